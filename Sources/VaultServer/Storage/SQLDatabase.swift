import Foundation
import Synchronization

/// A value bound to or read from SQL. Both backends store only these four kinds: booleans are
/// integers, dates are microseconds since the epoch, JSON is text, so one SQL text serves both.
public enum SQLValue: Sendable, Equatable {
    case null
    case int(Int64)
    case text(String)
    case blob(Data)

    public static func bool(_ value: Bool) -> SQLValue { .int(value ? 1 : 0) }
    public static func optionalText(_ value: String?) -> SQLValue { value.map(SQLValue.text) ?? .null }
    public static func optionalInt(_ value: Int64?) -> SQLValue { value.map(SQLValue.int) ?? .null }
}

/// One result row, by column name.
public struct SQLRow: Sendable {
    let columns: [String]
    let values: [SQLValue]

    public subscript(_ column: String) -> SQLValue {
        guard let index = columns.firstIndex(of: column) else { return .null }
        return values[index]
    }

    public func text(_ column: String) -> String? {
        if case .text(let value) = self[column] { return value }
        return nil
    }

    public func int(_ column: String) -> Int64? {
        if case .int(let value) = self[column] { return value }
        return nil
    }

    public func bool(_ column: String) -> Bool { (int(column) ?? 0) != 0 }

    /// The value at a position found once for a whole result (see `CipherRecord.Layout`).
    func text(at index: Int?) -> String? {
        guard let index, case .text(let value) = values[index] else { return nil }
        return value
    }

    func int(at index: Int?) -> Int64? {
        guard let index, case .int(let value) = values[index] else { return nil }
        return value
    }

    public func blob(_ column: String) -> Data? {
        switch self[column] {
        case .blob(let data): return data
        case .text(let text): return Data(text.utf8)
        default: return nil
        }
    }
}

/// The SQL dialect of a backend, for the few places where the two differ.
public enum SQLDialect: Sendable {
    case sqlite
    case postgres

    /// Column type of a 64-bit integer.
    var integer: String { self == .sqlite ? "INTEGER" : "BIGINT" }
    /// Column type of binary data.
    var blob: String { self == .sqlite ? "BLOB" : "BYTEA" }
}

/// One connection's view during a transaction.
public protocol SQLSession: Sendable {
    /// Runs one statement with `?` placeholders and returns its rows (use `RETURNING` to learn what a
    /// write touched).
    @discardableResult
    func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow]
}

extension SQLSession {
    @discardableResult
    public func query(_ sql: String) async throws -> [SQLRow] { try await query(sql, []) }
}

/// A database the server stores everything in: SQLite (embedded default) or PostgreSQL.
public protocol SQLDatabase: Sendable {
    var dialect: SQLDialect { get }
    /// A short description for the start-up line ("SQLite at …", "PostgreSQL at host:port/db").
    var location: String { get }
    /// Runs `body` in one transaction: committed when it returns, rolled back when it throws.
    func transaction<T: Sendable>(_ body: @Sendable (any SQLSession) async throws -> T) async throws -> T
    /// Runs `body`, which only reads, on a connection that may run beside other reads and the writer:
    /// SQLite reads one snapshot from a pool of read-only connections (WAL lets them run while a write
    /// transaction is open); PostgreSQL runs the statements on a pooled connection without `BEGIN`/`COMMIT`
    /// (under READ COMMITTED every statement reads its own snapshot in a transaction too, so the
    /// transaction would add two round trips and nothing else). Whatever committed before the call is
    /// seen. A write statement in `body` fails.
    func read<T: Sendable>(_ body: @Sendable (any SQLSession) async throws -> T) async throws -> T
    /// How busy the connections are, for `/metrics`.
    var use: DatabaseUse { get }
    /// Releases connections.
    func close() async
}

