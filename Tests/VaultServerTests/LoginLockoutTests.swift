import Foundation
import Hummingbird
import HTTPTypes
import Testing
import VaultCrypto
@testable import VaultServer

@Suite("Security: lockouts that grow with repeated failures; X-Forwarded-For only from trusted proxies", .serialized)
struct LoginLockoutTests {
    static func from(_ address: String) -> HTTPFields { [HTTPField.Name("X-Forwarded-For")!: address] }

    /// A configuration whose token buckets never get in the way, so only the lockouts are tested.
    static func lockouts(_ clock: ManualClock, threshold: Int = 3, addressThreshold: Int = 1_000, max: Double = 3_600)
        -> (inout ServerConfiguration) -> Void {
        { configuration in
            configuration.now = { clock.now }
            configuration.accountLoginBurst = 1_000
            configuration.addressLoginBurst = 1_000
            configuration.accountLockoutThreshold = threshold
            configuration.addressLockoutThreshold = addressThreshold
            configuration.loginLockoutBaseSeconds = 60
            configuration.loginLockoutMaxSeconds = max
            configuration.trustedProxies = ["127.0.0.1", "::1"]
        }
    }

    @Test("failures in a row lock the account out from that address, each further failure twice as long, up to the maximum; a success resets",
          arguments: Backend.available)
    func escalates(backend: Backend) async throws {
        let clock = ManualClock(frozen: true)
        try await withTestServer(backend, configure: Self.lockouts(clock, max: 200)) { api in
            let user = try await TestUser.register(api)
            let attacker = Self.from("203.0.113.7")
            for attempt in 0..<3 {
                #expect(try await user.login(api, password: "guess \(attempt)", headers: attacker).status == .badRequest)
            }
            var waits: [Int] = []
            for _ in 0..<4 {
                let locked = try await user.login(api, password: "next guess", headers: attacker)
                #expect(locked.status == .tooManyRequests)
                let wait = try #require(LoginRateLimitTests.retryAfter(locked))
                waits.append(wait)
                // Hammering during the lockout changes nothing; the right password waits too.
                #expect(try await user.login(api, headers: attacker).status == .tooManyRequests)
                #expect(LoginRateLimitTests.retryAfter(try await user.login(api, headers: attacker)) == wait)
                clock.advance(seconds: Int64(wait))
                #expect(try await user.login(api, password: "after the wait", headers: attacker).status == .badRequest)
            }
            #expect(waits == [60, 120, 200, 200])
            // The owner, from their own address, is not locked out by the attacker's failures.
            #expect(try await user.login(api, headers: Self.from("198.51.100.20")).status == .ok)
            // A success from that address resets its count: three more failures before the first lockout again.
            clock.advance(seconds: 200)
            #expect(try await user.login(api, headers: attacker).status == .ok)
            for attempt in 0..<3 {
                #expect(try await user.login(api, password: "again \(attempt)", headers: attacker).status == .badRequest)
            }
            #expect(LoginRateLimitTests.retryAfter(try await user.login(api, headers: attacker)) == 60)
        }
    }

    @Test("failures over many accounts from one address lock the address out, longer each time", arguments: Backend.available)
    func addressEscalates(backend: Backend) async throws {
        let clock = ManualClock(frozen: true)
        try await withTestServer(backend, configure: Self.lockouts(clock, threshold: 1_000, addressThreshold: 4)) { api in
            let user = try await TestUser.register(api)
            let stuffer = Self.from("203.0.113.8")
            for index in 0..<4 {
                let response = try await api.form("/identity/connect/token", [
                    ("grant_type", "password"), ("username", "victim-\(index)@example.com"), ("password", "aGFzaA=="),
                    ("scope", "api offline_access"), ("client_id", "cli"), ("deviceType", "25"), ("deviceIdentifier", "d"), ("deviceName", "n"),
                ], headers: stuffer)
                #expect(response.status == .badRequest)
            }
            #expect(LoginRateLimitTests.retryAfter(try await user.login(api, headers: stuffer)) == 60)
            #expect(try await user.login(api, headers: Self.from("203.0.113.9")).status == .ok, "another address is not affected")
            clock.advance(seconds: 60)
            #expect(try await user.login(api, password: "wrong", headers: stuffer).status == .badRequest)
            #expect(LoginRateLimitTests.retryAfter(try await user.login(api, headers: stuffer)) == 120)
        }
    }

