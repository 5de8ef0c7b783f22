import Foundation
import Hummingbird
import HTTPTypes
import Testing
import VaultCrypto
import VaultModels
@testable import VaultServer

/// Two-step login with an authenticator app (docs/PROTOCOL.md, "Two-step login"). The server's clock is
/// frozen and moved by the tests, so a code's time step is known without waiting for real time.
@Suite("Two-step login: authenticator, remembered devices, recovery, lockouts")
struct TwoFactorTests {
    /// A frozen clock, and login buckets that never get in the way (only the two-step lockout is tested).
    static func configure(_ clock: ManualClock) -> (inout ServerConfiguration) -> Void {
        { configuration in
            configuration.now = { clock.now }
            configuration.accountLoginBurst = 1_000
            configuration.addressLoginBurst = 1_000
        }
    }

    /// The authenticator's code at the clock's time (plus `offset` seconds).
    static func code(_ key: String, _ clock: ManualClock, offset: Int64 = 0) throws -> String {
        try TOTP(secretOrURI: key).code(counter: UInt64((clock.now / 1_000_000 + offset) / 30))
    }

    static let required: JSONValue = .object([
        "error": .string("invalid_grant"), "error_description": .string("Two factor required."),
        "TwoFactorProviders": .array([.string("0")]), "TwoFactorProviders2": .object(["0": .null]),
        "MasterPasswordPolicy": .object(["Object": .string("masterPasswordPolicy")]),
    ])

    /// Whether a response is the wrong-code answer: the fields the official server sends.
    static func isInvalidCode(_ response: APIResponse) -> Bool {
        response.status == .badRequest && response.object["error"]?.stringValue == "invalid_grant"
            && response.object["error_description"]?.stringValue == "invalid_username_or_password"
            && response.object["ErrorModel"] == .object(["Message": .string("Two-step token is invalid. Try again."), "Object": .string("error")])
    }

    /// Turns the authenticator on through the API (get-authenticator, then the code) and returns its key.
    @discardableResult
    static func enable(_ user: TestUser, _ api: APIClient, _ clock: ManualClock, token: String) async throws -> String {
        let fresh = try await api.request(.post, "/api/two-factor/get-authenticator", token: token,
                                          json: .object(["masterPasswordHash": .string(user.hash)]))
        #expect(fresh.status == .ok, "\(fresh.message ?? "")")
        let key = try #require(fresh.object["key"]?.stringValue)
        let verification = try #require(fresh.object["userVerificationToken"]?.stringValue)
        let enabled = try await api.request(.put, "/api/two-factor/authenticator", token: token, json: .object([
            "token": .string(try code(key, clock)), "key": .string(key), "userVerificationToken": .string(verification),
        ]))
        #expect(enabled.status == .ok, "\(enabled.message ?? "")")
        return key
    }

    /// A password login with extra form fields.
    static func login(_ user: TestUser, _ api: APIClient, device: String = "device-1", _ extra: [(String, String)] = [],
                      password: String? = nil) async throws -> APIResponse {
        try await api.form("/identity/connect/token", [
            ("grant_type", "password"), ("username", user.email), ("password", password ?? user.hash),
            ("scope", "api offline_access"), ("client_id", "cli"), ("deviceType", "25"), ("deviceIdentifier", device),
            ("deviceName", "linux"),
        ] + extra)
    }

    static func withCode(_ code: String, provider: String = "0", remember: Bool = false) -> [(String, String)] {
        [("twoFactorToken", code), ("twoFactorProvider", provider), ("twoFactorRemember", remember ? "1" : "0")]
    }

