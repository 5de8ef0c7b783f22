import Foundation
import Hummingbird
import HTTPTypes
import Logging
import Synchronization
import Testing
@testable import VaultServer

/// Log lines at every level, kept for a test to read.
final class CapturedLines: Sendable {
    private let lines = Mutex<[String]>([])

    var all: [String] { lines.withLock { $0 } }

    func logger(level: Logger.Level = .info) -> Logger {
        var logger = Logger(label: "vaultsync-server") { _ in LineCapture(sink: self) }
        logger.logLevel = level
        return logger
    }

    fileprivate func append(_ line: String) { lines.withLock { $0.append(line) } }
}

private struct LineCapture: LogHandler {
    let sink: CapturedLines
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        sink.append("\(event.level) \(event.message) \(metadata.merging(event.metadata ?? [:]) { _, new in new })")
    }
}

/// A clock in seconds that only the test moves.
final class SecondsClock: Sendable {
    private let value = Mutex<Double>(1_764_000_000)
    var now: Double { value.withLock { $0 } }
    func advance(_ seconds: Double) { value.withLock { $0 += seconds } }
}

/// A flood of made-up client ids no longer empties the login limits (docs/SECURITY.md, "Attack review
/// 2026-12-01", finding 3): memory stays bounded by evicting cold keys, never a lockout running or an
/// account's partly used bucket, and refused logins are logged as a summary line per interval.
@Suite("Security: a flood of made-up client ids neither unlocks an account nor floods the log")
struct LoginFloodTests {
    /// The server's defaults (docs/PROTOCOL.md, "Login limits").
    static func limiter(_ clock: SecondsClock, capacity: Int = LoginRateLimiter.defaultCapacity) -> LoginRateLimiter {
        LoginRateLimiter(account: .init(burst: 10, refillPerSecond: 1.0 / 6), address: .init(burst: 60, refillPerSecond: 1),
                         accountEscalation: .init(threshold: 20, baseSeconds: 60, maxSeconds: 86_400),
                         addressEscalation: .init(threshold: 200, baseSeconds: 60, maxSeconds: 86_400),
                         capacity: capacity, now: { clock.now })
    }

    @Test("100,000 made-up client ids from one address, then one each from 150,000 addresses: the locked-out account is still locked, memory stays bounded")
    func floodKeepsLockouts() async throws {
        let clock = SecondsClock()
        let limiter = Self.limiter(clock)
        let attacker = "203.0.113.7"
        // 23 wrong passwords for the victim from the attacker's address, as fast as the limits let them:
        // the lockout has doubled to 480 s.
        var failures = 0
        while failures < 23 {
            if let wait = try await limiter.attempt(account: "victim@example.com", address: attacker) {
                clock.advance(wait)
                continue
            }
            try await limiter.recordFailure(account: "victim@example.com", address: attacker)
            failures += 1
        }
        let lockout = try #require(try await limiter.attempt(account: "victim@example.com", address: attacker))
        #expect(lockout > 479 && lockout <= 480)

        // The review's flood: made-up client ids from one address (client_credentials costs no hash). Refused
        // attempts used to add a key each.
        for index in 0..<100_000 {
            let id = "user.made-up-\(index)"
            if try await limiter.attempt(account: id, address: attacker) == nil {
                try await limiter.recordFailure(account: id, address: attacker)
            }
        }
        // And one from each of 150,000 addresses over 150 s, each let through and failing: every table fills.
        for index in 0..<150_000 {
            let id = "user.spread-\(index)", address = "10.\(index >> 16).\((index >> 8) & 255).\(index & 255)"
            if try await limiter.attempt(account: id, address: address) == nil {
                try await limiter.recordFailure(account: id, address: address)
            }
            clock.advance(0.001)
        }
        #expect(await limiter.largestTable <= LoginRateLimiter.defaultCapacity, "memory stays bounded")
        let still = try #require(try await limiter.attempt(account: "victim@example.com", address: attacker), "still locked out")
        #expect(still > 0 && still <= lockout - 149)
        // The attacker's address itself is not locked out: the lockout that holds is the account's.
        #expect(try await limiter.attempt(account: "someone-else@example.com", address: attacker) == nil)
    }

