import Foundation
import Testing
import VaultClient
import VaultCrypto
import VaultModels
import VaultTestSupport

/// Secrets never on a command line (readable by every user of the machine through `ps` and
/// /proc/PID/cmdline, and kept in shell history), never left on disk after their time, and never
/// handed to the editor's environment.
@Suite("CLI: secrets off the command line, sessions deleted, the editor's environment")
struct CommandLineSecretTests {
    @Test("a session file is deleted when a command finds it expired or damaged, kept for a key that is not its own, and by lock")
    func sessionFiles() async throws {
        let scenario = try await CLIScenario.start()
        let device = try await scenario.device(register: true)
        let sessionPath = device.home + "/session"
        let noPassword = ["VAULTSYNC_PASSWORD"]
        func exists() -> Bool { FileManager.default.fileExists(atPath: sessionPath) }

        // A session sealed by the library as `unlock` seals it, whose time ran out a minute ago.
        let engine = try VaultEngine(databasePath: device.home + "/vault.sqlite",
                                     configuration: EngineConfiguration(serverURL: await scenario.server.url))
        try await engine.unlock(email: scenario.email, password: scenario.password)
        let expiredKey = SymmetricCryptoKey.generate()
        let expired = try await engine.sealSession(with: expiredKey, expiresAt: WireDate(Date().addingTimeInterval(-60)))
        await engine.shutdown()
        try Data(expired.utf8).write(to: URL(fileURLWithPath: sessionPath))
        let refused = try await device.expect(["list"], status: 2, environment: ["VAULTSYNC_SESSION": expiredKey.base64], removing: noPassword)
        #expect(refused.stderr.contains("expired"), "\(refused)")
        #expect(!exists(), "the expired session's file must be deleted")

        // A key that does not open the file leaves it: it may be another shell's newer session.
        let key = try await device.expect(["unlock", "--raw"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(exists())
        try await device.expect(["list"], status: 2, environment: ["VAULTSYNC_SESSION": SymmetricCryptoKey.generate().base64], removing: noPassword)
        #expect(exists())
        try await device.expect(["list"], environment: ["VAULTSYNC_SESSION": key], removing: noPassword)

        // The file says when it expires, so any command deletes it once that has passed, with or without its key.
        let text = try String(contentsOfFile: sessionPath, encoding: .utf8)
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.first?.hasPrefix("expires ") == true, "\(text.prefix(20))")
        lines[0] = "expires \(Int(Date().timeIntervalSince1970) - 1)"
        try Data(lines.joined(separator: "\n").utf8).write(to: URL(fileURLWithPath: sessionPath))
        try await device.expect(["status"], removing: noPassword)
        #expect(!exists(), "status (no key) must delete a session file past its expiry")
        try await device.expect(["list"], status: 2, environment: ["VAULTSYNC_SESSION": key], removing: noPassword)

        // A damaged file opens for nobody: deleted.
        let second = try await device.expect(["unlock", "--raw"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        try Data("not a sealed session".utf8).write(to: URL(fileURLWithPath: sessionPath))
        try await device.expect(["list"], status: 2, environment: ["VAULTSYNC_SESSION": second], removing: noPassword)
        #expect(!exists(), "a damaged session file must be deleted")

        // lock deletes it.
        _ = try await device.expect(["unlock", "--raw"])
        #expect(exists())
        try await device.expect(["lock"], removing: noPassword)
        #expect(!exists())
        await scenario.finish([device])
    }
}
