import Foundation
import GRDB

/// `vaultsync-server backup` and `restore` for the embedded SQLite database (docs/OPERATIONS.md,
/// "Backups"). A backup is SQLite's online backup of the live file (pages copied under SQLite's own
/// locking, so a server writing meanwhile neither blocks nor tears it), made one self-contained file
/// (rollback journal, no WAL beside it), mode 600, checked with `integrity_check` before it is called
/// done. It holds what the database holds and nothing else: vault data stays encrypted as the clients
/// sent it; the token signing key is a file of its own and is not in it.
public enum SQLiteBackup {
    /// What a backup or a restored file holds.
    public struct Summary: Sendable, Equatable {
        public var users: Int
        public var items: Int
        public var attachments: Int
        public var bytes: Int
    }

    public enum Failure: Error, Equatable, CustomStringConvertible {
        case noDatabase(String)
        case outputExists(String)
        case notABackup(path: String, reason: String)
        case folderNotEmpty(String)
        case failed(String)

        public var description: String {
            switch self {
            case .noDatabase(let path): "there is no database at \(path) (is --data-dir the server's?)"
            case .outputExists(let path): "\(path) exists already; give a new file (a backup never replaces one)"
            case .notABackup(let path, let reason): "\(path) is not a vaultsync-server database: \(reason)"
            case .folderNotEmpty(let path): "\(path) is not empty: restore into a new, empty data folder (nothing was changed)"
            case .failed(let reason): reason
            }
        }
    }

    public static func backup(databaseAt source: String, to destination: String) throws(Failure) -> Summary {
        guard FileManager.default.fileExists(atPath: source) else { throw .noDatabase(source) }
        guard !FileManager.default.fileExists(atPath: destination) else { throw .outputExists(destination) }
        // Made by this process with mode 600 before SQLite writes a byte of the vault into it.
        guard FileManager.default.createFile(atPath: destination, contents: nil, attributes: [.posixPermissions: 0o600]) else {
            throw .failed("cannot create \(destination)")
        }
        do {
            let from = try DatabaseQueue(path: source)
            let to = try DatabaseQueue(path: destination)
            try from.backup(to: to)
            try from.close()
            try to.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA journal_mode = DELETE") }
            let summary = try check(to, path: destination)
            try to.close()
            return summary
        } catch {
            try? FileManager.default.removeItem(atPath: destination)
            if let failure = error as? Failure { throw failure }
            throw .failed("the backup failed: \(error)")
        }
    }

    /// Puts a backup back as the database of `dataDirectory`, which must be empty or missing (a server's
    /// live folder is never overwritten). The file is checked first; the copy is written beside its place
    /// and renamed into it, mode 600.
    public static func restore(_ backup: String, intoDataDirectory dataDirectory: String, databaseName: String = "vaultsync.sqlite") throws(Failure) -> Summary {
        guard FileManager.default.fileExists(atPath: backup) else { throw .notABackup(path: backup, reason: "no such file") }
        if let contents = try? FileManager.default.contentsOfDirectory(atPath: dataDirectory), !contents.isEmpty {
            throw .folderNotEmpty(dataDirectory)
        }
        do {
            var readOnly = Configuration()
            readOnly.readonly = true
            let summary: Summary
            do {
                let source = try DatabaseQueue(path: backup, configuration: readOnly)
                summary = try check(source, path: backup)
                try source.close()
            } catch let failure as Failure {
                throw failure
            } catch {
                throw Failure.notABackup(path: backup, reason: "SQLite cannot open it (\(error))")
            }
            try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            let target = (dataDirectory as NSString).appendingPathComponent(databaseName)
            let partial = target + ".restoring"
            guard FileManager.default.createFile(atPath: partial, contents: nil, attributes: [.posixPermissions: 0o600]) else {
                throw Failure.failed("cannot create \(partial)")
            }
            let from = try DatabaseQueue(path: backup, configuration: readOnly)
            let to = try DatabaseQueue(path: partial)
            try from.backup(to: to)
            try from.close()
            try to.close()
            try FileManager.default.moveItem(atPath: partial, toPath: target)
            return summary
        } catch let failure as Failure {
            throw failure
        } catch {
            throw .failed("the restore failed: \(error)")
        }
    }

    /// `integrity_check`, the server's tables, and what they hold.
    static func check(_ queue: DatabaseQueue, path: String) throws -> Summary {
        try queue.read { db in
            let integrity = try String.fetchAll(db, sql: "PRAGMA integrity_check")
            guard integrity == ["ok"] else { throw Failure.notABackup(path: path, reason: "SQLite's integrity check says \(integrity.prefix(3).joined(separator: "; "))") }
            for table in ["users", "ciphers", "attachments", "schema_migrations"] where try !db.tableExists(table) {
                throw Failure.notABackup(path: path, reason: "it has no \(table) table")
            }
            let pageCount = try Int.fetchOne(db, sql: "PRAGMA page_count") ?? 0
            let pageSize = try Int.fetchOne(db, sql: "PRAGMA page_size") ?? 0
            return Summary(users: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM users") ?? 0,
                           items: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM ciphers") ?? 0,
                           attachments: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM attachments") ?? 0,
                           bytes: pageCount * pageSize)
        }
    }
}
