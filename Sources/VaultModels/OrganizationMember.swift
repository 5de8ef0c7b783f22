import Foundation

/// A member (or invitee) of an organization, as its owners and admins see it.
public struct OrganizationMember: Sendable, Equatable {
    /// The membership's id (the path's `{organizationUserId}`).
    public var id: String
    /// The member's account id; `nil` while only invited.
    public var userID: String?
    public var email: String
    public var name: String?
    /// 0 invited, 1 accepted (waiting for confirmation), 2 confirmed.
    public var status: Int
    /// 0 owner, 1 admin, 2 user, 3 manager.
    public var type: Int
    /// The collections they are assigned (owners and admins reach every collection whatever this says).
    public var collections: [CollectionGrant]

    public init(id: String, userID: String?, email: String, name: String?, status: Int, type: Int, collections: [CollectionGrant] = []) {
        self.id = id
        self.userID = userID
        self.email = email
        self.name = name
        self.status = status
        self.type = type
        self.collections = collections
    }
}

/// What a member may do with the items of one collection (organizations.md §4.4), the choices the
/// official clients offer for a member's collection.
public enum CollectionAccess: String, Sendable, Equatable, CaseIterable {
    /// View and edit the items (no flag set).
    case edit
    /// View the items; no change to them or their attachments.
    case readOnly = "read-only"
    /// View the items without their passwords and other hidden secrets, which the server never sends
    /// (the official "can view, except passwords").
    case hidePasswords = "hide-passwords"
    /// Edit the items and manage the collection: rename it, delete it, choose who has access.
    case manage

    /// The wire flags `readOnly`, `hidePasswords`, `manage`.
    public var flags: (readOnly: Bool, hidePasswords: Bool, manage: Bool) {
        switch self {
        case .edit: (false, false, false)
        case .readOnly: (true, false, false)
        case .hidePasswords: (true, true, false)
        case .manage: (false, false, true)
        }
    }

    /// The access the wire flags give; "can edit, except passwords" (only `hidePasswords`) reads as
    /// `hidePasswords`, the nearest of these four.
    public init(readOnly: Bool, hidePasswords: Bool, manage: Bool) {
        self = manage ? .manage : hidePasswords ? .hidePasswords : readOnly ? .readOnly : .edit
    }
}

/// One collection a member is assigned, with their access to it.
public struct CollectionGrant: Sendable, Hashable {
    public var collectionID: String
    public var access: CollectionAccess

    public init(collectionID: String, access: CollectionAccess) {
        self.collectionID = collectionID
        self.access = access
    }

    /// The wire form: `{"id", "readOnly", "hidePasswords", "manage"}`, `id` being the collection's (or, in a
    /// collection's user list, the member's).
    public func wire(id: String? = nil) -> JSONValue {
        let flags = access.flags
        return .object(["id": .string(id ?? collectionID), "readOnly": .bool(flags.readOnly), "hidePasswords": .bool(flags.hidePasswords),
                        "manage": .bool(flags.manage)])
    }

    /// Reads a wire entry (`nil` when it has no id).
    public init?(wire value: JSONValue) {
        guard let object = value.objectValue, let id = object["id"]?.stringValue else { return nil }
        self.init(collectionID: id.lowercased(), access: CollectionAccess(
            readOnly: object["readOnly"]?.boolValue ?? false, hidePasswords: object["hidePasswords"]?.boolValue ?? false,
            manage: object["manage"]?.boolValue ?? false))
    }
}
