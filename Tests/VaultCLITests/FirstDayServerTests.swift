import Foundation
import Testing
import VaultTestSupport

/// What a person sees of the server on a first day, through the built executable: `sync` says what it
/// received, `status --check` asks the server now, and a failed connection names the server and the
/// likely mistake (docs/CLI.md).
@Suite("First-day server messages: sync received, status --check, connection hints")
struct FirstDayServerTests {
    @Test("sync says what it brought from the server: another device's new, changed and deleted items; its own sends are not counted")
    func syncReportsReceived() async throws {
        let scenario = try await CLIScenario.start()
        let a = try await scenario.device(register: true)
        let b = try await scenario.device()
        defer { Task { await scenario.finish([a, b]) } }
        try await a.expect(["add", "login", "--name", "One", "--username", "u1"])
        try await a.expect(["add", "login", "--name", "Two", "--username", "u2"])
        let first = try await b.expect(["sync"])
        #expect(first.stdout.contains("From the server: 2 items new or changed."), "\(first)")

        try await a.expect(["edit", "One", "--username", "changed"])
        try await a.expect(["delete", "Two", "--permanent"])
        let second = try await b.json(["sync"])
        #expect(second["received"]?.intValue == 1 && second["removed"]?.intValue == 1, "\(second)")

        try await b.expect(["add", "login", "--name", "Mine"])
        let own = try await b.json(["sync"])
        #expect(own["received"]?.intValue == 0 && own["removed"]?.intValue == 0, "B's own item is not news to B: \(own)")
        let quiet = try await b.expect(["sync"])
        #expect(!quiet.stdout.contains("From the server"), "\(quiet)")
    }

    @Test("status --check asks the server now: it answers, or it does not, and the line says which")
    func statusCheck() async throws {
        let scenario = try await CLIScenario.start()
        let device = try await scenario.device(register: true)
        defer { Task { await scenario.finish([device]) } }
        let up = try await device.expect(["status", "--check"])
        #expect(up.stdout.contains("check           the server answered now ("), "\(up)")
        let json = try await device.json(["status", "--check"])
        #expect(json["check"]?["answered"]?.boolValue == true && json["connection"]?.stringValue == "online", "\(json)")

        await scenario.server.stop()
        let down = try await device.expect(["status", "--check"])
        #expect(down.stdout.contains("check           the server did not answer now:"), "\(down)")
        #expect(down.stdout.contains("connection      offline"), "the failed check is the last contact now: \(down)")
        let plain = try await device.expect(["status"])
        #expect(plain.stdout.contains("`status --check` asks it now"), "\(plain)")
    }

    @Test("a failed connection names the server: a port with nothing listening, https to a plain-HTTP server, a path after the base URL")
    func connectionHints() async throws {
        let scenario = try await CLIScenario.start()
        defer { Task { await scenario.finish([]) } }
        let url = await scenario.server.url
        let device = CLIDevice(password: scenario.password)
        defer { try? FileManager.default.removeItem(atPath: (device.home as NSString).deletingLastPathComponent) }
        // Port 1 (tcpmux): nothing listens there on any machine this runs on.
        let closed = 1
        try await device.expect(["config", "server", "http://127.0.0.1:\(closed)"])
        let refused = try await device.run(["login", scenario.email, "--accept-kdf", "pbkdf2:100000"])
        #expect(refused.status == 7 && refused.stderr.contains("(server: http://127.0.0.1:\(closed); nothing listens on port \(closed) of 127.0.0.1"),
                "\(refused)")

        try await device.expect(["config", "server", url.replacingOccurrences(of: "http://", with: "https://")])
        let tls = try await device.run(["login", scenario.email, "--accept-kdf", "pbkdf2:100000"])
        #expect(tls.stderr.contains("if this server speaks plain HTTP (a local test server), use \(url)"), "\(tls)")

        try await device.expect(["config", "server", url + "/api"])
        let path = try await device.run(["login", scenario.email, "--accept-kdf", "pbkdf2:100000"])
        #expect(path.stderr.contains("the server address is its base URL, without /api: vaultsync config server \(url)"), "\(path)")
    }

    @Test("an SSH key's fingerprint is computed from its public key (as ssh-keygen -l prints it) and printed by --field fingerprint")
    func sshFingerprint() async throws {
        let scenario = try await CLIScenario.start()
        let device = try await scenario.device(register: true)
        defer { Task { await scenario.finish([device]) } }
        let keyFile = (device.home as NSString).deletingLastPathComponent + "/id_ed25519"
        try Data("-----BEGIN OPENSSH PRIVATE KEY-----\nnot a real key\n-----END OPENSSH PRIVATE KEY-----\n".utf8).write(to: URL(fileURLWithPath: keyFile))
        // The public key and fingerprint of SSHKeyFingerprintTests (ssh-keygen -lf).
        let publicKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOPPSog0q9UKO+lS1Y8rZytmQfm59dD1ap9E658WEr97 kat@example"
        try await device.expect(["add", "ssh-key", "--name", "Server", "--private-key-file", keyFile, "--public-key", publicKey])
        let printed = try await device.expect(["get", "Server", "--field", "fingerprint"])
        #expect(printed.stdout == "SHA256:QoTFcUugoBBim+3OYPjsBRSvfua+hSC86FvN69mTUAY\n", "\(printed)")
        let shown = try await device.expect(["get", "Server"])
        #expect(shown.stdout.contains("SHA256:QoTFcUugoBBim+3OYPjsBRSvfua+hSC86FvN69mTUAY"), "\(shown)")
    }
}
