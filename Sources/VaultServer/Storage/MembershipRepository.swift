import Foundation
import VaultModels

/// Changing who belongs to an organization and what they may reach (docs/SHARING.md): a member's role and
/// collections, removal, leaving, collection access, and deleting the organization. Every function here
/// returns the accounts whose view of the vault changed, for the notifications the controller sends.
extension VaultRepository {
    /// Why a membership change was refused (400 with the message, or 404 for what the caller cannot see).
    enum MembershipRefusal: Error, Sendable, Equatable {
        case notFound
        case refused(String)
    }

    static let lastOwnerMessage = "The organization must have at least one confirmed owner."

    /// Confirmed owners other than `membershipID`.
    static func otherOwners(organizationID: String, except membershipID: String, _ session: any SQLSession) async throws -> Int64 {
        try await session.query("""
            SELECT COUNT(*) AS n FROM memberships WHERE organization_id = ? AND type = 0 AND status = 2 AND id <> ?
            """, [.text(organizationID), .text(membershipID)]).first?.int("n") ?? 0
    }

    /// The collections each member is assigned, by membership id.
    func assignments(organizationID: String) async throws -> [String: [CollectionAccessEntry]] {
        try await read { session in
            let rows = try await session.query("""
                SELECT cm.* FROM collection_members cm JOIN collections c ON c.id = cm.collection_id
                WHERE c.organization_id = ? ORDER BY cm.collection_id
                """, [.text(organizationID)])
            var result: [String: [CollectionAccessEntry]] = [:]
            for row in rows {
                let membership = row.text("membership_id") ?? ""
                result[membership, default: []].append(CollectionAccessEntry(
                    membershipID: row.text("collection_id") ?? "", readOnly: row.bool("read_only"),
                    hidePasswords: row.bool("hide_passwords"), manage: row.bool("manage")))
            }
            return result
        }
    }

    /// Who may change `target`: owners change anyone; admins change users and managers only, and may not
    /// make anyone an owner or admin (the official rule). `type` is the role asked for, if any.
    static func mayChange(_ target: MembershipRecord, to type: Int?, by actor: MembershipRecord) -> Bool {
        if actor.type == 0 { return true }
        guard actor.type == 1, target.type != 0, target.type != 1 else { return false }
        return type.map { $0 != 0 && $0 != 1 } ?? true
    }

    /// Sets a member's role and, given `collections` (`CollectionAccessEntry.membershipID` holding the
    /// collection id, as in invites), replaces their collections. Returns the member's user id.
    func updateMember(organizationID: String, membershipID: String, type: Int, collections: [CollectionAccessEntry]?,
                      by actor: MembershipRecord, now: Int64) async throws -> Result<String, MembershipRefusal> {
        try await transaction { session in
            guard let target = try await session.query("SELECT * FROM memberships WHERE id = ? AND organization_id = ?",
                                                       [.text(membershipID), .text(organizationID)]).first.map(MembershipRecord.init(row:)) else {
                return .failure(.notFound)
            }
            guard Self.mayChange(target, to: type, by: actor) else {
                return .failure(.refused("Only owners can change owners and admins, or make a member an owner or admin."))
            }
            if target.type == 0, type != 0, target.status == 2,
               try await Self.otherOwners(organizationID: organizationID, except: target.id, session) == 0 {
                return .failure(.refused(Self.lastOwnerMessage))
            }
            try await session.query("UPDATE memberships SET type = ? WHERE id = ?", [.int(Int64(type)), .text(target.id)])
            if let collections {
                for entry in collections {
                    guard try await !session.query("SELECT id FROM collections WHERE id = ? AND organization_id = ?",
                                                    [.text(entry.membershipID), .text(organizationID)]).isEmpty else {
                        return .failure(.refused("Collection not found"))
                    }
                }
                try await session.query("DELETE FROM collection_members WHERE membership_id = ?", [.text(target.id)])
                for entry in collections {
                    try await Self.assign(collectionID: entry.membershipID, membershipID: target.id, entry, session)
                }
            }
            try await Self.bumpRevision([target.userID], now: now, session)
            return .success(target.userID)
        }
    }

    /// Removes a member (or withdraws an invite: `nil` user). Nobody removes themselves here (that is
    /// leaving); admins cannot remove owners or admins. The organization is not re-keyed: what the member
    /// saw before stays known to them (docs/SECURITY.md, "Removing a member").
    func removeMember(organizationID: String, membershipID: String, by actor: MembershipRecord, now: Int64) async throws
        -> Result<String?, MembershipRefusal> {
        try await transaction { session in
            guard let target = try await session.query("SELECT * FROM memberships WHERE id = ? AND organization_id = ?",
                                                       [.text(membershipID), .text(organizationID)]).first.map(MembershipRecord.init(row:)) else {
                let withdrawn = try await session.query("DELETE FROM organization_invites WHERE id = ? AND organization_id = ? RETURNING id",
                                                        [.text(membershipID), .text(organizationID)])
                return withdrawn.isEmpty ? .failure(.notFound) : .success(nil)
            }
            guard target.id != actor.id else { return .failure(.refused("You cannot remove yourself: leave the organization instead.")) }
            guard Self.mayChange(target, to: nil, by: actor) else { return .failure(.refused("Only owners can remove owners and admins.")) }
            try await session.query("DELETE FROM memberships WHERE id = ?", [.text(target.id)])
            try await Self.bumpRevision([target.userID], now: now, session)
            return .success(target.userID)
        }
    }

