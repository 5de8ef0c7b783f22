import CommandLineSupport
import Foundation
import Testing
import VaultTestSupport

/// Runs a built executable (`vaultsync`, `vaultsync-server`) to its end in `folder` (see `runProcess`).
func runExecutable(_ name: String, _ arguments: [String], environment: [String: String], in folder: String) async throws -> Finished {
    try await runProcess(try helperExecutable(name), arguments, environment: environment, folder: folder)
}

func emptyFolder() throws -> String {
    let folder = NSTemporaryDirectory() + "vaultsync-exec-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    return folder
}

/// The environment of a person with a fresh home folder: no VaultSync variables from the test run.
func freshEnvironment(home: String) -> [String: String] {
    var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("VAULTSYNC_") && $0.key != "XDG_DATA_HOME" }
    environment["HOME"] = home
    environment["NO_COLOR"] = "1"
    return environment
}

@Suite("The executables as people start them: defaults, environment, bad flags")
struct ExecutableTests {
    @Test("vaultsync-server refuses bad flags and unreadable variables with exit 64 and a message, storing nothing", arguments: [
        (["--port", "http"], [:], "--port"),
        (["--port", "70000"], [:], "--port must be between 0 and 65535"),
        (["--log-level", "loud"], [:], "--log-level must be one of"),
        (["--database-url", "mysql://x"], [:], "--database-url must start with postgres://"),
        (["--frobnicate"], [:], "Unknown option '--frobnicate'"),
        ([], ["VAULTSYNC_PORT": "eighty"], "VAULTSYNC_PORT must be a port number"),
        ([], ["VAULTSYNC_DISABLE_SIGNUPS": "maybe"], "VAULTSYNC_DISABLE_SIGNUPS must be true or false"),
        ([], ["VAULTSYNC_LOG_LEVEL": "loud"], "VAULTSYNC_LOG_LEVEL must be one of"),
        (["--trusted-proxy", "proxy.local"], [:], "--trusted-proxy must be IP addresses; \"proxy.local\" is not one"),
        ([], ["VAULTSYNC_TRUSTED_PROXIES": "10.0.0.1, bad"], "VAULTSYNC_TRUSTED_PROXIES must be IP addresses; \"bad\" is not one"),
        ([], ["VAULTSYNC_PORT": "70000"], "VAULTSYNC_PORT must be between 0 and 65535"),
        (["--host", "999.1.1.1"], [:], "--host must be an IP address or a host name of this machine, not \"999.1.1.1\""),
        ([], ["VAULTSYNC_HOST": "999.1.1.1"], "VAULTSYNC_HOST must be an IP address"),
        (["--cors-origin", "https://vault.example.com/"], [:], "--cors-origin must be origins such as https://vault.example.com"),
        ([], ["VAULTSYNC_CORS_ORIGINS": "https://ok.example, vault.example.com"], "VAULTSYNC_CORS_ORIGINS must be origins"),
    ] as [([String], [String: String], String)])
    func serverRefusals(arguments: [String], variables: [String: String], message: String) async throws {
        let folder = try emptyFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let environment = freshEnvironment(home: folder).merging(variables) { $1 }
        let result = try await runExecutable("vaultsync-server", arguments, environment: environment, in: folder)
        #expect(result.status == 64, "\(result)")
        #expect(result.stderr.contains(message), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder + "/vaultsync-data"))
    }

    @Test("vaultsync-server --help lists every flag with its variable")
    func serverHelp() async throws {
        let folder = try emptyFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let result = try await runExecutable("vaultsync-server", ["--help"], environment: freshEnvironment(home: folder), in: folder)
        #expect(result.status == 0)
        for variable in ["VAULTSYNC_HOST", "VAULTSYNC_PORT", "VAULTSYNC_DATA_DIR", "VAULTSYNC_DATABASE_URL", "VAULTSYNC_LOG_LEVEL",
                         "VAULTSYNC_DISABLE_SIGNUPS", "VAULTSYNC_TOKEN_KEY", "VAULTSYNC_TRUSTED_PROXIES", "VAULTSYNC_CORS_ORIGINS"] {
            #expect(result.stdout.contains(variable), "\(variable) missing from --help")
        }
    }

