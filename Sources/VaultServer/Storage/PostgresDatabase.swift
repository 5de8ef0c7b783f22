import Foundation
import Logging
import NIOCore
import PostgresNIO

/// The PostgreSQL backend, for deployments that outgrow one machine. Several server instances may
/// share one database: nothing here keeps per-process state that another instance would need.
public final class PostgresDatabase: SQLDatabase {
    public let dialect = SQLDialect.postgres
    public let location: String
    let client: PostgresClient
    /// Connections one node opens at most; several nodes open this many each (PostgreSQL's own default
    /// `max_connections` of 100 leaves room for six).
    static let maximumConnections = 16
    public let use = DatabaseUse(size: PostgresDatabase.maximumConnections)
    private let logger: Logger
    private let runTask: Task<Void, Never>
    /// For ``checkConnection()``: one connection made outside the pool, whose failure is told at once.
    private let connectionConfiguration: PostgresConnection.Configuration

    /// Connects to `postgres://user:password@host:port/database`.
    public init(url: String, logger: Logger) throws {
        guard let components = URLComponents(string: url), components.scheme == "postgres" || components.scheme == "postgresql",
              let host = components.host, !host.isEmpty else {
            throw StorageError.invalidURL("expected postgres://user:password@host:port/database")
        }
        let database = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        var configuration = PostgresClient.Configuration(
            host: host, port: components.port ?? 5432, username: components.user ?? "postgres",
            password: components.password, database: database.isEmpty ? nil : database, tls: .disable)
        configuration.options.maximumConnections = Self.maximumConnections
        var single = PostgresConnection.Configuration(host: host, port: components.port ?? 5432, username: components.user ?? "postgres",
                                                      password: components.password, database: database.isEmpty ? nil : database, tls: .disable)
        single.options.connectTimeout = .seconds(10)
        connectionConfiguration = single
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.client = client
        self.logger = logger
        runTask = Task { await client.run() }
        location = "PostgreSQL at \(host):\(components.port ?? 5432)/\(database)"
    }

    /// Connects once, outside the pool, and says why that fails: the pool itself retries a database it cannot
    /// reach (or that refuses the password) for ever, and a server starting against one would wait without a word.
    public func checkConnection() async throws {
        do {
            let connection = try await PostgresConnection.connect(configuration: connectionConfiguration, id: 0, logger: logger)
            try await connection.close()
        } catch {
            let reason: String
            if let error = error as? PSQLError {
                // An answer from the server (a wrong password, no such database) will not change by waiting.
                if let message = error.serverInfo?[.message] { throw StorageError.database("cannot connect to \(location): \(message)") }
                reason = error.underlying.map { "\($0)" } ?? "\(error.code)"
            } else {
                reason = "\(error)"
            }
            guard !reason.contains("Connection refused") else {
                throw StorageError.unreachable("cannot connect to \(location): nothing listens there (connection refused). Is PostgreSQL running, at that address?")
            }
            throw StorageError.unreachable("cannot connect to \(location): \(reason)")
        }
    }

    /// ``checkConnection()`` until the database answers or `limit` has passed (`nil`: no limit), every
    /// retry logged; a node started before its database (a reboot, a deployment) waits instead of exiting.
    /// An answer that refuses (a wrong password) is thrown at once.
    public func waitUntilReachable(limit: Duration?, logger: Logger) async throws {
        let clock = ContinuousClock()
        let deadline = limit.map { clock.now + $0 }
        var pause = Duration.milliseconds(500)
        while true {
            do {
                return try await checkConnection()
            } catch StorageError.unreachable(let reason) {
                if let deadline, clock.now + pause > deadline { throw StorageError.unreachable(reason) }
                logger.warning("waiting for the database", metadata: ["reason": "\(reason)", "retry_in_seconds": "\(pause.components.seconds)"])
                try await Task.sleep(for: pause)
                pause = min(pause * 2, .seconds(5))
            }
        }
    }

    public func transaction<T: Sendable>(_ body: @Sendable (any SQLSession) async throws -> T) async throws -> T {
        do {
            let started = use.waiting()
            var held = false
            defer { use.ended(held: held) }
            return try await client.withTransaction(logger: logger) { connection in
                use.holding(since: started)
                held = true
                return try await body(PostgresSession(connection: connection, logger: logger))
            }
        } catch let error as PostgresTransactionError {
            // Surface the closure's own error (a 404, a validation error…) rather than the wrapper.
            if let closureError = error.closureError { throw closureError }
            throw StorageError.database(String(describing: error))
        }
    }

