import Foundation
import Hummingbird
import HummingbirdTesting
import Testing
import VaultCrypto
import VaultModels
@testable import VaultServer

@Suite("Organizations, collections and shared items", .serialized)
struct OrganizationTests {
    @Test("owner creates an organization; a member confirmed with the wrapped key reads shared items; read-only cannot edit",
          arguments: Backend.available)
    func sharedItems(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let owner = try await TestUser.register(api)
            let ownerToken = try await owner.token(api)
            let (orgID, orgKey) = try await owner.createOrganization(api, token: ownerToken)

            // The owner's sync carries the org key wrapped for them and the default collection.
            let ownerSync = try await api.request(.get, "/api/sync", token: ownerToken).object
            let profileOrg = try #require(ownerSync["profile"]?.objectValue?["organizations"]?.arrayValue?.first?.objectValue)
            #expect(profileOrg["status"] == .int(2))
            #expect(profileOrg["type"] == .int(0))
            for field in ["enabled", "selfHost", "usePolicies", "keyConnectorEnabled", "useGroups", "useDirectory", "useEvents",
                          "useTotp", "use2fa", "useApi", "usersGetPremium"] {
                #expect(profileOrg[field]?.boolValue != nil, "profileOrganization lacks \(field)")
            }
            let unwrapped = try owner.privateKey.unwrapKey(EncString(try #require(profileOrg["key"]?.stringValue)))
            #expect(unwrapped == orgKey)
            let collection = try #require(ownerSync["collections"]?.arrayValue?.first?.objectValue)
            #expect(collection["type"] == .int(0))
            let collectionID = try #require(collection["id"]?.stringValue)
            #expect(try EncString(try #require(collection["name"]?.stringValue)).decryptString(key: orgKey) == "Default collection")

            // Two members: one read-write, one read-only.
            let writer = try await TestUser.register(api)
            let reader = try await TestUser.register(api)
            for (member, readOnly) in [(writer, false), (reader, true)] {
                let invite = try await api.request(.post, "/api/organizations/\(orgID)/users/invite", token: ownerToken, json: .object([
                    "emails": .array([.string(member.email)]), "type": .int(2), "groups": .array([]),
                    "collections": .array([.object(["id": .string(collectionID), "readOnly": .bool(readOnly),
                                                    "hidePasswords": .bool(false), "manage": .bool(false)])]),
                ]))
                #expect(invite.status == .ok, "invite: \(invite.message ?? "")")
                try await member.acceptInvite(api, organizationID: orgID, invite: invite)
            }
            let members = try await api.request(.get, "/api/organizations/\(orgID)/users", token: ownerToken).object
            let accepted = (members["data"]?.arrayValue ?? []).compactMap(\.objectValue).filter { $0["status"] == .int(1) }
            #expect(accepted.count == 2)
            for entry in accepted {
                let userID = try #require(entry["userId"]?.stringValue)
                let membershipID = try #require(entry["id"]?.stringValue)
                let publicKey = try await api.request(.get, "/api/users/\(userID)/public-key", token: ownerToken).object
                let wrapped = try RSAPublicKey(spkiBase64: try #require(publicKey["publicKey"]?.stringValue)).wrap(orgKey)
                let confirm = try await api.request(.post, "/api/organizations/\(orgID)/users/\(membershipID)/confirm", token: ownerToken,
                                                    json: .object(["key": .string(wrapped.serialized)]))
                #expect(confirm.status == .ok)
            }

            // The writer creates an org item in the collection.
            let writerToken = try await writer.token(api)
            let writerSync = try await api.request(.get, "/api/sync", token: writerToken).object
            let writerOrgKey = try writer.privateKey.unwrapKey(EncString(try #require(
                writerSync["profile"]?.objectValue?["organizations"]?.arrayValue?.first?.objectValue?["key"]?.stringValue)))
            #expect(writerOrgKey == orgKey)
            let keys = VaultKeys(userKey: writer.userKey, organizationKeys: [orgID: writerOrgKey])
            var view = try keys.newItem(type: .login, name: "Shared wifi", organizationId: orgID)
            view.login = LoginView(username: "guest", password: "wifi-password")
            let missingCollection = try await api.request(.post, "/api/ciphers/create", token: writerToken, json: .object([
                "cipher": try view.encrypted(with: keys).jsonValue, "collectionIds": .array([]),
            ]))
            #expect(missingCollection.status == .badRequest)
            let created = try await api.request(.post, "/api/ciphers/create", token: writerToken, json: .object([
                "cipher": try view.encrypted(with: keys).jsonValue, "collectionIds": .array([.string(collectionID)]),
            ]))
            #expect(created.status == .ok, "create: \(created.message ?? "")")
            let cipherID = try #require(created.object["id"]?.stringValue)
            #expect(created.object["collectionIds"] == .array([.string(collectionID)]))

            // The reader sees it, can decrypt it, cannot edit or delete it.
            let readerToken = try await reader.token(api)
            let readerSync = try await api.request(.get, "/api/sync", token: readerToken).object
            let shared = try #require(readerSync["ciphers"]?.arrayValue?.first?.objectValue)
            #expect(shared["edit"] == .bool(false))
            #expect(shared["viewPassword"] == .bool(true))
            #expect(shared["permissions"]?.objectValue?["delete"] == .bool(false))
            let readerKeys = VaultKeys(userKey: reader.userKey, organizationKeys: [orgID: try reader.privateKey.unwrapKey(EncString(try #require(
                readerSync["profile"]?.objectValue?["organizations"]?.arrayValue?.first?.objectValue?["key"]?.stringValue)))])
            let readerView = try CipherWire(json: shared, path: "$").decrypted(with: readerKeys)
            #expect(readerView.login?.password == "wifi-password")
            var edit = readerView
            edit.login?.password = "changed"
            let refused = try await api.request(.put, "/api/ciphers/\(cipherID)", token: readerToken, json: try edit.encrypted(with: readerKeys).jsonValue)
            #expect(refused.status == .forbidden)
            #expect(refused.message == "You do not have permissions to edit this.")
            #expect(try await api.request(.put, "/api/ciphers/\(cipherID)/delete", token: readerToken).status == .forbidden)

            // The owner (full access) sees it too; a stranger does not.
            let ownerSees = try await api.request(.get, "/api/ciphers/\(cipherID)", token: ownerToken)
            #expect(ownerSees.status == .ok)
            let stranger = try await TestUser.register(api)
            let strangerToken = try await stranger.token(api)
            #expect(try await api.request(.get, "/api/ciphers/\(cipherID)", token: strangerToken).status == .notFound)
            #expect(try await api.request(.get, "/api/organizations/\(orgID)/collections", token: strangerToken).status == .notFound)
        }
    }
}

