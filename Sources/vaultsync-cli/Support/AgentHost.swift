import AgentLink
import ArgumentParser
import CommandLineSupport
import Foundation
import VaultAgent
import VaultClient
import VaultModels

/// A command the agent runs for a client: the agent's engine (unlocked once, live in the background)
/// and the client's environment. Set only inside ``AgentCommandRunner``; everywhere else a command
/// runs in its own process with its own engine.
struct AgentHost: Sendable {
    let engine: VaultEngine
    let environment: [String: String]
    /// The client's arguments, after the executable's name.
    let arguments: [String]
    /// A master password piped to this command (read once per command).
    let pipedPassword = CLIContext.KeptPassword()

    @TaskLocal static var current: AgentHost?

    /// The environment the running command sees: the client's when the agent runs it.
    static var environment: [String: String] { current?.environment ?? ProcessInfo.processInfo.environment }

    /// The running command's arguments, after the executable's name.
    static var arguments: [String] { current?.arguments ?? BWSurface.commandArguments() }
}

/// The command's side: a command that can run in the agent is sent there when the profile's agent
/// runs (and `VAULTSYNC_AGENT` is not `off`), with this process's standard input, output and error
/// passed over the socket (SCM_RIGHTS), so the agent writes to this terminal or pipe exactly as the
/// command would, and this process ends with the agent's exit status. The master password, when the
/// agent is locked, is asked here, in the calling terminal, and only the password crosses the socket.
enum AgentForwarding {
    /// The exit status of the command as the agent ran it; `nil` when it is to run here.
    static func forward(needsUnlock: Bool, options: GlobalOptions) async throws -> Int32? {
        let environment = ProcessInfo.processInfo.environment
        guard AgentHost.current == nil, environment["VAULTSYNC_AGENT"]?.lowercased() != "off" else { return nil }
        let profile = Profile.resolve(environment: environment)
        let path = AgentLocation.socketPath(profileDirectory: profile.directory, environment: environment)
        // No socket file, no agent: the common case costs one stat.
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        do {
            if needsUnlock { try await unlockAgentIfLocked(path: path, profile: profile, options: options, environment: environment) }
            let request: JSONObject = [
                "op": .string("run"),
                "arguments": .array(BWSurface.commandArguments().map(JSONValue.string)),
                "environment": .object(JSONObject(entries: environment.sorted { $0.key < $1.key }.map { JSONObject.Entry(key: $0.key, value: .string($0.value)) })),
                "folder": .string(FileManager.default.currentDirectoryPath),
            ]
            let answer = try AgentSocketClient.exchange(path: path, request: JSONValue.object(request).serialized(),
                                                        descriptors: [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO], timeout: nil)
            guard let object = try? JSONParser.parseObject(answer), let status = object["exit"]?.intValue else {
                throw CLIError.stated("The agent answered something that is not a command's outcome.", .failure)
            }
            return Int32(status)
        } catch AgentSocketError.notRunning {
            return nil
        }
    }

    /// A locked agent is unlocked first when this command would ask for the password: the prompt is this
    /// terminal's. A password given otherwise (a file, `VAULTSYNC_PASSWORD`, a session) goes with the
    /// command, which unlocks the agent as it would unlock this process.
    static func unlockAgentIfLocked(path: String, profile: Profile, options: GlobalOptions,
                                    environment: [String: String]) async throws {
        let given = options.passwordFile != nil || environment["VAULTSYNC_PASSWORD"].map({ !$0.isEmpty }) == true
            || environment["VAULTSYNC_SESSION"].map({ !$0.isEmpty }) == true
        guard !given, Console.stdinIsTTY else { return }
        let status = try AgentSocketClient.exchange(path: path, request: JSONValue.object(["op": .string("status")]).serialized())
        guard (try? JSONParser.parseObject(status))?["locked"] == .bool(true) else { return }
        guard let password = Console.readSecret(prompt: "Master password: "), !password.isEmpty else { throw CLIError.locked }
        let answer = try AgentSocketClient.exchange(path: path, request: JSONValue.object([
            "op": .string("unlock"), "password": .string(password),
        ]).serialized())
        if (try? JSONParser.parseObject(answer))?["error"]?.stringValue == "wrongPassword" { throw VaultError.wrongPassword }
    }
}