    public func read<T: Sendable>(_ body: @Sendable (any SQLSession) async throws -> T) async throws -> T {
        let started = use.waiting()
        var held = false
        defer { use.ended(held: held) }
        return try await client.withConnection { connection in
            use.holding(since: started)
            held = true
            return try await body(PostgresSession(connection: connection, logger: logger))
        }
    }

    /// Runs one statement outside any transaction (`CREATE DATABASE` and other administration).
    public func executeOutsideTransaction(_ sql: String) async throws {
        try await client.query(PostgresQuery(unsafeSQL: sql), logger: logger)
    }

    public func close() async {
        runTask.cancel()
    }

    /// `NOTIFY channel, payload` (delivered to every connection listening on the channel, this node's too).
    func notify(channel: String, payload: String) async throws {
        var bindings = PostgresBindings(capacity: 2)
        bindings.append(channel)
        bindings.append(payload)
        try await client.query(PostgresQuery(unsafeSQL: "SELECT pg_notify($1, $2)", binds: bindings), logger: logger)
    }

    /// Listens on `channel` on a connection of its own (outside the pool, which it would hold for ever) and
    /// hands each payload to `handle`; `ready` is called once the `LISTEN` stands. Returns when cancelled;
    /// throws when the connection fails.
    func listen(channel: String, ready: @Sendable () -> Void, _ handle: @Sendable (String) -> Void) async throws {
        let connection = try await PostgresConnection.connect(configuration: connectionConfiguration, id: 1, logger: logger)
        do {
            try await connection.listen(on: channel) { notifications in
                ready()
                for try await notification in notifications { handle(notification.payload) }
            }
        } catch {
            try? await connection.close()
            throw error
        }
        try? await connection.close()
    }
}

struct PostgresSession: SQLSession {
    let connection: PostgresConnection
    let logger: Logger

    func query(_ sql: String, _ binds: [SQLValue]) async throws -> [SQLRow] {
        var bindings = PostgresBindings(capacity: binds.count)
        for value in binds {
            switch value {
            case .null: bindings.appendNull()
            case .int(let int): bindings.append(int)
            case .text(let text): bindings.append(text)
            case .blob(let data): try bindings.append(data)
            }
        }
        let query = PostgresQuery(unsafeSQL: Self.numberPlaceholders(sql), binds: bindings)
        do {
            let rows = try await connection.query(query, logger: logger)
            var result: [SQLRow] = []
            // Every row of a result has the same columns: one array, shared.
            var columns: [String]?
            for try await row in rows {
                var values: [SQLValue] = []
                values.reserveCapacity(columns?.count ?? 16)
                for cell in row {
                    values.append(try Self.value(of: cell))
                }
                if columns == nil { columns = row.map(\.columnName) }
                result.append(SQLRow(columns: columns ?? [], values: values))
            }
            return result
        } catch let error as PSQLError {
            if error.serverInfo?[.sqlState] == "23505" {
                throw StorageError.uniqueViolation(error.serverInfo?[.message] ?? "unique violation")
            }
            throw StorageError.database(error.serverInfo?[.message] ?? String(reflecting: error))
        }
    }

    static func value(of cell: PostgresCell) throws -> SQLValue {
        guard cell.bytes != nil else { return .null }
        switch cell.dataType {
        case .int2, .int4, .int8: return .int(try cell.decode(Int64.self))
        case .bool: return .bool(try cell.decode(Bool.self))
        case .bytea: return .blob(try cell.decode(Data.self))
        default: return .text(try cell.decode(String.self))
        }
    }

    /// `?` → `$1`, `$2`, … (our SQL never has `?` inside literals).
    static func numberPlaceholders(_ sql: String) -> String {
        var out = ""
        out.reserveCapacity(sql.utf8.count + 16)
        var index = 0
        for character in sql {
            if character == "?" {
                index += 1
                out += "$\(index)"
            } else {
                out.append(character)
            }
        }
        return out
    }
}
