import ArgumentParser
import Foundation
import VaultClient
import VaultModels
import VaultSyncCore

/// `vaultsync demo`: the offline story, told with two devices against a real server, every step verified.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Show offline editing and conflict resolution with two devices and a real server, verifying each step.",
        discussion: """
        Self-contained: starts vaultsync-server (the executable beside vaultsync, or on PATH) on a free loopback port with a temporary SQLite database, registers an account, and uses two device profiles (A and B). The server is really stopped while A edits offline. Exits 8 if any verification fails.

        Examples:
          vaultsync demo
          vaultsync demo --keep     # leave the server and both profiles for poking around
        """
    )

    @Flag(help: "Keep the server running and the profiles on disk afterwards (stop with Ctrl-C).") var keep = false

    mutating func run() async throws {
        var story: DemoStory
        do {
            story = try DemoStory()
        } catch {
            Console.error("the demo cannot start: \(error)")
            throw ExitCode(ExitStatus.failure.rawValue)
        }
        // Interrupted (Ctrl-C, or a SIGTERM or SIGHUP) while it runs: the server stops, its folder goes too, and the
        // person is told (RELIABILITY bug 66). A signal sent to this process alone (not its terminal's group) must not
        // leave the server's process running. Once the story is told, with --keep, the same signal ends the wait.
        let stop = StopSignals()
        stop.onInterrupted { [root = story.root, server = story.server] signal in
            server.stopNow()
            try? FileManager.default.removeItem(atPath: root)
            FileHandle.standardError.write(Data("\nthe demo was interrupted; its folder \(root) was removed\n".utf8))
            Foundation.exit(128 + signal)
        }
        do {
            try await story.tell(keep: keep)
        } catch {
            // An interruption stops the server under the story, which then fails: the handler says why and exits.
            if stop.interrupting { await stop.waitForExit() }
            let (message, _) = describe(error)
            Console.error("the demo stopped: \(message)")
            await story.cleanUp(keep: false)
            throw ExitCode(ExitStatus.failure.rawValue)
        }
        print("")
        if story.failures > 0 {
            print(Console.styled("demo: \(story.failures) of \(story.checks) verifications FAILED", .red))
            await story.cleanUp(keep: keep)
            throw ExitCode(ExitStatus.verificationFailed.rawValue)
        }
        print(Console.styled("demo: all \(story.checks) verifications passed", .green))
        if keep {
            // From here a signal is the person's "stop now", not an interruption (`demo --keep` ignored Ctrl-C,
            // RELIABILITY bug 78: the wait made a second signal source, which never fired).
            stop.keepWaiting()
            story.printKeepInstructions()
            fflush(nil)
            await stop.waitForSignal()
        }
        await story.cleanUp(keep: keep)
    }
}

/// The demo's state and narration.
struct DemoStory {
    let root = NSTemporaryDirectory() + "vaultsync-demo-" + UUID().uuidString.prefix(8).lowercased()
    let email = "demo@vaultsync.local"
    let password = "correct horse battery staple"
    let server: ServerProcess
    var deviceA: CLIContext?
    var deviceB: CLIContext?
    var checks = 0
    var failures = 0

    init() throws {
        server = ServerProcess(executable: try ServerProcess.locate(), dataDirectory: root + "/server", logPath: root + "/server.log")
    }

    mutating func verify(_ what: String, _ passed: Bool, _ detail: @autoclosure () -> String = "") {
        checks += 1
        if passed {
            print("  \(Console.styled("✔", .green)) \(what)")
        } else {
            failures += 1
            let extra = detail()
            print("  \(Console.styled("✘", .red)) \(what)\(extra.isEmpty ? "" : ": \(extra)")")
        }
        fflush(nil)
    }

    /// Each step's lines go out as they are said, into a pipe or a file too (not at the end, when the output is
    /// buffered; RELIABILITY bug 66: `demo --keep` in a pipe showed nothing while it waited).
    func step(_ title: String) {
        fflush(nil)
        print("\n" + Console.styled(title, .bold))
    }

