import Foundation
import GRDB

/// The embedded backend: one SQLite file in WAL mode, through GRDB.
///
/// One writer connection, taken by one transaction at a time (SQLite's single-writer model made
/// explicit; it keeps `BEGIN IMMEDIATE … COMMIT` spans from interleaving on the shared connection), and
/// a few read-only connections for ``read(_:)``: in WAL mode a reader sees the last commit before its
/// first statement and neither waits for the writer nor makes it wait. Statements run synchronously on
/// the caller's thread.
public final class SQLiteDatabase: SQLDatabase {
    public let dialect = SQLDialect.sqlite
    public let location: String
    private let writer: ConnectionPool<DatabaseQueue>
    private let readers: ConnectionPool<DatabaseQueue>
    private let connections: [DatabaseQueue]
    public let use = DatabaseUse(size: 1 + SQLiteDatabase.readerCount)

    /// How many read-only connections: more than the threads that can run a read at once (statements
    /// are synchronous, so a read holds its connection only while its task runs).
    static let readerCount = max(4, 2 * ProcessInfo.processInfo.activeProcessorCount)

    /// Opens (creating if needed) the database file at `path`.
    public init(path: String) throws {
        var configuration = Configuration()
        // Transactions span several async accesses of one connection; the pools guard them.
        configuration.allowsUnsafeTransactions = true
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA foreign_keys = ON")
            try Self.tune(db)
        }
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        // The file holds password hashes and encrypted vaults: owner-only (SQLite gives -wal/-shm the same mode).
        try? FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        try queue.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        var readConfiguration = Configuration()
        readConfiguration.readonly = true
        readConfiguration.allowsUnsafeTransactions = true
        readConfiguration.busyMode = .timeout(10)
        readConfiguration.prepareDatabase { db in try Self.tune(db) }
        let readerQueues = try (0..<Self.readerCount).map { _ in try DatabaseQueue(path: path, configuration: readConfiguration) }
        writer = ConnectionPool([queue])
        readers = ConnectionPool(readerQueues)
        connections = [queue] + readerQueues
        location = "SQLite at \(path)"
    }

    /// Every connection keeps 8 MiB of pages: with SQLite's default 2 MiB a sync of a 1,000-item vault
    /// re-read its pages from the file (`pread`, 6% of the sync profile) on every request, into each
    /// reader's own cache. (Mapping the file instead, `mmap_size`, cost the update load ~15% more CPU per
    /// request and gained the sync nothing measurable.)
    static func tune(_ db: Database) throws {
        try db.execute(sql: "PRAGMA cache_size = -8192")
    }

    public func transaction<T: Sendable>(_ body: @Sendable (any SQLSession) async throws -> T) async throws -> T {
        try await run(on: writer, begin: "BEGIN IMMEDIATE", body)
    }

    public func read<T: Sendable>(_ body: @Sendable (any SQLSession) async throws -> T) async throws -> T {
        // A deferred transaction on a read-only connection: one snapshot for every statement of `body`.
        try await run(on: readers, begin: "BEGIN DEFERRED", body)
    }

    private func run<T: Sendable>(on pool: ConnectionPool<DatabaseQueue>, begin: String,
                                  _ body: @Sendable (any SQLSession) async throws -> T) async throws -> T {
        let started = use.waiting()
        let queue = await pool.acquire()
        use.holding(since: started)
        defer {
            pool.release(queue)
            use.ended(held: true)
        }
        try Self.execute(begin, on: queue)
        let result: T
        do {
            result = try await body(SQLiteSession(queue: queue))
        } catch {
            try? Self.execute("ROLLBACK", on: queue)
            throw error
        }
        do {
            try Self.execute("COMMIT", on: queue)
        } catch {
            try? Self.execute("ROLLBACK", on: queue)
            throw error
        }
        return result
    }

    private static func execute(_ sql: String, on queue: DatabaseQueue) throws {
        try queue.inDatabase { db in try db.execute(sql: sql) }
    }

    public func close() async {
        for connection in connections {
            try? connection.close()
        }
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
            // Synchronous on purpose: the caller holds the connection, statements take microseconds,
            // and an async hop per statement cost more than the statements themselves. Prepared
            // statements are cached per SQL text: the same few statements run on every request. Rows
            // are read from a cursor (no copy of each row) and share one array of column names.
            return try queue.inDatabase { db in
                let statement = try db.cachedStatement(sql: sql)
                let columns = statement.columnNames
                let width = columns.count
                var rows: [SQLRow] = []
                let cursor = try Row.fetchCursor(statement, arguments: arguments)
                while try cursor.next() != nil {
                    var values: [SQLValue] = []
                    values.reserveCapacity(width)
                    for index in 0..<width {
                        // Straight from the stepped statement: the generic Row subscript looked up type
                        // metadata at run time for every value (5% of a sync's samples).
                        switch DatabaseValue(sqliteStatement: statement.sqliteStatement, index: CInt(index)).storage {
                        case .null: values.append(.null)
                        case .int64(let int): values.append(.int(int))
                        case .double(let double): values.append(.int(Int64(double)))
                        case .string(let text): values.append(.text(text))
                        case .blob(let data): values.append(.blob(data))
                        }
                    }
                    rows.append(SQLRow(columns: columns, values: values))
                }
                return rows
            }
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
            throw StorageError.uniqueViolation(error.message ?? "constraint")
        } catch let error as DatabaseError {
            throw StorageError.database(error.message ?? "\(error.resultCode)")
        }
    }
}