/// How busy a database's connections are (docs/OPERATIONS.md, "Watching it"): how many a call may hold
/// at most, how many calls hold one now, how many wait for one, and how long each waited. A node whose
/// calls wait is short of connections (or its database is slow), which the request latencies alone do
/// not tell apart from slow handlers.
public final class DatabaseUse: Sendable {
    public struct Sample: Sendable, Equatable {
        /// The most connections calls can hold at once (SQLite: the writer and the readers).
        public var size: Int
        public var inUse: Int
        public var waiting: Int
    }

    private struct State {
        var sample: Sample
        var waited: (@Sendable (Duration) -> Void)?
    }

    private let state: Mutex<State>

    init(size: Int) {
        state = Mutex(State(sample: Sample(size: size, inUse: 0, waiting: 0)))
    }

    public var sample: Sample { state.withLock { $0.sample } }

    /// `observe` is told each call's wait for a connection (once set; `/metrics` keeps their histogram).
    public func observeWaits(_ observe: @escaping @Sendable (Duration) -> Void) {
        state.withLock { $0.waited = observe }
    }

    /// A call starts waiting for a connection; returns when, for ``holding(since:)``.
    func waiting() -> ContinuousClock.Instant {
        state.withLock { $0.sample.waiting += 1 }
        return ContinuousClock.now
    }

    /// The call that started waiting at `started` holds a connection now.
    func holding(since started: ContinuousClock.Instant) {
        let observe = state.withLock { state -> (@Sendable (Duration) -> Void)? in
            state.sample.waiting -= 1
            state.sample.inUse += 1
            return state.waited
        }
        observe?(ContinuousClock.now - started)
    }

    /// The call ended: it gave its connection back (`held`), or stopped waiting without one.
    func ended(held: Bool) {
        state.withLock { held ? ($0.sample.inUse -= 1) : ($0.sample.waiting -= 1) }
    }
}

/// Errors of the storage layer.
public enum StorageError: Error, Sendable, CustomStringConvertible {
    /// A uniqueness rule was violated (duplicate email, id…).
    case uniqueViolation(String)
    /// The database answered with an error.
    case database(String)
    /// The database URL could not be understood.
    case invalidURL(String)
    /// The database did not answer (nothing listens, a timeout): waiting may help.
    case unreachable(String)
    /// A newer vaultsync-server has migrated the database (`version` is one this one does not know).
    case newerSchema(version: Int, newestKnown: Int)

    public var description: String {
        switch self {
        case .uniqueViolation(let what): return "duplicate: \(what)"
        case .database(let message): return "database error: \(message)"
        case .invalidURL(let reason): return "invalid database URL: \(reason)"
        case .unreachable(let reason): return reason
        case .newerSchema(let version, let newestKnown):
            return "the database was migrated by a newer vaultsync-server (its migration \(version); this one knows up to \(newestKnown)): "
                + "run that version or a later one, or restore a backup made before the upgrade"
        }
    }
}

/// A first-in, first-out pool of connections (one for the writer, several for readers): taking a free
/// one is a lock and an array pop (no actor hop, no suspension); a caller finding none waits in line.
final class ConnectionPool<Connection: Sendable>: Sendable {
    private struct State {
        var idle: [Connection]
        var waiters: [CheckedContinuation<Connection, Never>] = []
    }

    private let state: Mutex<State>

    init(_ connections: [Connection]) {
        state = Mutex(State(idle: connections))
    }

    func acquire() async -> Connection {
        if let connection = state.withLock({ $0.idle.popLast() }) { return connection }
        return await withCheckedContinuation { continuation in
            let connection = state.withLock { state -> Connection? in
                if let connection = state.idle.popLast() { return connection }
                state.waiters.append(continuation)
                return nil
            }
            if let connection { continuation.resume(returning: connection) }
        }
    }

    func release(_ connection: Connection) {
        let waiter = state.withLock { state -> CheckedContinuation<Connection, Never>? in
            if state.waiters.isEmpty {
                state.idle.append(connection)
                return nil
            }
            return state.waiters.removeFirst()
        }
        waiter?.resume(returning: connection)
    }
}