    @Test("both executables say their version, and nothing else, with exit 0", arguments: ["vaultsync", "vaultsync-server"])
    func version(executable: String) async throws {
        let folder = try emptyFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let result = try await runExecutable(executable, ["--version"], environment: freshEnvironment(home: folder), in: folder)
        #expect(result.status == 0 && result.stdout == "\(executable) \(ProductVersion.current)\n", "\(result)")
        // Nothing was made: a version question needs no profile and no data directory.
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).isEmpty)
    }

    @Test("vaultsync on a fresh home: help, status, a clear way forward, bad flags refused")
    func clientDefaults() async throws {
        let home = try emptyFolder()
        defer { try? FileManager.default.removeItem(atPath: home) }
        let environment = freshEnvironment(home: home)
        let help = try await runExecutable("vaultsync", ["--help"], environment: environment, in: home)
        #expect(help.status == 0 && help.stdout.contains("import") && help.stdout.contains("export") && help.stdout.contains("generate"))

        // No server, no account: status says so and exits 0; the profile goes to ~/.local/share/vaultsync, 0700.
        let status = try await runExecutable("vaultsync", ["status"], environment: environment, in: home)
        #expect(status.status == 0, "\(status)")
        // Nothing to unlock: it says how to log in, not "locked" or "unlock to see" (RELIABILITY bug 73).
        #expect(status.stdout.contains("not logged in (vaultsync login EMAIL)") && !status.stdout.contains("unlock"), "\(status)")
        let profile = home + "/.local/share/vaultsync"
        let mode = try FileManager.default.attributesOfItem(atPath: profile)[.posixPermissions] as? Int
        #expect(mode == 0o700)

        let list = try await runExecutable("vaultsync", ["list"], environment: environment, in: home)
        #expect(list.status == 3 && list.stderr.contains("vaultsync login"), "\(list)")
        let sync = try await runExecutable("vaultsync", ["sync"], environment: environment, in: home)
        #expect(sync.status != 0 && !sync.stderr.isEmpty, "\(sync)")

        let unknown = try await runExecutable("vaultsync", ["list", "--colour"], environment: environment, in: home)
        #expect(unknown.status == 64 && unknown.stderr.contains("--colour"), "\(unknown)")
        let badServer = try await runExecutable("vaultsync", ["config", "server", "not a url"], environment: environment, in: home)
        #expect(badServer.status == 64, "\(badServer)")

        // VAULTSYNC_HOME moves the profile.
        let elsewhere = home + "/elsewhere"
        let moved = try await runExecutable("vaultsync", ["status"], environment: environment.merging(["VAULTSYNC_HOME": elsewhere]) { $1 }, in: home)
        #expect(moved.status == 0 && FileManager.default.fileExists(atPath: elsewhere))
    }

    #if os(Linux)
    /// scripts/setup.sh on Debian, with dpkg, apt-get and sudo replaced by fakes on PATH: it installs only
    /// what is missing, and where it cannot install it names the command to run and stops.
    @Test("scripts/setup.sh installs nothing when all is there, and names the packages when it cannot install them")
    func setupScript() async throws {
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let folder = try emptyFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let fakes = folder + "/bin"
        try FileManager.default.createDirectory(atPath: fakes, withIntermediateDirectories: true)
        func fake(_ name: String, _ body: String) throws {
            let path = fakes + "/" + name
            try Data("#!/bin/sh\n\(body)\n".utf8).write(to: URL(fileURLWithPath: path))
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: path)
        }
        let marker = folder + "/apt-get-ran"
        try fake("apt-get", "echo \"$@\" >> \(marker)\nexit 100")
        try fake("sudo", "exec \"$@\"")
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = fakes + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        let script = repository.appendingPathComponent("scripts/setup.sh").path

        try fake("dpkg", "exit 0")  // everything installed
        let present = try await runProcess(URL(fileURLWithPath: "/bin/bash"), [script, "test"], environment: environment)
        #expect(present.status == 0, "\(present)")
        #expect(!FileManager.default.fileExists(atPath: marker), "apt-get must not run when nothing is missing")

        try fake("dpkg", "exit 1")  // nothing installed, and apt-get fails
        let missing = try await runProcess(URL(fileURLWithPath: "/bin/bash"), [script, "test"], environment: environment)
        #expect(missing.status == 1, "\(missing)")
        #expect(missing.stderr.contains("As root, run: apt-get install -y libsqlite3-dev postgresql"), "\(missing.stderr)")
        #expect(try String(contentsOfFile: marker, encoding: .utf8).contains("update"))
    }
    #endif
}
