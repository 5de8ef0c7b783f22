import Foundation
import Hummingbird
import Testing
import VaultCrypto
import VaultModels
@testable import VaultServer

@Suite("Organization invites: accepted by the invitee only, the same answer for every email", .serialized)
struct InviteTests {
    /// An owner's organization with one shared item in its default collection.
    struct Organization {
        let owner: TestUser
        let token: String
        let id: String
        let key: SymmetricCryptoKey
        let collectionID: String

        static func make(_ api: APIClient) async throws -> Organization {
            let owner = try await TestUser.register(api)
            let token = try await owner.token(api)
            let (id, key) = try await owner.createOrganization(api, token: token)
            let collectionID = try #require(try await api.request(.get, "/api/organizations/\(id)/collections", token: token)
                .object["data"]?.arrayValue?.first?.objectValue?["id"]?.stringValue)
            let keys = VaultKeys(userKey: owner.userKey, organizationKeys: [id: key])
            var view = try keys.newItem(type: .login, name: "Pushed into your vault", organizationId: id)
            view.login = LoginView(username: "attacker", password: "phish")
            let created = try await api.request(.post, "/api/ciphers/create", token: token, json: .object([
                "cipher": try view.encrypted(with: keys).jsonValue, "collectionIds": .array([.string(collectionID)]),
            ]))
            #expect(created.status == .ok)
            return Organization(owner: owner, token: token, id: id, key: key, collectionID: collectionID)
        }

        func invite(_ api: APIClient, _ emails: [String]) async throws -> APIResponse {
            try await api.request(.post, "/api/organizations/\(id)/users/invite", token: token, json: .object([
                "emails": .array(emails.map(JSONValue.string)), "type": .int(2), "groups": .array([]),
                "collections": .array([.object(["id": .string(collectionID), "readOnly": .bool(false), "hidePasswords": .bool(false)])]),
            ]))
        }

