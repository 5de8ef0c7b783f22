import AgentLink
import ArgumentParser
import Foundation
import Logging
import VaultAgent
import VaultClient
import VaultModels
import VaultSyncCore

/// `vaultsync agent`: a background process per profile that stays unlocked and keeps the device live
/// (docs/CLI.md, "The agent").
struct AgentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "agent",
        abstract: "Run a background agent for this profile: unlocked once, live sync while it runs.",
        discussion: """
        The agent holds the unlocked vault in memory (never on disk), keeps this device live (changes from other devices arrive as they happen, queued changes leave as soon as the server answers), and locks after `config lock-timeout` seconds without a request, on `vaultsync lock`, and on SIGHUP. It listens on a Unix socket only this user can reach.

        Examples:
          vaultsync agent start
          vaultsync agent status
          vaultsync agent stop
          vaultsync agent run      # in the foreground, for a service manager
        """,
        subcommands: [AgentStartCommand.self, AgentStopCommand.self, AgentStatusCommand.self, AgentRunCommand.self])
}

/// The requests a command sends the agent (JSON objects, one per frame) and how it asks.
enum AgentRequests {
    static func socketPath(_ context: CLIContext) -> String {
        AgentLocation.socketPath(profileDirectory: context.profile.directory, environment: context.environment)
    }

    /// Sends `{"op": op, …fields}` and returns the answer; `nil` when no agent runs for the profile.
    static func ask(_ op: String, _ context: CLIContext, fields: JSONObject = [:], timeout: Duration = .seconds(30)) throws -> JSONObject? {
        var object = fields
        object["op"] = .string(op)
        let request = JSONValue.object(object).serialized()
        let answer: [UInt8]
        do {
            answer = try AgentSocketClient.exchange(path: socketPath(context), request: request, timeout: timeout)
        } catch .notRunning {
            return nil
        } catch {
            throw CLIError.stated(error.errorDescription ?? "\(error)", .failure)
        }
        guard let object = try? JSONParser.parseObject(answer) else {
            throw CLIError.stated("The agent answered something that is not JSON.", .failure)
        }
        if let code = object["error"]?.stringValue {
            throw CLIError.stated("The agent refused the request (\(code)): \(object["message"]?.stringValue ?? "").", .failure)
        }
        return object
    }
}

