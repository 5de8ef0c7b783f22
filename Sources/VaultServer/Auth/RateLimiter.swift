import Foundation
import Logging

/// Limits for login attempts: token buckets per account and per client address, and lockouts that
/// grow with repeated failures (docs/PROTOCOL.md, "Login limits").
///
/// The buckets bound the rate of any attempt. The lockouts answer guessing: after `threshold` failures
/// in a row of one account from one address (a success resets them), or from one address over all
/// accounts (reset a day after the last failure), the next attempt waits `base` seconds, and every
/// failure after that doubles the wait, up to `max`. The per-account lockout is keyed by the address
/// too, so nobody can lock an account's owner out from elsewhere beyond the flat account bucket, which
/// is the account's own and bounds guesses from all addresses together.
///
/// The decisions are pure functions of the entries one call reads (``Entries``); where the entries live
/// is the ``LimiterStore``'s business. One node keeps them in memory (``MemoryLimiterStore``); nodes that
/// share a PostgreSQL database keep them in its `login_limits` table (``SQLLimiterStore``), so that a
/// second node does not double an attacker's attempts (docs/OPERATIONS.md, "Several nodes").
struct LoginRateLimiter: Sendable {
    struct Limit: Sendable {
        /// Attempts allowed at once.
        var burst: Double
        /// Attempts regained per second.
        var refillPerSecond: Double

        /// Seconds after its last use when a bucket is full again whatever it held (0 for a limit so large
        /// that a bucket never runs low).
        var refillHorizon: Double {
            burst >= 1e12 ? 0 : burst / refillPerSecond
        }
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

    /// Failures in a row, and the lockout they earned.
    struct Failures: Sendable, Equatable {
        var count: Int
        var last: Double
        var lockedUntil: Double
    }

    struct Bucket: Sendable, Equatable {
        var tokens: Double
        var updated: Double
    }

    /// What one call reads and may change: the failures of the account from the address and of the
    /// address, and the two buckets (`nil`: nothing stored, a full bucket or no failure).
    struct Entries: Sendable, Equatable {
        var pair: Failures?
        var byAddress: Failures?
        var account: Bucket?
        var address: Bucket?
    }

    /// The limits and lockouts the decisions apply.
    struct Policy: Sendable {
        var accountLimit: Limit
        var addressLimit: Limit
        var pairEscalation: Escalation
        var addressEscalation: Escalation

        /// A bucket that has refilled: forgetting it changes nothing.
        func isCold(_ bucket: Bucket, limit: Limit, time: Double) -> Bool {
            LoginRateLimiter.refilled(bucket, limit: limit, time: time).tokens >= limit.burst
        }
    }

    let policy: Policy
    let store: any LimiterStore
    private let now: @Sendable () -> Double

    /// The keys each table holds in memory before it evicts cold ones.
    static let defaultCapacity = 100_000

    /// A limiter over `store`, or in memory holding `capacity` keys per table when `store` is `nil`.
    init(account: Limit, address: Limit,
         accountEscalation: Escalation = .init(threshold: 20, baseSeconds: 60, maxSeconds: 86_400),
         addressEscalation: Escalation = .init(threshold: 200, baseSeconds: 60, maxSeconds: 86_400),
         capacity: Int = LoginRateLimiter.defaultCapacity,
         store: (@Sendable (Policy) -> any LimiterStore)? = nil,
         now: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }) {
        let policy = Policy(accountLimit: account, addressLimit: address, pairEscalation: accountEscalation, addressEscalation: addressEscalation)
        self.policy = policy
        self.store = store?(policy) ?? MemoryLimiterStore(capacity: capacity, policy: policy)
        self.now = now
    }

    /// For tests: the keys held by the largest table of a limiter in memory.
    var largestTable: Int {
        get async { await (store as? MemoryLimiterStore)?.largestTable ?? 0 }
    }

    /// Takes one attempt for `account` from `address`; returns the seconds to wait when refused. A
    /// locked-out attempt takes nothing (hammering does not extend a lockout), and a refused one stores
    /// nothing (it cannot push other keys out).
    func attempt(account: String, address: String) async throws -> Double? {
        let time = now(), policy = policy
        return try await store.update(account: account, address: address, time: time) { Self.attempt(&$0, policy: policy, time: time) }
    }

    /// A failed attempt (wrong password or unknown account): counts towards the lockouts.
    func recordFailure(account: String, address: String) async throws {
        let time = now(), policy = policy
        try await store.update(account: account, address: address, time: time) { Self.failure(&$0, policy: policy, time: time) }
    }

    /// A successful login: the account's failures from that address are forgotten.
    func recordSuccess(account: String, address: String) async throws {
        try await store.update(account: account, address: address, time: now()) { $0.pair = nil }
    }

