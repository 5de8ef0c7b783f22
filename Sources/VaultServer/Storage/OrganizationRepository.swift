import Foundation
import VaultModels

extension VaultRepository {
    /// `profile.organizations[]` (organizations.md §4.1): confirmed memberships, Vaultwarden's field set.
    static func profileOrganizations(userID: String, _ session: any SQLSession) async throws -> [JSONValue] {
        let rows = try await session.query("""
            SELECT m.id AS membership_id, m.type, m.status, m.akey, o.id AS organization_id, o.name FROM memberships m
            JOIN organizations o ON o.id = m.organization_id WHERE m.user_id = ? AND m.status = 2 ORDER BY o.created_at
            """, [.text(userID)])
        return rows.map { row in
            var object = JSONObject()
            object["object"] = .string("profileOrganization")
            object["id"] = .string(row.text("organization_id") ?? "")
            object["name"] = .string(row.text("name") ?? "")
            object["key"] = row.text("akey").map(JSONValue.string) ?? .null
            object["status"] = .int(Int(row.int("status") ?? 2))
            object["type"] = .int(Int(row.int("type") ?? 2))
            object["enabled"] = .bool(true)
            object["organizationUserId"] = .string(row.text("membership_id") ?? "")
            object["userId"] = .string(userID)
            object["permissions"] = .object(Dictionary(uniqueKeysWithValues: [
                "accessEventLogs", "accessImportExport", "accessReports", "createNewCollections", "editAnyCollection",
                "deleteAnyCollection", "manageGroups", "managePolicies", "manageSso", "manageUsers", "manageResetPassword", "manageScim",
            ].map { ($0, JSONValue.bool(false)) }).sorted { $0.key < $1.key }.reduce(into: JSONObject()) { $0[$1.key] = $1.value })
            for flag in ["usersGetPremium", "useTotp", "use2fa", "useApi", "usePolicies", "selfHost", "usePasswordManager", "useCustomPermissions"] {
                object[flag] = .bool(true)
            }
            for flag in ["useGroups", "useDirectory", "useEvents", "useSso", "useKeyConnector", "useScim", "useResetPassword",
                         "useSecretsManager", "useActivateAutofillPolicy", "keyConnectorEnabled", "hasPublicAndPrivateKeys",
                         "resetPasswordEnrolled", "ssoBound", "limitCollectionCreation", "limitCollectionDeletion", "limitItemDeletion",
                         "allowAdminAccessToAllCollectionItems", "userIsClaimedByOrganization", "accessSecretsManager",
                         "familySponsorshipAvailable"] {
                object[flag] = .bool(false)
            }
            object["seats"] = .int(20)
            object["maxCollections"] = .null
            object["maxStorageGb"] = .int(32767)
            object["productTierType"] = .int(3)
            for empty in ["identifier", "keyConnectorUrl", "providerId", "providerName", "providerType",
                          "familySponsorshipFriendlyName", "familySponsorshipLastSyncDate", "familySponsorshipValidUntil",
                          "familySponsorshipToDelete"] {
                object[empty] = .null
            }
            return .object(object)
        }
    }

    /// `collections[]` of sync (organizations.md §4.2).
    static func syncCollections(userID: String, _ session: any SQLSession) async throws -> [JSONValue] {
        let memberships = try await session.query("SELECT * FROM memberships WHERE user_id = ? AND status = 2", [.text(userID)])
            .map(MembershipRecord.init(row:))
        var result: [JSONValue] = []
        for membership in memberships {
            let collections = try await session.query("""
                SELECT c.*, cm.read_only, cm.hide_passwords, cm.manage, cm.membership_id FROM collections c
                LEFT JOIN collection_members cm ON cm.collection_id = c.id AND cm.membership_id = ?
                WHERE c.organization_id = ? ORDER BY c.id
                """, [.text(membership.id), .text(membership.organizationID)])
            for row in collections {
                let full = membership.hasFullAccess
                guard full || row.text("membership_id") != nil else { continue }
                result.append(.object(collectionObject(row, object: "collectionDetails", access: full
                    ? .owner : CipherAccess(assignment: row, manager: membership.managesAssignedCollections))))
            }
        }
        return result
    }