/// `vaultsync agent run`: the agent itself, in the foreground until SIGINT, SIGTERM or `agent stop`.
struct AgentRunCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the agent in the foreground (for systemd or launchd); stop it with Ctrl-C, SIGTERM or `vaultsync agent stop`.",
        discussion: "Example:\n  vaultsync agent run")
    static var needsUnlock: Bool { false }
    @OptionGroup var global: GlobalOptions
    /// How `agent start` hands its child the password it asked for: on standard input, never in the
    /// arguments or the environment, which other processes of the user can read.
    @Flag(name: .customLong("password-stdin"), help: .hidden) var passwordStdin = false

    func execute(_ context: CLIContext) async throws {
        _ = try context.requireServer()
        let email = try context.requireEmail()
        // Before a key exists in this process.
        AgentHardening.apply()
        let memoryLocked = AgentHardening.lockMemory()
        if passwordStdin {
            guard let password = readLine(strippingNewline: true), !password.isEmpty else { throw CLIError.locked }
            try await context.unlockLocally(email: email, password: password)
        } else if context.canUnlock {
            try await context.unlock()
        } else {
            // Started by a service manager: no terminal to ask on. It runs locked until `vaultsync unlock`.
            Console.note("no master password given: the agent starts locked; `vaultsync unlock` unlocks it")
        }
        let engine = context.engine
        await engine.keepNameIndexInMemory(true)
        let lockTimeout = context.settings.lockTimeout ?? ProfileSettings.defaultLockTimeout
        let state = AgentState(engine: engine, email: email, lockTimeout: .seconds(lockTimeout), memoryLocked: memoryLocked)
        let stop = StopSignals(signals: [SIGINT, SIGTERM])
        stop.keepWaiting()
        signal(SIGHUP, SIG_IGN)
        // A client's pipe closed early is an error on that write, never the agent's end.
        signal(SIGPIPE, SIG_IGN)
        let hangup = DispatchSource.makeSignalSource(signal: SIGHUP, queue: .global())
        hangup.setEventHandler { Task { await state.lock(reason: "SIGHUP") } }
        hangup.resume()
        var logger = Logger(label: "vaultsync.agent")
        logger.logLevel = .info
        let path = AgentRequests.socketPath(context)
        let server = AgentSocketServer(path: path, logger: logger) { request, _, descriptors in await state.answer(request, descriptors: descriptors) }
        do {
            try server.start()
        } catch {
            throw CLIError.stated(error.errorDescription ?? "\(error)", .failure)
        }
        let liveStateFile = LiveStateFile(profileDatabase: engine.localStore.path, program: "agent")
        let events = await engine.liveEvents()
        let reporter = Task {
            // What needs the person is announced when it changes: conflicts to review, changes the server
            // refused. By count and command only: the log is a file, and item names are the vault's secrets.
            var announced = (conflicts: 0, attention: 0)
            for await event in events {
                if case .state(let live) = event { liveStateFile.write(live) }
                if case .synced(let sent, let pending, let messages) = event {
                    if sent > 0 || pending > 0 || !messages.isEmpty {
                        logger.info("synced", metadata: ["sent": "\(sent)", "pending": "\(pending)", "messages": "\(messages.count)"])
                    }
                    if let status = try? await engine.status() {
                        if status.unreviewedConflicts != announced.conflicts, status.unreviewedConflicts > 0 {
                            logger.notice("conflicts to review: `vaultsync conflicts`", metadata: ["conflicts": "\(status.unreviewedConflicts)"])
                        }
                        if status.needsAttentionCount != announced.attention, status.needsAttentionCount > 0 {
                            logger.notice("changes the server refused need attention: `vaultsync pending`",
                                          metadata: ["needsAttention": "\(status.needsAttentionCount)"])
                        }
                        announced = (status.unreviewedConflicts, status.needsAttentionCount)
                    }
                }
                if case .itemKeptForResolution(let id) = event {
                    logger.info("an item changed elsewhere while this device's change waits; the next sync resolves the two", metadata: ["item": "\(id)"])
                }
                if event == .loggedOut { await state.requestStop() }
            }
        }
        if !((try? await engine.status().locked) ?? true) { await engine.startLiveSync() }
        Console.note("agent for \(context.profile.directory) listening on \(path) (pid \(getpid()))")
        fflush(nil)
        let idle = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(1))
                await state.lockIfIdle()
            }
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await stop.waitForSignal() }
            group.addTask { await state.waitForStopRequest() }
            await group.next()
            await state.requestStop()
            stop.release()
            group.cancelAll()
        }
        idle.cancel()
        hangup.cancel()
        server.stop()
        await engine.stopLiveSync()
        reporter.cancel()
        liveStateFile.write(nil)
        Console.note("agent stopped")
    }
}

