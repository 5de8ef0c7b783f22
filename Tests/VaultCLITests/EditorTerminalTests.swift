import Foundation
import Testing
import VaultTestSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `vaultsync edit` with a full-screen editor, as a person runs it: the built executable at a terminal of
/// its own (a pseudo-terminal that is its controlling terminal), `$EDITOR` a real vi. The editor must run
/// in the terminal's foreground: started in a process group of its own, vim was stopped by the terminal
/// (SIGTTIN) on a blank screen and nothing but `kill -9` ended it (docs/CLI.md, "Editing in $EDITOR").
@Suite("vaultsync edit in a terminal")
struct EditorTerminalTests {
    /// vi from Debian's vim-tiny (scripts/setup.sh installs it for the tests), else the machine's vi.
    static let vi: String? = ["/usr/bin/vim.tiny", "/usr/bin/vi", "/usr/bin/vim"].first { FileManager.default.isExecutableFile(atPath: $0) }

    /// A registered device holding the login "Bank" (username alice, password bank-Pa55).
    static func deviceWithBank() async throws -> (CLIScenario, CLIDevice) {
        let scenario = try await CLIScenario.start()
        let device = try await scenario.device(register: true)
        try await device.expect(["add", "login", "--name", "Bank", "--username", "alice", "--password", "-"], stdin: "bank-Pa55\n")
        return (scenario, device)
    }

    static func terminalEnvironment(_ device: CLIDevice, editor: String) -> [String: String] {
        var environment = device.environment
        environment["EDITOR"] = editor
        environment.removeValue(forKey: "VISUAL")
        environment["TERM"] = "xterm"
        return environment
    }

    @Test("vi as $EDITOR at a terminal: it draws the item, a field is changed and written with :wq, and the edit is saved")
    func viEditsAField() async throws {
        let vi = try #require(Self.vi, "no vi on this machine (scripts/setup.sh test installs vim-tiny)")
        let (scenario, device) = try await Self.deviceWithBank()
        defer { Task { await scenario.finish([device]) } }

        let edit = try TerminalSession(try vaultsyncExecutable(), ["edit", "Bank"], environment: Self.terminalEnvironment(device, editor: vi))
        defer { edit.end() }
        try await edit.waitFor("bank-Pa55")
        edit.type(":%s/bank-Pa55/typed-in-vi/\r")
        edit.type(":wq\r")
        let status = try await edit.exit()
        #expect(status == 0, "\(edit.text)")
        #expect(try await device.expect(["get", "Bank", "--field", "password"]).stdout == "typed-in-vi\n")
        #expect(try await device.expect(["get", "Bank", "--field", "username"]).stdout == "alice\n", "the other fields are as they were")
    }

    @Test("Ctrl-C reaches vi (it answers with its own hint) and vaultsync waits; :qa! then leaves the item unchanged")
    func controlCReachesVi() async throws {
        let vi = try #require(Self.vi, "no vi on this machine (scripts/setup.sh test installs vim-tiny)")
        let (scenario, device) = try await Self.deviceWithBank()
        defer { Task { await scenario.finish([device]) } }

        let edit = try TerminalSession(try vaultsyncExecutable(), ["edit", "Bank"], environment: Self.terminalEnvironment(device, editor: vi))
        defer { edit.end() }
        try await edit.waitFor("bank-Pa55")
        edit.type(":%s/bank-Pa55/never-written/\r")
        // The buffer holds the change before the Ctrl-C (vim's interrupt flushes keys not read yet): the
        // line is drawn again with it, the value's closing quote after it (the command line's echo has a slash).
        try await edit.waitFor("never-written\"")
        let shown = edit.text.count
        edit.type("\u{03}")
        // vim's answer to a Ctrl-C in normal mode, with changes in the buffer.
        try await edit.waitFor(":qa!", after: shown)
        edit.type(":qa!\r")
        let status = try await edit.exit()
        #expect(status == 0, "abandoned in the editor: the item as it was, which is no change: \(edit.text)")
        #expect(try await device.expect(["get", "Bank", "--field", "password"]).stdout == "bank-Pa55\n")
    }

    @Test("Ctrl-C ends a script editor that has already written its change: nothing is saved, and the message names SIGINT")
    func controlCEndsScriptEditor() async throws {
        let (scenario, device) = try await Self.deviceWithBank()
        defer { Task { await scenario.finish([device]) } }
        let script = (device.home as NSString).deletingLastPathComponent + "/writing-editor"
        // Writes the change at once, says so, and waits (for the Ctrl-C).
        try Data(#"""
            #!/bin/sh
            sed -i 's/bank-Pa55/written-then-interrupted/' "$1"
            echo "editor: written, waiting"
            exec sleep 600
            """#.utf8).write(to: URL(fileURLWithPath: script))
        chmod(script, 0o700)

        let edit = try TerminalSession(try vaultsyncExecutable(), ["edit", "Bank"], environment: Self.terminalEnvironment(device, editor: script))
        defer { edit.end() }
        try await edit.waitFor("editor: written, waiting")
        edit.type("\u{03}")
        let status = try await edit.exit()
        #expect(status != 0, "\(edit.text)")
        #expect(edit.text.contains("the editor was ended by SIGINT; nothing was saved"), "\(edit.text)")
        #expect(try await device.expect(["get", "Bank", "--field", "password"]).stdout == "bank-Pa55\n")
        #if os(Linux)
        let left = try FileManager.default.contentsOfDirectory(atPath: "/dev/shm").filter { Self.holds($0, "written-then-interrupted") }
        #expect(left.isEmpty, "the decrypted file is removed: \(left)")
        #endif
    }

    static func holds(_ name: String, _ text: String) -> Bool {
        (try? String(contentsOfFile: "/dev/shm/" + name, encoding: .utf8))?.contains(text) == true
    }
}
