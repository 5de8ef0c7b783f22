import Foundation
import GRDB

/// The embedded backend: one SQLite file in WAL mode, through GRDB.
///
/// One connection, serialised by an async mutex: every transaction (reads included) runs alone, which
/// is SQLite's single-writer model made explicit and keeps `BEGIN IMMEDIATE … COMMIT` spans from
/// interleaving on the shared connection. Statements run synchronously on the caller's thread.
public final class SQLiteDatabase: SQLDatabase {
    public let dialect = SQLDialect.sqlite
    public let location: String
    private let queue: DatabaseQueue
    private let mutex = AsyncMutex()

    /// Opens (creating if needed) the database file at `path`.
    public init(path: String) throws {
        var configuration = Configuration()
        // Transactions span several async accesses of the one connection; the mutex guards them.
        configuration.allowsUnsafeTransactions = true
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA foreign_keys = ON")
        }
        queue = try DatabaseQueue(path: path, configuration: configuration)
        // The file holds password hashes and encrypted vaults: owner-only (SQLite gives -wal/-shm the same mode).
        try? FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        try queue.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        location = "SQLite at \(path)"
    }

    public func transaction<T: Sendable>(_ body: @Sendable (any SQLSession) async throws -> T) async throws -> T {
        await mutex.lock()
        do {
            try run("BEGIN IMMEDIATE")
            let result: T
            do {
                result = try await body(SQLiteSession(queue: queue))
            } catch {
                try? run("ROLLBACK")
                throw error
            }
            try run("COMMIT")
            await mutex.unlock()
            return result
        } catch {
            await mutex.unlock()
            throw error
        }
    }

    private func run(_ sql: String) throws {
        try queue.inDatabase { db in try db.execute(sql: sql) }
    }

    public func close() async {
        try? queue.close()
    }
}

struct SQLiteSession: SQLSession {
    let queue: DatabaseQueue

    func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
        let arguments = StatementArguments(binds.map { value -> (any DatabaseValueConvertible)? in
            switch value {
            case .null: return nil
            case .int(let int): return int
            case .text(let text): return text
            case .blob(let data): return data
            }
        })
        do {
            // Synchronous on purpose: the caller holds the transaction mutex, statements take
            // microseconds, and an async hop per statement cost more than the statements themselves.
            // Prepared statements are cached per SQL text: the same few statements run on every request.
            return try queue.inDatabase { db in
                let rows = try Row.fetchAll(try db.cachedStatement(sql: sql), arguments: arguments)
                return rows.map { row in
                    SQLRow(columns: Array(row.columnNames), values: row.databaseValues.map { value in
                        switch value.storage {
                        case .null: return .null
                        case .int64(let int): return .int(int)
                        case .double(let double): return .int(Int64(double))
                        case .string(let text): return .text(text)
                        case .blob(let data): return .blob(data)
                        }
                    })
                }
            }
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
            throw StorageError.uniqueViolation(error.message ?? "constraint")
        } catch let error as DatabaseError {
            throw StorageError.database(error.message ?? "\(error.resultCode)")
        }
    }
}