/// What the agent holds between requests: the engine, when it was last used, and whether it was asked to stop.
actor AgentState {
    let engine: VaultEngine
    let email: String
    let lockTimeout: Duration
    private var lastUse = ContinuousClock.now
    private var stopRequested = false
    private var stopWaiters: [CheckedContinuation<Void, Never>] = []

    /// Whether the agent's memory is locked out of swap (``AgentHardening/lockMemory()``).
    let memoryLocked: Bool

    init(engine: VaultEngine, email: String, lockTimeout: Duration, memoryLocked: Bool) {
        self.memoryLocked = memoryLocked
        self.engine = engine
        self.email = email
        self.lockTimeout = lockTimeout
    }

    /// One request: `status`, `unlock` (with the master password, which a command asked for in its
    /// terminal; the keys themselves never leave the agent), `lock` or `stop`. What needs no key is
    /// answered locked too.
    func answer(_ request: [UInt8], descriptors: [Int32] = []) async -> [UInt8] {
        guard let object = try? JSONParser.parseObject(request), let op = object["op"]?.stringValue else {
            return Self.error("malformed", "A request is a JSON object with an \"op\".")
        }
        lastUse = ContinuousClock.now
        switch op {
        case "status":
            var answer: JSONObject = ["ok": .bool(true), "pid": .int(Int(getpid()))]
            let status = try? await engine.status()
            answer["locked"] = .bool(status?.locked ?? true)
            answer["pending"] = status.map { .int($0.pendingCount) } ?? .null
            answer["needsAttention"] = status.map { .int($0.needsAttentionCount) } ?? .null
            answer["conflicts"] = status.map { .int($0.unreviewedConflicts) } ?? .null
            answer["live"] = await engine.liveSyncState.map { .string($0.rawValue) } ?? .null
            answer["memoryLocked"] = .bool(memoryLocked)
            return JSONValue.object(answer).serialized()
        case "unlock":
            guard let password = object["password"]?.stringValue, !password.isEmpty else {
                return Self.error("malformed", "An unlock request carries the master password.")
            }
            do {
                try await engine.unlock(email: email, password: password)
            } catch VaultError.wrongPassword {
                return Self.error("wrongPassword", "The master password is not correct.")
            } catch {
                return Self.error("unlockFailed", "The vault could not be unlocked here.")
            }
            await engine.startLiveSync()
            Console.note("agent unlocked")
            fflush(nil)
            return JSONValue.object(["ok": .bool(true)]).serialized()
        case "run":
            // A command, run here with the client's standard streams (passed with the request).
            guard case .array(let given)? = object["arguments"], case .object(let environment)? = object["environment"],
                  let folder = object["folder"]?.stringValue, descriptors.count == 3 else {
                return Self.error("malformed", "A run request carries the arguments, the environment, the folder and three descriptors.")
            }
            let arguments = given.compactMap(\.stringValue)
            // `decline`: the command line's front asks; a command that would not run here is answered
            // `declined`, untouched, and the front runs it in the calling process.
            let declining = object["decline"] == .bool(true)
            let status = await AgentCommandRunner.run(arguments: arguments, environment: Dictionary(environment.compactMap { entry in entry.value.stringValue.map { (entry.key, $0) } }) { first, _ in first },
                                                      folder: folder, descriptors: descriptors, engine: engine, declining: declining)
            guard let status else { return JSONValue.object(["declined": .bool(true)]).serialized() }
            lastUse = ContinuousClock.now
            // A command that unlocked the vault (a password it was given) leaves the agent unlocked and live.
            if !(await engine.isLocked) { await engine.startLiveSync() }
            return JSONValue.object(["exit": .int(Int(status))]).serialized()
        case "lock":
            await lock(reason: "vaultsync lock")
            return JSONValue.object(["ok": .bool(true)]).serialized()
        case "stop":
            requestStop()
            return JSONValue.object(["ok": .bool(true)]).serialized()
        default:
            return Self.error("unknownRequest", "The agent does not know that request.")
        }
    }

    /// Locks the vault: live sync stops and the keys are dropped from the engine.
    func lock(reason: String) async {
        guard !((try? await engine.status().locked) ?? true) else { return }
        await engine.stopLiveSync()
        await engine.lock()
        Console.note("agent locked (\(reason))")
        fflush(nil)
    }

    /// Locks after ``lockTimeout`` without a request.
    func lockIfIdle() async {
        guard ContinuousClock.now - lastUse >= lockTimeout else { return }
        await lock(reason: "no request for \(lockTimeout)")
    }

    func requestStop() {
        stopRequested = true
        let waiters = stopWaiters
        stopWaiters = []
        for waiter in waiters { waiter.resume() }
    }

    func waitForStopRequest() async {
        if stopRequested { return }
        await withCheckedContinuation { stopWaiters.append($0) }
    }

    static func error(_ code: String, _ message: String) -> [UInt8] {
        JSONValue.object(["error": .string(code), "message": .string(message)]).serialized()
    }
}

/// `vaultsync agent start`: asks for the password here, checks it, and starts `agent run` detached.
struct AgentStartCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        commandName: "start",
        abstract: "Start the agent in the background (the password is asked here, once).",
        discussion: "Example:\n  vaultsync agent start")
    static var needsUnlock: Bool { false }
    @OptionGroup var global: GlobalOptions

    func execute(_ context: CLIContext) async throws {
        _ = try context.requireServer()
        let email = try context.requireEmail()
        if let running = try AgentRequests.ask("status", context) {
            print("The agent already runs (pid \(running["pid"]?.intValue ?? 0)).")
            return
        }
        guard let password = try context.masterPassword() else { throw CLIError.locked }
        // A wrong password is told here, in this terminal, not in the agent's log.
        try await context.unlockLocally(email: email, password: password)
        await context.engine.lock()
        let child = try await Self.launch(context, password: password)
        print("Agent started (pid \(child)): this device stays unlocked and live; it locks after "
              + "\(context.settings.lockTimeout ?? ProfileSettings.defaultLockTimeout) s without use. Stop it with `vaultsync agent stop`.")
    }

    /// Starts `agent run` detached with a password already checked, and waits until it answers; its process id.
    static func launch(_ context: CLIContext, password: String) async throws -> pid_t {
        let path = AgentRequests.socketPath(context)
        var environment = context.environment
        for secret in ["VAULTSYNC_PASSWORD", "VAULTSYNC_SESSION"] { environment.removeValue(forKey: secret) }
        let log = context.profile.directory + "/agent.log"
        let child = try DetachedProcess.start(executable: DetachedProcess.currentExecutable(), arguments: ["agent", "run", "--password-stdin"],
                                              environment: environment, standardInput: password + "\n", logPath: log)
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if (try? AgentSocketClient.connectable(path)) == true { return child }
            if let status = DetachedProcess.exitStatus(child) {
                let tail = (try? String(contentsOfFile: log, encoding: .utf8))?.split(separator: "\n").suffix(3).joined(separator: "\n") ?? ""
                throw CLIError.stated("The agent stopped at once (exit \(status)):\n\(tail)", .failure)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw CLIError.stated("The agent did not start listening within 60 s (see \(log)).", .failure)
    }
}

