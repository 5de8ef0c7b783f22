import Foundation
import HTTPTypes
import Hummingbird
import Testing
import VaultCrypto
import VaultModels
@testable import VaultServer

/// Deleting one's account (docs/PROTOCOL.md, "Account settings"), against the real server with a second
/// handle on its database to see what is left.
@Suite("Account deletion: DELETE /api/accounts and POST /api/accounts/delete", .serialized)
struct AccountDeletionTests {
    /// `SELECT COUNT(*)` of `sql`'s rows.
    static func count(_ server: AttachmentServer, _ sql: String, _ binds: [SQLValue] = []) async throws -> Int64 {
        try await server.database.read { session in
            try await session.query("SELECT COUNT(*) AS n FROM (\(sql)) counted", binds).first?.int("n") ?? -1
        }
    }

    /// What an account has, table by table (attachment tables counted whole: only the account's and the
    /// bystander's files are in this server).
    static func holdings(_ server: AttachmentServer, userID: String) async throws -> [String: Int64] {
        let user: [SQLValue] = [.text(userID)]
        return [
            "users": try await count(server, "SELECT id FROM users WHERE id = ?", user),
            "devices": try await count(server, "SELECT id FROM devices WHERE user_id = ?", user),
            "ciphers": try await count(server, "SELECT id FROM ciphers WHERE user_id = ?", user),
            "folders": try await count(server, "SELECT id FROM folders WHERE user_id = ?", user),
            "memberships": try await count(server, "SELECT id FROM memberships WHERE user_id = ?", user),
            "cipher_user_state": try await count(server, "SELECT cipher_id FROM cipher_user_state WHERE user_id = ?", user),
            "create_keys": try await count(server, "SELECT item_id FROM create_keys WHERE user_id = ?", user),
            "organizations": try await count(server, "SELECT id FROM organizations"),
            "attachments": try await count(server, "SELECT id FROM attachments"),
            "attachment_uploads": try await count(server, "SELECT id FROM attachment_uploads"),
            "attachment_chunks": try await count(server, "SELECT upload_id FROM attachment_chunks"),
        ]
    }

    /// Invites `member` to the organization as `type` with access to `collectionID`, has them accept, and
    /// confirms them (the organization key wrapped for their public key) unless `confirm` is false.
    static func join(_ api: APIClient, _ member: TestUser, organization orgID: String, key orgKey: SymmetricCryptoKey, collectionID: String,
                     ownerToken: String, type: Int = 2, confirm: Bool = true) async throws {
        let invite = try await api.request(.post, "/api/organizations/\(orgID)/users/invite", token: ownerToken, json: .object([
            "emails": .array([.string(member.email)]), "type": .int(type),
            "collections": .array([.object(["id": .string(collectionID), "readOnly": .bool(false), "hidePasswords": .bool(false)])]),
        ]))
        #expect(invite.status == .ok, "invite: \(invite.message ?? "")")
        try await member.acceptInvite(api, organizationID: orgID, invite: invite)
        guard confirm else { return }
        let members = try await api.request(.get, "/api/organizations/\(orgID)/users", token: ownerToken).object["data"]?.arrayValue ?? []
        let entry = try #require(members.compactMap(\.objectValue).first { $0["email"] == .string(member.email.lowercased()) && $0["status"] == .int(1) })
        let userID = try #require(entry["userId"]?.stringValue)
        let publicKey = try await api.request(.get, "/api/users/\(userID)/public-key", token: ownerToken).object
        let wrapped = try RSAPublicKey(spkiBase64: try #require(publicKey["publicKey"]?.stringValue)).wrap(orgKey)
        let confirmed = try await api.request(.post, "/api/organizations/\(orgID)/users/\(try #require(entry["id"]?.stringValue))/confirm",
                                              token: ownerToken, json: .object(["key": .string(wrapped.serialized)]))
        #expect(confirmed.status == .ok, "confirm: \(confirmed.message ?? "")")
    }

    static func collectionID(_ api: APIClient, organization orgID: String, token: String) async throws -> String {
        try #require(try await api.request(.get, "/api/organizations/\(orgID)/collections", token: token)
            .object["data"]?.arrayValue?.first?.objectValue?["id"]?.stringValue)
    }

