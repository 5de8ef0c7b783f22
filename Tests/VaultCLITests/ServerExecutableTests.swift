import Foundation
import Testing
import VaultTestSupport

/// `vaultsync-server` as a person starts it: the built executable, in a folder of its own.
@Suite("The server executable as people start it")
struct ServerExecutableTests {
    @Test("no flags in an empty folder: it listens, stores its data in ./vaultsync-data, and stops on SIGTERM")
    func defaults() async throws {
        let folder = NSTemporaryDirectory() + "vaultsync-server-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // Only the port is given by the environment (8087 may be taken on a shared machine); no flag at all.
        // An empty VAULTSYNC_TOKEN_KEY is "not given" too (it was decoded as an empty key and refused).
        let server = Process()
        server.executableURL = try helperExecutable("vaultsync-server")
        server.environment = ProcessInfo.processInfo.environment.merging(["VAULTSYNC_PORT": "0", "VAULTSYNC_TOKEN_KEY": ""]) { $1 }
        server.currentDirectoryURL = URL(fileURLWithPath: folder)
        // The start line goes to standard error (the log), as every other line the server prints.
        let log = OutputCollector()
        let errors = Pipe()
        errors.fileHandleForReading.readabilityHandler = { handle in log.append(handle.availableData) }
        server.standardError = errors
        server.standardOutput = Pipe()
        try server.run()
        let started = await waitUntil { log.text.contains("listening on http://127.0.0.1:") || !server.isRunning }
        #expect(started && server.isRunning, "it listens: \(log.text)")
        #expect(log.text.contains("storing data in SQLite at ./vaultsync-data/vaultsync.sqlite"), "\(log.text)")
        #expect(FileManager.default.fileExists(atPath: folder + "/vaultsync-data/vaultsync.sqlite"))
        #expect(FileManager.default.fileExists(atPath: folder + "/vaultsync-data/token-signing.key"))
        kill(server.processIdentifier, SIGTERM)
        // Polled, not waitUntilExit: a blocked cooperative thread would stall the servers of other tests.
        #expect(await waitUntil { !server.isRunning }, "it stops on SIGTERM")
        errors.fileHandleForReading.readabilityHandler = nil
        #expect(server.terminationReason == .exit && server.terminationStatus == 0, "\(log.text)")
    }

    @Test("a token key that is not base64 of 32 bytes is refused with a clear message, before anything is stored")
    func badTokenKey() async throws {
        let folder = NSTemporaryDirectory() + "vaultsync-server-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let result = try await runExecutable("vaultsync-server", ["--port", "0", "--token-key", "c2hvcnQ="],
                                             environment: ProcessInfo.processInfo.environment, in: folder)
        #expect(result.status != 0)
        #expect(result.stderr.contains("--token-key must be base64 of at least 32 bytes"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder + "/vaultsync-data"))
    }
}
