import Foundation
import Testing
import VaultModels
import VaultTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Commands run in the profile's agent when one runs: the same output and exit codes as without it
/// (`VAULTSYNC_AGENT=off`), written straight to the caller's own standard streams, with no password
/// once the agent is unlocked (docs/CLI.md, "The agent").
@Suite("vaultsync agent: commands through the agent")
struct AgentForwardingTests {
    /// A registered device with a few items and its agent running (unlocked); the agent's pid.
    static func deviceWithAgent() async throws -> (CLIScenario, CLIDevice, Int32) {
        let scenario = try await CLIScenario.start()
        let device = try await scenario.device(register: true)
        try await device.expect(["folder", "add", "Work"])
        try await device.expect(["add", "login", "--name", "Bank", "--username", "alice", "--uri", "https://bank.example.com/login",
                                 "--folder", "Work", "--password", "-"], stdin: "bank-Pa55\n")
        try await device.expect(["add", "login", "--name", "GitHub", "--username", "alice", "--password", "-"], stdin: "gh-one\n")
        try await device.expect(["add", "login", "--name", "GitHub", "--username", "bob", "--password", "-"], stdin: "gh-two\n")
        try await device.expect(["add", "note", "--name", "Recovery", "--notes", "two\nlines"])
        try await device.expect(["agent", "start"])
        let pid = try #require(try await device.json(["agent", "status"])["pid"]?.intValue.map(Int32.init))
        return (scenario, device, pid)
    }

