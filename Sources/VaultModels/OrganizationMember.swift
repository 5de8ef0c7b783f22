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

    public init(id: String, userID: String?, email: String, name: String?, status: Int, type: Int) {
        self.id = id
        self.userID = userID
        self.email = email
        self.name = name
        self.status = status
        self.type = type
    }
}
