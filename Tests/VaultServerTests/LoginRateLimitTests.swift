import Foundation
import Hummingbird
import Testing
import VaultCrypto
@testable import VaultServer

@Suite("Security: login rate limits and lockout recovery", .serialized)
struct LoginRateLimitTests {
    /// Seconds to wait, from the Retry-After header.
    static func retryAfter(_ response: APIResponse) -> Int? {
        response.headers[.retryAfter].flatMap(Int.init)
    }

    @Test("per account: the burst, then 429 with Retry-After; hammering does not extend it; the clock's window restores it",
          arguments: Backend.available)
    func perAccount(backend: Backend) async throws {
        let clock = ManualClock(frozen: true)
        try await withTestServer(backend, configure: {
            $0.now = { clock.now }
            $0.accountLoginBurst = 3
            $0.accountRefillSeconds = 60
        }) { api in
            let user = try await TestUser.register(api)
            let other = try await TestUser.register(api)
            for attempt in 0..<3 {
                #expect(try await user.login(api, password: "wrong \(attempt)").status == .badRequest)
            }
            let limited = try await user.login(api, password: "wrong again")
            #expect(limited.status == .tooManyRequests)
            let wait = try #require(Self.retryAfter(limited))
            #expect(wait >= 1 && wait <= 60, "Retry-After \(wait)")
            #expect(limited.message?.contains("Try again in \(wait) second\(wait == 1 ? "." : "s.")") == true, "\(limited.message ?? "")")
            for _ in 0..<10 {
                #expect(try await user.login(api).status == .tooManyRequests, "even the right password waits")
            }
            // The lock is per account: another account from the same address logs in.
            #expect(try await other.login(api).status == .ok)
            // One refill period later exactly one attempt is back.
            clock.advance(seconds: Int64(wait))
            #expect(try await user.login(api).status == .ok)
            #expect(try await user.login(api).status == .tooManyRequests)
            // After the whole window the full burst is back.
            clock.advance(seconds: 3 * 60)
            for _ in 0..<3 { #expect(try await user.login(api).status == .ok) }
            #expect(try await user.login(api).status == .tooManyRequests)
        }
    }

    @Test("per address: many accounts from one address share its limit, which recovers with the clock", arguments: Backend.available)
    func perAddress(backend: Backend) async throws {
        let clock = ManualClock(frozen: true)
        try await withTestServer(backend, configure: {
            $0.now = { clock.now }
            $0.addressLoginBurst = 5
            $0.addressRefillSeconds = 10
        }) { api in
            let user = try await TestUser.register(api)
            // Unknown accounts: an address guessing many emails is limited like one guessing passwords.
            for index in 0..<5 {
                let response = try await api.form("/identity/connect/token", [
                    ("grant_type", "password"), ("username", "nobody-\(index)@example.com"), ("password", "aGFzaA=="),
                    ("scope", "api offline_access"), ("client_id", "cli"), ("deviceType", "25"), ("deviceIdentifier", "d"), ("deviceName", "n"),
                ])
                #expect(response.status == .badRequest)
                #expect(response.object["error"] == .string("invalid_grant"))
            }
            let limited = try await user.login(api)
            #expect(limited.status == .tooManyRequests)
            let wait = try #require(Self.retryAfter(limited))
            #expect(wait >= 1 && wait <= 10)
            clock.advance(seconds: Int64(wait))
            #expect(try await user.login(api).status == .ok)
        }
    }

    /// CPU seconds of this process (every thread), or of the calling thread only.
    static func cpuSeconds(thread: Bool = false) -> Double {
        var time = timespec()
        clock_gettime(thread ? CLOCK_THREAD_CPUTIME_ID : CLOCK_PROCESS_CPUTIME_ID, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    @Test("the server stores password hashes with at least 600,000 iterations unless a test lowers the cost on purpose")
    func storedHashCost() {
        var configuration = ServerConfiguration()
        #expect(configuration.storedHashIterations == 600_000)
        configuration.passwordIterations = 1_000
        #expect(configuration.storedHashIterations == StoredPasswordHash.minimumIterations)
        configuration.passwordIterations = 800_000
        #expect(configuration.storedHashIterations == 800_000)
        configuration.insecureTestingPasswordIterations = 1_000
        #expect(configuration.storedHashIterations == 1_000)
    }

    @Test("a login to an account that does not exist costs the slow hash a wrong password costs: timing does not reveal accounts")
    func unknownAccountCostsTheHash() async throws {
        // The real cost (the other test servers use a cheap one, see `insecureTestingPasswordIterations`).
        try await withTestServer(.sqlite, configure: { $0.insecureTestingPasswordIterations = nil }) { api in
            // One stored-hash derivation at the server's iteration count, on this thread alone (other
            // tests running alongside cannot inflate it).
            let started = Self.cpuSeconds(thread: true)
            _ = try StoredPasswordHash.derive(clientHash: "aGFzaA==", salt: [UInt8](repeating: 1, count: 32),
                                              iterations: StoredPasswordHash.minimumIterations)
            let hash = Self.cpuSeconds(thread: true) - started
            // The whole process's CPU over an unknown account's login: at least that hash (other tests
            // alongside can only add to it). Without the decoy hash it is a few milliseconds.
            let before = Self.cpuSeconds()
            let response = try await api.form("/identity/connect/token", [
                ("grant_type", "password"), ("username", "nobody-timing@example.com"), ("password", "aGFzaA=="),
                ("scope", "api offline_access"), ("client_id", "cli"), ("deviceType", "25"), ("deviceIdentifier", "d"), ("deviceName", "n"),
            ])
            let login = Self.cpuSeconds() - before
            #expect(response.status == .badRequest)
            #expect(response.object["error"] == .string("invalid_grant"))
            #expect(login >= hash * 0.8, "an unknown account's login took \(login) s of CPU; one password hash takes \(hash) s")
        }
    }
}