    static func collectionObject(_ row: SQLRow, object: String, access: CipherAccess?) -> JSONObject {
        var result = JSONObject()
        result["id"] = .string(row.text("id") ?? "")
        result["organizationId"] = .string(row.text("organization_id") ?? "")
        result["name"] = .string(row.text("name") ?? "")
        result["externalId"] = row.text("external_id").map(JSONValue.string) ?? .null
        result["type"] = .int(0)
        result["defaultUserCollectionEmail"] = .null
        if let access {
            result["readOnly"] = .bool(!access.edit)
            result["hidePasswords"] = .bool(!access.viewPassword)
            result["manage"] = .bool(access.manage)
        }
        result["object"] = .string(object)
        return result
    }

    // MARK: Organization flows (organizations.md §6)

    func createOrganization(userID: String, name: String, billingEmail: String, key: String, collectionName: String?, now: Int64) async throws -> String {
        try await transaction { session in
            let id = newID()
            try await session.query("INSERT INTO organizations (id, name, billing_email, created_at) VALUES (?, ?, ?, ?)",
                                    [.text(id), .text(name), .text(billingEmail), .int(now)])
            try await session.query("INSERT INTO memberships (id, organization_id, user_id, type, status, akey) VALUES (?, ?, ?, 0, 2, ?)",
                                    [.text(newID()), .text(id), .text(userID), .text(key)])
            if let collectionName {
                try await session.query("INSERT INTO collections (id, organization_id, name, external_id) VALUES (?, ?, ?, NULL)",
                                        [.text(newID()), .text(id), .text(collectionName)])
            }
            try await Self.bumpRevision([userID], now: now, session)
            return id
        }
    }

    /// The caller's confirmed membership in an organization, if any.
    static func membership(userID: String, organizationID: String, _ session: any SQLSession) async throws -> MembershipRecord? {
        try await session.query("SELECT * FROM memberships WHERE organization_id = ? AND user_id = ?",
                                [.text(organizationID), .text(userID)]).first.map(MembershipRecord.init(row:))
    }

    func membership(userID: String, organizationID: String) async throws -> MembershipRecord? {
        try await transaction { session in try await Self.membership(userID: userID, organizationID: organizationID, session) }
    }

    struct CollectionAccessEntry: Sendable {
        var membershipID: String
        var readOnly: Bool
        var hidePasswords: Bool
        var manage: Bool
    }

    func saveCollection(organizationID: String, id: String?, name: String, externalID: String?, users: [CollectionAccessEntry]?,
                        now: Int64) async throws -> SQLRow? {
        try await transaction { session in
            let collectionID: String
            if let id {
                guard try await !session.query("UPDATE collections SET name = ?, external_id = ? WHERE id = ? AND organization_id = ? RETURNING id",
                                                [.text(name), .optionalText(externalID), .text(id), .text(organizationID)]).isEmpty else { return nil }
                collectionID = id
            } else {
                collectionID = newID()
                try await session.query("INSERT INTO collections (id, organization_id, name, external_id) VALUES (?, ?, ?, ?)",
                                        [.text(collectionID), .text(organizationID), .text(name), .optionalText(externalID)])
            }
            if let users {
                try await session.query("DELETE FROM collection_members WHERE collection_id = ?", [.text(collectionID)])
                for entry in users {
                    guard try await !session.query("SELECT id FROM memberships WHERE id = ? AND organization_id = ?",
                                                    [.text(entry.membershipID), .text(organizationID)]).isEmpty else {
                        throw APIError(.badRequest, "Invalid member")
                    }
                    try await Self.assign(collectionID: collectionID, membershipID: entry.membershipID, entry, session)
                }
            }
            let members = try await session.query("SELECT user_id FROM memberships WHERE organization_id = ?", [.text(organizationID)])
            try await Self.bumpRevision(members.compactMap { $0.text("user_id") }, now: now, session)
            return try await session.query("SELECT * FROM collections WHERE id = ?", [.text(collectionID)]).first
        }
    }

    func collections(organizationID: String) async throws -> [SQLRow] {
        try await transaction { session in
            try await session.query("SELECT * FROM collections WHERE organization_id = ? ORDER BY id", [.text(organizationID)])
        }
    }

