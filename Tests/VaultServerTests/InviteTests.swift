import Foundation
import Hummingbird
import Testing
import VaultCrypto
import VaultModels
@testable import VaultServer

@Suite("Organization invites: accepted by the invitee only, with the one-time code, the same answer for every email", .serialized)
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

        func member(_ api: APIClient, _ email: String) async throws -> JSONObject? {
            try await members(api).first { $0["email"] == .string(email.lowercased()) }
        }

        func members(_ api: APIClient) async throws -> [JSONObject] {
            (try await api.request(.get, "/api/organizations/\(id)/users", token: token).object["data"]?.arrayValue ?? []).compactMap(\.objectValue)
        }
    }

    /// `POST …/users/{inviteID}/accept` as `token`'s account, with `code` as the body's `token` (none: no `token` field).
    static func accept(_ api: APIClient, org: Organization, inviteID: String, token: String, code: String?) async throws -> APIResponse {
        var body = JSONObject()
        if let code { body["token"] = .string(code) }
        return try await api.request(.post, "/api/organizations/\(org.id)/users/\(inviteID)/accept", token: token, json: .object(body))
    }

    /// A refusal of an accept, as every refusal must look: 400, the one message, nothing else.
    static func isRefusal(_ response: APIResponse) -> Bool {
        response.status == .badRequest && response.message == OrganizationsController.acceptRefused
    }

    /// A code that is well formed and not the invite's.
    static func wrongCode(than code: String) -> String {
        let other = code.hasPrefix("A") ? "B" : "A"
        return other + code.dropFirst()
    }

    @Test("an invited user is no member until they accept: no organization, no items; then accepted, then confirmed",
          arguments: Backend.available)
    func notAMemberUntilAccepted(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let org = try await Organization.make(api)
            let victim = try await TestUser.register(api)
            let victimToken = try await victim.token(api)
            let invite = try await org.invite(api, [victim.email])
            #expect(invite.status == .ok)
            let code = try victim.inviteCode(in: invite)
            func victimSees() async throws -> (organizations: Int, ciphers: Int) {
                let sync = try await api.request(.get, "/api/sync", token: victimToken).object
                return (sync["profile"]?.objectValue?["organizations"]?.arrayValue?.count ?? -1, sync["ciphers"]?.arrayValue?.count ?? -1)
            }
            #expect(try await victimSees() == (0, 0), "an invite alone puts nothing in the invitee's vault")
            let invited = try #require(try await org.member(api, victim.email))
            #expect(invited["status"] == .int(0) && invited["userId"] == .null && invited["inviteState"] == .string("pending"))
            let inviteID = try #require(invited["id"]?.stringValue)
            // The owner cannot confirm an invite the invitee has not accepted (nor push a key with it).
            let wrapped = try victim.privateKey.publicKey.wrap(org.key).serialized
            #expect(try await api.request(.post, "/api/organizations/\(org.id)/users/\(inviteID)/confirm", token: org.token,
                                          json: .object(["key": .string(wrapped)])).status == .badRequest)
            #expect(try await victimSees() == (0, 0))
            // The invitee sees the invite and accepts it with the code.
            let pending = try await api.request(.get, "/api/vaultsync/invites", token: victimToken).object["data"]?.arrayValue ?? []
            #expect(pending.first?.objectValue?["id"] == .string(inviteID) && pending.first?.objectValue?["organizationId"] == .string(org.id))
            #expect(try await Self.accept(api, org: org, inviteID: inviteID, token: victimToken, code: code).status == .ok)
            let accepted = try await org.member(api, victim.email)
            #expect(accepted?["status"] == .int(1) && accepted?["acceptedWithCode"] == .bool(true))
            #expect(try await victimSees() == (0, 0), "accepted but not confirmed: still no items")
            #expect(try await api.request(.post, "/api/organizations/\(org.id)/users/\(inviteID)/confirm", token: org.token,
                                          json: .object(["key": .string(wrapped)])).status == .ok)
            #expect(try await victimSees() == (1, 1))
            #expect(try await api.request(.get, "/api/vaultsync/invites", token: victimToken).object["data"]?.arrayValue?.isEmpty == true)
            // The owner's own membership was never accepted with a code.
            #expect(try await org.member(api, org.owner.email)?["acceptedWithCode"] == .bool(false))
        }
    }

    @Test("the invite answer gives each email its own code, which is shown once, to the inviter",
          arguments: Backend.available)
    func inviteAnswerCarriesCodes(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let org = try await Organization.make(api)
            let emails = (0..<3).map { "code-\($0)-\(UUID().uuidString.prefix(8).lowercased())@example.com" }
            let invite = try await org.invite(api, emails)
            let entries = (invite.object["inviteCodes"]?.arrayValue ?? []).compactMap(\.objectValue)
            #expect(entries.map { $0["email"]?.stringValue ?? "" } == emails)
            let codes = entries.compactMap { $0["code"]?.stringValue }
            #expect(Set(codes).count == 3)
            for code in codes {
                let symbols = try #require(InvitationCode.normalised(code), "\(code) is a code")
                #expect(code == InvitationCode.grouped(symbols) && code.count == 34)
            }
            let listed = try await org.members(api).filter { $0["status"] == .int(0) }
            #expect(Set(entries.compactMap { $0["id"]?.stringValue }) == Set(listed.compactMap { $0["id"]?.stringValue }))
            let list = String(decoding: try await api.request(.get, "/api/organizations/\(org.id)/users", token: org.token).bytes, as: UTF8.self)
            #expect(codes.allSatisfy { !list.contains($0) }, "the member list never shows a code again")
        }
    }

    @Test("a stranger who registered the invited email first cannot accept: no code, a wrong code, the code on another account, all refused alike; the invitee with the code is accepted, once",
          arguments: Backend.available)
    func claimedInviteNeedsTheCode(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let org = try await Organization.make(api)
            // The owner invites frank@…, who has no account yet; a stranger registers that email first.
            let frankEmail = "frank-\(UUID().uuidString.prefix(8).lowercased())@example.com"
            let invite = try await org.invite(api, [frankEmail])
            let code = try #require(invite.object["inviteCodes"]?.arrayValue?.first?.objectValue?["code"]?.stringValue)
            let stranger = try await TestUser.register(api, email: frankEmail)
            let strangerToken = try await stranger.token(api)
            let pending = try await api.request(.get, "/api/vaultsync/invites", token: strangerToken).object["data"]?.arrayValue ?? []
            let inviteID = try #require(pending.first?.objectValue?["id"]?.stringValue, "the stranger can see the invite")
            var refusals: [APIResponse] = []
            refusals.append(try await Self.accept(api, org: org, inviteID: inviteID, token: strangerToken, code: nil))
            refusals.append(try await Self.accept(api, org: org, inviteID: inviteID, token: strangerToken, code: ""))
            refusals.append(try await Self.accept(api, org: org, inviteID: inviteID, token: strangerToken, code: Self.wrongCode(than: code)))
            refusals.append(try await Self.accept(api, org: org, inviteID: inviteID, token: strangerToken, code: "not a code"))
            #expect(refusals.allSatisfy(Self.isRefusal), "\(refusals.map(\.message))")
            #expect(Set(refusals.map(\.bytes)).count == 1, "every refusal is the same answer")
            let seen = try #require(try await org.member(api, frankEmail))
            #expect(seen["status"] == .int(0) && seen["userId"] == .null, "the owner never sees the stranger as accepted")
            #expect(try await api.request(.get, "/api/sync", token: strangerToken).object["profile"]?.objectValue?["organizations"]?
                .arrayValue?.isEmpty == true)

            // The real invitee of another invite accepts with their code; the code does not work on another account
            // (answered as a wrong code: nothing tells whether the email matched).
            let invitee = try await TestUser.register(api)
            let second = try await org.invite(api, [invitee.email])
            let inviteeCode = try invitee.inviteCode(in: second)
            let secondID = try #require(try await org.member(api, invitee.email)?["id"]?.stringValue)
            let onOtherAccount = try await Self.accept(api, org: org, inviteID: secondID, token: strangerToken, code: inviteeCode)
            #expect(Self.isRefusal(onOtherAccount) && onOtherAccount.bytes == refusals[0].bytes)
            #expect(try await Self.accept(api, org: org, inviteID: secondID, token: org.token, code: inviteeCode).bytes == refusals[0].bytes,
                    "not even the owner accepts for the invitee")
            let inviteeToken = try await invitee.token(api)
            // Case, spaces and missing dashes do not matter.
            let typed = " " + inviteeCode.lowercased().replacingOccurrences(of: "-", with: " ") + " "
            #expect(try await Self.accept(api, org: org, inviteID: secondID, token: inviteeToken, code: typed).status == .ok)
            let accepted = try await org.member(api, invitee.email)
            #expect(accepted?["status"] == .int(1) && accepted?["acceptedWithCode"] == .bool(true))
            // The code a second time: refused, alike.
            #expect(try await Self.accept(api, org: org, inviteID: secondID, token: inviteeToken, code: inviteeCode).bytes == refusals[0].bytes)
            #expect(try await org.invite(api, [invitee.email]).status == .badRequest, "already a member")
            // An id that is no invite at all: the same answer.
            #expect(try await Self.accept(api, org: org, inviteID: UUID().uuidString.lowercased(), token: inviteeToken, code: inviteeCode)
                .bytes == refusals[0].bytes)
        }
    }

    @Test("5 wrong codes kill an invite, even when they arrive at once: the right code is refused after them; a new invite works",
          arguments: Backend.available)
    func bruteForceStopped(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let org = try await Organization.make(api)
            let invitee = try await TestUser.register(api)
            let token = try await invitee.token(api)
            let first = try await org.invite(api, [invitee.email])
            let code = try invitee.inviteCode(in: first)
            let inviteID = try #require(try await org.member(api, invitee.email)?["id"]?.stringValue)
            // Four wrong codes leave the invite usable.
            for _ in 0..<4 {
                #expect(Self.isRefusal(try await Self.accept(api, org: org, inviteID: inviteID, token: token, code: Self.wrongCode(than: code))))
            }
            #expect(try await org.member(api, invitee.email)?["inviteState"] == .string("pending"))
            #expect(Self.isRefusal(try await Self.accept(api, org: org, inviteID: inviteID, token: token, code: Self.wrongCode(than: code))))
            #expect(try await org.member(api, invitee.email)?["inviteState"] == .string("tooManyWrongCodes"))
            #expect(Self.isRefusal(try await Self.accept(api, org: org, inviteID: inviteID, token: token, code: code)), "dead: the right code too")
            #expect(try await api.request(.get, "/api/vaultsync/invites", token: token).object["data"]?.arrayValue?.isEmpty == true)

            // Renewed, with a new code; ten wrong codes at the same moment count as ten (no lost updates), so the
            // right one after them is refused.
            let renewed = try await org.invite(api, [invitee.email])
            let newCode = try invitee.inviteCode(in: renewed)
            #expect(newCode != code)
            #expect(try await org.member(api, invitee.email)?["inviteState"] == .string("pending"))
            let answers = try await withThrowingTaskGroup(of: APIResponse.self) { group in
                for _ in 0..<10 {
                    group.addTask { try await Self.accept(api, org: org, inviteID: inviteID, token: token, code: Self.wrongCode(than: newCode)) }
                }
                return try await group.reduce(into: [APIResponse]()) { $0.append($1) }
            }
            #expect(answers.count == 10 && answers.allSatisfy(Self.isRefusal))
            #expect(Self.isRefusal(try await Self.accept(api, org: org, inviteID: inviteID, token: token, code: newCode)))

            // The old code never works on a renewed invite; a third invite's code does.
            let third = try await org.invite(api, [invitee.email])
            #expect(Self.isRefusal(try await Self.accept(api, org: org, inviteID: inviteID, token: token, code: newCode)))
            #expect(try await Self.accept(api, org: org, inviteID: inviteID, token: token, code: try invitee.inviteCode(in: third)).status == .ok)
        }
    }

    @Test("the invite answers the same for an email with an account and one without, but for the email and its code; the new account can accept later",
          arguments: Backend.available)
    func sameAnswerForEveryEmail(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let org = try await Organization.make(api)
            let existing = try await TestUser.register(api)
            let unknownEmail = "not-yet-\(UUID().uuidString.prefix(8).lowercased())@example.com"
            /// The answer with the email, the invite's id, its code and its expiry taken out.
            func shape(_ response: APIResponse, _ email: String) throws -> String {
                let entry = try #require(response.object["inviteCodes"]?.arrayValue?.first?.objectValue)
                var text = String(decoding: response.bytes, as: UTF8.self)
                for value in [email.lowercased(), entry["id"]?.stringValue ?? "?", entry["code"]?.stringValue ?? "?",
                              entry["expirationDate"]?.stringValue ?? "?"] {
                    text = text.replacingOccurrences(of: value, with: "…")
                }
                return text
            }
            let known = try await org.invite(api, [existing.email])
            let unknown = try await org.invite(api, [unknownEmail])
            #expect(known.status == .ok && unknown.status == .ok)
            #expect(try shape(known, existing.email) == shape(unknown, unknownEmail))
            let renewed = try await org.invite(api, [unknownEmail.uppercased()])
            #expect(try shape(renewed, unknownEmail) == shape(known, existing.email), "again: renewed, same answer")
            let statuses = try await org.members(api).filter { $0["status"] == .int(0) }.map { $0["email"]?.stringValue ?? "" }
            #expect(Set(statuses) == [existing.email.lowercased(), unknownEmail])
            let newcomer = try await TestUser.register(api, email: unknownEmail)
            try await newcomer.acceptInvite(api, organizationID: org.id, invite: renewed)
        }
    }

    @Test("an invite expires after the configured lifetime: the right code is refused after it", arguments: Backend.available)
    func inviteExpires(backend: Backend) async throws {
        let clock = ManualClock(frozen: true)
        try await withTestServer(backend, configure: { $0.now = { clock.now }; $0.inviteLifetime = 600 }) { api in
            let org = try await Organization.make(api)
            let invitee = try await TestUser.register(api)
            let invite = try await org.invite(api, [invitee.email])
            #expect(invite.status == .ok)
            let code = try invitee.inviteCode(in: invite)
            let inviteID = try #require(try await org.member(api, invitee.email)?["id"]?.stringValue)
            clock.advance(seconds: 600)
            let token = try await invitee.token(api)
            #expect(try await api.request(.get, "/api/vaultsync/invites", token: token).object["data"]?.arrayValue?.count == 1, "the last second")
            clock.advance(seconds: 1)
            #expect(try await api.request(.get, "/api/vaultsync/invites", token: token).object["data"]?.arrayValue?.isEmpty == true)
            #expect(try await org.member(api, invitee.email)?["inviteState"] == .string("expired"))
            #expect(Self.isRefusal(try await Self.accept(api, org: org, inviteID: inviteID, token: token, code: code)))
            // A new invite can be accepted, with its new code.
            let again = try await org.invite(api, [invitee.email])
            try await invitee.acceptInvite(api, organizationID: org.id, invite: again)
        }
    }
}