    func say(_ text: String) {
        print("  " + Console.styled(text, .dim))
    }

    /// A device: a CLI profile directory with settings, and an engine on its database.
    func makeDevice(_ name: String, url: String) throws -> CLIContext {
        let profile = Profile(directory: root + "/device-" + name)
        try profile.prepare()
        let settings = ProfileSettings(server: url, email: email)
        try profile.saveSettings(settings)
        let engine = try VaultEngine(databasePath: profile.databasePath, configuration: settings.engineConfiguration())
        return CLIContext(profile: profile, settings: settings, engine: engine, options: GlobalOptions(), environment: [:])
    }

    static func login(_ name: String, username: String, password: String) -> CipherView {
        var view = CipherView(type: .login, name: name)
        view.login = LoginView(uris: [LoginURIView(uri: "https://\(name.lowercased().replacingOccurrences(of: " ", with: "-")).example")],
                               username: username, password: password)
        return view
    }

    static func named(_ name: String, in engine: VaultEngine) async throws -> CipherView? {
        try await engine.items().compactMap { try? $0.result.get() }.first { $0.name == name }
    }

    /// What must agree between devices: every item's id, name, password, notes and trash state.
    static func fingerprint(_ engine: VaultEngine) async throws -> [String] {
        try await engine.items().map { item in
            let view = try item.result.get()
            return "\(item.id)|\(view.name)|\(view.login?.password ?? "")|\(view.login?.username ?? "")|\(view.notes ?? "")|\(view.isDeleted)"
        }.sorted()
    }