    @Test("enabling the authenticator through the API; then a login needs its code (the official 400 body), a code logs in once",
          arguments: Backend.available)
    func enableAndLogIn(backend: Backend) async throws {
        let clock = ManualClock(frozen: true)
        try await withTestServer(backend, configure: Self.configure(clock)) { api in
            let user = try await TestUser.register(api)
            let token = try await user.token(api)
            let none = try await api.request(.get, "/api/two-factor", token: token)
            #expect(none.json == .object(["object": .string("list"), "data": .array([]), "continuationToken": .null]))
            // The profile says whether two-step login is on (it said "off" always: RELIABILITY bug 69).
            #expect(try await api.request(.get, "/api/accounts/profile", token: token).object["twoFactorEnabled"] == .bool(false))
            #expect(try await api.request(.get, "/api/sync", token: token).object["profile"]?.objectValue?["twoFactorEnabled"] == .bool(false))

            let fresh = try await api.request(.post, "/api/two-factor/get-authenticator", token: token,
                                              json: .object(["masterPasswordHash": .string(user.hash)]))
            #expect(fresh.status == .ok)
            #expect(fresh.object["enabled"] == .bool(false) && fresh.object["object"] == .string("twoFactorAuthenticator"))
            let key = try #require(fresh.object["key"]?.stringValue)
            #expect(key.count == 32)
            #expect(try TOTP.base32Decode(key).count == 20)
            let verification = try #require(fresh.object["userVerificationToken"]?.stringValue)
            let other = try await api.request(.post, "/api/two-factor/get-authenticator", token: token,
                                              json: .object(["masterPasswordHash": .string(user.hash)]))
            #expect(other.object["key"]?.stringValue != key, "a new key each time until one is enabled")
            let wrongPassword = try await api.request(.post, "/api/two-factor/get-authenticator", token: token,
                                                      json: .object(["masterPasswordHash": .string(try user.authorizationHash("wrong"))]))
            #expect(wrongPassword.status == .badRequest)

            // A wrong code, a token made for another key, no verification at all: refused, nothing enabled.
            let wrongCode = try await api.request(.put, "/api/two-factor/authenticator", token: token, json: .object([
                "token": .string(try Self.code(key, clock, offset: 300)), "key": .string(key), "userVerificationToken": .string(verification),
            ]))
            #expect(wrongCode.status == .badRequest)
            #expect(wrongCode.object["validationErrors"] == .object(["Token": .array([.string("Invalid token.")])]), "\(wrongCode.object)")
            let otherKey = try #require(other.object["key"]?.stringValue)
            let mismatched = try await api.request(.put, "/api/two-factor/authenticator", token: token, json: .object([
                "token": .string(try Self.code(otherKey, clock)), "key": .string(otherKey), "userVerificationToken": .string(verification),
            ]))
            #expect(mismatched.status == .badRequest)
            #expect(mismatched.object["validationErrors"] == .object(["UserVerificationToken": .array([.string("User verification failed.")])]))
            #expect(try await Self.login(user, api).status == .ok, "still one step")

            let enabled = try await api.request(.put, "/api/two-factor/authenticator", token: token, json: .object([
                "token": .string(try Self.code(key, clock)), "key": .string(key), "userVerificationToken": .string(verification),
            ]))
            #expect(enabled.json == .object([
                "enabled": .bool(true), "key": .string(key), "userVerificationToken": .null, "object": .string("twoFactorAuthenticator"),
            ]))
            let list: JSONValue = .object([
                "object": .string("list"),
                "data": .array([.object(["enabled": .bool(true), "type": .int(0), "object": .string("twoFactorProvider")])]),
                "continuationToken": .null,
            ])
            #expect(try await api.request(.get, "/api/two-factor", token: token).json == list)
            #expect(try await api.request(.get, "/api/accounts/profile", token: token).object["twoFactorEnabled"] == .bool(true))
            #expect(try await api.request(.get, "/api/sync", token: token).object["profile"]?.objectValue?["twoFactorEnabled"] == .bool(true))
            #expect(try await api.request(.post, "/api/two-factor/get", token: token, json: .object([:])).json == list)
            let again = try await api.request(.post, "/api/two-factor/get-authenticator", token: token,
                                              json: .object(["masterPasswordHash": .string(user.hash)]))
            #expect(again.object["enabled"] == .bool(true) && again.object["key"] == .string(key))

            // The password alone: the official "Two factor required." body, exactly.
            let asked = try await Self.login(user, api)
            #expect(asked.status == .badRequest)
            #expect(asked.json == Self.required, "\(String(decoding: asked.bytes, as: UTF8.self))")
            #expect(try await Self.login(user, api, [("twoFactorProvider", "0")]).json == Self.required, "a provider without a code")
            #expect(try await Self.login(user, api, Self.withCode(try Self.code(key, clock), provider: "1")).json == Self.required,
                    "a provider the account does not have")
            // The password is checked first: a wrong one with a right code is a wrong password.
            let wrong = try await Self.login(user, api, Self.withCode(try Self.code(key, clock, offset: 30)), password: try user.authorizationHash("x"))
            #expect(wrong.object["ErrorModel"]?.objectValue?["Message"] == .string("Username or password is incorrect. Try again."))

            // The code shown to enable it was used: it (and older ones) is refused; the next step's code logs in once.
            #expect(Self.isInvalidCode(try await Self.login(user, api, Self.withCode(try Self.code(key, clock)))))
            #expect(Self.isInvalidCode(try await Self.login(user, api, Self.withCode(try Self.code(key, clock, offset: -30)))))
            let next = try Self.code(key, clock, offset: 30)
            let loggedIn = try await Self.login(user, api, Self.withCode(next))
            #expect(loggedIn.status == .ok, "the next step's code (clock drift of one step): \(loggedIn.message ?? "")")
            #expect(loggedIn.object["Key"] != nil && loggedIn.object["refresh_token"] != nil)
            #expect(loggedIn.object["TwoFactorToken"] == nil, "no remember token unless asked")
            #expect(Self.isInvalidCode(try await Self.login(user, api, Self.withCode(next))), "a replayed code is refused")
            clock.advance(seconds: 60)
            let later = try await Self.login(user, api, Self.withCode(" " + (try Self.code(key, clock)).map(String.init).joined(separator: " ")))
            #expect(later.status == .ok, "a later code, spaces ignored: \(later.message ?? "")")
            // Refresh tokens go on working without a code.
            let refresh = try #require(later.object["refresh_token"]?.stringValue)
            #expect(try await api.form("/identity/connect/token", [("grant_type", "refresh_token"), ("refresh_token", refresh)]).status == .ok)
        }
    }

    @Test("remember this device: a TwoFactorToken that skips the code on that device only, until the password changes or two-step login is turned off",
          arguments: Backend.available)
    func rememberDevice(backend: Backend) async throws {
        let clock = ManualClock(frozen: true)
        try await withTestServer(backend, configure: Self.configure(clock)) { api in
            let user = try await TestUser.register(api)
            let token = try await user.token(api)
            let key = try await Self.enable(user, api, clock, token: token)
            clock.advance(seconds: 30)
            let first = try await Self.login(user, api, device: "laptop", Self.withCode(try Self.code(key, clock), remember: true))
            #expect(first.status == .ok)
            let remembered = try #require(first.object["TwoFactorToken"]?.stringValue)
            let again = try await Self.login(user, api, device: "laptop", Self.withCode(remembered, provider: "5"))
            #expect(again.status == .ok, "\(again.message ?? "")")
            #expect(again.object["TwoFactorToken"] == nil, "a login with the remember token gets no new one")
            #expect(try await Self.login(user, api, device: "phone", Self.withCode(remembered, provider: "5")).json == Self.required,
                    "another device")
            #expect(try await Self.login(user, api, device: "laptop", Self.withCode("made-up", provider: "5")).json == Self.required)

            // A password change ends it.
            let session = try #require(again.object["access_token"]?.stringValue)
            let newPassword = "a new passphrase"
            let newMaster = try MasterKey.derive(password: newPassword, salt: user.email, kdf: TestUser.kdf)
            let changed = try await api.request(.post, "/api/accounts/password", token: session, json: .object([
                "masterPasswordHash": .string(user.hash),
                "newMasterPasswordHash": .string(newMaster.serverAuthorizationHash(password: newPassword)),
                "key": .string(try newMaster.encryptUserKey(user.userKey).serialized), "masterPasswordHint": .null,
            ]))
            #expect(changed.status == .ok, "\(changed.message ?? "")")
            let newHash = try user.authorizationHash(newPassword)
            #expect(try await Self.login(user, api, device: "laptop", Self.withCode(remembered, provider: "5"), password: newHash).json
                    == Self.required, "the password changed")

            // A new one, then two-step login off and on again: the old one is gone.
            clock.advance(seconds: 30)
            let second = try await Self.login(user, api, device: "laptop", Self.withCode(try Self.code(key, clock), remember: true),
                                              password: newHash)
            let rememberedAgain = try #require(second.object["TwoFactorToken"]?.stringValue)
            let session2 = try #require(second.object["access_token"]?.stringValue)
            let off = try await api.request(.put, "/api/two-factor/disable", token: session2, json: .object([
                "type": .int(0), "masterPasswordHash": .string(newHash),
            ]))
            #expect(off.json == .object(["enabled": .bool(false), "type": .int(0), "object": .string("twoFactorProvider")]))
            #expect(try await Self.login(user, api, device: "laptop", password: newHash).status == .ok, "no second step any more")
            let freshUser = TestUser(email: user.email, password: newPassword, masterKey: newMaster, userKey: user.userKey,
                                     privateKey: user.privateKey)
            clock.advance(seconds: 30)
            _ = try await Self.enable(freshUser, api, clock, token: session2)
            #expect(try await Self.login(user, api, device: "laptop", Self.withCode(rememberedAgain, provider: "5"), password: newHash).json
                    == Self.required, "turned off and on again")
        }
    }

    @Test("wrong codes lock the account's second step out, longer each time; a right code resets the count",
          arguments: Backend.available)
    func wrongCodesLockOut(backend: Backend) async throws {
        let clock = ManualClock(frozen: true)
        try await withTestServer(backend, configure: Self.configure(clock)) { api in
            let user = try await TestUser.register(api)
            let key = try await Self.enable(user, api, clock, token: try await user.token(api))
            let right = try Self.code(key, clock, offset: 30)
            let wrong = right == "000000" ? "111111" : "000000"
            for _ in 0..<5 {
                #expect(Self.isInvalidCode(try await Self.login(user, api, Self.withCode(wrong))))
            }
            let locked = try await Self.login(user, api, Self.withCode(right))
            #expect(locked.status == .tooManyRequests, "even the right code waits")
            #expect(LoginRateLimitTests.retryAfter(locked) == 60)
            #expect(locked.message?.hasPrefix("Too many two-step login attempts.") == true, "\(locked.message ?? "")")
            #expect(try await Self.login(user, api, [("twoFactorToken", "12345678"), ("twoFactorProvider", "8")]).status == .tooManyRequests,
                    "recovery codes are locked out too")
            #expect(try await Self.login(user, api).json == Self.required, "the first step still answers")
            clock.advance(seconds: 60)
            #expect(Self.isInvalidCode(try await Self.login(user, api, Self.withCode(wrong))))
            #expect(LoginRateLimitTests.retryAfter(try await Self.login(user, api, Self.withCode(right))) == 120, "twice as long")
            clock.advance(seconds: 120)
            let ok = try await Self.login(user, api, Self.withCode(try Self.code(key, clock)))
            #expect(ok.status == .ok, "\(ok.message ?? "")")
            // Reset: five more wrong codes before the next lockout.
            for _ in 0..<4 {
                #expect(Self.isInvalidCode(try await Self.login(user, api, Self.withCode(wrong))))
            }
            #expect(Self.isInvalidCode(try await Self.login(user, api, Self.withCode(wrong))))
            #expect(try await Self.login(user, api, Self.withCode(wrong)).status == .tooManyRequests)
        }
    }

    @Test("the recovery code: shown by get-recover, it turns two-step login off at the token endpoint (provider 8) and is replaced",
          arguments: Backend.available)
    func recoveryAtLogin(backend: Backend) async throws {
        let clock = ManualClock(frozen: true)
        try await withTestServer(backend, configure: Self.configure(clock)) { api in
            let user = try await TestUser.register(api)
            let token = try await user.token(api)
            let before = try await api.request(.post, "/api/two-factor/get-recover", token: token,
                                               json: .object(["masterPasswordHash": .string(user.hash)]))
            #expect(before.json == .object(["code": .null, "object": .string("twoFactorRecover")]), "none before two-step login")
            try await Self.enable(user, api, clock, token: token)
            let shown = try await api.request(.post, "/api/two-factor/get-recover", token: token,
                                              json: .object(["masterPasswordHash": .string(user.hash)]))
            #expect(shown.object["object"] == .string("twoFactorRecover"))
            let code = try #require(shown.object["code"]?.stringValue)
            #expect(code.count == 32 && code.allSatisfy { $0.isLowercase || $0.isNumber })
            #expect(try await api.request(.post, "/api/two-factor/get-recover", token: token,
                                          json: .object(["masterPasswordHash": .string(try user.authorizationHash("no"))])).status == .badRequest)

            #expect(Self.isInvalidCode(try await Self.login(user, api, Self.withCode(String(repeating: "a", count: 32), provider: "8"))))
            // As typed: upper case, in groups.
            let typed = stride(from: 0, to: 32, by: 4).map { start in
                String(code.dropFirst(start).prefix(4)).uppercased()
            }.joined(separator: " ")
            let recovered = try await Self.login(user, api, Self.withCode(typed, provider: "8", remember: true))
            #expect(recovered.status == .ok, "\(recovered.message ?? "")")
            #expect(recovered.object["Key"] != nil)
            #expect(try await api.request(.get, "/api/two-factor", token: token).object["data"] == .array([]))
            #expect(try await Self.login(user, api).status == .ok, "two-step login is off")
            let next = try await api.request(.post, "/api/two-factor/get-recover", token: token,
                                             json: .object(["masterPasswordHash": .string(user.hash)]))
            let newCode = try #require(next.object["code"]?.stringValue)
            #expect(newCode != code && newCode.count == 32)
        }
    }

    @Test("the older anonymous recover endpoint: the same 400 for every failure; the right code turns two-step login off",
          arguments: Backend.available)
    func legacyRecover(backend: Backend) async throws {
        let clock = ManualClock(frozen: true)
        try await withTestServer(backend, configure: Self.configure(clock)) { api in
            let user = try await TestUser.register(api)
            let token = try await user.token(api)
            try await Self.enable(user, api, clock, token: token)
            let code = try #require(try await api.request(.post, "/api/two-factor/get-recover", token: token,
                                                          json: .object(["masterPasswordHash": .string(user.hash)])).object["code"]?.stringValue)
            func recover(_ email: String, _ hash: String, _ code: String) async throws -> APIResponse {
                try await api.request(.post, "/api/two-factor/recover", json: .object([
                    "email": .string(email), "masterPasswordHash": .string(hash), "recoveryCode": .string(code),
                ]))
            }
            let invalid: JSONValue = .object(["": .array([.string("Invalid information. Try again.")])])
            for attempt in [
                try await recover(user.email, user.hash, String(repeating: "b", count: 32)),
                try await recover(user.email, try user.authorizationHash("wrong"), code),
                try await recover("nobody-\(UUID().uuidString.prefix(6))@example.com", user.hash, code),
            ] {
                #expect(attempt.status == .badRequest && attempt.object["validationErrors"] == invalid, "\(attempt.object)")
            }
            #expect(try await Self.login(user, api).json == Self.required)
            let done = try await recover(user.email.uppercased(), user.hash, code)
            #expect(done.status == .ok && done.bytes.isEmpty)
            #expect(try await Self.login(user, api).status == .ok)
            #expect(try await recover(user.email, user.hash, code).status == .badRequest, "the code was replaced")
        }
    }

    @Test("turning the authenticator off: DELETE with its key and the verification token, or disable with the password",
          arguments: Backend.available)
    func disable(backend: Backend) async throws {
        let clock = ManualClock(frozen: true)
        try await withTestServer(backend, configure: Self.configure(clock)) { api in
            let user = try await TestUser.register(api)
            let token = try await user.token(api)
            let key = try await Self.enable(user, api, clock, token: token)
            let shown = try await api.request(.post, "/api/two-factor/get-authenticator", token: token,
                                              json: .object(["masterPasswordHash": .string(user.hash)]))
            let verification = try #require(shown.object["userVerificationToken"]?.stringValue)
            let otherKey = AuthenticatorKey.generate()
            let wrongKey = try await api.request(.delete, "/api/two-factor/authenticator", token: token, json: .object([
                "type": .int(0), "key": .string(otherKey), "masterPasswordHash": .string(user.hash),
            ]))
            #expect(wrongKey.status == .badRequest, "the key must be the authenticator's")
            let noProof = try await api.request(.delete, "/api/two-factor/authenticator", token: token, json: .object([
                "type": .int(0), "key": .string(key),
            ]))
            #expect(noProof.status == .badRequest)
            #expect(try await Self.login(user, api).json == Self.required)
            let deleted = try await api.request(.delete, "/api/two-factor/authenticator", token: token, json: .object([
                "type": .int(0), "key": .string(key), "userVerificationToken": .string(verification),
            ]))
            #expect(deleted.json == .object(["enabled": .bool(false), "type": .int(0), "object": .string("twoFactorProvider")]))
            #expect(try await Self.login(user, api).status == .ok)

            clock.advance(seconds: 30)
            try await Self.enable(user, api, clock, token: token)
            let refused = try await api.request(.post, "/api/two-factor/disable", token: token, json: .object([
                "type": .int(0), "masterPasswordHash": .string(try user.authorizationHash("guess")),
            ]))
            #expect(refused.status == .badRequest)
            #expect(try await Self.login(user, api).json == Self.required)
            let off = try await api.request(.post, "/api/two-factor/disable", token: token, json: .object([
                "type": .string("0"), "masterPasswordHash": .string(user.hash),
            ]))
            #expect(off.json == .object(["enabled": .bool(false), "type": .int(0), "object": .string("twoFactorProvider")]))
            #expect(try await Self.login(user, api).status == .ok)
        }
    }
}

extension TestUser {
    /// The master password hash of the user's password.
    var hash: String { masterKey.serverAuthorizationHash(password: password) }
}