/// The agent's side: runs one command at a time, in this process, on the agent's engine, with the
/// client's standard streams, environment and current folder, and answers its exit status.
enum AgentCommandRunner {
    private static let turns = Turns()

    /// The command's exit status; nil when `declining` and the command would not run in the agent
    /// (``VaultSyncCommand/hostable(_:engineLocked:)``): then nothing of it ran, and the client runs it itself.
    static func run(arguments: [String], environment: [String: String], folder: String, descriptors: [Int32],
                    engine: VaultEngine, declining: Bool = false) async -> Int32? {
        guard descriptors.count == 3 else { return ExitStatus.failure.rawValue }
        await turns.take()
        StandardStreams.flush()
        let saved = (0..<3).map { dup(Int32($0)) }
        for (index, descriptor) in descriptors.enumerated() { dup2(descriptor, Int32(index)) }
        StandardStreams.discardBufferedInput()
        StandardStreams.clearOutputErrors()
        let agentFolder = FileManager.default.currentDirectoryPath
        _ = FileManager.default.changeCurrentDirectoryPath(folder)
        let locked = await engine.isLocked
        let status = await AgentHost.$current.withValue(AgentHost(engine: engine, environment: environment, arguments: arguments)) { () async -> Int32? in
            guard declining else { return await VaultSyncCommand.runHosted(arguments) }
            // Parsed once: the command that is judged is the one that runs.
            guard let command = VaultSyncCommand.hostable(arguments, engineLocked: locked) else { return nil }
            return await VaultSyncCommand.runHosted(arguments, parsed: command)
        }
        StandardStreams.flush()
        StandardStreams.discardBufferedInput()
        for (index, descriptor) in saved.enumerated() {
            dup2(descriptor, Int32(index))
            close(descriptor)
        }
        StandardStreams.clearOutputErrors()
        _ = FileManager.default.changeCurrentDirectoryPath(agentFolder)
        await turns.give()
        return status
    }

    /// One command at a time, in the order they came: the process's standard streams and folder are lent
    /// to one command.
    actor Turns {
        private var busy = false
        private var waiting: [CheckedContinuation<Void, Never>] = []

        func take() async {
            guard busy else {
                busy = true
                return
            }
            await withCheckedContinuation { waiting.append($0) }
        }

        func give() {
            if waiting.isEmpty { busy = false } else { waiting.removeFirst().resume() }
        }
    }
}

extension VaultSyncCommand {
    /// The command `arguments` name, when it runs in the agent as it is: one that asks nothing of the
    /// calling terminal, and, while the agent is locked, one that needs no unlocking. What the parser
    /// refuses, `--help` and `--version` are for the calling process too (its messages are the same).
    static func hostable(_ arguments: [String], engineLocked: Bool) -> (any ParsableCommand)? {
        guard let command = try? parseAsRoot(NegativeNumbers.rewrite(arguments)), let hostable = command as? any AgentHostable,
              hostable.runsInAgent, !engineLocked || !hostable.needsKeys else { return nil }
        return command
    }

    /// Parses (unless `parsed` is given) and runs `arguments` as `main` does, returning the exit status
    /// instead of ending the process.
    static func runHosted(_ arguments: [String], parsed: (any ParsableCommand)? = nil) async -> Int32 {
        let arguments = NegativeNumbers.rewrite(arguments)
        do {
            var command: any ParsableCommand
            do {
                command = try parsed ?? parseAsRoot(arguments)
            } catch {
                if let suggestion = CommandSuggestion.message(for: arguments, refusedWith: error) {
                    Console.error(suggestion)
                    return ExitStatus.usage.rawValue
                }
                throw error
            }
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            let status = exitCode(for: error).rawValue
            let message = fullMessage(for: error)
            if !message.isEmpty {
                if status == 0 { print(message) } else { FileHandle.standardError.write(Data((message + "\n").utf8)) }
            }
            return status
        }
        if let failure = StandardOutput.finish() {
            FileHandle.standardError.write(Data("error: \(failure)\n".utf8))
            return 1
        }
        return 0
    }
}