    static func attempt(_ entries: inout Entries, policy: Policy, time: Double) -> Double? {
        let locked = max(entries.pair?.lockedUntil ?? 0, entries.byAddress?.lockedUntil ?? 0)
        if locked > time { return locked - time }
        let accountBucket = refilled(entries.account, limit: policy.accountLimit, time: time)
        let addressBucket = refilled(entries.address, limit: policy.addressLimit, time: time)
        let wait = max(Self.wait(accountBucket, limit: policy.accountLimit), Self.wait(addressBucket, limit: policy.addressLimit))
        if wait > 0 { return wait }
        entries.account = Bucket(tokens: accountBucket.tokens - 1, updated: time)
        entries.address = Bucket(tokens: addressBucket.tokens - 1, updated: time)
        return nil
    }

    static func failure(_ entries: inout Entries, policy: Policy, time: Double) {
        entries.pair = failed(entries.pair, escalation: policy.pairEscalation, time: time, forgetAfter: nil)
        entries.byAddress = failed(entries.byAddress, escalation: policy.addressEscalation, time: time,
                                   forgetAfter: policy.addressEscalation.maxSeconds)
    }

    private static func failed(_ entry: Failures?, escalation: Escalation, time: Double, forgetAfter: Double?) -> Failures {
        var entry = entry ?? Failures(count: 0, last: time, lockedUntil: 0)
        if let forgetAfter, time - entry.last > forgetAfter { entry.count = 0 }
        entry.count += 1
        entry.last = time
        if let lockout = escalation.lockout(after: entry.count) { entry.lockedUntil = time + lockout }
        return entry
    }

    static func refilled(_ bucket: Bucket?, limit: Limit, time: Double) -> Bucket {
        guard let bucket else { return Bucket(tokens: limit.burst, updated: time) }
        return Bucket(tokens: min(limit.burst, bucket.tokens + max(0, time - bucket.updated) * limit.refillPerSecond), updated: time)
    }

    private static func wait(_ bucket: Bucket, limit: Limit) -> Double {
        bucket.tokens >= 1 ? 0 : (1 - bucket.tokens) / limit.refillPerSecond
    }

    static func pairKey(_ account: String, _ address: String) -> String { account + "\n" + address }
}

/// Where a ``LoginRateLimiter``'s entries live. ``update(account:address:time:_:)`` reads the entries of
/// one account and address, lets `change` decide, and stores what it changed, as one step: two calls for
/// the same account or address never interleave (a lost update here would be a free guess).
protocol LimiterStore: Sendable {
    @discardableResult
    func update<T: Sendable>(account: String, address: String, time: Double,
                             _ change: @Sendable (inout LoginRateLimiter.Entries) -> T) async throws -> T
}

/// One node's entries, in memory (docs/SECURITY.md, "Attack review 2026-12-01"): a refused attempt
/// stores nothing, so an address adds keys no faster than its bucket lets it try; each table holds
/// `capacity` keys and makes room by evicting its least recently used *cold* ones (a full bucket, a count
/// of failures with no lockout running), never an active lockout or a partly used bucket. The tables
/// used to be emptied at 100,000 keys: that many made-up client ids reset every lockout.
actor MemoryLimiterStore: LimiterStore {
    private let policy: LoginRateLimiter.Policy
    private var pairFailures: LRUTable<LoginRateLimiter.Failures>
    private var addressFailures: LRUTable<LoginRateLimiter.Failures>
    private var accounts: LRUTable<LoginRateLimiter.Bucket>
    private var addresses: LRUTable<LoginRateLimiter.Bucket>

    init(capacity: Int, policy: LoginRateLimiter.Policy) {
        self.policy = policy
        pairFailures = LRUTable(capacity: capacity)
        addressFailures = LRUTable(capacity: capacity)
        accounts = LRUTable(capacity: capacity)
        addresses = LRUTable(capacity: capacity)
    }

    var largestTable: Int { max(accounts.count, addresses.count, pairFailures.count, addressFailures.count) }

    func update<T: Sendable>(account: String, address: String, time: Double,
                             _ change: @Sendable (inout LoginRateLimiter.Entries) -> T) -> T {
        let pairKey = LoginRateLimiter.pairKey(account, address)
        let before = LoginRateLimiter.Entries(pair: pairFailures.peek(pairKey), byAddress: addressFailures.peek(address),
                                              account: accounts.peek(account), address: addresses.peek(address))
        var after = before
        let result = change(&after)
        let failuresCold: (LoginRateLimiter.Failures) -> Bool = { $0.lockedUntil <= time }
        if after.pair != before.pair { Self.store(after.pair, pairKey, in: &pairFailures, isCold: failuresCold) }
        if after.byAddress != before.byAddress { Self.store(after.byAddress, address, in: &addressFailures, isCold: failuresCold) }
        let policy = policy
        if after.account != before.account {
            Self.store(after.account, account, in: &accounts) { policy.isCold($0, limit: policy.accountLimit, time: time) }
        }
        if after.address != before.address {
            Self.store(after.address, address, in: &addresses) { policy.isCold($0, limit: policy.addressLimit, time: time) }
        }
        return result
    }

    private static func store<Value>(_ value: Value?, _ key: String, in table: inout LRUTable<Value>, isCold: (Value) -> Bool) {
        if let value { table.set(key, value, isCold: isCold) } else { table.remove(key) }
    }
}