extension OrganizationTests {
    @Test("share moves a personal item into the organization; collections can be changed; admins list org items",
          arguments: Backend.available)
    func shareAndCollections(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let owner = try await TestUser.register(api)
            let token = try await owner.token(api)
            let (orgID, orgKey) = try await owner.createOrganization(api, token: token, name: "Team", collectionName: "One")
            let second = try await api.request(.post, "/api/organizations/\(orgID)/collections", token: token, json: .object([
                "name": .string(try EncString.encrypt("Two", key: orgKey).serialized), "users": .array([]), "groups": .array([]),
            ]))
            let secondID = try #require(second.object["id"]?.stringValue)
            let firstID = try #require(try await api.request(.get, "/api/organizations/\(orgID)/collections", token: token)
                .object["data"]?.arrayValue?.compactMap { $0.objectValue?["id"]?.stringValue }.first { $0 != secondID })

            // A personal item with its own item key; sharing re-wraps only that key.
            let created = try await api.request(.post, "/api/ciphers", token: token, json: .object(try owner.loginItem(name: "Moving")))
            var wire = try CipherWire(json: created.object, path: "$")
            let itemKey = try #require(wire.key).decryptKey(key: owner.userKey)
            wire.key = try EncString.wrap(itemKey, with: orgKey)
            wire.organizationId = orgID
            wire.lastKnownRevisionDate = wire.revisionDate
            let missing = try await api.request(.put, "/api/ciphers/\(wire.id!)/share", token: token,
                                                json: .object(["cipher": wire.jsonValue, "collectionIds": .array([])]))
            #expect(missing.status == .badRequest)
            let shared = try await api.request(.put, "/api/ciphers/\(wire.id!)/share", token: token,
                                               json: .object(["cipher": wire.jsonValue, "collectionIds": .array([.string(firstID)])]))
            #expect(shared.status == .ok, "share: \(shared.message ?? "")")
            #expect(shared.object["organizationId"] == .string(orgID))
            #expect(shared.object["collectionIds"] == .array([.string(firstID)]))
            let keys = VaultKeys(userKey: owner.userKey, organizationKeys: [orgID: orgKey])
            #expect(try CipherWire(json: shared.object, path: "$").decrypted(with: keys).login?.password == "hunter2")

