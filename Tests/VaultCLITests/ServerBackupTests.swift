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
    @Test("a backup made under a running write load is one self-contained file of mode 600; restored into an empty folder, a new server serves the same vault; bad input refused, nothing changed")
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
        // Two files, acknowledged by the server (not waiting in the profile).
        var files: [String: Data] = [:]
        for (name, size) in [("small.bin", 300_000), ("large.bin", 2_500_000)] {
            let bytes = Data((0..<size).map { _ in UInt8.random(in: 0...255) })
            try bytes.write(to: URL(fileURLWithPath: folder + "/" + name))
            files[name] = bytes
            let added = try await device.expect(["attachment", "add", "Note 0", folder + "/" + name])
            #expect(!added.stdout.contains("waiting for the server"), "\(added)")
        }

        // A write load from two other devices while the backup is made: each save that returned before the
        // backup started must be in it.
        let writers = [CLIDevice(password: "correct horse battery staple"), CLIDevice(password: "correct horse battery staple")]
        for writer in writers {
            try await writer.expect(["config", "server", "http://127.0.0.1:\(port)"])
            try await writer.expect(["login", "backup@example.com"])
        }
        let stop = StopFlag()
        let load = writers.enumerated().map { index, writer in
            Task { () -> [(name: String, acknowledged: ContinuousClock.Instant)] in
                var saved: [(String, ContinuousClock.Instant)] = []
                var sequence = 0
                while !stop.isSet {
                    sequence += 1
                    let name = "Load \(index)-\(sequence)"
                    let result = try await writer.expect(["add", "note", "--name", name, "--notes", "written under load"])
                    if !result.stdout.contains("waiting for the server") { saved.append((name, ContinuousClock.now)) }
                }
                return saved
            }
        }
        // Wait until the load has written something, then back up while it goes on.
        let loadStarted = ContinuousClock.now
        repeat {
            try await device.expect(["sync"])
        } while try await !device.expect(["list"]).stdout.contains("Load ") && ContinuousClock.now - loadStarted < .seconds(120)
        let backup = folder + "/backup.sqlite"
        let backupStarted = ContinuousClock.now
        let made = try await runExecutable("vaultsync-server", ["--data-dir", folder + "/data", "backup", "--output", backup], environment: environment, in: folder)
        // And a little more load after it, so the backup was made in the middle of it.
        try await Task.sleep(for: .milliseconds(500))
        stop.set()
        var beforeBackup: [String] = []
        var afterBackup = 0
        for task in load {
            for save in try await task.value {
                if save.acknowledged < backupStarted { beforeBackup.append(save.name) } else { afterBackup += 1 }
            }
        }
        #expect(!beforeBackup.isEmpty, "saves acknowledged before the backup started")
        print("backup under load: \(beforeBackup.count) saves acknowledged before the backup started, \(afterBackup) after")
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
        for name in beforeBackup { #expect(listed.contains(name), "acknowledged before the backup: \(name)") }
        #expect(try await other.expect(["get", "Note 3", "--field", "notes"]).stdout == "kept 3\n")
        for (name, bytes) in files {
            try await other.expect(["attachment", "get", "Note 0", name, "--output", folder + "/restored-" + name])
            #expect(try Data(contentsOf: URL(fileURLWithPath: folder + "/restored-" + name)) == bytes, "\(name), byte for byte")
        }
    }
}

/// Set once by the test, read by the tasks it stops.
final class StopFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    var isSet: Bool { lock.withLock { value } }
    func set() { lock.withLock { value = true } }
}
