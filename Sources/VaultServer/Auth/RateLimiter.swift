import Foundation

/// Token-bucket limits for login attempts, per account and per client address.
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

    private struct Bucket {
        var tokens: Double
        var updated: Double
    }

    private let accountLimit: Limit
    private let addressLimit: Limit
    private var accounts: [String: Bucket] = [:]
    private var addresses: [String: Bucket] = [:]
    private let now: @Sendable () -> Double

    init(account: Limit, address: Limit, now: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }) {
        accountLimit = account
        addressLimit = address
        self.now = now
    }

    /// Takes one attempt for `account` from `address`; returns the seconds to wait when refused.
    func attempt(account: String, address: String) -> Double? {
        let time = now()
        if accounts.count > 100_000 { accounts.removeAll() }
        if addresses.count > 100_000 { addresses.removeAll() }
        let accountWait = Self.wait(in: &accounts, key: account, limit: accountLimit, time: time)
        let addressWait = Self.wait(in: &addresses, key: address, limit: addressLimit, time: time)
        if let wait = max(accountWait ?? 0, addressWait ?? 0) as Double?, wait > 0 { return wait }
        Self.take(in: &accounts, key: account)
        Self.take(in: &addresses, key: address)
        return nil
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
