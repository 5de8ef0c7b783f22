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

    @Test("register at a terminal: a short password is refused before it is asked again; the repeat must match")
    func registerAtTerminal() async throws {
        let scenario = try await CLIScenario.start()
        defer { Task { await scenario.finish([]) } }
        var device = CLIDevice()
        defer { try? FileManager.default.removeItem(atPath: (device.home as NSString).deletingLastPathComponent) }
        try await device.expect(["config", "server", await scenario.server.url])
        device.environment.removeValue(forKey: "VAULTSYNC_PASSWORD")
        let short = try TerminalSession(try vaultsyncExecutable(), ["register", "first-day@example.com", "--kdf-iterations", "100000"],
                                        environment: device.environment)
        defer { short.end() }
        try await short.waitFor("New master password: ")
        short.type("short\r")
        #expect(try await short.exit() == 64, "\(short.text)")
        #expect(short.text.contains("at least 12 characters") && !short.text.contains("Repeat it"), "\(short.text)")

        let differ = try TerminalSession(try vaultsyncExecutable(), ["register", "first-day@example.com", "--kdf-iterations", "100000"],
                                         environment: device.environment)
        defer { differ.end() }
        try await differ.waitFor("New master password: ")
        differ.type("correct horse battery staple\r")
        try await differ.waitFor("Repeat it: ")
        differ.type("correct horse battery stapl\r")
        #expect(try await differ.exit() == 64 && differ.text.contains("the passwords differ"), "\(differ.text)")

        let piped = try await device.run(["register", "first-day@example.com", "--kdf-iterations", "100000"], stdin: "correct horse battery staple\n")
        #expect(piped.status == 0, "a piped password is not asked again: \(piped)")
    }
}

/// The shell completions and the man page, installed by the README's one command into a home of the test's own.
@Suite("Shell completions and the man page")
struct ShellSupportTests {
    @Test("scripts/install-shell-support.sh installs bash, zsh and fish completions and vaultsync.1; bash reads its script, man renders the page")
    func installs() async throws {
        let home = temporaryDirectory("vaultsync-shell-home")
        defer { try? FileManager.default.removeItem(atPath: home) }
        let executable = try vaultsyncExecutable()
        // The repository: the first folder above the build's that holds Package.swift.
        var repository = executable.deletingLastPathComponent()
        while repository.path != "/", !FileManager.default.fileExists(atPath: repository.appendingPathComponent("Package.swift").path) {
            repository = repository.deletingLastPathComponent()
        }
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = home
        environment.removeValue(forKey: "XDG_DATA_HOME")
        environment.removeValue(forKey: "XDG_CONFIG_HOME")
        let installed = try await runProcess(repository.appendingPathComponent("scripts/install-shell-support.sh"), [executable.path],
                                             environment: environment)
        #expect(installed.status == 0, "\(installed.stderr)")
        let bash = home + "/.local/share/bash-completion/completions/vaultsync"
        let script = try String(contentsOfFile: bash, encoding: .utf8)
        #expect(script.contains("complete") && script.contains("list") && script.contains("watch"), "\(script.prefix(300))")
        let checked = try await runProcess(URL(fileURLWithPath: "/bin/bash"), ["-n", bash], environment: environment)
        #expect(checked.status == 0, "bash parses it: \(checked.stderr)")
        for file in ["/.local/share/zsh/site-functions/_vaultsync", "/.config/fish/completions/vaultsync.fish"] {
            #expect((try? String(contentsOfFile: home + file, encoding: .utf8))?.contains("vaultsync") == true, "\(file)")
        }
        let page = try String(contentsOfFile: home + "/.local/share/man/man1/vaultsync.1", encoding: .utf8)
        #expect(page.hasPrefix(".TH VAULTSYNC 1") && page.contains(".SS \"vaultsync folder add\"") && page.contains("--clip"), "\(page.prefix(300))")
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/groff") || FileManager.default.isExecutableFile(atPath: "/usr/bin/nroff") {
            let rendered = try await runProcess(URL(fileURLWithPath: "/bin/sh"), ["-c", "nroff -man \"$0\" | head -20", home + "/.local/share/man/man1/vaultsync.1"],
                                                environment: environment)
            #expect(rendered.stdout.contains("vaultsync"), "\(rendered)")
        }
    }
}
