import Foundation
import Logging
import Testing
@testable import VaultServer
import VaultTestSupport

/// Login limits in the database (Storage/LoginLimitsStore.swift): the same decisions as in memory, and on
/// PostgreSQL shared by every limiter on the database, as the nodes of one deployment share them.
@Suite("Login limits shared through the database")
struct SharedLoginLimitsTests {
    /// A database of `backend` with the schema, and its clean-up.
    static func database(_ backend: Backend) async throws -> (any SQLDatabase, url: String?, @Sendable () async -> Void) {
        let folder = NSTemporaryDirectory() + "vs-limits-" + UUID().uuidString
        let test = try await TestDatabase.make(backend, directory: folder)
        try ensureDataDirectory(test.configuration)
        let database = try openDatabase(test.configuration, logger: Logger(label: "limits-test"))
        try await VaultRepository(database: database).migrate()
        return (database, test.configuration.databaseURL, { await database.close(); await test.cleanup() })
    }

    static func limiter(_ clock: SecondsClock, database: (any SQLDatabase)?, scope: String = "login") -> LoginRateLimiter {
        var store: (@Sendable (LoginRateLimiter.Policy) -> any LimiterStore)?
        if let database {
            store = { policy in SQLLimiterStore(database: database, scope: scope, policy: policy) }
        }
        return LoginRateLimiter(account: .init(burst: 10, refillPerSecond: 1.0 / 6), address: .init(burst: 60, refillPerSecond: 1),
                                accountEscalation: .init(threshold: 5, baseSeconds: 60, maxSeconds: 3_600),
                                addressEscalation: .init(threshold: 50, baseSeconds: 60, maxSeconds: 86_400),
                                store: store, now: { clock.now })
    }

    /// A fixed mix of attempts, failures and successes from a few accounts and addresses, with the clock
    /// moving; returns every answer.
    static func script(_ limiter: LoginRateLimiter, _ clock: SecondsClock) async throws -> [String] {
        var answers: [String] = []
        var generator = SeededRandom(seed: 7)
        for step in 0..<400 {
            let account = "user\(Int.random(in: 0..<3, using: &generator))@example.com"
            let address = "192.0.2.\(Int.random(in: 0..<4, using: &generator))"
            if let wait = try await limiter.attempt(account: account, address: address) {
                answers.append("\(step) wait \(Int(wait.rounded(.up)))")
            } else if Int.random(in: 0..<10, using: &generator) < 8 {
                try await limiter.recordFailure(account: account, address: address)
                answers.append("\(step) failed")
            } else {
                try await limiter.recordSuccess(account: account, address: address)
                answers.append("\(step) ok")
            }
            clock.advance(Double(Int.random(in: 0..<4_000, using: &generator)) / 1_000)
        }
        return answers
    }

    @Test("the database's limiter gives the memory limiter's answers to the same 400 attempts", arguments: Backend.available)
    func sameAnswers(_ backend: Backend) async throws {
        let (database, _, cleanup) = try await Self.database(backend)
        let memoryClock = SecondsClock(), databaseClock = SecondsClock()
        let inMemory = try await Self.script(Self.limiter(memoryClock, database: nil), memoryClock)
        let inDatabase = try await Self.script(Self.limiter(databaseClock, database: database), databaseClock)
        #expect(inMemory == inDatabase)
        #expect(inMemory.contains { $0.hasSuffix("wait 60") } && inMemory.contains { $0.hasSuffix("ok") }, "the script reaches lockouts and successes")
        await cleanup()
    }

    @Test("three limiters on one PostgreSQL database (three nodes): five wrong answers spread over them lock the account as one would; 40 attempts at once take exactly the bucket's 10")
    func sharedAcrossNodes() async throws {
        guard Backend.postgresAdminURL != nil else {
            #expect(ProcessInfo.processInfo.environment["CI"] == nil, "CI must export VAULTSYNC_TEST_POSTGRES_URL")
            return
        }
        let (database, url, cleanup) = try await Self.database(.postgres)
        let clock = SecondsClock()
        // Each node opens its own connection pool, as separate processes do.
        var others: [PostgresDatabase] = []
        for _ in 0..<2 { others.append(try PostgresDatabase(url: try #require(url), logger: Logger(label: "node"))) }
        let nodes = [Self.limiter(clock, database: database)] + others.map { Self.limiter(clock, database: $0) }
        for index in 0..<5 {
            let node = nodes[index % 3]
            #expect(try await node.attempt(account: "victim@example.com", address: "198.51.100.9") == nil)
            try await node.recordFailure(account: "victim@example.com", address: "198.51.100.9")
        }
        for node in nodes {
            let wait = try #require(try await node.attempt(account: "victim@example.com", address: "198.51.100.9"), "locked on every node")
            #expect(wait > 59 && wait <= 60)
        }
        // The account bucket (10 at once) is shared too: 40 attempts at once over the three nodes, 10 let through.
        let allowed = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<40 {
                group.addTask { try await nodes[index % 3].attempt(account: "burst@example.com", address: "203.0.113.\(index)") == nil }
            }
            return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(allowed == 10)
        for other in others { await other.close() }
        await cleanup()
    }

    @Test("rows that no longer change a decision are deleted; a lockout running and a partly used bucket stay", arguments: Backend.available)
    func cleanUp(_ backend: Backend) async throws {
        let (database, _, cleanup) = try await Self.database(backend)
        let clock = SecondsClock()
        let limiter = Self.limiter(clock, database: database)
        let store = try #require(limiter.store as? SQLLimiterStore)
        for index in 0..<20 {
            #expect(try await limiter.attempt(account: "cold-\(index)", address: "192.0.2.1") == nil)
        }
        #expect(try await limiter.attempt(account: "locked", address: "192.0.2.2") == nil)
        // Seven failures: locked out for 240 s.
        for _ in 0..<7 { try await limiter.recordFailure(account: "locked", address: "192.0.2.2") }
        let before = try await store.rowCount()
        #expect(before == 20 + 1 + 2 + 1 + 1, "20 account buckets, their address's, the locked account's bucket, its address's, its two failure rows")
        // 61 s later: every bucket but the 10-per-minute account's is full again, and the lockout still runs.
        clock.advance(61)
        #expect(try await limiter.attempt(account: "recent", address: "192.0.2.3") == nil)
        try await store.cleanUp(time: clock.now)
        let after = try await store.rowCount()
        #expect(after == 2 + 2, "the running lockout's two rows, and the new attempt's two partly used buckets: \(after)")
        #expect(try await limiter.attempt(account: "locked", address: "192.0.2.2") != nil, "still locked out")
        await cleanup()
    }
}
