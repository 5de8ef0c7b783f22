import ArgumentParser
import Foundation
import VaultServer

/// `vaultsync-server backup --output FILE`: a consistent copy of the database while the server serves.
struct BackupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Copy the database while the server serves (SQLite); on PostgreSQL, say how to use pg_dump.",
        discussion: """
        The copy holds what the database holds: accounts, encrypted items, folders, organizations and attachments, \
        encrypted as the clients sent them. The token signing key (a file of its own) is not in it: a server restored \
        without it signs new tokens, and every device signs in again.

        Example:
          vaultsync-server --data-dir /var/lib/vaultsync backup --output /backups/vaultsync-2026-12-02.sqlite
        """)

    /// The server's own flags (`--data-dir`, `--database-url-file`, …), read as the server reads them.
    @ParentCommand var server: ServerCommand

    @Option(help: ArgumentHelp("The backup file to write: a new file, created with mode 600.", valueName: "FILE"))
    var output: String

    func run() throws {
        let dataDir = server.dataDir
        if server.databaseURL != nil || server.databaseURLFile != nil || environment("VAULTSYNC_DATABASE_URL") != nil {
            try Self.postgresGuidance()
            return
        }
        var configuration = ServerConfiguration()
        configuration.dataDirectory = dataDir
        do {
            let summary = try SQLiteBackup.backup(databaseAt: configuration.sqlitePath, to: output)
            print("Backed up \(summary.users) account\(summary.users == 1 ? "" : "s"), \(summary.items) item\(summary.items == 1 ? "" : "s") "
                  + "and \(summary.attachments) attachment\(summary.attachments == 1 ? "" : "s") (\(Self.size(summary.bytes))) to \(output).")
        } catch {
            FileHandle.standardError.write(Data("Error: \(error)\n".utf8))
            throw ExitCode(error == .outputExists(output) ? 64 : 1)
        }
    }

    /// PostgreSQL's own tool makes the consistent copy; this checks it is installed and shows the two commands.
    static func postgresGuidance() throws {
        let found = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":").contains { folder in
            FileManager.default.isExecutableFile(atPath: "\(folder)/pg_dump")
        }
        print("""
            On PostgreSQL the database's own tools make the backup, while the servers serve:
              pg_dump --format=custom --file=vaultsync.dump "$DATABASE_URL"
              pg_restore --dbname="$EMPTY_DATABASE_URL" vaultsync.dump     # into an empty database
            (a URL with a password: keep it in a file or PGPASSFILE, not on the command line).
            """)
        guard found else {
            FileHandle.standardError.write(Data("Error: pg_dump is not on PATH: install PostgreSQL's client tools (Debian: apt install postgresql-client).\n".utf8))
            throw ExitCode.failure
        }
    }

    static func size(_ bytes: Int) -> String {
        bytes >= 1 << 20 ? String(format: "%.1f MiB", Double(bytes) / Double(1 << 20)) : String(format: "%.0f KiB", Double(bytes) / 1024)
    }
}

/// `vaultsync-server restore FILE`: a backup put back as the database of a new, empty data folder.
struct RestoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Put a backup back into a new, empty data folder (a non-empty one is refused).",
        discussion: """
        The file is checked first (SQLite's integrity check and the server's tables). Start the server on the folder \
        afterwards; without the old token signing key every device signs in again.

        Example:
          vaultsync-server --data-dir /var/lib/vaultsync-restored restore /backups/vaultsync-2026-12-02.sqlite
        """)

    /// The server's own flags: `--data-dir` names the new folder.
    @ParentCommand var server: ServerCommand

    @Argument(help: "The backup file (from `vaultsync-server backup`).")
    var file: String

    func run() throws {
        let dataDir = server.dataDir
        do {
            let summary = try SQLiteBackup.restore(file, intoDataDirectory: dataDir)
            print("Restored \(summary.users) account\(summary.users == 1 ? "" : "s") and \(summary.items) item\(summary.items == 1 ? "" : "s") "
                  + "into \(dataDir). Start the server with --data-dir \(dataDir).")
        } catch {
            FileHandle.standardError.write(Data("Error: \(error)\n".utf8))
            switch error {
            case .folderNotEmpty, .notABackup: throw ExitCode(64)
            default: throw ExitCode.failure
            }
        }
    }
}