    /// An organization item in `collectionID`, made by `token`'s user.
    static func organizationItem(_ api: APIClient, _ owner: TestUser, token: String, orgID: String, orgKey: SymmetricCryptoKey,
                                 collectionID: String, name: String) async throws -> String {
        let keys = VaultKeys(userKey: owner.userKey, organizationKeys: [orgID: orgKey])
        var view = try keys.newItem(type: .login, name: name, organizationId: orgID)
        view.login = LoginView(username: "shared", password: "shared-password")
        let created = try await api.request(.post, "/api/ciphers/create", token: token, json: .object([
            "cipher": try view.encrypted(with: keys).jsonValue, "collectionIds": .array([.string(collectionID)]),
        ]))
        #expect(created.status == .ok, "organization item: \(created.message ?? "")")
        return try #require(created.object["id"]?.stringValue)
    }

    /// A personal item with an uploaded 161-byte file; returns the item's id.
    static func itemWithFile(_ api: APIClient, _ user: TestUser, token: String, name: String, folderID: String? = nil) async throws -> String {
        let created = try await api.request(.post, "/api/ciphers", token: token, json: .object(try user.loginItem(name: name, folderId: folderID)))
        let cipherID = try #require(created.object["id"]?.stringValue, "item: \(created.message ?? "")")
        let started = try await user.startAttachment(api, token: token, cipherID: cipherID)
        let attachmentID = try #require(started.object["attachmentId"]?.stringValue)
        let body = try EncString.encrypt(Array(repeating: 7, count: 100), key: .generate()).binary()
        let uploaded = try await api.request(.post, "/api/ciphers/\(cipherID)/attachment/\(attachmentID)", token: token, body: Array(body),
                                             headers: [.contentType: "application/octet-stream"])
        #expect(uploaded.status == .ok, "upload: \(uploaded.message ?? "")")
        return cipherID
    }

    @Test("deleting an account takes its items, folders, files, devices, memberships and the organization it was alone in; its tokens stop; a wrong hash deletes nothing",
          arguments: Backend.available)
    func deleteEverything(backend: Backend) async throws {
        try await withAttachmentServer(backend) { server in
            let api = server.api
            let user = try await TestUser.register(api)
            let laptop = try await SignedInDevice.login(user, api)
            let phone = try await SignedInDevice.login(user, api)
            let token = laptop.access
            let userID = try #require(try await api.request(.get, "/api/accounts/profile", token: token).object["id"]?.stringValue)
            let folder = try await api.request(.post, "/api/folders", token: token,
                                               json: .object(["name": .string(try EncString.encrypt("Bills", key: user.userKey).serialized)]),
                                               headers: [HTTPField.Name("Idempotency-Key")!: UUID().uuidString])
            let folderID = try #require(folder.object["id"]?.stringValue)
            let filed = try await Self.itemWithFile(api, user, token: token, name: "Bank", folderID: folderID)
            #expect(try await api.request(.post, "/api/ciphers", token: token, json: .object(try user.loginItem(name: "Mail"))).status == .ok)
            // An organization the account is alone in, with an item.
            let (soloID, soloKey) = try await user.createOrganization(api, token: token, name: "Solo")
            let soloItem = try await Self.organizationItem(api, user, token: token, orgID: soloID, orgKey: soloKey,
                                                           collectionID: try await Self.collectionID(api, organization: soloID, token: token), name: "Solo wifi")
            // A member of someone else's organization, with the shared item filed in its own folder.
            let bystander = try await TestUser.register(api)
            let bystanderToken = try await bystander.token(api)
            let (familyID, familyKey) = try await bystander.createOrganization(api, token: bystanderToken, name: "Family")
            let familyCollection = try await Self.collectionID(api, organization: familyID, token: bystanderToken)
            let sharedItem = try await Self.organizationItem(api, bystander, token: bystanderToken, orgID: familyID, orgKey: familyKey,
                                                             collectionID: familyCollection, name: "Family wifi")
            try await Self.join(api, user, organization: familyID, key: familyKey, collectionID: familyCollection, ownerToken: bystanderToken)
            #expect(try await api.request(.put, "/api/ciphers/\(sharedItem)/partial", token: token,
                                          json: .object(["folderId": .string(folderID), "favorite": .bool(true)])).status == .ok)
            let bystanderItem = try await Self.itemWithFile(api, bystander, token: bystanderToken, name: "Bystander's")