        func members(_ api: APIClient) async throws -> [JSONObject] {
            (try await api.request(.get, "/api/organizations/\(id)/users", token: token).object["data"]?.arrayValue ?? []).compactMap(\.objectValue)
        }
    }

    @Test("an invited user is no member until they accept: no organization, no items; then accepted, then confirmed",
          arguments: Backend.available)
    func notAMemberUntilAccepted(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let org = try await Organization.make(api)
            let victim = try await TestUser.register(api)
            let victimToken = try await victim.token(api)
            #expect(try await org.invite(api, [victim.email]).status == .ok)
            func victimSees() async throws -> (organizations: Int, ciphers: Int) {
                let sync = try await api.request(.get, "/api/sync", token: victimToken).object
                return (sync["profile"]?.objectValue?["organizations"]?.arrayValue?.count ?? -1, sync["ciphers"]?.arrayValue?.count ?? -1)
            }
            #expect(try await victimSees() == (0, 0), "an invite alone puts nothing in the invitee's vault")
            let invited = try #require(try await org.members(api).first { $0["email"] == .string(victim.email.lowercased()) })
            #expect(invited["status"] == .int(0) && invited["userId"] == .null)
            let inviteID = try #require(invited["id"]?.stringValue)
            // The owner cannot confirm an invite the invitee has not accepted (nor push a key with it).
            let wrapped = try victim.privateKey.publicKey.wrap(org.key).serialized
            #expect(try await api.request(.post, "/api/organizations/\(org.id)/users/\(inviteID)/confirm", token: org.token,
                                          json: .object(["key": .string(wrapped)])).status == .badRequest)
            #expect(try await victimSees() == (0, 0))
            // The invitee sees the invite and accepts it.
            let pending = try await api.request(.get, "/api/vaultsync/invites", token: victimToken).object["data"]?.arrayValue ?? []
            #expect(pending.first?.objectValue?["id"] == .string(inviteID) && pending.first?.objectValue?["organizationId"] == .string(org.id))
            #expect(try await api.request(.post, "/api/organizations/\(org.id)/users/\(inviteID)/accept", token: victimToken,
                                          json: .object(["token": .string("from-a-mail")])).status == .ok)
            #expect(try await org.members(api).first { $0["email"] == .string(victim.email.lowercased()) }?["status"] == .int(1))
            #expect(try await victimSees() == (0, 0), "accepted but not confirmed: still no items")
            #expect(try await api.request(.post, "/api/organizations/\(org.id)/users/\(inviteID)/confirm", token: org.token,
                                          json: .object(["key": .string(wrapped)])).status == .ok)
            #expect(try await victimSees() == (1, 1))
            #expect(try await api.request(.get, "/api/vaultsync/invites", token: victimToken).object["data"]?.arrayValue?.isEmpty == true)
        }
    }

    @Test("only the invited account can accept, once", arguments: Backend.available)
    func onlyTheInvitee(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let org = try await Organization.make(api)
            let invitee = try await TestUser.register(api)
            let other = try await TestUser.register(api)
            #expect(try await org.invite(api, [invitee.email]).status == .ok)
            let inviteID = try #require(try await org.members(api).first { $0["email"] == .string(invitee.email.lowercased()) }?["id"]?.stringValue)
            let path = "/api/organizations/\(org.id)/users/\(inviteID)/accept"
            let otherToken = try await other.token(api)
            let stolen = try await api.request(.post, path, token: otherToken, json: .object(["token": .string("x")]))
            #expect(stolen.status == .badRequest)
            #expect(stolen.message == "This invitation was issued to a different account.")
            #expect(try await api.request(.get, "/api/vaultsync/invites", token: otherToken).object["data"]?.arrayValue?.isEmpty == true)
            // The organization owner cannot accept for the invitee either.
            #expect(try await api.request(.post, path, token: org.token, json: .object([:])).status == .badRequest)
            let inviteeToken = try await invitee.token(api)
            #expect(try await api.request(.post, path, token: inviteeToken, json: .object([:])).status == .ok)
            #expect(try await api.request(.post, path, token: inviteeToken, json: .object([:])).status == .notFound, "once")
            #expect(try await org.invite(api, [invitee.email]).status == .badRequest, "already a member")
        }
    }

    @Test("the invite answers the same for an email with an account and one without; the new account can accept later",
          arguments: Backend.available)
    func sameAnswerForEveryEmail(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let org = try await Organization.make(api)
            let existing = try await TestUser.register(api)
            let unknownEmail = "not-yet-\(UUID().uuidString.prefix(8).lowercased())@example.com"
            let known = try await org.invite(api, [existing.email])
            let unknown = try await org.invite(api, [unknownEmail])
            #expect(known.status == .ok && unknown.status == .ok)
            #expect(known.bytes == unknown.bytes && known.headers[.contentLength] == unknown.headers[.contentLength])
            #expect(try await org.invite(api, [unknownEmail.uppercased()]).bytes == known.bytes, "again: renewed, same answer")
            let statuses = try await org.members(api).filter { $0["status"] == .int(0) }.map { $0["email"]?.stringValue ?? "" }
            #expect(Set(statuses) == [existing.email.lowercased(), unknownEmail])
            let newcomer = try await TestUser.register(api, email: unknownEmail)
            try await newcomer.acceptInvite(api, organizationID: org.id)
        }
    }

    @Test("an invite expires after the configured lifetime", arguments: Backend.available)
    func inviteExpires(backend: Backend) async throws {
        let clock = ManualClock(frozen: true)
        try await withTestServer(backend, configure: { $0.now = { clock.now }; $0.inviteLifetime = 600 }) { api in
            let org = try await Organization.make(api)
            let invitee = try await TestUser.register(api)
            #expect(try await org.invite(api, [invitee.email]).status == .ok)
            let inviteID = try #require(try await org.members(api).first { $0["email"] == .string(invitee.email.lowercased()) }?["id"]?.stringValue)
            clock.advance(seconds: 600)
            let token = try await invitee.token(api)
            #expect(try await api.request(.get, "/api/vaultsync/invites", token: token).object["data"]?.arrayValue?.count == 1, "the last second")
            clock.advance(seconds: 1)
            #expect(try await api.request(.get, "/api/vaultsync/invites", token: token).object["data"]?.arrayValue?.isEmpty == true)
            let late = try await api.request(.post, "/api/organizations/\(org.id)/users/\(inviteID)/accept", token: token, json: .object([:]))
            #expect(late.status == .badRequest && late.message == "This invitation has expired. Ask the organization for a new one.")
            // A new invite can be accepted.
            #expect(try await org.invite(api, [invitee.email]).status == .ok)
            try await invitee.acceptInvite(api, organizationID: org.id)
        }
    }
}
