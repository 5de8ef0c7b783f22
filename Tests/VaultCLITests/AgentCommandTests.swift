import Foundation
import Testing
import VaultModels
import VaultTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `vaultsync agent` through the built executable, against a real server (docs/CLI.md, "The agent").
@Suite("vaultsync agent")
struct AgentCommandTests {
    @Test("agent start asks once and detaches: unlocked and live in the background, no secret in its arguments or environment; SIGHUP locks it; stop ends it")
    func startLiveHangupStop() async throws {
        let scenario = try await CLIScenario.start()
        let a = try await scenario.device(register: true)
        let b = try await scenario.device()
        defer { Task { await scenario.finish([a, b]) } }
        let started = try await b.expect(["agent", "start"])
        #expect(started.stdout.contains("Agent started"), "\(started)")
        let pid = try #require(try await Self.status(b)["pid"]?.intValue.map(Int32.init))
        defer { kill(pid, SIGKILL) }
        #expect(await waitUntil { (try? await Self.status(b)["live"]) == .string("live") }, "the agent's live sync connects")
        #expect(try await Self.status(b)["locked"] == .bool(false))

        let arguments = try String(decoding: Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline")), as: UTF8.self)
        let environment = try String(decoding: Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/environ")), as: UTF8.self)
        #expect(!arguments.contains(scenario.password) && !environment.contains(scenario.password), "no password in /proc/\(pid)")
        #expect(!environment.contains("VAULTSYNC_SESSION="), "no session key either")
        // Its memory is kept out of swap where no limit stops it (as root, which these tests often run as).
        let procStatus = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let lockedKiB = procStatus.split(separator: "\n").first { $0.hasPrefix("VmLck:") }
            .flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
        let reported = try await Self.status(b)["memoryLocked"]
        if geteuid() == 0 {
            #expect(reported == .bool(true) && lockedKiB > 0, "VmLck \(lockedKiB) kB; the agent says \(String(describing: reported))")
        } else {
            #expect(reported == .bool(lockedKiB > 0), "VmLck \(lockedKiB) kB; the agent says \(String(describing: reported))")
        }

        // Another device's change reaches this profile's store while nothing but the agent runs here.
        try await a.expect(["add", "login", "--name", "Through the agent", "--username", "alice"])
        // (`list` reads the local copy and asks the server nothing.)
        #expect(await waitUntil {
            (try? await b.json(["list"])).flatMap { itemID($0, named: "Through the agent") } != nil
        }, "the agent stored it")
        let status = try await b.expect(["status"])
        #expect(status.stdout.contains("live sync       live (vaultsync agent, pid \(pid))"), "\(status)")

        kill(pid, SIGHUP)
        #expect(await waitUntil { (try? await Self.status(b)["locked"]) == .bool(true) }, "SIGHUP locks the agent")
        let stopped = try await b.expect(["agent", "stop"])
        #expect(stopped.stdout.contains("Agent stopped."), "\(stopped)")
        #expect(try await Self.status(b)["running"] == .bool(false))
        #expect(await waitUntil { kill(pid, 0) != 0 }, "the process has ended")
    }

    @Test("a wrong password is told by agent start in the calling terminal (exit 3) and no agent is left running")
    func wrongPassword() async throws {
        let scenario = try await CLIScenario.start()
        let a = try await scenario.device(register: true)
        defer { Task { await scenario.finish([a]) } }
        let refused = try await a.expect(["agent", "start"], status: 3, environment: ["VAULTSYNC_PASSWORD": "not the password"])
        #expect(refused.stderr.lowercased().contains("password"), "\(refused)")
        #expect(try await Self.status(a)["running"] == .bool(false))
        #expect(try await a.expect(["agent", "stop"]).stdout.contains("No agent runs for this profile."))
    }

    @Test("vaultsync lock locks a running agent too; two profiles have an agent each")
    func lockAndTwoProfiles() async throws {
        let scenario = try await CLIScenario.start()
        let a = try await scenario.device(register: true)
        let b = try await scenario.device()
        defer { Task { await scenario.finish([a, b]) } }
        try await a.expect(["agent", "start"])
        try await b.expect(["agent", "start"])
        let pids = [try await Self.status(a)["pid"], try await Self.status(b)["pid"]]
        #expect(pids[0] != nil && pids[0] != pids[1], "each profile has its own agent: \(pids)")
        try await a.expect(["lock"])
        #expect(try await Self.status(a)["locked"] == .bool(true))
        #expect(try await Self.status(b)["locked"] == .bool(false), "the other profile's agent is untouched")
        try await a.expect(["agent", "stop"])
        try await b.expect(["agent", "stop"])
    }

    @Test("agent run under a service manager (no terminal, no password) starts locked; vaultsync unlock unlocks it and it goes live")
    func serviceStartsLocked() async throws {
        let scenario = try await CLIScenario.start()
        let a = try await scenario.device(register: true)
        defer { Task { await scenario.finish([a]) } }
        var environment = a.environment
        environment.removeValue(forKey: "VAULTSYNC_PASSWORD")
        let agent = KillableChild(executable: try vaultsyncExecutable(), arguments: ["agent", "run"], environment: environment,
                                  replacingEnvironment: true, collectingStandardError: true)
        try agent.run()
        defer { _ = agent.killAndCollect() }
        try await agent.wait(for: "listening on")
        #expect(agent.output.text.contains("the agent starts locked"), "\(agent.output.text)")
        #expect(try await Self.status(a)["locked"] == .bool(true))

        let unlocked = try await a.expect(["unlock", "--raw"])
        #expect(unlocked.stderr.contains("the agent is unlocked too"), "\(unlocked)")
        #expect(!unlocked.stdout.contains("agent"), "standard output is the session key alone")
        #expect(await waitUntil { (try? await Self.status(a)["live"]) == .string("live") }, "unlocked, it goes live")
        try await a.expect(["agent", "stop"])
        #expect(await waitUntil { !agent.isRunning })
    }

    @Test("config agent on: unlock starts the agent when none runs, and its output is still the session line alone")
    func configAgentOn() async throws {
        let scenario = try await CLIScenario.start()
        let a = try await scenario.device(register: true)
        defer { Task { await scenario.finish([a]) } }
        try await a.expect(["config", "agent", "on"])
        #expect(try await a.json(["config", "show"])["agent"] == .bool(true))
        let unlocked = try await a.expect(["unlock", "--raw"])
        #expect(unlocked.stderr.contains("agent started"), "\(unlocked)")
        #expect(unlocked.stdout.split(separator: "\n").count == 1, "only the session key on standard output: \(unlocked)")
        #expect(try await Self.status(a)["locked"] == .bool(false))
        try await a.expect(["agent", "stop"])
        try await a.expect(["config", "agent", "off"])
        try await a.expect(["unlock", "--raw"])
        #expect(try await Self.status(a)["running"] == .bool(false), "off: unlock leaves the agent alone")
        let refused = try await a.expect(["config", "agent", "maybe"], status: 64)
        #expect(refused.stderr.contains("say on or off"), "\(refused)")
    }

    static func status(_ device: CLIDevice) async throws -> JSONObject {
        try #require(try await device.json(["agent", "status"]).objectValue)
    }
}