            let before = try await Self.holdings(server, userID: userID)
            // Three devices: accepting the invite logged in on another.
            #expect(before["users"] == 1 && before["devices"] == 3 && before["ciphers"] == 2 && before["folders"] == 1, "\(before)")
            #expect(before["memberships"] == 2 && before["organizations"] == 2 && before["attachments"] == 2 && before["attachment_chunks"] == 2,
                    "\(before)")
            #expect(before["cipher_user_state"] ?? 0 >= 2 && before["create_keys"] == 1, "\(before)")

            // Refused: no token, no hash, a wrong hash. Nothing goes.
            #expect(try await api.request(.delete, "/api/accounts", json: .object(["masterPasswordHash": .string(user.hash)])).status == .unauthorized)
            #expect(try await api.request(.post, "/api/accounts/delete", json: .object(["masterPasswordHash": .string(user.hash)])).status
                == .unauthorized)
            let missing = try await api.request(.delete, "/api/accounts", token: token, json: .object([:]))
            #expect(AccountSettingsTests.refusedFields(missing) == ["masterPasswordHash"])
            let wrong = try await api.request(.delete, "/api/accounts", token: token,
                                              json: .object(["masterPasswordHash": .string(try user.authorizationHash("not the password"))]))
            #expect(AccountSettingsTests.refusedFields(wrong) == ["masterPasswordHash"])
            #expect(try await Self.holdings(server, userID: userID) == before)
            #expect(try await phone.works(api) == (true, true))

            let deleted = try await api.request(.delete, "/api/accounts", token: token, json: .object(["masterPasswordHash": .string(user.hash)]))
            #expect(deleted.status == .ok && deleted.bytes.isEmpty, "\(deleted.message ?? "")")

            let after = try await Self.holdings(server, userID: userID)
            for table in ["users", "devices", "ciphers", "folders", "memberships", "cipher_user_state", "create_keys"] {
                #expect(after[table] == 0, "\(table): \(after[table] ?? -1) left")
            }
            #expect(after["organizations"] == 1, "Solo went with the account; Family stays")
            #expect(try await Self.count(server, "SELECT id FROM ciphers WHERE id = ? OR organization_id = ?", [.text(soloItem), .text(soloID)]) == 0)
            #expect(try await Self.count(server, "SELECT id FROM ciphers WHERE id = ?", [.text(filed)]) == 0)
            #expect(after["attachments"] == 1 && after["attachment_uploads"] == 1 && after["attachment_chunks"] == 1, "only the bystander's file is left")

            // Its tokens stop, its password no longer logs in.
            #expect(try await laptop.works(api) == (false, false))
            #expect(try await phone.works(api) == (false, false))
            #expect(try await user.login(api).status == .badRequest)

            // The bystander's organization, item and file are whole; the member is gone from its list.
            let bystanderSync = try await api.request(.get, "/api/sync", token: bystanderToken).object
            let ids = (bystanderSync["ciphers"]?.arrayValue ?? []).compactMap { $0.objectValue?["id"]?.stringValue }
            #expect(Set(ids) == [sharedItem, bystanderItem])
            let link = try #require((bystanderSync["ciphers"]?.arrayValue ?? []).compactMap(\.objectValue).first { $0["id"] == .string(bystanderItem) }?[
                "attachments"]?.arrayValue?.first?.objectValue?["url"]?.stringValue)
            #expect(try await server.download(link).status == 200)
            let members = try await api.request(.get, "/api/organizations/\(familyID)/users", token: bystanderToken).object["data"]?.arrayValue ?? []
            #expect(members.count == 1)

            // The email is free again, for a new, empty account.
            let again = try await TestUser.register(api, email: user.email)
            let fresh = try await api.request(.get, "/api/sync", token: try await again.token(api)).object
            #expect(fresh["ciphers"]?.arrayValue?.isEmpty == true && fresh["folders"]?.arrayValue?.isEmpty == true)
            #expect(fresh["profile"]?.objectValue?["organizations"]?.arrayValue?.isEmpty == true)
        }
    }

    @Test("the only owner of an organization with other members is refused, naming it; a member, or an owner beside another, is deleted (POST twin too)",
          arguments: Backend.available)
    func soleOwner(backend: Backend) async throws {
        try await withAttachmentServer(backend) { server in
            let api = server.api
            let owner = try await TestUser.register(api)
            let ownerToken = try await owner.token(api)
            let (orgID, orgKey) = try await owner.createOrganization(api, token: ownerToken, name: "Family")
            let collectionID = try await Self.collectionID(api, organization: orgID, token: ownerToken)
            let item = try await Self.organizationItem(api, owner, token: ownerToken, orgID: orgID, orgKey: orgKey, collectionID: collectionID,
                                                       name: "Family wifi")
            // A member who accepted and was not confirmed yet still counts, as on the official server.
            let member = try await TestUser.register(api)
            try await Self.join(api, member, organization: orgID, key: orgKey, collectionID: collectionID, ownerToken: ownerToken, confirm: false)

            let refused = try await api.request(.post, "/api/accounts/delete", token: ownerToken,
                                                json: .object(["masterPasswordHash": .string(owner.hash)]))
            #expect(refused.status == .badRequest)
            #expect(refused.message?.contains("only owner of the organization \"Family\"") == true, "\(refused.message ?? "")")
            #expect(refused.message?.contains("not deleted") == true)
            #expect(try await api.request(.get, "/api/sync", token: ownerToken).status == .ok, "nothing was deleted")
            #expect(try await Self.count(server, "SELECT id FROM ciphers WHERE id = ?", [.text(item)]) == 1)

            // Another confirmed owner: the first owner can go, the organization stays with them.
            let coOwner = try await TestUser.register(api)
            try await Self.join(api, coOwner, organization: orgID, key: orgKey, collectionID: collectionID, ownerToken: ownerToken, type: 0)
            let coOwnerToken = try await coOwner.token(api)
            // The member (not an owner) can go at any time.
            let memberToken = try await member.token(api)
            #expect(try await api.request(.post, "/api/accounts/delete", token: memberToken,
                                          json: .object(["masterPasswordHash": .string(member.hash)])).status == .ok)
            #expect(try await api.request(.delete, "/api/accounts", token: ownerToken,
                                          json: .object(["masterPasswordHash": .string(owner.hash)])).status == .ok)
            let profile = try await api.request(.get, "/api/sync", token: coOwnerToken).object["profile"]?.objectValue
            #expect(profile?["organizations"]?.arrayValue?.compactMap { $0.objectValue?["id"]?.stringValue } == [orgID])
            let members = try await api.request(.get, "/api/organizations/\(orgID)/users", token: coOwnerToken).object["data"]?.arrayValue ?? []
            #expect(members.compactMap { $0.objectValue?["email"]?.stringValue } == [coOwner.email.lowercased()])
            #expect(try await Self.count(server, "SELECT id FROM ciphers WHERE id = ?", [.text(item)]) == 1)

            // Now alone in it: the organization and its item go with the last owner.
            #expect(try await api.request(.delete, "/api/accounts", token: coOwnerToken,
                                          json: .object(["masterPasswordHash": .string(coOwner.hash)])).status == .ok)
            #expect(try await Self.count(server, "SELECT id FROM organizations") == 0)
            #expect(try await Self.count(server, "SELECT id FROM ciphers") == 0)
            #expect(try await api.request(.get, "/api/sync", token: coOwnerToken).status == .unauthorized)
        }
    }
}