/// A dictionary of at most `capacity` keys (unless more are hot) that makes room by evicting its least
/// recently used cold entries: ``set(_:_:isCold:)`` looks at a few of the oldest entries and evicts the
/// cold ones; a hot one it meets moves to the front (it is still in use), so eviction costs a few steps
/// per insertion whatever the table holds. When every entry it looks at is hot, the table grows past
/// `capacity`: what is hot (a lockout running, a bucket being used) is bounded by how fast attempts are
/// allowed, and forgetting it would be the attack.
struct LRUTable<Value> {
    private struct Node {
        var key: String
        var value: Value
        var newer: Int
        var older: Int
    }

    let capacity: Int
    private var index: [String: Int] = [:]
    private var nodes: [Node] = []
    private var free: [Int] = []
    /// The most and least recently used nodes (-1: none).
    private var newest = -1
    private var oldest = -1
    /// How many of the oldest entries one insertion looks at.
    private static var evictionSteps: Int { 8 }

    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    var count: Int { index.count }

    /// The value of `key`, without making it recently used.
    func peek(_ key: String) -> Value? {
        index[key].map { nodes[$0].value }
    }

    /// Stores `value` under `key` as the most recently used; a new key first makes room by evicting the
    /// oldest entries `isCold` says may go.
    mutating func set(_ key: String, _ value: Value, isCold: (Value) -> Bool) {
        if let slot = index[key] {
            nodes[slot].value = value
            moveToFront(slot)
            return
        }
        if index.count >= capacity { evict(isCold: isCold) }
        let node = Node(key: key, value: value, newer: -1, older: newest)
        let slot: Int
        if let reused = free.popLast() {
            nodes[reused] = node
            slot = reused
        } else {
            nodes.append(node)
            slot = nodes.count - 1
        }
        if newest >= 0 { nodes[newest].newer = slot }
        newest = slot
        if oldest < 0 { oldest = slot }
        index[key] = slot
    }

    mutating func remove(_ key: String) {
        guard let slot = index.removeValue(forKey: key) else { return }
        unlink(slot)
        free.append(slot)
    }

    private mutating func evict(isCold: (Value) -> Bool) {
        var steps = 0
        while index.count >= capacity, oldest >= 0, steps < Self.evictionSteps {
            steps += 1
            let slot = oldest
            if isCold(nodes[slot].value) {
                remove(nodes[slot].key)
            } else {
                moveToFront(slot)
            }
        }
    }

    private mutating func moveToFront(_ slot: Int) {
        guard slot != newest else { return }
        unlink(slot)
        nodes[slot].older = newest
        nodes[slot].newer = -1
        if newest >= 0 { nodes[newest].newer = slot }
        newest = slot
        if oldest < 0 { oldest = slot }
    }

    private mutating func unlink(_ slot: Int) {
        let node = nodes[slot]
        if node.newer >= 0 { nodes[node.newer].older = node.older } else { newest = node.older }
        if node.older >= 0 { nodes[node.older].newer = node.newer } else { oldest = node.newer }
        nodes[slot].newer = -1
        nodes[slot].older = -1
    }
}

/// Refused logins, logged as one summary line per interval instead of one line each: a flood of
/// refusals must not become a flood of log lines (docs/SECURITY.md, "Attack review 2026-12-01"). The
/// first refusal after a quiet interval is logged as it happens; the ones after it in the same interval
/// are counted, and the next refusal after the interval logs how many there were and from how many
/// addresses (counted up to 1,000).
actor RefusalLog {
    private let logger: Logger
    private let interval: Double
    private let now: @Sendable () -> Double
    private var windowStart: Double = -.infinity
    private var counts: [String: Int] = [:]
    private var addresses: Set<String> = []

    init(logger: Logger, intervalSeconds: Double = 60, now: @escaping @Sendable () -> Double) {
        self.logger = logger
        interval = intervalSeconds
        self.now = now
    }

    /// One refusal of kind `what` ("login failed", "api key login failed") from `address`.
    func note(_ what: String, address: String) {
        let time = now()
        if time - windowStart >= interval {
            flush()
            windowStart = time
            logger.info("\(what)", metadata: ["address": "\(address)"])
            return
        }
        counts[what, default: 0] += 1
        if addresses.count < 1_000 { addresses.insert(address) }
    }

    private func flush() {
        guard !counts.isEmpty else { return }
        let summary = counts.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
        logger.warning("refused logins since the last line: \(summary)",
                       metadata: ["addresses": "\(addresses.count >= 1_000 ? "1000+" : String(addresses.count))",
                                  "seconds": "\(Int(interval))"])
        counts = [:]
        addresses = []
    }
}
