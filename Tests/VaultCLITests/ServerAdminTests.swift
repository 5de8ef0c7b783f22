import Foundation
import Testing
import VaultTestSupport

/// `vaultsync-server admin …` as an operator runs it: the built executables, beside a running server,
/// with the devices of the account driven through the real `vaultsync`.
@Suite("vaultsync-server admin")
struct ServerAdminTests {
    static func admin(_ arguments: [String], _ folder: String, environment: [String: String], stdin: String? = nil) async throws -> CLIResult {
        let finished = try await runProcess(try helperExecutable("vaultsync-server"), ["--data-dir", folder + "/data", "admin"] + arguments,
                                            environment: environment, folder: folder, stdin: stdin)
        return CLIResult(status: finished.status, stdout: finished.stdout, stderr: finished.stderr)
    }

    @Test("users list and show count without reading; disable refuses logins and ends sessions at once; enable; sessions revoke; delete asks, then deletes; bad input refused")
    func accounts() async throws {
        let folder = try emptyFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var environment = freshEnvironment(home: folder)
        environment["VAULTSYNC_PORT"] = "0"
        let noDatabase = try await Self.admin(["users", "list"], folder, environment: environment)
        #expect(noDatabase.status == 64 && noDatabase.stderr.contains("there is no server database at"), "\(noDatabase)")
        #expect(!FileManager.default.fileExists(atPath: folder + "/data"), "nothing created")

        let (server, log) = try await ServerExecutableTests.startServer(in: folder, environment: environment, arguments: ["--data-dir", folder + "/data"])
        defer { server.killAndCollect() }
        let port = try #require(log.text.split(separator: "listening on http://127.0.0.1:").last?.prefix { $0.isNumber })
        let laptop = CLIDevice(password: "correct horse battery staple")
        try await laptop.expect(["config", "server", "http://127.0.0.1:\(port)"])
        try await laptop.expect(["register", "alice@example.com", "--kdf-iterations", "600000"])
        try await laptop.expect(["add", "note", "--name", "Secret plan", "--notes", "the notes"])

        let listed = try await Self.admin(["users", "list"], folder, environment: environment)
        #expect(listed.status == 0 && listed.stdout.contains("alice@example.com") && listed.stdout.contains("enabled"), "\(listed)")
        #expect(!listed.stdout.contains("Secret plan"))
        let shown = try await Self.admin(["users", "show", "ALICE@example.com", "--json"], folder, environment: environment)
        let account = try #require(try JSONSerialization.jsonObject(with: Data(shown.stdout.utf8)) as? [String: Any], "\(shown)")
        #expect(account["email"] as? String == "alice@example.com")
        #expect(account["items"] as? Int == 1 && account["sessions"] as? Int == 1 && account["disabled"] is NSNull, "\(account)")
        let unknown = try await Self.admin(["users", "show", "nobody@example.com"], folder, environment: environment)
        #expect(unknown.status == 64 && unknown.stderr.contains("no account has the email nobody@example.com"), "\(unknown)")
        let notEmail = try await Self.admin(["users", "disable", "alice"], folder, environment: environment)
        #expect(notEmail.status == 64 && notEmail.stderr.contains("is not an email address"), "\(notEmail)")

        // Disabled: the laptop's session ends at its next request, and a new login is refused, saying why.
        let disabled = try await Self.admin(["users", "disable", "alice@example.com"], folder, environment: environment)
        #expect(disabled.status == 0 && disabled.stdout.contains("Disabled alice@example.com") && disabled.stdout.contains("1 session ended"), "\(disabled)")
        let refusedSync = try await laptop.run(["sync"])
        #expect(refusedSync.status != 0, "\(refusedSync)")
        let phone = CLIDevice(password: "correct horse battery staple")
        try await phone.expect(["config", "server", "http://127.0.0.1:\(port)"])
        let refusedLogin = try await phone.run(["login", "alice@example.com"])
        #expect(refusedLogin.status != 0 && refusedLogin.stderr.contains("This account is disabled"), "\(refusedLogin)")
        let status = try await Self.admin(["users", "show", "alice@example.com"], folder, environment: environment)
        #expect(status.stdout.contains("disabled since") && status.stdout.contains("0 signed-in devices"), "\(status)")

        let enabled = try await Self.admin(["users", "enable", "alice@example.com"], folder, environment: environment)
        #expect(enabled.status == 0, "\(enabled)")
        try await phone.expect(["login", "alice@example.com"])
        #expect(try await phone.expect(["get", "Secret plan", "--field", "notes"]).stdout == "the notes\n")

        let revoked = try await Self.admin(["sessions", "revoke", "alice@example.com"], folder, environment: environment)
        #expect(revoked.status == 0 && revoked.stdout.contains("Ended 1 session"), "\(revoked)")
        let afterRevoke = try await phone.run(["sync"])
        #expect(afterRevoke.status != 0, "\(afterRevoke)")

        // Deleting asks; with standard input not a terminal it wants --yes.
        let unconfirmed = try await Self.admin(["users", "delete", "alice@example.com"], folder, environment: environment, stdin: "alice@example.com\n")
        #expect(unconfirmed.status == 64 && unconfirmed.stderr.contains("--yes"), "\(unconfirmed)")
        let deleted = try await Self.admin(["users", "delete", "alice@example.com", "--yes"], folder, environment: environment)
        #expect(deleted.status == 0 && deleted.stdout.contains("Deleted alice@example.com"), "\(deleted)")
        #expect(try await Self.admin(["users", "list"], folder, environment: environment).stdout == "No accounts yet.\n")
    }

    @Test("--signups-allowed false: only an invited address registers, once; an address with an account is not invited")
    func invitations() async throws {
        let folder = try emptyFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var environment = freshEnvironment(home: folder)
        environment["VAULTSYNC_PORT"] = "0"
        let (server, log) = try await ServerExecutableTests.startServer(in: folder, environment: environment,
                                                                        arguments: ["--data-dir", folder + "/data", "--signups-allowed", "false"])
        defer { server.killAndCollect() }
        let port = try #require(log.text.split(separator: "listening on http://127.0.0.1:").last?.prefix { $0.isNumber })
        let bob = CLIDevice(password: "correct horse battery staple")
        try await bob.expect(["config", "server", "http://127.0.0.1:\(port)"])
        let refused = try await bob.run(["register", "bob@example.com", "--kdf-iterations", "600000"])
        #expect(refused.status != 0, "\(refused)")
        let invited = try await Self.admin(["invite", "Bob@Example.com"], folder, environment: environment.merging(["VAULTSYNC_SIGNUPS_ALLOWED": "false"]) { $1 })
        #expect(invited.status == 0 && invited.stdout.contains("Invited bob@example.com: they may register now."), "\(invited)")
        #expect(try await Self.admin(["invite", "--list"], folder, environment: environment).stdout.contains("bob@example.com"))
        try await bob.expect(["register", "bob@example.com", "--kdf-iterations", "600000"])
        #expect(try await Self.admin(["invite", "--list"], folder, environment: environment).stdout == "No open invitations.\n")
        let again = try await Self.admin(["invite", "bob@example.com"], folder, environment: environment)
        #expect(again.status == 64 && again.stderr.contains("has an account already"), "\(again)")
        let carol = CLIDevice(password: "correct horse battery staple")
        try await carol.expect(["config", "server", "http://127.0.0.1:\(port)"])
        #expect(try await carol.run(["register", "carol@example.com", "--kdf-iterations", "600000"]).status != 0)
    }
}
