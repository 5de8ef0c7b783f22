import Foundation
import Testing
import VaultModels
import VaultTestSupport

@Suite("CLI: config ca-file, a refused certificate in save notes and status", .timeLimit(.minutes(3)))
struct TrustCommandTests {
    static func authority(_ commonName: String = "VaultSync Test CA") throws -> TestCertificateAuthority {
        try TestCertificateAuthority.make(directory: URL(fileURLWithPath: temporaryDirectory("vaultsync-ca")), commonName: commonName)
    }

    @Test("config ca-file stores a PEM CA (absolute) and shows it; a key file or a missing file is refused naming it, nothing stored; --clear removes it")
    func caFileSetting() async throws {
        let authority = try Self.authority()
        let device = CLIDevice()
        let noSystemFile = ["SSL_CERT_FILE"]
        let notPEM = try await device.expect(["config", "ca-file", authority.keyPath], status: 65)
        #expect(notPEM.stderr.contains(authority.keyPath) && notPEM.stderr.contains("no PEM certificate"))
        let missing = try await device.expect(["config", "ca-file", authority.caPath + ".missing"], status: 65)
        #expect(missing.stderr.contains(authority.caPath + ".missing") && missing.stderr.contains("no such file"))
        #expect(try await device.expect(["config", "show", "--json"], removing: noSystemFile).json()["caFile"] == .null)

        let folder = (authority.caPath as NSString).deletingLastPathComponent
        let set = try await runIn(folder, device, ["config", "ca-file", "ca.pem"])
        #expect(set.stdout.contains("Trusting 1 certificate authority from \(authority.caPath)") && set.stdout.contains("\"VaultSync Test CA\""))
        #expect(try await device.expect(["config", "show", "--json"], removing: noSystemFile).json()["caFile"] == .string(authority.caPath))
        let shown = try await device.expect(["config", "show"])
        #expect(shown.stdout.contains("\(authority.caPath) (config ca-file)"))

        try await device.expect(["config", "ca-file", "--clear"])
        #expect(try await device.expect(["config", "show", "--json"], removing: noSystemFile).json()["caFile"] == .null)
        // Without a setting, SSL_CERT_FILE is the CA file.
        #expect(try await device.expect(["config", "show", "--json"], environment: ["SSL_CERT_FILE": authority.caPath]).json()["caFile"]
                == .string(authority.caPath))
        try await device.expect(["config", "ca-file"], status: 64)
        try? FileManager.default.removeItem(atPath: (device.home as NSString).deletingLastPathComponent)
    }

    @Test("an https server with a private CA: login exits 8 naming the issuer; with the CA it works; an edit without it is kept with the reason, status shows it, sync sends it once trusted")
    func refusedCertificate() async throws {
        let authority = try Self.authority("Example Private CA")
        let server = LiveServer { $0.tls = .init(certificateChainPath: authority.certificatePath, privateKeyPath: authority.keyPath) }
        try await server.start()
        let scenario = CLIScenario(server: server, email: "cli-tls-\(UUID().uuidString.prefix(8).lowercased())@example.com")
        let url = await server.url
        let device = CLIDevice(password: scenario.password)
        try await device.expect(["config", "server", url])
        let refused = try await device.expect(["register", scenario.email, "--kdf-iterations", "100000"], status: 8)
        #expect(refused.stderr.contains("(issued by \"Example Private CA\") is not trusted by this device"))
        #expect(refused.stderr.contains("vaultsync config ca-file PATH"))

        try await device.expect(["config", "ca-file", authority.caPath])
        try await device.expect(["register", scenario.email, "--kdf-iterations", "100000"])
        try await device.expect(["config", "ca-file", "--clear"])

        let saved = try await device.expect(["add", "login", "--name", "Bank", "--username", "alice"])
        #expect(saved.stderr.contains("saved on this device only — the server was not used"))
        #expect(saved.stderr.contains("Example Private CA") && saved.stderr.contains("1 change pending"))
        let status = try await device.expect(["status"])
        #expect(status.stdout.contains("untrusted certificate"))
        #expect(status.stdout.contains("certificate     the certificate of \(url.dropFirst("https://".count)) (issued by \"Example Private CA\")"))
        let json = try await device.json(["status"])
        #expect(json["connection"] == .string("untrusted-certificate"))
        #expect(json["certificateProblem"]?["reason"] == .string("untrustedIssuer"))
        #expect(json["certificateProblem"]?["issuer"] == .string("Example Private CA"))
        #expect(json["pending"] == .int(1))
        let sync = try await device.expect(["sync"], status: 8)
        #expect(sync.stderr.contains("1 change stay queued") || sync.stderr.contains("1 change stays queued"))

        try await device.expect(["config", "ca-file", authority.caPath])
        let sent = try await device.expect(["sync"])
        #expect(sent.stdout.contains("Synced: 1 change sent, 0 still pending"))
        let after = try await device.json(["status"])
        #expect(after["connection"] == .string("online") && after["certificateProblem"] == .null)
        await scenario.finish([device])
    }

    /// Runs in `folder` (a relative CA path is stored as an absolute one).
    func runIn(_ folder: String, _ device: CLIDevice, _ arguments: [String]) async throws -> CLIResult {
        let executable = try vaultsyncExecutable()
        let finished = try await runProcess(executable, arguments, environment: device.environment, folder: folder)
        #expect(finished.status == 0, "vaultsync \(arguments.joined(separator: " ")): \(finished.stderr)")
        return CLIResult(status: finished.status, stdout: finished.stdout, stderr: finished.stderr)
    }
}
