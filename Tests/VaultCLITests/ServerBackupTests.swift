import Foundation
import Testing
import VaultTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `vaultsync-server backup` and `restore` as an operator runs them: the built executables, a server
/// serving (and written to) while the backup is made, a second server on the restored folder.
@Suite("vaultsync-server backup and restore")
struct ServerBackupTests {
    @Test("a backup made while the server serves is one self-contained file of mode 600; restored into an empty folder, a new server serves the same vault; bad input refused, nothing changed")
    func backupAndRestore() async throws {
        let folder = try emptyFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var environment = freshEnvironment(home: folder)
        environment["VAULTSYNC_PORT"] = "0"
        let (server, log) = try await ServerExecutableTests.startServer(in: folder, environment: environment, arguments: ["--data-dir", folder + "/data"])
        defer { server.killAndCollect() }
        let port = try #require(log.text.split(separator: "listening on http://127.0.0.1:").last?.prefix { $0.isNumber })
        let device = CLIDevice(password: "correct horse battery staple")
        try await device.expect(["config", "server", "http://127.0.0.1:\(port)"])
        try await device.expect(["register", "backup@example.com", "--kdf-iterations", "600000"])
        for index in 0..<5 { try await device.expect(["add", "note", "--name", "Note \(index)", "--notes", "kept \(index)"]) }

        // Made while the server serves, with a save going on beside it.
        let saving = Task { _ = try await device.expect(["add", "note", "--name", "During the backup", "--notes", "x"]) }
        let backup = folder + "/backup.sqlite"
        let made = try await runExecutable("vaultsync-server", ["--data-dir", folder + "/data", "backup", "--output", backup], environment: environment, in: folder)
        try await saving.value
        #expect(made.status == 0 && made.stdout.contains("Backed up 1 account, ") && made.stdout.contains(backup), "\(made)")
        let attributes = try FileManager.default.attributesOfItem(atPath: backup)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        #expect(!FileManager.default.fileExists(atPath: backup + "-wal"), "one file, no write-ahead log beside it")
        let again = try await runExecutable("vaultsync-server", ["--data-dir", folder + "/data", "backup", "--output", backup], environment: environment, in: folder)
        #expect(again.status == 64 && again.stderr.contains("exists already"), "\(again)")

        // Restore: a non-empty folder and a file that is not a backup are refused.
        let refused = try await runExecutable("vaultsync-server", ["--data-dir", folder + "/data", "restore", backup], environment: environment, in: folder)
        #expect(refused.status == 64 && refused.stderr.contains("is not empty"), "\(refused)")
        try Data("not a database".utf8).write(to: URL(fileURLWithPath: folder + "/junk.sqlite"))
        let junk = try await runExecutable("vaultsync-server", ["--data-dir", folder + "/junk-data", "restore", folder + "/junk.sqlite"], environment: environment, in: folder)
        #expect(junk.status == 64 && junk.stderr.contains("is not a vaultsync-server database"), "\(junk)")
        #expect(!FileManager.default.fileExists(atPath: folder + "/junk-data/vaultsync.sqlite"))
        let restored = try await runExecutable("vaultsync-server", ["--data-dir", folder + "/restored", "restore", backup], environment: environment, in: folder)
        #expect(restored.status == 0 && restored.stdout.contains("Restored 1 account"), "\(restored)")

        // The restored folder serves the vault to a new device (the token key is new: it signs in).
        server.killAndCollect()
        let (second, secondLog) = try await ServerExecutableTests.startServer(in: folder, environment: environment, arguments: ["--data-dir", folder + "/restored"])
        defer { second.killAndCollect() }
        let secondPort = try #require(secondLog.text.split(separator: "listening on http://127.0.0.1:").last?.prefix { $0.isNumber })
        let other = CLIDevice(password: "correct horse battery staple")
        try await other.expect(["config", "server", "http://127.0.0.1:\(secondPort)"])
        try await other.expect(["login", "backup@example.com"])
        let listed = try await other.expect(["list"]).stdout
        for index in 0..<5 { #expect(listed.contains("Note \(index)"), "\(listed)") }
        #expect(try await other.expect(["get", "Note 3", "--field", "notes"]).stdout == "kept 3\n")
    }
}