// The commands that run in the agent when one runs: the vault's own commands that ask nothing once the
// vault is unlocked, so that one engine writes the profile while the agent runs. The others run in the
// calling process: the editor (`edit` with no flags, `drafts recover`), a secret typed at the terminal
// (`-` while standard input is a terminal), `--clip` (the clipboard tool and its clearer belong to the
// caller's session), sign-in and account commands, settings, import and export, the agent's own, `watch`.
extension ListCommand { var runsInAgent: Bool { true } }
extension GetCommand { var runsInAgent: Bool { !clip } }
extension SyncCommand { var runsInAgent: Bool { true } }
extension StatusCommand { var runsInAgent: Bool { true } }
extension AddCommand { var runsInAgent: Bool { !AgentForwarding.readsTerminal } }
extension EditCommand { var runsInAgent: Bool { !(jsonFile == nil && fields.isEmpty) && !AgentForwarding.readsTerminal } }
extension DeleteCommand { var runsInAgent: Bool { true } }
extension RestoreCommand { var runsInAgent: Bool { true } }
extension ArchiveCommand { var runsInAgent: Bool { true } }
extension UnarchiveCommand { var runsInAgent: Bool { true } }
extension FavoriteCommand { var runsInAgent: Bool { true } }
extension MoveCommand { var runsInAgent: Bool { true } }
extension FolderCommand.List { var runsInAgent: Bool { true } }
extension FolderCommand.Add { var runsInAgent: Bool { true } }
extension FolderCommand.Rename { var runsInAgent: Bool { true } }
extension FolderCommand.Delete { var runsInAgent: Bool { true } }
extension PendingCommand.List { var runsInAgent: Bool { true } }
extension PendingCommand.Retry { var runsInAgent: Bool { true } }
extension PendingCommand.Discard { var runsInAgent: Bool { true } }
extension ConflictsCommand.List { var runsInAgent: Bool { true } }
extension ConflictsCommand.Show { var runsInAgent: Bool { true } }
extension ConflictsCommand.Resolve { var runsInAgent: Bool { true } }
extension DraftsCommand.List { var runsInAgent: Bool { true } }
extension DraftsCommand.Discard { var runsInAgent: Bool { true } }
extension AttachmentCommand.List { var runsInAgent: Bool { true } }
extension AttachmentCommand.Add { var runsInAgent: Bool { !AgentForwarding.readsTerminal } }
extension AttachmentCommand.Get { var runsInAgent: Bool { true } }
extension AttachmentCommand.Rename { var runsInAgent: Bool { true } }
extension AttachmentCommand.Delete { var runsInAgent: Bool { true } }
// bw's commands that ask nothing once the vault is unlocked (not unlock and lock, which change sessions).
extension BWStatusCommand { var runsInAgent: Bool { true } }
extension BWSyncCommand { var runsInAgent: Bool { true } }
extension BWListCommand { var runsInAgent: Bool { true } }
extension BWGetCommand { var runsInAgent: Bool { true } }
extension BWCreateCommand { var runsInAgent: Bool { !Console.stdinIsTTY || encoded != nil } }
extension BWEditCommand { var runsInAgent: Bool { !Console.stdinIsTTY || encoded != nil } }
extension BWDeleteCommand { var runsInAgent: Bool { true } }
extension BWRestoreCommand { var runsInAgent: Bool { true } }
extension BWEncodeCommand { var runsInAgent: Bool { true } }
extension BWGenerateCommand { var runsInAgent: Bool { true } }

extension AgentForwarding {
    /// Whether an argument reads standard input (`-`, `@-`) while it is a terminal: a prompt this process asks.
    static var readsTerminal: Bool {
        Console.stdinIsTTY && AgentHost.arguments.contains { $0 == "-" || $0 == "@-" }
    }
}