    @Test("X-Forwarded-For is believed only from a trusted proxy, and then its rightmost untrusted entry", arguments: Backend.available)
    func trustedProxy(backend: Backend) async throws {
        let clock = ManualClock(frozen: true)
        // Not trusted: the header is ignored, every attempt counts against the socket's address.
        try await withTestServer(backend, configure: {
            $0.now = { clock.now }
            $0.addressLoginBurst = 3
            $0.addressRefillSeconds = 600
        }) { api in
            let user = try await TestUser.register(api)
            for index in 0..<3 {
                #expect(try await user.login(api, headers: Self.from("192.0.2.\(index + 1)")).status == .ok)
            }
            #expect(try await user.login(api, headers: Self.from("192.0.2.99")).status == .tooManyRequests, "a forged header escapes nothing")
        }
        // Trusted: each client address has its own bucket; a client cannot pick its address by
        // prepending entries; a malformed entry is not believed.
        try await withTestServer(backend, configure: {
            $0.now = { clock.now }
            $0.addressLoginBurst = 2
            $0.addressRefillSeconds = 600
            $0.trustedProxies = ["127.0.0.1", "::1", "10.0.0.2"]
        }) { api in
            let user = try await TestUser.register(api)
            for _ in 0..<2 { #expect(try await user.login(api, headers: Self.from("192.0.2.1")).status == .ok) }
            #expect(try await user.login(api, headers: Self.from("192.0.2.1")).status == .tooManyRequests)
            #expect(try await user.login(api, headers: Self.from("192.0.2.2")).status == .ok, "another client behind the proxy")
            // The client sent "192.0.2.50"; the proxies appended the real client and themselves.
            #expect(try await user.login(api, headers: Self.from("192.0.2.50, 192.0.2.1, 10.0.0.2")).status == .tooManyRequests)
            for _ in 0..<2 { #expect(try await user.login(api, headers: Self.from("not-an-address")).status == .ok) }
            #expect(try await user.login(api, headers: Self.from("also-not-one")).status == .tooManyRequests, "malformed: the proxy's own bucket")
        }
    }

    /// A registration as a client sends it, from `headers`' address.
    static func register(_ api: APIClient, _ email: String, headers: HTTPFields) async throws -> APIResponse {
        try await api.request(.post, "/identity/accounts/register", json: .object([
            "email": .string(email), "masterPasswordHash": .string("aGFzaA=="),
            "key": .string(try EncString.encrypt("user key", key: .generate()).serialized), "kdf": .int(0), "kdfIterations": .int(600_000),
        ]), headers: headers)
    }

    @Test("registrations: a burst per address, then 429; registering taken emails locks the address out, longer each time",
          arguments: Backend.available)
    func registrations(backend: Backend) async throws {
        let clock = ManualClock(frozen: true)
        try await withTestServer(backend, configure: {
            $0.now = { clock.now }
            $0.registrationBurst = 3
            $0.registrationRefillSeconds = 600
            $0.registrationLockoutThreshold = 2
            $0.loginLockoutBaseSeconds = 60
            $0.trustedProxies = ["127.0.0.1", "::1"]
        }) { api in
            let busy = Self.from("203.0.113.10")
            for index in 0..<3 {
                #expect(try await Self.register(api, "new-\(index)@example.com", headers: busy).status == .ok)
            }
            let limited = try await Self.register(api, "new-3@example.com", headers: busy)
            #expect(limited.status == .tooManyRequests)
            #expect((LoginRateLimitTests.retryAfter(limited) ?? 0) > 0 && (LoginRateLimitTests.retryAfter(limited) ?? 0) <= 600)
            #expect(try await Self.register(api, "new-4@example.com", headers: Self.from("203.0.113.11")).status == .ok)
            // Probing: registering emails that have accounts.
            let prober = Self.from("203.0.113.12")
            for index in 0..<2 {
                #expect(try await Self.register(api, "new-\(index)@example.com", headers: prober).status == .badRequest)
            }
            #expect(LoginRateLimitTests.retryAfter(try await Self.register(api, "fresh@example.com", headers: prober)) == 60)
            clock.advance(seconds: 60)
            #expect(try await Self.register(api, "new-2@example.com", headers: prober).status == .badRequest)
            #expect(LoginRateLimitTests.retryAfter(try await Self.register(api, "fresh@example.com", headers: prober)) == 120)
        }
    }
}