            let moved = try await api.request(.put, "/api/ciphers/\(wire.id!)/collections_v2", token: token,
                                              json: .object(["collectionIds": .array([.string(secondID)])]))
            #expect(moved.object["unavailable"] == .bool(false))
            #expect(moved.object["cipher"]?.objectValue?["collectionIds"] == .array([.string(secondID)]))
            let listed = try await api.request(.get, "/api/ciphers/organization-details?organizationId=\(orgID)", token: token)
            #expect(listed.object["data"]?.arrayValue?.count == 1)
            let stranger = try await TestUser.register(api)
            let strangerToken = try await stranger.token(api)
            #expect(try await api.request(.get, "/api/ciphers/organization-details?organizationId=\(orgID)", token: strangerToken).status == .notFound)
            #expect(try await api.request(.put, "/api/ciphers/\(wire.id!)/collections", token: strangerToken,
                                          json: .object(["collectionIds": .array([])])).status == .notFound)
        }
    }
}

@Suite("Several server instances on one PostgreSQL", .serialized)
struct MultiInstanceTests {
    @Test("two instances share tokens, data and the concurrency check")
    func twoInstances() async throws {
        guard Backend.postgresAdminURL != nil else { return }
        let directory = NSTemporaryDirectory() + "vaultsync-multi-" + UUID().uuidString
        let database = try await TestDatabase.make(.postgres, directory: directory)
        var configuration = database.configuration
        configuration.tokenKey = SystemRandomSource().bytes(count: 64)
        let first = try await buildApplication(configuration: configuration)
        let second = try await buildApplication(configuration: configuration)
        do {
            try await first.test(.ahc(.http)) { firstClient in
                try await second.test(.ahc(.http)) { secondClient in
                    let a = APIClient(client: firstClient)
                    let b = APIClient(client: secondClient)
                    let user = try await TestUser.register(a)
                    let token = try await user.token(a)
                    let created = try await a.request(.post, "/api/ciphers", token: token, json: .object(try user.loginItem(name: "both")))
                    let wire = try CipherWire(json: created.object, path: "$")
                    // A token from instance A works on instance B, which sees A's write.
                    let seen = try await b.request(.get, "/api/ciphers/\(wire.id!)", token: token)
                    #expect(seen.status == .ok)
                    let bodies = try (0..<2).map { index -> JSONValue in
                        var view = try wire.decrypted(with: user.keys)
                        view.notes = "instance \(index)"
                        var body = try view.encrypted(with: user.keys)
                        body.lastKnownRevisionDate = wire.revisionDate
                        return body.jsonValue
                    }
                    async let fromA = a.request(.put, "/api/ciphers/\(wire.id!)", token: token, json: bodies[0])
                    async let fromB = b.request(.put, "/api/ciphers/\(wire.id!)", token: token, json: bodies[1])
                    let codes = try await [fromA.status.code, fromB.status.code].sorted()
                    #expect(codes == [200, 400])
                }
            }
        } catch {
            await database.cleanup()
            throw error
        }
        await database.cleanup()
    }

    @Test("CI runs the PostgreSQL half of the suite")
    func ciHasPostgres() {
        if ProcessInfo.processInfo.environment["CI"] == "true" {
            #expect(Backend.postgresAdminURL != nil, "CI must export VAULTSYNC_TEST_POSTGRES_URL (see .ci/run)")
        }
    }
}