    @Test("each command answers exactly as it does without the agent, and needs no password while the agent is unlocked")
    func sameAnswers() async throws {
        let (scenario, device, pid) = try await Self.deviceWithAgent()
        defer {
            kill(pid, SIGKILL)
            Task { await scenario.finish([device]) }
        }
        let commands: [[String]] = [
            ["list"], ["list", "--json"], ["list", "--search", "git"], ["get", "Bank", "--field", "password"], ["get", "Bank"],
            ["get", "Bank", "--json"], ["get", "GitHub"], ["get", "GitHub", "bob", "--field", "password"], ["get", "bank.example.com", "--field", "username"],
            ["get", "Nothing like it"], ["get", "Bank", "--field", "no-such-field"], ["folder", "list"], ["get"], ["list", "--frobnicate"],
        ]
        for command in commands {
            let direct = try await device.run(command, environment: ["VAULTSYNC_AGENT": "off"])
            let agent = try await device.run(command, removing: ["VAULTSYNC_PASSWORD"])
            #expect(agent.status == direct.status && agent.stdout == direct.stdout && agent.stderr == direct.stderr,
                    "\(command): through the agent\n\(agent)\nwithout it\n\(direct)")
        }
        // Without the agent and without a password the vault is locked: the answers above came from the agent.
        try await device.expect(["list"], status: 2, environment: ["VAULTSYNC_AGENT": "off"], removing: ["VAULTSYNC_PASSWORD"])
    }

    @Test("the vault's other commands run in the agent too (edits with flags, delete, restore, archive, folders, pending, conflicts, drafts, attachments), answering as they do without it")
    func moreCommands() async throws {
        let (scenario, device, pid) = try await Self.deviceWithAgent()
        defer {
            kill(pid, SIGKILL)
            Task { await scenario.finish([device]) }
        }
        let viaAgent = ["VAULTSYNC_PASSWORD"]
        // Reads and refusals: the same answers either way.
        let reads: [[String]] = [
            ["pending"], ["pending", "--json"], ["conflicts"], ["drafts"], ["attachment", "list", "Bank"], ["edit", "Nothing", "--username", "x"],
            ["delete", "Nothing"], ["folder", "rename", "Nope", "Else"], ["pending", "discard", "Bank", "--yes"], ["conflicts", "show", "nothing"],
            ["restore", "Bank"], ["attachment", "get", "Bank", "missing.txt", "--output", "-"],
        ]
        for command in reads {
            let direct = try await device.run(command, environment: ["VAULTSYNC_AGENT": "off"])
            let agent = try await device.run(command, removing: viaAgent)
            #expect(agent.status == direct.status && agent.stdout == direct.stdout && agent.stderr == direct.stderr,
                    "\(command): through the agent\n\(agent)\nwithout it\n\(direct)")
        }
        // Changes and their undoing, once through the agent and once without it: the same answers, and the
        // agent's changes are in the profile for a command without it.
        let pairs: [([String], [String])] = [
            (["archive", "Recovery"], ["unarchive", "Recovery"]),
            (["delete", "Recovery"], ["restore", "Recovery"]),
            (["folder", "add", "Home"], ["folder", "delete", "Home"]),
            (["edit", "Bank", "--username", "carol"], ["edit", "Bank", "--username", "alice"]),
        ]
        for (change, undo) in pairs {
            let agentChange = try await device.run(change, removing: viaAgent)
            let agentUndo = try await device.run(undo, removing: viaAgent)
            let directChange = try await device.run(change, environment: ["VAULTSYNC_AGENT": "off"])
            let directUndo = try await device.run(undo, environment: ["VAULTSYNC_AGENT": "off"])
            // A new folder's id is its own each time.
            func same(_ one: CLIResult, _ other: CLIResult) -> Bool {
                let id = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/
                return one.stdout.replacing(id, with: "ID") == other.stdout.replacing(id, with: "ID") && one.stderr == other.stderr
            }
            #expect(agentChange.status == 0 && same(agentChange, directChange),
                    "\(change): through the agent\n\(agentChange)\nwithout it\n\(directChange)")
            #expect(agentUndo.status == 0 && same(agentUndo, directUndo),
                    "\(undo): through the agent\n\(agentUndo)\nwithout it\n\(directUndo)")
        }
        try await device.expect(["edit", "Bank", "--username", "dave"], removing: viaAgent)
        #expect(try await device.expect(["get", "Bank", "--field", "username"], environment: ["VAULTSYNC_AGENT": "off"]).stdout == "dave\n")
        // An attachment added through the agent (the file named relative to the caller's folder) comes back whole.
        let folder = temporaryDirectory("vaultsync-agent-files")
        try Data("recovery codes\n1234-5678\n".utf8).write(to: URL(fileURLWithPath: folder + "/codes.txt"))
        let added = try await runProcess(try vaultsyncExecutable(), ["attachment", "add", "Bank", "codes.txt"],
                                         environment: device.environment.filter { $0.key != "VAULTSYNC_PASSWORD" }, folder: folder)
        #expect(added.status == 0, "\(added)")
        let fetched = try await device.expect(["attachment", "get", "Bank", "codes.txt", "--output", "-"], environment: ["VAULTSYNC_AGENT": "off"])
        #expect(fetched.stdout == "recovery codes\n1234-5678\n", "\(fetched)")
        #expect(try await device.expect(["attachment", "get", "Bank", "codes.txt", "--output", "-"], removing: viaAgent).stdout == fetched.stdout)
        // Without the agent and without a password the vault is locked: the answers above came from the agent.
        try await device.expect(["pending"], status: 2, environment: ["VAULTSYNC_AGENT": "off"], removing: viaAgent)
    }

    @Test("a change made through the agent (its secret piped to the command's own standard input) is in the profile for a command without it")
    func changesThroughTheAgent() async throws {
        let (scenario, device, pid) = try await Self.deviceWithAgent()
        defer {
            kill(pid, SIGKILL)
            Task { await scenario.finish([device]) }
        }
        let added = try await device.expect(["add", "login", "--name", "Piped", "--password", "-"], stdin: "piped-Pa55\n", removing: ["VAULTSYNC_PASSWORD"])
        #expect(added.stdout.isEmpty || !added.stdout.contains("error"), "\(added)")
        try await device.expect(["favorite", "Piped"], removing: ["VAULTSYNC_PASSWORD"])
        try await device.expect(["move", "Piped", "Work"], removing: ["VAULTSYNC_PASSWORD"])
        try await device.expect(["sync"], removing: ["VAULTSYNC_PASSWORD"])
        let shown = try #require(try await device.expect(["get", "Piped", "--json"], environment: ["VAULTSYNC_AGENT": "off"]).json().objectValue)
        #expect(shown["login"]?["password"]?.stringValue == "piped-Pa55" && shown["favorite"]?.boolValue == true, "\(shown)")
        #expect(try await device.expect(["pending"], environment: ["VAULTSYNC_AGENT": "off"]).stdout.contains("Nothing pending."))
        // A locked agent takes the password a command is given, and stays unlocked for the next.
        try await device.expect(["lock"])
        try await device.expect(["list"], status: 2, removing: ["VAULTSYNC_PASSWORD"])
        try await device.expect(["list"])
        #expect(try await device.expect(["get", "Piped", "--field", "password"], removing: ["VAULTSYNC_PASSWORD"]).stdout == "piped-Pa55\n")
    }

    @Test("at a terminal, a locked agent's password is asked in the calling terminal; a wrong one is refused there")
    func promptInTheCallingTerminal() async throws {
        let (scenario, device, pid) = try await Self.deviceWithAgent()
        defer {
            kill(pid, SIGKILL)
            Task { await scenario.finish([device]) }
        }
        try await device.expect(["lock"])
        var environment = device.environment
        environment.removeValue(forKey: "VAULTSYNC_PASSWORD")
        environment["TERM"] = "xterm"
        let wrong = try TerminalSession(try vaultsyncExecutable(), ["get", "Bank", "--field", "username"], environment: environment)
        defer { wrong.end() }
        try await wrong.waitFor("Master password: ")
        wrong.type("not it\r")
        #expect(try await wrong.exit() == 3, "\(wrong.text)")
        let right = try TerminalSession(try vaultsyncExecutable(), ["get", "Bank", "--field", "username"], environment: environment)
        defer { right.end() }
        try await right.waitFor("Master password: ")
        right.type(scenario.password + "\r")
        #expect(try await right.exit() == 0, "\(right.text)")
        #expect(right.text.contains("alice"), "\(right.text)")
        #expect(try await device.json(["agent", "status"])["locked"] == .bool(false))
    }
}
