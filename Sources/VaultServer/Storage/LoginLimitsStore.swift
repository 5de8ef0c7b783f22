import Crypto
import Foundation
import Synchronization

/// Login limits kept in the database, for nodes that share one (PostgreSQL): every node reads and
/// writes the same entries, so three nodes allow what one does (docs/OPERATIONS.md, "Several nodes").
///
/// One call is one transaction: advisory locks on the account and on the address (taken in a fixed
/// order, so two calls never wait on each other in a circle), one read of the four rows, and one write
/// per row that changed. SQLite runs one writer at a time and takes no lock. The cost: one transaction
/// of four to seven statements per attempt and another per outcome, beside a password check (600,000
/// rounds of PBKDF2) that costs far more.
///
/// Rows that no longer change a decision are deleted every `cleanupInterval` writes of this node: a
/// refilled bucket, and failures with no lockout running whose last failure is older than the longest
/// lockout (a day by default; the count of an account's failures from one address is forgotten then).
final class SQLLimiterStore: LimiterStore {
    private let database: any SQLDatabase
    /// Which limiter: `login`, `registration`, `two-step`.
    private let scope: String
    private let policy: LoginRateLimiter.Policy
    private let writes = Atomic<Int>(0)
    static let cleanupInterval = 512

    init(database: any SQLDatabase, scope: String, policy: LoginRateLimiter.Policy) {
        self.database = database
        self.scope = scope
        self.policy = policy
    }

    private enum Kind: String, CaseIterable {
        case pair, addressFailures = "address-failures", account, address
    }

    /// A lock's number: the first 8 bytes of SHA-256 of what it guards.
    static func lockKey(_ text: String) -> Int64 {
        let digest = Array(SHA256.hash(data: Array(text.utf8)))
        return digest.prefix(8).reduce(Int64(0)) { ($0 << 8) | Int64($1) }
    }

    func update<T: Sendable>(account: String, address: String, time: Double,
                             _ change: @Sendable (inout LoginRateLimiter.Entries) -> T) async throws -> T {
        let scope = scope, dialect = database.dialect
        let keys: [Kind: String] = [.pair: LoginRateLimiter.pairKey(account, address), .addressFailures: address,
                                    .account: account, .address: address]
        let (result, changed) = try await database.transaction { session -> (T, Int) in
            if dialect == .postgres {
                for lock in Set([Self.lockKey(scope + "\naccount\n" + account), Self.lockKey(scope + "\naddress\n" + address)]).sorted() {
                    try await session.query("SELECT pg_advisory_xact_lock(?)", [.int(lock)])
                }
            }
            let rows = try await session.query("""
                SELECT kind, key, count, last_at, locked_until, tokens, updated_at FROM login_limits
                WHERE scope = ? AND ((kind = 'pair' AND key = ?) OR (kind = 'address-failures' AND key = ?)
                    OR (kind = 'account' AND key = ?) OR (kind = 'address' AND key = ?))
                """, [.text(scope), .text(keys[.pair]!), .text(address), .text(account), .text(address)])
            func row(_ kind: Kind) -> SQLRow? { rows.first { $0.text("kind") == kind.rawValue && $0.text("key") == keys[kind] } }
            func failures(_ kind: Kind) -> LoginRateLimiter.Failures? {
                row(kind).map { .init(count: Int($0.int("count") ?? 0), last: Self.seconds($0.int("last_at")), lockedUntil: Self.seconds($0.int("locked_until"))) }
            }
            func bucket(_ kind: Kind) -> LoginRateLimiter.Bucket? {
                row(kind).map { .init(tokens: $0.text("tokens").flatMap(Double.init) ?? 0, updated: Self.seconds($0.int("updated_at"))) }
            }
            let before = LoginRateLimiter.Entries(pair: failures(.pair), byAddress: failures(.addressFailures),
                                                  account: bucket(.account), address: bucket(.address))
            var after = before
            let result = change(&after)
            var changed = 0
            func write(_ kind: Kind, _ binds: [SQLValue]?) async throws {
                changed += 1
                guard let binds else {
                    try await session.query("DELETE FROM login_limits WHERE scope = ? AND kind = ? AND key = ?",
                                            [.text(scope), .text(kind.rawValue), .text(keys[kind]!)])
                    return
                }
                try await session.query("""
                    INSERT INTO login_limits (scope, kind, key, count, last_at, locked_until, tokens, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (scope, kind, key) DO UPDATE SET count = excluded.count, last_at = excluded.last_at,
                        locked_until = excluded.locked_until, tokens = excluded.tokens, updated_at = excluded.updated_at
                    """, [.text(scope), .text(kind.rawValue), .text(keys[kind]!)] + binds)
            }
            func failureBinds(_ value: LoginRateLimiter.Failures?) -> [SQLValue]? {
                value.map { [.int(Int64($0.count)), .int(Self.micros($0.last)), .int(Self.micros($0.lockedUntil)), .null, .null] }
            }
            func bucketBinds(_ value: LoginRateLimiter.Bucket?) -> [SQLValue]? {
                // The tokens as text: Swift's shortest form reads back as the same Double, and an unlimited
                // bucket's (the two-step limiter's) is beyond an integer.
                value.map { [.null, .null, .null, .text(String($0.tokens)), .int(Self.micros($0.updated))] }
            }
            if after.pair != before.pair { try await write(.pair, failureBinds(after.pair)) }
            if after.byAddress != before.byAddress { try await write(.addressFailures, failureBinds(after.byAddress)) }
            if after.account != before.account { try await write(.account, bucketBinds(after.account)) }
            if after.address != before.address { try await write(.address, bucketBinds(after.address)) }
            return (result, changed)
        }
        if changed > 0, writes.add(1, ordering: .relaxed).newValue % Self.cleanupInterval == 0 {
            try await cleanUp(time: time)
        }
        return result
    }

    /// Deletes the rows that no longer change a decision (see the type's summary).
    func cleanUp(time: Double) async throws {
        let failuresForgotten = Self.micros(time - max(policy.pairEscalation.maxSeconds, policy.addressEscalation.maxSeconds, 86_400))
        let accountsFull = Self.micros(time - policy.accountLimit.refillHorizon)
        let addressesFull = Self.micros(time - policy.addressLimit.refillHorizon)
        _ = try await database.transaction { session in
            try await session.query("""
                DELETE FROM login_limits WHERE scope = ? AND (
                    (kind IN ('pair', 'address-failures') AND locked_until <= ? AND last_at < ?)
                    OR (kind = 'account' AND updated_at < ?) OR (kind = 'address' AND updated_at < ?))
                """, [.text(scope), .int(Self.micros(time)), .int(failuresForgotten), .int(accountsFull), .int(addressesFull)])
        }
    }

    /// For tests: the rows this limiter holds.
    func rowCount() async throws -> Int {
        try await database.read { session in
            try await session.query("SELECT COUNT(*) AS n FROM login_limits WHERE scope = ?", [.text(scope)]).first?.int("n").map(Int.init) ?? 0
        }
    }

    static func micros(_ seconds: Double) -> Int64 {
        guard seconds.isFinite else { return seconds > 0 ? .max : .min }
        return Int64((seconds * 1_000_000).rounded())
    }

    static func seconds(_ micros: Int64?) -> Double { Double(micros ?? 0) / 1_000_000 }
}
