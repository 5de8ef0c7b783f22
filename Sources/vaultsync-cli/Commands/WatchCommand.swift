import ArgumentParser
import Foundation
import VaultClient
import VaultModels
import VaultSyncCore

struct WatchCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Keep this device's copy live: apply changes from other devices as they happen, send queued changes as soon as the server answers.",
        discussion: """
        Connects to the server's notifications hub (or, where the server has none, asks it for changes every --poll-interval seconds) and prints one line per change that arrives. Changes queued on this device, by this command or any other, are sent as soon as the server answers again. Ctrl-C stops it.

        Examples:
          vaultsync watch
          vaultsync watch --json | jq .
        """)
    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions
    @Option(help: "Seconds between two questions to a server without a notifications hub.") var pollInterval: Int = 30

    func validate() throws {
        guard (1...3600).contains(pollInterval) else { throw ValidationError("--poll-interval must be from 1 to 3600 seconds") }
    }

    func execute(_ context: CLIContext) async throws {
        _ = try context.requireServer()
        let engine = context.engine
        let stop = StopSignals()
        stop.keepWaiting()
        let events = await engine.liveEvents()
        await engine.startLiveSync(LiveSyncOptions(pollInterval: .seconds(pollInterval)))
        let json = output.json
        let stateFile = LiveStateFile(profileDatabase: engine.localStore.path)
        let printer = Task {
            for await event in events {
                if case .state(let state) = event { stateFile.write(state) }
                let (line, object) = Self.describe(event)
                if json {
                    Presentation.printJSON(object)
                } else if let line {
                    Console.line(line)
                }
                fflush(nil)
                if event == .loggedOut { return true }
            }
            return false
        }
        // Ends at Ctrl-C (SIGINT), SIGTERM or SIGHUP, or when the server ends the session.
        let loggedOut = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await stop.waitForSignal()
                return false
            }
            group.addTask { await printer.value }
            let first = await group.next() ?? false
            // The printer is a task of its own: cancelling the group does not end it, and the group
            // waits for the child that awaits it (Ctrl-C did nothing while the stream stayed open).
            printer.cancel()
            group.cancelAll()
            return first
        }
        await engine.stopLiveSync()
        printer.cancel()
        stateFile.write(nil)
        if loggedOut {
            throw CLIError.stated("The server ended this session (a password change or \"log out everywhere\"): log in again with `vaultsync login`.",
                                  .authenticationFailed)
        }
        if !json { Console.note("stopped") }
    }

    /// The line a person reads and the JSON a script reads for one event.
    static func describe(_ event: LiveEvent) -> (String?, JSONValue) {
        func name(_ name: String?, _ id: String) -> String { name.map { "\"\(Presentation.oneLine($0))\"" } ?? "an item (\(id.prefix(8)))" }
        switch event {
        case .state(let state):
            let text: String
            switch state {
            case .live: text = "live: connected to the server's notifications"
            case .polling: text = "polling: the server has no notifications hub; asking it for changes"
            case .offline: text = "offline: the server does not answer; changes stay queued here and are sent when it is back"
            }
            return (text, .object(["event": .string("state"), "state": .string(state.rawValue)]))
        case .itemChanged(let id, let itemName):
            return ("\(name(itemName, id)) updated on another device",
                    .object(["event": .string("itemChanged"), "id": .string(id), "name": itemName.map(JSONValue.string) ?? .null]))
        case .itemRemoved(let id, let itemName):
            return ("\(name(itemName, id)) deleted on another device",
                    .object(["event": .string("itemRemoved"), "id": .string(id), "name": itemName.map(JSONValue.string) ?? .null]))
        case .itemKeptForResolution(let id):
            return ("an item with a change waiting here (\(id.prefix(8))) changed on another device: both are kept, and the next sync resolves them",
                    .object(["event": .string("itemKeptForResolution"), "id": .string(id)]))
        case .synced(let sent, let pending, let messages):
            var line: String?
            if sent > 0 { line = "sent \(sent) queued change\(sent == 1 ? "" : "s") to the server" }
            if pending > 0 { line = (line.map { $0 + "; " } ?? "") + "\(pending) still waiting" }
            if !messages.isEmpty { line = ([line].compactMap { $0 } + messages).joined(separator: "\n") }
            return (line, .object(["event": .string("synced"), "sent": .int(sent), "pending": .int(pending),
                                   "messages": .array(messages.map(JSONValue.string))]))
        case .loggedOut:
            return ("the server ended this session", .object(["event": .string("loggedOut")]))
        case .problem(let reason):
            return ("problem: \(reason) (trying again)", .object(["event": .string("problem"), "reason": .string(reason)]))
        }
    }
}
