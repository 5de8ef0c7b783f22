import Foundation

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
    /// Releases connections.
    func close() async
}

/// Errors of the storage layer.
public enum StorageError: Error, Sendable, CustomStringConvertible {
    /// A uniqueness rule was violated (duplicate email, id…).
    case uniqueViolation(String)
    /// The database answered with an error.
    case database(String)
    /// The database URL could not be understood.
    case invalidURL(String)

    public var description: String {
        switch self {
        case .uniqueViolation(let what): return "duplicate: \(what)"
        case .database(let message): return "database error: \(message)"
        case .invalidURL(let reason): return "invalid database URL: \(reason)"
        }
    }
}

/// A first-in, first-out async mutex: one holder at a time, waiters resume in order.
actor AsyncMutex {
    private var locked = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func lock() async {
        if !locked {
            locked = true
            return
        }
        await withCheckedContinuation { waiters.append($0) }
    }

    func unlock() {
        if waiters.isEmpty {
            locked = false
        } else {
            waiters.removeFirst().resume()
        }
    }
}
