import Foundation
import Testing
import VaultTestSupport

/// What a person types on a first day, through the built executable: a mistyped command gets a
/// suggestion, and the master password may come down a pipe (docs/CLI.md).
@Suite("First-day input: command typos and piped passwords")
struct FirstDayInputTests {
    @Test("a mistyped command or subcommand is answered with the one meant; an item's name is never taken for one")
    func commandTypos() async throws {
        let device = CLIDevice()
        let list = try await device.run(["lsit"])
        #expect(list.status == 64 && list.stderr.contains("unknown command 'lsit'. Did you mean 'vaultsync list'?"), "\(list)")
        let folder = try await device.run(["folder", "ad", "Foo"])
        #expect(folder.status == 64 && folder.stderr.contains("Did you mean 'vaultsync folder add'?"), "\(folder)")
        let status = try await device.run(["stauts"])
        #expect(status.stderr.contains("Did you mean 'vaultsync status'?"), "\(status)")
        let far = try await device.run(["xyzzy"])
        #expect(far.status == 64 && !far.stderr.contains("Did you mean"), "nothing near: the parser's own message: \(far)")
    }

    @Test("a master password from a pipe: unlock --raw reads it, --password-file - too, login as well; a wrong one is refused")
    func pipedPassword() async throws {
        let scenario = try await CLIScenario.start()
        let registered = try await scenario.device(register: true)
        defer { Task { await scenario.finish([registered]) } }
        try await registered.expect(["add", "login", "--name", "Bank", "--username", "alice"])
        var device = registered
        device.environment.removeValue(forKey: "VAULTSYNC_PASSWORD")

        let locked = try await device.run(["get", "Bank"])
        #expect(locked.status == 2, "no password anywhere, nothing piped: locked: \(locked)")
        let unlocked = try await device.run(["unlock", "--raw"], stdin: scenario.password + "\n")
        #expect(unlocked.status == 0, "\(unlocked)")
        let key = unlocked.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(!key.isEmpty && !key.contains(" "), "only the session key: \(unlocked.stdout)")
        let read = try await device.run(["get", "Bank", "--field", "username"], environment: ["VAULTSYNC_SESSION": key])
        #expect(read.stdout == "alice\n", "\(read)")

        let fromDash = try await device.run(["get", "Bank", "--field", "username", "--password-file", "-"], stdin: scenario.password + "\r\n")
        #expect(fromDash.status == 0 && fromDash.stdout == "alice\n", "\(fromDash)")
        let wrong = try await device.run(["unlock", "--raw"], stdin: "not the password\n")
        #expect(wrong.status == 3, "\(wrong)")

        let other = CLIDevice()
        try await other.expect(["config", "server", await scenario.server.url])
        let login = try await other.run(["login", scenario.email, "--accept-kdf", "pbkdf2:100000"], stdin: scenario.password + "\n")
        #expect(login.status == 0, "\(login)")
        let afterLogin = try await other.run(["get", "Bank", "--field", "username"], stdin: scenario.password + "\n")
        #expect(afterLogin.stdout == "alice\n", "any command that needs the password takes it from the pipe: \(afterLogin)")
        try? FileManager.default.removeItem(atPath: (other.home as NSString).deletingLastPathComponent)
    }
}
