import Foundation
import HTTPTypes
import Hummingbird
import Testing
import VaultCrypto
import VaultModels
@testable import VaultServer

/// The account routes the official clients call for their settings (docs/PROTOCOL.md, "Account settings"):
/// equivalent domains, the profile's name, the avatar colour, password hints and push registration. Each
/// against the real server: it works, it needs a token (but the anonymous ones), and bad input is refused
/// naming the field with nothing changed.
@Suite("Account settings: equivalent domains, profile, avatar, password hints, push registration", .serialized)
struct AccountSettingsTests {
    /// The account revision (`GET /api/accounts/revision-date`, milliseconds).
    static func revision(_ api: APIClient, _ token: String) async throws -> Int64 {
        let answer = try await api.request(.get, "/api/accounts/revision-date", token: token)
        return try #require(answer.json.flatMap { if case .number(let text) = $0 { Int64(text) } else { nil } })
    }

    /// The field names of a `400`'s `validationErrors`.
    static func refusedFields(_ response: APIResponse) -> [String] {
        guard response.status == .badRequest else { return [] }
        return (response.object["validationErrors"]?.objectValue?.entries ?? []).map(\.key)
    }

    @Test("equivalent domains: stored per user, answered by GET and PUT/POST, in the sync unless excluded; bad lists refused, nothing changed",
          arguments: Backend.available)
    func equivalentDomains(backend: Backend) async throws {
        let clock = ManualClock(frozen: true)
        try await withTestServer(backend, configure: { $0.now = { clock.now } }) { api in
            let user = try await TestUser.register(api)
            let token = try await user.token(api)
            let other = try await TestUser.register(api)
            let otherToken = try await other.token(api)
            for (method, path) in [(HTTPRequest.Method.get, "/api/settings/domains"), (.put, "/api/settings/domains"), (.post, "/api/settings/domains")] {
                let answer = try await api.request(method, path, json: method == .get ? nil : .object(["equivalentDomains": .array([])]))
                #expect(answer.status == .unauthorized, "\(method) \(path) without a token")
            }
            let empty: JSONValue = .object([
                "object": .string("domains"), "equivalentDomains": .array([]), "globalEquivalentDomains": .array([]),
                "excludedGlobalEquivalentDomains": .array([]),
            ])
            #expect(try await api.request(.get, "/api/settings/domains", token: token).json == empty)

            let before = try await Self.revision(api, token)
            clock.advance(seconds: 5)
            let groups: JSONValue = .array([
                .array([.string("example.com"), .string("example.net")]),
                .array([.string("shop.test"), .string("shop.example"), .string("xn--bcher-kva.example")]),
            ])
            let saved = try await api.request(.put, "/api/settings/domains", token: token, json: .object([
                "equivalentDomains": groups, "excludedGlobalEquivalentDomains": .array([.int(3), .int(7), .int(3)]),
            ]))
            #expect(saved.status == .ok, "\(saved.message ?? "")")
            let stored: JSONValue = .object([
                "object": .string("domains"), "equivalentDomains": groups, "globalEquivalentDomains": .array([]),
                "excludedGlobalEquivalentDomains": .array([.int(3), .int(7)]),
            ])
            #expect(saved.json == stored)
            #expect(try await api.request(.get, "/api/settings/domains", token: token).json == stored)
            #expect(try await Self.revision(api, token) > before, "the account revision moves: other devices sync the change")
            let sync = try await api.request(.get, "/api/sync", token: token).object
            #expect(sync["domains"] == .object([
                "object": .string("domains"), "equivalentDomains": groups, "globalEquivalentDomains": .array([]),
            ]))
            #expect(try await api.request(.get, "/api/sync?excludeDomains=true", token: token).object["domains"] == .null)
            #expect(try await api.request(.get, "/api/settings/domains", token: otherToken).json == empty, "per user")

            // Refused, each naming the field; what is stored stays.
            let refusals: [(JSONObject, String)] = [
                (["equivalentDomains": .string("example.com")], "equivalentDomains"),
                (["equivalentDomains": .array([.string("example.com")])], "equivalentDomains"),
                (["equivalentDomains": .array([.array([.string("example.com"), .int(5)])])], "equivalentDomains"),
                (["equivalentDomains": .array([.array([.string("")])])], "equivalentDomains"),
                (["equivalentDomains": .array([.array([.string(String(repeating: "a", count: 256))])])], "equivalentDomains"),
                (["equivalentDomains": .array(Array(repeating: .array([.string("a.example")]), count: RequestLimits.equivalentDomainGroups + 1))],
                 "equivalentDomains"),
                (["excludedGlobalEquivalentDomains": .array([.string("x")])], "excludedGlobalEquivalentDomains"),
                (["excludedGlobalEquivalentDomains": .array([.int(256)])], "excludedGlobalEquivalentDomains"),
                (["excludedGlobalEquivalentDomains": .int(1)], "excludedGlobalEquivalentDomains"),
            ]
            for (body, field) in refusals {
                let refused = try await api.request(.put, "/api/settings/domains", token: token, json: .object(body))
                #expect(Self.refusedFields(refused) == [field], "\(body.serialized().count) bytes: \(refused.status) \(refused.message ?? "")")
            }
            #expect(try await api.request(.put, "/api/settings/domains", token: token, body: Array("[1]".utf8)).status == .badRequest)
            #expect(try await api.request(.get, "/api/settings/domains", token: token).json == stored)

            // The deprecated POST twin; null (or absent) clears.
            let cleared = try await api.request(.post, "/api/settings/domains", token: token, json: .object(["equivalentDomains": .null]))
            #expect(cleared.status == .ok)
            #expect(cleared.json == empty)
            #expect(try await api.request(.get, "/api/sync", token: token).object["domains"] == .object([
                "object": .string("domains"), "equivalentDomains": .array([]), "globalEquivalentDomains": .array([]),
            ]))
        }
    }

    @Test("profile: PUT/POST /api/accounts/profile sets the name, answered as GET and in the sync; a long name or hint is refused, nothing changed",
          arguments: Backend.available)
    func profile(backend: Backend) async throws {
        let clock = ManualClock(frozen: true)
        try await withAttachmentServer(backend, configure: { $0.now = { clock.now } }) { server in
            let api = server.api
            let user = try await TestUser.register(api, hint: "the first cat")
            let token = try await user.token(api)
            func storedHint() async throws -> String? {
                try await server.database.read { session in
                    try await session.query("SELECT password_hint FROM users WHERE email = ?", [.text(user.email.lowercased())]).first?.text("password_hint")
                }
            }
            #expect(try await storedHint() == "the first cat")
            for method in [HTTPRequest.Method.put, .post] {
                #expect(try await api.request(method, "/api/accounts/profile", json: .object(["name": .string("x")])).status == .unauthorized)
            }
            let before = try await Self.revision(api, token)
            clock.advance(seconds: 5)
            // What the official clients send: the name, the hint they no longer know (null), and a fixed culture.
            let changed = try await api.request(.put, "/api/accounts/profile", token: token, json: .object([
                "name": .string("Alice Example"), "masterPasswordHint": .null, "culture": .string("en-US"),
            ]))
            #expect(changed.status == .ok, "\(changed.message ?? "")")
            #expect(changed.object["object"] == .string("profile"))
            #expect(changed.object["name"] == .string("Alice Example"))
            #expect(changed.object["email"] == .string(user.email.lowercased()))
            let profile = try await api.request(.get, "/api/accounts/profile", token: token)
            #expect(changed.json == profile.json, "the answer is the profile as GET answers it")
            #expect(try await api.request(.get, "/api/sync", token: token).object["profile"]?.objectValue?["name"] == .string("Alice Example"))
            #expect(try await Self.revision(api, token) > before)
            // The hint is not the profile's to change (the clients send it empty): it stays.
            #expect(try await storedHint() == "the first cat")
            #expect(try await api.request(.put, "/api/accounts/profile", token: token, json: .object([
                "name": .string("Alice Example"), "masterPasswordHint": .string("another hint")])).status == .ok)
            #expect(try await storedHint() == "the first cat")

            let fifty = String(repeating: "é", count: 50)
            #expect(try await api.request(.post, "/api/accounts/profile", token: token, json: .object(["name": .string(fifty)])).object["name"]
                == .string(fifty), "50 characters, the deprecated POST")
            let refusals: [(JSONObject, String)] = [
                (["name": .string(String(repeating: "n", count: 51))], "name"),
                (["name": .int(7)], "name"),
                (["name": .string("Bob"), "masterPasswordHint": .string(String(repeating: "h", count: 51))], "masterPasswordHint"),
            ]
            for (body, field) in refusals {
                let refused = try await api.request(.put, "/api/accounts/profile", token: token, json: .object(body))
                #expect(Self.refusedFields(refused) == [field], "\(refused.status) \(refused.message ?? "")")
            }
            #expect(try await api.request(.get, "/api/accounts/profile", token: token).object["name"] == .string(fifty))
            // An empty name clears it.
            #expect(try await api.request(.put, "/api/accounts/profile", token: token, json: .object(["name": .string("")])).object["name"] == .null)
            #expect(try await api.request(.get, "/api/sync", token: token).object["profile"]?.objectValue?["name"] == .null)
        }
    }

    @Test("avatar: PUT/POST /api/accounts/avatar sets #rrggbb or null, shown in the profile and the sync; other values refused, nothing changed",
          arguments: Backend.available)
    func avatar(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let user = try await TestUser.register(api)
            let token = try await user.token(api)
            #expect(try await api.request(.get, "/api/accounts/profile", token: token).object["avatarColor"] == .null)
            for method in [HTTPRequest.Method.put, .post] {
                #expect(try await api.request(method, "/api/accounts/avatar", json: .object(["avatarColor": .string("#aabbcc")])).status
                    == .unauthorized)
            }
            let set = try await api.request(.put, "/api/accounts/avatar", token: token, json: .object(["avatarColor": .string("#2E7d32")]))
            #expect(set.status == .ok, "\(set.message ?? "")")
            #expect(set.object["object"] == .string("profile") && set.object["avatarColor"] == .string("#2E7d32"))
            #expect(try await api.request(.get, "/api/accounts/profile", token: token).object["avatarColor"] == .string("#2E7d32"))
            #expect(try await api.request(.get, "/api/sync", token: token).object["profile"]?.objectValue?["avatarColor"] == .string("#2E7d32"))
            for bad: JSONValue in [.string("red"), .string("#12345"), .string("#1234567"), .string("#GGGGGG"), .string("123456#"), .int(5)] {
                let refused = try await api.request(.put, "/api/accounts/avatar", token: token, json: .object(["avatarColor": bad]))
                #expect(Self.refusedFields(refused) == ["avatarColor"], "\(bad): \(refused.status)")
            }
            #expect(try await api.request(.get, "/api/accounts/profile", token: token).object["avatarColor"] == .string("#2E7d32"))
            let cleared = try await api.request(.post, "/api/accounts/avatar", token: token, json: .object(["avatarColor": .null]))
            #expect(cleared.status == .ok && cleared.object["avatarColor"] == .null)
            #expect(try await api.request(.get, "/api/sync", token: token).object["profile"]?.objectValue?["avatarColor"] == .null)
        }
    }

    @Test("password hints: one answer for every well-formed email, with or without an account or a hint, never the hint; bad emails refused",
          arguments: Backend.available)
    func passwordHint(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let withHint = try await TestUser.register(api, hint: "the name of the first cat")
            let withoutHint = try await TestUser.register(api)
            var answers: [APIResponse] = []
            for email in [withHint.email, withHint.email.uppercased(), withoutHint.email, "nobody-\(UUID().uuidString.prefix(8))@example.com"] {
                let answer = try await api.request(.post, "/api/accounts/password-hint", json: .object(["email": .string(email)]))
                #expect(answer.status == .badRequest)
                #expect(answer.message?.contains("does not send password hints") == true, "\(answer.message ?? "")")
                #expect(!String(decoding: answer.bytes, as: UTF8.self).contains("cat"), "the hint is never shown")
                answers.append(answer)
            }
            #expect(Set(answers.map(\.bytes)).count == 1, "the same bytes whoever asks")
            for body: JSONObject in [[:], ["email": .string("")], ["email": .string("no-at-sign")], ["email": .string("a@b@c")],
                                     ["email": .string("@example.com")], ["email": .int(1)],
                                     ["email": .string(String(repeating: "a", count: 250) + "@example.com")]] {
                let refused = try await api.request(.post, "/api/accounts/password-hint", json: .object(body))
                #expect(Self.refusedFields(refused) == ["email"], "\(body.serialized().count) bytes: \(refused.status)")
            }
            // A token changes nothing (the route is anonymous).
            let token = try await withHint.token(api)
            let authenticated = try await api.request(.post, "/api/accounts/password-hint", token: token,
                                                      json: .object(["email": .string(withHint.email)]))
            #expect(authenticated.bytes == answers[0].bytes)
        }
    }

    @Test("push registration: the token is kept on the device and cleared anonymously, web push is taken; unknown devices 404, bad bodies 400",
          arguments: Backend.available)
    func pushRegistration(backend: Backend) async throws {
        try await withAttachmentServer(backend) { server in
            let api = server.api
            func stored(_ identifier: String) async throws -> [String?] {
                try await server.database.read { session in
                    try await session.query("SELECT push_token FROM devices WHERE identifier = ? ORDER BY id", [.text(identifier)])
                        .map { $0.text("push_token") }
                }
            }
            let user = try await TestUser.register(api)
            let phone = try await SignedInDevice.login(user, api)
            let stranger = try await SignedInDevice.login(try await TestUser.register(api), api)
            let path = "/api/devices/identifier/\(phone.identifier)"

            #expect(try await api.request(.put, path + "/token", json: .object(["pushToken": .string("t")])).status == .unauthorized)
            #expect(try await api.request(.put, path + "/web-push-auth", json: .object([
                "endpoint": .string("https://push.example/1"), "p256dh": .string("k"), "auth": .string("a")])).status == .unauthorized)

            let put = try await api.request(.put, path + "/token", token: phone.access, json: .object(["pushToken": .string("fcm-token-1")]))
            #expect(put.status == .ok && put.bytes.isEmpty, "\(put.message ?? "")")
            #expect(try await stored(phone.identifier) == ["fcm-token-1"])
            #expect(try await api.request(.post, path + "/token", token: phone.access, json: .object(["pushToken": .string("fcm-token-2")])).status == .ok)
            #expect(try await stored(phone.identifier) == ["fcm-token-2"])

            // Not the caller's device: 404, and the other account's device keeps its token.
            #expect(try await api.request(.put, "/api/devices/identifier/\(stranger.identifier)/token", token: phone.access,
                                          json: .object(["pushToken": .string("hijack")])).status == .notFound)
            #expect(try await stored(stranger.identifier) == [nil])
            #expect(try await api.request(.put, "/api/devices/identifier/\(UUID().uuidString)/token", token: phone.access,
                                          json: .object(["pushToken": .string("x")])).status == .notFound)
            for bad: JSONValue in [.string(String(repeating: "t", count: 256)), .int(5)] {
                let refused = try await api.request(.put, path + "/token", token: phone.access, json: .object(["pushToken": bad]))
                #expect(Self.refusedFields(refused) == ["pushToken"])
            }
            #expect(try await stored(phone.identifier) == ["fcm-token-2"])

            // Web push: taken (and dropped) for the caller's devices.
            let subscription: JSONObject = ["endpoint": .string("https://push.example/sub/1"), "p256dh": .string("BOr8key"), "auth": .string("c2VjcmV0")]
            for method in [HTTPRequest.Method.put, .post] {
                #expect(try await api.request(method, path + "/web-push-auth", token: phone.access, json: .object(subscription)).status == .ok)
            }
            var partial = subscription
            partial["auth"] = nil
            #expect(Self.refusedFields(try await api.request(.put, path + "/web-push-auth", token: phone.access, json: .object(partial))) == ["auth"])
            #expect(try await api.request(.put, "/api/devices/identifier/\(stranger.identifier)/web-push-auth", token: phone.access,
                                          json: .object(subscription)).status == .notFound)

            // Clearing needs no token, as on the official server.
            let clear = try await api.request(.put, path + "/clear-token")
            #expect(clear.status == .ok && clear.bytes.isEmpty)
            #expect(try await stored(phone.identifier) == [nil])
            #expect(try await api.request(.post, path + "/clear-token").status == .ok)
            #expect(try await api.request(.put, "/api/devices/identifier/\(UUID().uuidString)/clear-token").status == .notFound)
            #expect(try await phone.works(api) == (true, true), "the device is still signed in")
        }
    }
}
