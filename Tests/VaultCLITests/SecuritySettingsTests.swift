import Foundation
import Testing
import VaultModels
import VaultTestSupport

@Suite("CLI: https only, KDF confirmation, organizations")
struct SecuritySettingsTests {
    @Test("config server refuses plain HTTP to another machine unless allowed on purpose, and warns when it is")
    func plainHTTP() async throws {
        let device = CLIDevice()
        let refused = try await device.expect(["config", "server", "http://vault.example.com"], status: 64)
        #expect(refused.stderr.contains("plain HTTP") && refused.stderr.contains("https://"))
        #expect(try await device.expect(["config", "show", "--json"]).json()["server"] == .null)
        let allowed = try await device.expect(["config", "server", "http://vault.example.com", "--insecure-allow-plain-http"])
        #expect(allowed.stderr.contains("WARNING") && allowed.stdout.contains("http://vault.example.com"))
        // Loopback and https need no override; the override is dropped when it is not asked for again.
        try await device.expect(["config", "server", "https://vault.example.com"])
        try await device.expect(["config", "server", "http://127.0.0.1:8087"])
        try await device.expect(["config", "server", "ftp://vault.example.com"], status: 64)
        try? FileManager.default.removeItem(atPath: (device.home as NSString).deletingLastPathComponent)
    }

    @Test("login names KDF settings below the minimums, sends nothing, and logs in once they are confirmed exactly")
    func confirmKdf() async throws {
        let scenario = try await CLIScenario.start()
        let first = CLIDevice(password: scenario.password)
        try await first.expect(["config", "server", await scenario.server.url])
        try await first.expect(["register", scenario.email, "--kdf-iterations", "100000"])

        let second = CLIDevice(password: scenario.password)
        try await second.expect(["config", "server", await scenario.server.url])
        let refused = try await second.expect(["login", scenario.email], status: 8)
        #expect(refused.stderr.contains("PBKDF2-SHA256 with 100,000 iterations") && refused.stderr.contains("pbkdf2:100000"))
        #expect(try await second.expect(["config", "show", "--json"]).json()["email"] == .null)
        try await second.expect(["login", scenario.email, "--accept-kdf", "pbkdf2:200000"], status: 8)
        let bad = try await second.expect(["login", scenario.email, "--accept-kdf", "lots"], status: 64)
        #expect(bad.stderr.contains("--accept-kdf takes"))
        try await second.expect(["login", scenario.email, "--accept-kdf", "pbkdf2:100000"])
        #expect(try await second.expect(["org", "list", "--json"]).json() == .array([]))
        await scenario.finish([first, second])
    }
}