    func collectionMembers(collectionID: String, organizationID: String) async throws -> [SQLRow]? {
        try await transaction { session in
            guard try await !session.query("SELECT id FROM collections WHERE id = ? AND organization_id = ?",
                                            [.text(collectionID), .text(organizationID)]).isEmpty else { return nil }
            return try await session.query("SELECT * FROM collection_members WHERE collection_id = ?", [.text(collectionID)])
        }
    }

    func deleteCollection(id: String, organizationID: String, now: Int64) async throws -> Bool {
        try await transaction { session in
            let deleted = try await session.query("DELETE FROM collections WHERE id = ? AND organization_id = ? RETURNING id",
                                                  [.text(id), .text(organizationID)])
            let members = try await session.query("SELECT user_id FROM memberships WHERE organization_id = ?", [.text(organizationID)])
            try await Self.bumpRevision(members.compactMap { $0.text("user_id") }, now: now, session)
            return !deleted.isEmpty
        }
    }

    /// One invite as the inviter is told it: its id (the member id it will have), the email, and the code
    /// to hand to the invitee.
    struct IssuedInvite: Sendable {
        var id: String
        var email: String
        var code: String
    }

    /// Records invites for `emails` (docs/PROTOCOL.md, "Organization invites"), each with a new one-time
    /// code whose hash only is stored. Whether an email has an account is never looked at, so the answer
    /// cannot tell; an email already invited gets its invite renewed with the new type, collections and
    /// code (the old code stops working, the wrong-code count starts again). Refused as a whole: a
    /// collection of another organization, or an email that is already a member.
    func invite(organizationID: String, emails: [String], type: Int, collections: [CollectionAccessEntry], now: Int64) async throws -> [IssuedInvite] {
        try await transaction { session in
            for entry in collections {
                guard try await !session.query("SELECT id FROM collections WHERE id = ? AND organization_id = ?",
                                                [.text(entry.membershipID), .text(organizationID)]).isEmpty else {
                    throw APIError(.badRequest, "Collection not found")
                }
            }
            let access = JSONValue.array(collections.map { entry in
                .object(["id": .string(entry.membershipID), "readOnly": .bool(entry.readOnly),
                         "hidePasswords": .bool(entry.hidePasswords), "manage": .bool(entry.manage)])
            })
            var issued: [IssuedInvite] = []
            for email in emails {
                guard try await session.query("""
                    SELECT m.id FROM memberships m JOIN users u ON u.id = m.user_id WHERE m.organization_id = ? AND u.email = ?
                    """, [.text(organizationID), .text(email)]).isEmpty else {
                    throw APIError(.badRequest, "User already in organization: \(email)")
                }
                let code = InviteCodes.make()
                let row = try await session.query("""
                    INSERT INTO organization_invites (id, organization_id, email, type, collections, created_at, code_hash, failed_attempts)
                    VALUES (?, ?, ?, ?, ?, ?, ?, 0)
                    ON CONFLICT (organization_id, email) DO UPDATE SET type = excluded.type, collections = excluded.collections,
                        created_at = excluded.created_at, code_hash = excluded.code_hash, failed_attempts = 0
                    RETURNING id
                    """, [.text(newID()), .text(organizationID), .text(email), .int(Int64(type)),
                          .text(String(decoding: access.serialized(), as: UTF8.self)), .int(now), .text(code.hash)]).first
                issued.append(IssuedInvite(id: row?.text("id") ?? "", email: email, code: code.shown))
            }
            return issued
        }
    }

    /// Why an invite could not be accepted. Every case but `alreadyMember` gets the same answer: the
    /// caller learns nothing about which check failed (nor whether their email was the invited one).
    enum InviteRefusal: Error, Sendable {
        /// No such invite (never made, accepted already), expired, dead after too many wrong codes, the
        /// code wrong or missing, or another account's invite.
        case refused
        /// The code was right, and the account is already a member.
        case alreadyMember
    }