    mutating func tell(keep: Bool) async throws {
        print(Console.styled("VaultSync demo: two devices, one server, and a network that goes away", .bold))
        print("(its files: \(root), removed at the end)")
        fflush(nil)
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try await server.start()
        let url = server.url
        say("server: \(url), vaultsync-server in its own process (SQLite in \(root)/server, its log in \(root)/server.log)")

        // Setup
        step("0. Setup: register on device A, add three items, log in on device B")
        let a = try makeDevice("a", url: url)
        let b = try makeDevice("b", url: url)
        deviceA = a
        deviceB = b
        try await a.engine.register(email: email, password: password)
        for item in [Self.login("Bank", username: "alice", password: "first-Pa55"),
                     Self.login("Old router", username: "admin", password: "admin123"),
                     Self.login("Email", username: "alice@example.com", password: "mail-Pa55")] {
            let result = try await a.engine.addItem(item)
            verify("A added \"\(item.name)\" (synced: \(result.outcome == .synced))", result.outcome == .synced)
        }
        try await b.engine.login(email: email, password: password)

        step("1. Both devices sync")
        _ = try await a.engine.sync()
        _ = try await b.engine.sync()
        let firstA = try await Self.fingerprint(a.engine)
        let firstB = try await Self.fingerprint(b.engine)
        verify("A and B hold the same 3 items", firstA == firstB && firstA.count == 3, "A \(firstA.count), B \(firstB.count)")

        step("2. The server goes down (really stopped)")
        await server.stop()
        let unreachable = await Self.isUnreachable(url)
        verify("nothing answers at \(url) any more", unreachable)

        step("3. Device A keeps working offline")
        guard var bank = try await Self.named("Bank", in: a.engine), let router = try await Self.named("Old router", in: a.engine) else {
            throw CLIError.verificationFailed("the demo items are missing on device A")
        }
        bank.login?.password = "second-Pa55"
        let edit1 = try await a.engine.updateItem(bank)
        bank = edit1.value
        bank.login?.password = "third-Pa55"
        bank.notes = "changed offline on A"
        let edit2 = try await a.engine.updateItem(bank)
        verify("A changed Bank's password twice: saved offline", edit1.outcome.isOffline && edit2.outcome.isOffline)
        let added = try await a.engine.addItem(Self.login("Streaming", username: "alice", password: "stream-Pa55"))
        let temporaryID = added.value.id ?? ""
        verify("A added \"Streaming\": saved offline with a temporary id \(temporaryID.prefix(8))…", added.outcome.isOffline)
        let deletion = try await a.engine.softDeleteItem(id: router.id ?? "")
        verify("A moved \"Old router\" to the trash: saved offline", deletion.isOffline)
        say("vaultsync status (device A):")
        let offlineStatus = try await a.engine.status()
        for line in StatusSnapshot(settings: a.settings, status: offlineStatus).lines { say("  " + line) }
        verify("status shows offline with 3 changes pending", offlineStatus.online == false && offlineStatus.pendingCount == 3,
               "online \(String(describing: offlineStatus.online)), pending \(offlineStatus.pendingCount)")

        step("4. The server comes back; meanwhile B edits Bank too")
        try await server.start()
        say("server back at \(server.url)")
        _ = try await b.engine.sync()
        guard var bankOnB = try await Self.named("Bank", in: b.engine) else { throw CLIError.verificationFailed("Bank is missing on B") }
        bankOnB.login?.username = "alice.b"
        bankOnB.notes = "changed on B (later than A)"
        let bEdit = try await b.engine.updateItem(bankOnB)
        verify("B's edit reached the server", bEdit.outcome == .synced)

        step("5. Device A syncs")
        let report = try await a.engine.sync()
        print("  synced: \(report.resolved) changes sent, \(report.backups.count) conflict backup(s), \(report.stillPending) pending")
        for message in report.messages { say("  " + message) }
        let liveBank = try await Self.named("Bank", in: a.engine)
        verify("both changed the notes: the newer edit (B's) won them", liveBank?.notes == "changed on B (later than A)")
        verify("the fields only one side changed were merged: B's username, A's new password (the old ones in its history)",
               liveBank?.login?.username == "alice.b" && liveBank?.login?.password == "third-Pa55"
                   && Set(liveBank?.passwordHistory.map(\.password) ?? []).isSuperset(of: ["first-Pa55", "second-Pa55"]))
        let backup = report.backups.first
        verify("A's losing version was kept as a backup: \"\(backup?.name ?? "none")\"",
               report.backups.count == 1 && (backup?.name.hasPrefix("Bank - offline conflict ") ?? false))
        let backupView = try await backup.asyncMap { try await a.engine.item(id: $0.backupID) }
        verify("the backup holds A's password and its history (first-Pa55, second-Pa55)",
               backupView?.login?.password == "third-Pa55"
                   && Set(backupView?.passwordHistory.map(\.password) ?? []).isSuperset(of: ["first-Pa55", "second-Pa55"]))
        let streaming = try await Self.named("Streaming", in: a.engine)
        verify("\"Streaming\" got the server's id (temporary \(temporaryID.prefix(8))… → \((streaming?.id ?? "").prefix(8))…)",
               streaming?.id != nil && streaming?.id != temporaryID)
        let trashed = try await a.engine.item(id: router.id ?? "")
        verify("\"Old router\" is in the trash on the server too", trashed.isDeleted)
        let afterStatus = try await a.engine.status()
        verify("nothing is pending any more", afterStatus.pendingCount == 0 && afterStatus.needsAttentionCount == 0)

        step("6. vaultsync conflicts show (device A)")
        if let backup {
            let comparison = try await ConflictComparison.load(backup.backupID, context: a)
            for line in comparison.lines(reveal: false) { print("  " + line) }
            verify("the comparison marks the username and notes as different (the password was merged into the live item)",
                   Set(comparison.rows.filter(\.differs).map(\.label)) == ["username", "notes"])
        }

        step("7. Device B syncs; both devices agree with the server")
        _ = try await b.engine.sync()
        let finalA = try await Self.fingerprint(a.engine)
        let finalB = try await Self.fingerprint(b.engine)
        verify("A and B hold the same \(finalA.count) items (Bank, its backup, Email, Streaming, Old router in the trash)",
               finalA == finalB && finalA.count == 5, "A \(finalA.count), B \(finalB.count)")

        try await tellLive(a: a, b: b)
    }