    /// The caller leaves (any status: an accepted member not yet confirmed may leave too). The last
    /// confirmed owner cannot: the organization would have nobody to run it (delete it instead).
    func leave(organizationID: String, userID: String, now: Int64) async throws -> Result<Void, MembershipRefusal> {
        try await transaction { session in
            guard let membership = try await Self.membership(userID: userID, organizationID: organizationID, session) else {
                return .failure(.notFound)
            }
            if membership.type == 0, membership.status == 2,
               try await Self.otherOwners(organizationID: organizationID, except: membership.id, session) == 0 {
                return .failure(.refused(Self.lastOwnerMessage + " Make another member an owner, or delete the organization."))
            }
            try await session.query("DELETE FROM memberships WHERE id = ?", [.text(membership.id)])
            try await Self.bumpRevision([userID], now: now, session)
            return .success(())
        }
    }

    /// Replaces who is assigned to a collection; returns everyone assigned before or after (their view changed).
    func setCollectionMembers(collectionID: String, organizationID: String, users: [CollectionAccessEntry], now: Int64) async throws
        -> Result<[String], MembershipRefusal> {
        try await transaction { session in
            guard try await !session.query("SELECT id FROM collections WHERE id = ? AND organization_id = ?",
                                            [.text(collectionID), .text(organizationID)]).isEmpty else { return .failure(.notFound) }
            var affected = Set(try await session.query("""
                SELECT m.user_id FROM collection_members cm JOIN memberships m ON m.id = cm.membership_id WHERE cm.collection_id = ?
                """, [.text(collectionID)]).compactMap { $0.text("user_id") })
            try await session.query("DELETE FROM collection_members WHERE collection_id = ?", [.text(collectionID)])
            for entry in users {
                guard let member = try await session.query("SELECT user_id FROM memberships WHERE id = ? AND organization_id = ?",
                                                           [.text(entry.membershipID), .text(organizationID)]).first else {
                    return .failure(.refused("Invalid member"))
                }
                affected.insert(member.text("user_id") ?? "")
                try await Self.assign(collectionID: collectionID, membershipID: entry.membershipID, entry, session)
            }
            let users = affected.sorted()
            try await Self.bumpRevision(users, now: now, session)
            return .success(users)
        }
    }

    /// Deletes an organization with its items (and their attachments), collections, memberships and
    /// invites, by the schema's cascades; returns its members' user ids.
    func deleteOrganization(id: String, now: Int64) async throws -> [String] {
        try await transaction { session in
            let members = try await session.query("SELECT user_id FROM memberships WHERE organization_id = ?", [.text(id)])
                .compactMap { $0.text("user_id") }
            try await session.query("DELETE FROM organizations WHERE id = ?", [.text(id)])
            try await Self.bumpRevision(members, now: now, session)
            return members
        }
    }

    /// Whether `membership` manages the collection: full access, or an assignment with `manage` (or as a manager).
    static func manages(collectionID: String, _ membership: MembershipRecord, _ session: any SQLSession) async throws -> Bool {
        if membership.hasFullAccess { return true }
        guard let row = try await session.query("SELECT * FROM collection_members WHERE collection_id = ? AND membership_id = ?",
                                                [.text(collectionID), .text(membership.id)]).first else { return false }
        return CipherAccess(assignment: row, manager: membership.managesAssignedCollections).manage
    }

    func manages(collectionID: String, _ membership: MembershipRecord) async throws -> Bool {
        try await read { session in try await Self.manages(collectionID: collectionID, membership, session) }
    }

    /// One assignment of a member to a collection, with the flags of `access` (its id field is not read).
    static func assign(collectionID: String, membershipID: String, _ access: CollectionAccessEntry, _ session: any SQLSession) async throws {
        try await session.query("""
            INSERT INTO collection_members (collection_id, membership_id, read_only, hide_passwords, manage) VALUES (?, ?, ?, ?, ?)
            """, [.text(collectionID), .text(membershipID), .bool(access.readOnly), .bool(access.hidePasswords), .bool(access.manage)])
    }

    /// The user ids who see an organization item now (its collections' members and the full-access members).
    func audience(ofCipher id: String, organizationID: String) async throws -> Set<String> {
        Set(try await audience(organizationID: organizationID, collectionIDs: try await collectionIDs(ofCipher: id)))
    }
}
