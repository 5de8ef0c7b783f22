import Foundation
import Testing
import VaultTestSupport

/// A copied profile folder holds its original's device identifier and sessions; `vaultsync` notices the
/// copy (the folder it was made in still holds a profile with that identifier) and asks at a terminal
/// whether it should become a device of its own. A moved folder is only recorded.
@Suite("CLI: a copied profile")
struct ProfileCopyTests {
    static func realPath(_ path: String) -> String {
        URL(fileURLWithPath: path).resolvingSymlinksInPath().standardizedFileURL.path
    }

    /// A registered device with one item, and a copy of its profile folder beside it.
    static func deviceAndCopy() async throws -> (CLIScenario, CLIDevice, CLIDevice) {
        let scenario = try await CLIScenario.start()
        let original = try await scenario.device(register: true)
        try await original.expect(["add", "login", "--name", "Bank", "--username", "alice", "--password", "-"], stdin: "bank-Pa55\n")
        let copyHome = temporaryDirectory("vaultsync-copy") + "/profile"
        try FileManager.default.copyItem(atPath: original.home, toPath: copyHome)
        return (scenario, original, CLIDevice(home: copyHome, password: scenario.password))
    }

    @Test("at a terminal a copy is asked; yes makes it a new device that needs a login, keeps its vault, and is not asked again")
    func copyBecomesNewDevice() async throws {
        let (scenario, original, copy) = try await Self.deviceAndCopy()
        defer { Task { await scenario.finish([original, copy]) } }

        var environment = copy.environment
        environment["TERM"] = "xterm"
        let status = try TerminalSession(try vaultsyncExecutable(), ["status"], environment: environment)
        defer { status.end() }
        try await status.waitFor("[y/N]")
        #expect(status.text.contains("This profile is a copy of the one in \(Self.realPath(original.home))"), "\(status.text)")
        status.type("y\r")
        try await status.waitFor("now a device of its own")
        #expect(try await status.exit() == 0, "\(status.text)")

        // Its sessions ended with the old identifier; the vault is still here, and readable with the password.
        #expect(try await copy.expect(["get", "Bank", "--field", "username"]).stdout == "alice\n")
        let sync = try await copy.expect(["sync"], status: 3)
        #expect(sync.stderr.contains("not logged in"), "\(sync)")
        // A change made before the login is kept and leaves after it.
        try await copy.expect(["add", "note", "--name", "Before the login", "--notes", "x"])
        try await copy.expect(["login", scenario.email])
        try await copy.expect(["sync"])
        let listed = try await copy.expect(["list"])
        #expect(!listed.stderr.contains("copy"), "asked once: \(listed.stderr)")
        // Both devices work side by side: the original's sign-in was not ended by the copy's.
        try await copy.expect(["add", "login", "--name", "From the copy", "--password", "-"], stdin: "c0py-Pa55\n")
        try await original.expect(["sync"])
        #expect(try await original.expect(["get", "From the copy", "--field", "password"]).stdout == "c0py-Pa55\n")
        #expect(try await original.expect(["get", "Before the login", "--field", "notes"]).stdout == "x\n")
    }

    @Test("no at the terminal keeps the copy as the same device and stops the question; piped, a command warns and works")
    func copyKeptOrWarned() async throws {
        let (scenario, original, copy) = try await Self.deviceAndCopy()
        defer { Task { await scenario.finish([original, copy]) } }

        let piped = try await copy.expect(["get", "Bank", "--field", "username"])
        #expect(piped.stdout == "alice\n")
        #expect(piped.stderr.contains("is a copy of the one in \(Self.realPath(original.home))")
                && piped.stderr.contains("vaultsync config device new"), "\(piped.stderr)")

        var environment = copy.environment
        environment["TERM"] = "xterm"
        let asked = try TerminalSession(try vaultsyncExecutable(), ["status"], environment: environment)
        defer { asked.end() }
        try await asked.waitFor("[y/N]")
        asked.type("n\r")
        try await asked.waitFor("not asked again")
        #expect(try await asked.exit() == 0, "\(asked.text)")
        #expect(!(try await copy.expect(["list"]).stderr.contains("copy")))
        // Kept on purpose, it still works as the same device.
        try await copy.expect(["sync"])
    }

    @Test("a moved profile folder is recorded in its new place, with no question and no warning; config device new works piped")
    func movedIsNotACopy() async throws {
        let scenario = try await CLIScenario.start()
        let original = try await scenario.device(register: true)
        try await original.expect(["add", "note", "--name", "Moved", "--notes", "x"])
        let newHome = temporaryDirectory("vaultsync-moved") + "/profile"
        try FileManager.default.moveItem(atPath: original.home, toPath: newHome)
        let moved = CLIDevice(home: newHome, password: scenario.password)
        defer { Task { await scenario.finish([moved]) } }
        let listed = try await moved.expect(["list"])
        #expect(listed.stdout.contains("Moved") && !listed.stderr.contains("copy"), "\(listed)")
        try await moved.expect(["sync"])

        let renewed = try await moved.expect(["config", "device", "new"])
        #expect(renewed.stderr.contains("now a device of its own"), "\(renewed)")
        try await moved.expect(["sync"], status: 3)
        try await moved.expect(["config", "device", "other"], status: 64)
    }
}
