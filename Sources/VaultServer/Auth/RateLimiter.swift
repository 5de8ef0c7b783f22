import Foundation

/// Limits for login attempts: token buckets per account and per client address, and lockouts that
/// grow with repeated failures (docs/PROTOCOL.md, "Login limits").
///
/// The buckets bound the rate of any attempt. The lockouts answer guessing: after `threshold` failures
/// in a row of one account from one address (a success resets them), or from one address over all
/// accounts (reset a day after the last failure), the next attempt waits `base` seconds, and every
/// failure after that doubles the wait, up to `max`. The per-account lockout is keyed by the address
/// too, so nobody can lock an account's owner out from elsewhere beyond the flat account bucket.
///
/// Per instance (in memory): several instances behind one database each enforce their own limit,
/// which bounds an attacker to N × the limit — good enough, and needs no shared state.
actor LoginRateLimiter {
    struct Limit: Sendable {
        /// Attempts allowed at once.
        var burst: Double
        /// Attempts regained per second.
        var refillPerSecond: Double
    }

    /// Lockouts after repeated failures.
    struct Escalation: Sendable {
        /// Failures in a row before the first lockout.
        var threshold: Int
        /// The first lockout, in seconds; each further failure doubles it.
        var baseSeconds: Double
        /// The longest lockout.
        var maxSeconds: Double

        /// The lockout after `failures` failures, if any.
        func lockout(after failures: Int) -> Double? {
            guard failures >= threshold else { return nil }
            let doublings = min(failures - threshold, 62)
            return min(maxSeconds, baseSeconds * pow(2, Double(doublings)))
        }
    }

    private struct Failures {
        var count: Int
        var last: Double
        var lockedUntil: Double
    }

    private let pairEscalation: Escalation
    private let addressEscalation: Escalation
    private var pairFailures: [String: Failures] = [:]
    private var addressFailures: [String: Failures] = [:]

    private struct Bucket {
        var tokens: Double
        var updated: Double
    }

    private let accountLimit: Limit
    private let addressLimit: Limit
    private var accounts: [String: Bucket] = [:]
    private var addresses: [String: Bucket] = [:]
    private let now: @Sendable () -> Double

    init(account: Limit, address: Limit,
         accountEscalation: Escalation = .init(threshold: 20, baseSeconds: 60, maxSeconds: 86_400),
         addressEscalation: Escalation = .init(threshold: 200, baseSeconds: 60, maxSeconds: 86_400),
         now: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }) {
        accountLimit = account
        addressLimit = address
        pairEscalation = accountEscalation
        self.addressEscalation = addressEscalation
        self.now = now
    }

    private static func pairKey(_ account: String, _ address: String) -> String { account + "\n" + address }

    /// Takes one attempt for `account` from `address`; returns the seconds to wait when refused. A
    /// locked-out attempt takes nothing (hammering does not extend a lockout).
    func attempt(account: String, address: String) -> Double? {
        let time = now()
        if accounts.count > 100_000 { accounts.removeAll() }
        if addresses.count > 100_000 { addresses.removeAll() }
        if pairFailures.count > 100_000 { pairFailures.removeAll() }
        if addressFailures.count > 100_000 { addressFailures.removeAll() }
        let locked = max(pairFailures[Self.pairKey(account, address)]?.lockedUntil ?? 0, addressFailures[address]?.lockedUntil ?? 0)
        if locked > time { return locked - time }
        let accountWait = Self.wait(in: &accounts, key: account, limit: accountLimit, time: time)
        let addressWait = Self.wait(in: &addresses, key: address, limit: addressLimit, time: time)
        if let wait = max(accountWait ?? 0, addressWait ?? 0) as Double?, wait > 0 { return wait }
        Self.take(in: &accounts, key: account)
        Self.take(in: &addresses, key: address)
        return nil
    }

    /// A failed attempt (wrong password or unknown account): counts towards the lockouts.
    func recordFailure(account: String, address: String) {
        let time = now()
        Self.fail(in: &pairFailures, key: Self.pairKey(account, address), escalation: pairEscalation, time: time, forgetAfter: nil)
        Self.fail(in: &addressFailures, key: address, escalation: addressEscalation, time: time, forgetAfter: addressEscalation.maxSeconds)
    }

    /// A successful login: the account's failures from that address are forgotten.
    func recordSuccess(account: String, address: String) {
        pairFailures[Self.pairKey(account, address)] = nil
    }

    private static func fail(in failures: inout [String: Failures], key: String, escalation: Escalation, time: Double, forgetAfter: Double?) {
        var entry = failures[key] ?? Failures(count: 0, last: time, lockedUntil: 0)
        if let forgetAfter, time - entry.last > forgetAfter { entry.count = 0 }
        entry.count += 1
        entry.last = time
        if let lockout = escalation.lockout(after: entry.count) { entry.lockedUntil = time + lockout }
        failures[key] = entry
    }

    private static func wait(in buckets: inout [String: Bucket], key: String, limit: Limit, time: Double) -> Double? {
        var bucket = buckets[key] ?? Bucket(tokens: limit.burst, updated: time)
        bucket.tokens = min(limit.burst, bucket.tokens + (time - bucket.updated) * limit.refillPerSecond)
        bucket.updated = time
        buckets[key] = bucket
        if bucket.tokens >= 1 { return nil }
        return (1 - bucket.tokens) / limit.refillPerSecond
    }

    private static func take(in buckets: inout [String: Bucket], key: String) {
        buckets[key]?.tokens -= 1
    }
}