    @Test("a full table evicts its least recently used cold keys, never a lockout running or a partly used bucket")
    func evictsColdKeysOnly() async throws {
        let clock = SecondsClock()
        // A used attempt is regained in 1 s, a drained bucket in 10 s.
        let limiter = LoginRateLimiter(account: .init(burst: 10, refillPerSecond: 1), address: .init(burst: 1_000_000, refillPerSecond: 1),
                                       accountEscalation: .init(threshold: 2, baseSeconds: 3_600, maxSeconds: 3_600),
                                       addressEscalation: .init(threshold: .max, baseSeconds: 0, maxSeconds: 0), capacity: 50, now: { clock.now })
        // A lockout and a drained bucket, made first (the least recently used).
        for _ in 0..<2 {
            #expect(try await limiter.attempt(account: "locked", address: "a") == nil)
            try await limiter.recordFailure(account: "locked", address: "a")
        }
        for _ in 0..<10 { #expect(try await limiter.attempt(account: "drained", address: "b") == nil) }
        #expect(try await limiter.attempt(account: "drained", address: "b") != nil)
        // 300 keys after them over 9 s: each is cold a second after its attempt; the drained bucket is not.
        for index in 0..<300 {
            #expect(try await limiter.attempt(account: "cold-\(index)", address: "c") == nil)
            try await limiter.recordFailure(account: "cold-\(index)", address: "c")
            clock.advance(0.03)
        }
        #expect(await limiter.largestTable <= 50)
        #expect(try await limiter.attempt(account: "locked", address: "a") != nil, "the lockout is kept")
        // About 9 attempts are back after 9 s; a forgotten bucket would start full again with 10.
        var allowed = 0
        while allowed < 20, try await limiter.attempt(account: "drained", address: "b") == nil { allowed += 1 }
        #expect(allowed >= 8 && allowed < 10, "the partly used bucket was kept, not forgotten (\(allowed) attempts)")
    }

    @Test("refused logins: the first is logged, the rest of the interval becomes one summary line")
    func refusalsSummarised() async throws {
        let clock = SecondsClock()
        let lines = CapturedLines()
        let log = RefusalLog(logger: lines.logger(), intervalSeconds: 60, now: { clock.now })
        for index in 0..<10_000 {
            await log.note(index % 2 == 0 ? "login failed" : "api key login failed", address: "203.0.113.\(index % 7)")
        }
        #expect(lines.all.count == 1)
        clock.advance(60)
        await log.note("login failed", address: "203.0.113.1")
        let all = lines.all
        #expect(all.count == 3)
        #expect(all[1].contains("4999 login failed") && all[1].contains("5000 api key login failed"), "\(all[1])")
        #expect(all[1].contains("\"addresses\": 7"), "\(all[1])")
    }

    @Test("on the real server, with a lowered capacity: a flood of made-up client ids leaves the lockout, and logs two lines",
          arguments: Backend.available)
    func floodOnTheServer(backend: Backend) async throws {
        let clock = ManualClock(frozen: true)
        let lines = CapturedLines()
        try await withTestServer(backend, configure: { configuration in
            LoginLockoutTests.lockouts(clock, threshold: 3, addressThreshold: 1_000_000)(&configuration)
            configuration.addressLoginBurst = 100_000
            configuration.loginLockoutBaseSeconds = 3_600
            configuration.loginLimiterCapacity = 50
            configuration.logLevel = .info
        }, logger: lines.logger()) { api in
            let user = try await TestUser.register(api)
            let attacker = LoginLockoutTests.from("203.0.113.9")
            for attempt in 0..<3 {
                #expect(try await user.login(api, password: "guess \(attempt)", headers: attacker).status == .badRequest)
            }
            #expect(try await user.login(api, headers: attacker).status == .tooManyRequests)
            let device = [("deviceType", "8"), ("deviceIdentifier", "flood"), ("deviceName", "x")]
            for index in 0..<400 {
                let answer = try await api.form("/identity/connect/token", [
                    ("grant_type", "client_credentials"), ("client_id", "user.made-up-\(index)"), ("client_secret", "x"), ("scope", "api"),
                ] + device, headers: attacker)
                #expect(answer.status == .badRequest)
            }
            let locked = try await user.login(api, headers: attacker)
            #expect(locked.status == .tooManyRequests, "the account is still locked out from the attacker's address")
            #expect(try await user.login(api, headers: LoginLockoutTests.from("198.51.100.9")).status == .ok, "and its owner is not")
            let refusals = lines.all.filter { $0.contains("login failed") || $0.contains("refused logins") }
            #expect(refusals.count == 1, "403 refusals, one line so far: \(refusals)")
            clock.advance(seconds: 60)
            #expect(try await user.login(api, password: "one more", headers: LoginLockoutTests.from("198.51.100.10")).status == .badRequest)
            let summary = lines.all.filter { $0.contains("refused logins") }
            #expect(summary.count == 1 && summary[0].contains("400 api key login failed") && summary[0].contains("2 login failed"), "\(summary)")
        }
    }
}