    /// Live sync (what `vaultsync watch` runs): B hears A's edit without a sync; A's change saved while
    /// the server is away leaves by itself when it is back.
    mutating func tellLive(a: CLIContext, b: CLIContext) async throws {
        step("8. Live sync: both devices watch (vaultsync watch); A edits Email, and B has it without a sync")
        let options = LiveSyncOptions(reconnect: ReconnectSchedule(base: 0.2, cap: 2))
        let eventsA = await LiveEventsSeen.listening(to: a.engine)
        let eventsB = await LiveEventsSeen.listening(to: b.engine)
        await a.engine.startLiveSync(options)
        await b.engine.startLiveSync(options)
        let liveA = await eventsA.waitFor { $0 == .state(.live) }
        let liveB = await eventsB.waitFor { $0 == .state(.live) }
        verify("A and B are connected to the server's notifications hub", liveA && liveB)
        guard var email = try await Self.named("Email", in: a.engine) else { throw CLIError.verificationFailed("Email is missing on A") }
        email.login?.password = "mail-2-Pa55"
        let edited = try await a.engine.updateItem(email)
        let heard = await eventsB.waitFor { if case .itemChanged(_, "Email") = $0 { return true } else { return false } }
        for line in await eventsB.lines() { say("B: " + line) }
        let onB = try await Self.named("Email", in: b.engine)
        verify("B's copy of Email has A's new password, with no sync run", edited.outcome == .synced && heard && onB?.login?.password == "mail-2-Pa55")

        step("9. The server goes away; A edits offline; the server comes back and A's change leaves by itself")
        await eventsA.clear()
        await eventsB.clear()
        await server.stop()
        let noticed = await eventsA.waitFor { $0 == .state(.offline) }
        verify("A's live sync notices the server is gone", noticed)
        guard var bank = try await Self.named("Bank", in: a.engine) else { throw CLIError.verificationFailed("Bank is missing on A") }
        bank.notes = "changed on A while the server was away, sent by live sync"
        let offline = try await a.engine.updateItem(bank)
        verify("A's edit of Bank is saved offline and queued", offline.outcome.isOffline)
        try await server.start()
        say("server back at \(server.url); nobody runs sync")
        let sent = await eventsA.waitFor { if case .synced(let count, _, _) = $0 { return count > 0 } else { return false } }
        // B hears of it live, or (when it reconnected after the change) catches up on reconnecting: either
        // way without anyone running sync.
        let notes = bank.notes
        let engineB = b.engine
        let received = await LiveEventsSeen.waitUntil { (try? await Self.named("Bank", in: engineB))?.notes == notes }
        for line in await eventsA.lines() { say("A: " + line) }
        for line in await eventsB.lines() { say("B: " + line) }
        let pending = try await a.engine.pendingCount()
        let bankOnB = try await Self.named("Bank", in: b.engine)
        verify("A's queued change reached the server by itself, and B received it live",
               sent && received && pending == 0 && bankOnB?.notes == bank.notes)
        await a.engine.stopLiveSync()
        await b.engine.stopLiveSync()
    }