/// `vaultsync agent stop`.
struct AgentStopCommand: VaultCommand {
    static let configuration = CommandConfiguration(commandName: "stop", abstract: "Stop this profile's agent.",
                                                    discussion: "Example:\n  vaultsync agent stop")
    static var needsUnlock: Bool { false }
    @OptionGroup var global: GlobalOptions

    func execute(_ context: CLIContext) async throws {
        guard try AgentRequests.ask("stop", context) != nil else {
            print("No agent runs for this profile.")
            return
        }
        let path = AgentRequests.socketPath(context)
        let deadline = ContinuousClock.now + .seconds(30)
        while (try? AgentSocketClient.connectable(path)) == true {
            guard ContinuousClock.now < deadline else { throw CLIError.stated("The agent did not stop within 30 s.", .failure) }
            try await Task.sleep(for: .milliseconds(20))
        }
        print("Agent stopped.")
    }
}

/// `vaultsync agent status`.
struct AgentStatusCommand: VaultCommand {
    static let configuration = CommandConfiguration(commandName: "status", abstract: "Whether this profile's agent runs, and its state.",
                                                    discussion: "Examples:\n  vaultsync agent status\n  vaultsync agent status --json")
    static var needsUnlock: Bool { false }
    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions

    func execute(_ context: CLIContext) async throws {
        let answer = try AgentRequests.ask("status", context)
        if output.json {
            var object: JSONObject = ["running": .bool(answer != nil)]
            if let answer {
                for key in ["pid", "locked", "live", "pending", "needsAttention", "conflicts", "memoryLocked"] { object[key] = answer[key] ?? .null }
            }
            return Presentation.printJSON(.object(object))
        }
        guard let answer else {
            print("agent           not running (`vaultsync agent start` starts it)")
            return
        }
        print("agent           running (pid \(answer["pid"]?.intValue ?? 0))")
        print("vault           \(answer["locked"]?.boolValue == false ? "unlocked" : "locked")")
        print("live sync       \(answer["live"]?.stringValue ?? "not running")")
        if let pending = answer["pending"]?.intValue { print("pending         \(pending)") }
        if let attention = answer["needsAttention"]?.intValue, attention > 0 { print("needs attention \(attention) (vaultsync pending)") }
        if let conflicts = answer["conflicts"]?.intValue, conflicts > 0 { print("conflicts       \(conflicts) to review (vaultsync conflicts)") }
        if answer["memoryLocked"] == .bool(false) { print("memory          may reach swap (mlockall needs RLIMIT_MEMLOCK unlimited; docs/CLI.md, \"The agent\")") }
    }
}

extension AgentStartCommand {
    /// After a command that checked `password` (unlock, login): a running agent that is locked is
    /// unlocked with it, and with `startingOne` (`config agent on`) an agent starts when none runs. A
    /// failure is said and changes nothing of the command's own outcome.
    static func handOver(_ context: CLIContext, password: String, startingOne: Bool) async {
        do {
            if let running = try AgentRequests.ask("status", context) {
                if running["locked"] == .bool(true) {
                    _ = try AgentRequests.ask("unlock", context, fields: ["password": .string(password)])
                    Console.note("the agent is unlocked too")
                }
            } else if startingOne {
                let pid = try await launch(context, password: password)
                Console.note("agent started (pid \(pid); `config agent on`)")
            }
        } catch {
            Console.note("the agent could not take the password: \(describe(error).message)")
        }
    }
}