    /// The invitee accepts with the invite's one-time code: the invite becomes an Accepted membership with
    /// the same id, the access the admin chose, and the mark that it was accepted with the code; an owner
    /// or admin then confirms it with the organization key wrapped for the member. Only the account whose
    /// email was invited, with the code, once, before the invite expires and before it has taken
    /// `InviteCodes.maximumFailures` wrong codes; each attempt that is not accepted counts.
    func acceptInvite(id: String, organizationID: String, user: UserRecord, code: String?, notBefore: Int64, now: Int64) async throws -> InviteRefusal? {
        try await transaction { session in
            guard let invite = try await session.query("SELECT * FROM organization_invites WHERE id = ? AND organization_id = ?",
                                                       [.text(id), .text(organizationID)]).first,
                  (invite.int("created_at") ?? 0) >= notBefore else { return .refused }
            // The attempt is counted before the code is looked at, in one statement, so that attempts at
            // the same moment cannot slip past the limit together.
            guard try await !session.query("""
                UPDATE organization_invites SET failed_attempts = failed_attempts + 1 WHERE id = ? AND failed_attempts < ? RETURNING id
                """, [.text(id), .int(InviteCodes.maximumFailures)]).isEmpty else { return .refused }
            let codeMatches = InviteCodes.matches(code, stored: invite.text("code_hash"))
            guard codeMatches, invite.text("email").map(EmailAddress.normalise) == EmailAddress.normalise(user.email) else { return .refused }
            try await session.query("DELETE FROM organization_invites WHERE id = ?", [.text(id)])
            guard try await Self.membership(userID: user.id, organizationID: organizationID, session) == nil else { return .alreadyMember }
            try await session.query("""
                INSERT INTO memberships (id, organization_id, user_id, type, status, akey, accepted_with_code) VALUES (?, ?, ?, ?, 1, NULL, 1)
                """, [.text(id), .text(organizationID), .text(user.id), .int(invite.int("type") ?? 2)])
            let access = (try? JSONParser.parse(Array((invite.text("collections") ?? "[]").utf8)))?.arrayValue ?? []
            for entry in access.compactMap(\.objectValue) {
                // A collection deleted since the invite is skipped.
                guard let collectionID = entry["id"]?.stringValue, try await !session.query(
                    "SELECT id FROM collections WHERE id = ? AND organization_id = ?", [.text(collectionID), .text(organizationID)]).isEmpty else { continue }
                try await Self.assign(collectionID: collectionID, membershipID: id, CollectionAccessEntry(
                    membershipID: collectionID, readOnly: entry["readOnly"]?.boolValue ?? false,
                    hidePasswords: entry["hidePasswords"]?.boolValue ?? false, manage: entry["manage"]?.boolValue ?? false), session)
            }
            try await Self.bumpRevision([user.id], now: now, session)
            return nil
        }
    }

    /// Invites for `email` that can still be accepted (not expired, not dead), with their organization's name.
    func pendingInvites(email: String, notBefore: Int64) async throws -> [SQLRow] {
        try await transaction { session in
            try await session.query("""
                SELECT i.id, i.organization_id, i.type, o.name FROM organization_invites i JOIN organizations o ON o.id = i.organization_id
                WHERE i.email = ? AND i.created_at >= ? AND i.failed_attempts < ? ORDER BY i.created_at
                """, [.text(EmailAddress.normalise(email)), .int(notBefore), .int(InviteCodes.maximumFailures)])
        }
    }

    /// An organization's invites not accepted yet.
    func invites(organizationID: String) async throws -> [SQLRow] {
        try await transaction { session in
            try await session.query("SELECT * FROM organization_invites WHERE organization_id = ? ORDER BY email", [.text(organizationID)])
        }
    }

    /// Confirms an Accepted member, storing the organization key wrapped for them; returns their user id.
    @discardableResult
    func confirm(organizationID: String, membershipID: String, key: String, now: Int64) async throws -> String {
        try await transaction { session in
            guard let row = try await session.query(
                "UPDATE memberships SET status = 2, akey = ? WHERE id = ? AND organization_id = ? AND status = 1 RETURNING user_id",
                [.text(key), .text(membershipID), .text(organizationID)]).first else {
                throw APIError(.badRequest, "User not valid.")
            }
            let userID = row.text("user_id") ?? ""
            try await Self.bumpRevision([userID], now: now, session)
            return userID
        }
    }

    func members(organizationID: String) async throws -> [SQLRow] {
        try await transaction { session in
            try await session.query("""
                SELECT m.*, u.email, u.name, u.public_key FROM memberships m JOIN users u ON u.id = m.user_id
                WHERE m.organization_id = ? ORDER BY u.email
                """, [.text(organizationID)])
        }
    }
}