    /// Whether a TCP connection to the server's port is refused.
    static func isUnreachable(_ url: String) async -> Bool {
        guard let port = URL(string: url)?.port else { return false }
        #if canImport(Glibc)
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let descriptor = socket(AF_INET, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        return result != 0
    }

    func printKeepInstructions() {
        let a = root + "/device-a"
        let b = root + "/device-b"
        print("""

        The server keeps running and both profiles are on disk. In another shell:
          export VAULTSYNC_PASSWORD='\(password)'
          VAULTSYNC_HOME=\(a) vaultsync status
          VAULTSYNC_HOME=\(a) vaultsync conflicts
          VAULTSYNC_HOME=\(b) vaultsync list
        Files: \(root)  (remove it when done). Press Ctrl-C to stop the server.
        """)
    }

    func cleanUp(keep: Bool) async {
        await deviceA?.engine.shutdown()
        await deviceB?.engine.shutdown()
        await server.stop()
        if !keep { try? FileManager.default.removeItem(atPath: root) }
    }
}

/// SIGINT, SIGTERM and SIGHUP while the demo runs, through one set of signal sources for its whole life: an
/// interruption until `keepWaiting()`, then the end of `waitForSignal()` (a signal that came in between ends it at once).
final class StopSignals: @unchecked Sendable {
    private let lock = NSLock()
    private var sources: [any DispatchSourceSignal] = []
    private var interrupted: (@Sendable (Int32) -> Void)?
    private var keeping = false
    private var signalled = false
    private var waiter: CheckedContinuation<Void, Never>?
    private var interruptedBy: Int32?

    /// An interruption is being handled (its handler ends the process).
    var interrupting: Bool { lock.withLock { interruptedBy != nil } }

    /// Waits for the interruption's handler to end the process.
    func waitForExit() async -> Never {
        while true { try? await Task.sleep(for: .seconds(3600)) }
    }

    init(signals: [Int32] = [SIGINT, SIGTERM, SIGHUP]) {
        for number in signals {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [weak self] in self?.received(number) }
            source.resume()
            sources.append(source)
        }
    }

    func onInterrupted(_ handler: @escaping @Sendable (Int32) -> Void) {
        lock.withLock { interrupted = handler }
    }

    func keepWaiting() {
        lock.withLock { keeping = true }
    }

    func waitForSignal() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = lock.withLock {
                if signalled { return true }
                waiter = continuation
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Ends ``waitForSignal()`` as a signal would (the process stops for another reason).
    func release() {
        let waiting: CheckedContinuation<Void, Never>? = lock.withLock {
            signalled = true
            defer { waiter = nil }
            return waiter
        }
        waiting?.resume()
    }

    private func received(_ number: Int32) {
        let (handler, waiting): ((@Sendable (Int32) -> Void)?, CheckedContinuation<Void, Never>?) = lock.withLock {
            guard keeping else {
                interruptedBy = number
                return (interrupted, nil)
            }
            signalled = true
            defer { waiter = nil }
            return (nil, waiter)
        }
        if let waiting {
            waiting.resume()
        } else if let handler {
            handler(number)
        }
    }
}

/// The live events one demo device received, kept for the narration and waited on with a deadline
/// (a demo that hangs helps nobody: past it, the verification fails and says so).
actor LiveEventsSeen {
    private var seen: [LiveEvent] = []
    private var reader: Task<Void, Never>?

    static func listening(to engine: VaultEngine) async -> LiveEventsSeen {
        let seen = LiveEventsSeen()
        await seen.read(await engine.liveEvents())
        return seen
    }

    private func read(_ stream: AsyncStream<LiveEvent>) {
        reader = Task { for await event in stream { self.append(event) } }
    }

    private func append(_ event: LiveEvent) { seen.append(event) }

    func clear() { seen.removeAll() }

    func lines() -> [String] {
        seen.compactMap { WatchCommand.describe($0).0 }
    }

    /// Waits until `condition` holds, for at most `limit`.
    static func waitUntil(within limit: Duration = .seconds(60), _ condition: @Sendable () async -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if await condition() { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return await condition()
    }

    nonisolated func waitFor(within limit: Duration = .seconds(60), _ match: @escaping @Sendable (LiveEvent) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if await seen.contains(where: match) { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return await seen.contains(where: match)
    }
}
