import Foundation
import Testing
@testable import VaultClient
import VaultCrypto
import VaultModels
import VaultSyncCore
import VaultTestSupport

/// One seed of the simulation: 3 devices of one account on the real server's application, in a world
/// of their own. The server answers in process (its router, no sockets); each device reaches it through
/// its own transport, which applies the device's faults (drops, 5xx, truncation, delays, partitions)
/// from the seed. The world has one clock that only the simulation moves, every engine draws its
/// randomness from the seed, and the devices act one at a time, each operation awaited to the end: the
/// same seed replays the same steps to the same outcome, and prints the same trace.
struct Simulation {
    let seed: UInt64
    let verbose: Bool
    var phases = PhaseTotals()

    static let deviceCount = 3

    /// Each device's base clock skew for the whole run (seeds add jumps): hours off in both directions.
    static let baseSkews: [Int64] = [-7_980, 420, 10_800]

    /// Access tokens expire at steps drawn from their own sequence (`seed ^ expirySeedMask`), so adding
    /// them left every seed's steps as they were. The acting device's token stops working before its
    /// step (in one step of five): its next call gets 401 and refreshes, under the device's faults.
    static let expirySeedMask: UInt64 = 0x7E57_0CE5_5A11_7E57

    /// How far the world's time moves before each step (1–30 s) comes from a sequence of its own too.
    static let timeSeedMask: UInt64 = 0x71DE_5EED_C10C_4B17

    /// Runs the seed in a new world (a copy of the ``WorldTemplate``'s server and devices), removed afterwards.
    func run() async throws -> SeedOutcome {
        let started = ContinuousClock.now
        let template = try await WorldTemplate.shared.value
        let time = SimulatedTime(startingAt: WorldTemplate.worldStart)
        let serverDirectory = temporaryDirectory("vaultsync-sim-server")
        defer { try? FileManager.default.removeItem(atPath: serverDirectory) }
        for file in try FileManager.default.contentsOfDirectory(atPath: template.serverDirectory) {
            try FileManager.default.copyItem(atPath: template.serverDirectory + "/" + file, toPath: serverDirectory + "/" + file)
        }
        return try await InProcessServer.run(time: time, dataDirectory: serverDirectory) { server in
            var devices: [SimDevice] = []
            do {
                for index in 0..<Self.deviceCount {
                    devices.append(try await SimDevice.inProcess(
                        index: index, server: server, copying: template.profiles[index], sealedSession: template.sealedSessions[index],
                        sessionKey: template.sessionKey, skewSeconds: Self.baseSkews[index],
                        randomSeed: (seed &* 0x9E37_79B9_7F4A_7C15) ^ UInt64(index + 1)))
                }
                phases.add("world", ContinuousClock.now - started)
                let observer = ServerObserver(server: server, template: template)
                do {
                    let outcome = try await play(devices: devices, time: time, email: template.email, observer: observer)
                    for device in devices { await device.remove() }
                    await observer.remove()
                    return outcome
                } catch {
                    await observer.remove()
                    throw error
                }
            } catch {
                for device in devices { await device.remove() }
                throw error
            }
        }
    }

    func play(devices: [SimDevice], time: SimulatedTime, email: String, observer: ServerObserver) async throws -> SeedOutcome {
        let started = ContinuousClock.now
        var generator = SeededRandom(seed: seed)
        var expiries = SeededRandom(seed: seed ^ Self.expirySeedMask)
        var clockSteps = SeededRandom(seed: seed ^ Self.timeSeedMask)
        var live = LiveDelivery(seed: seed)
        let published = observer.server.notifications
        let steps = Int.random(in: 4...12, using: &generator)
        let ledger = Ledger(tag: "s\(seed)")
        let trace = StepTrace(seed: seed, verbose: verbose)
        trace.add("seed \(seed): \(devices.count) devices, \(steps) steps")
        var faultRates: [Double] = []
        for device in devices {
            let faultRate = [0, 0.05, 0.15, 0.3][Int.random(in: 0..<4, using: &generator)]
            faultRates.append(faultRate)
            trace.add("device \(device.index): skew \(device.clock.skewSeconds) s, fault rate \(faultRate)")
        }
        // A few items everyone has, so that edits on different devices meet.
        var added: [String] = []
        for _ in 0..<2 {
            added.append(try await devices[0].perform(.add, targets: Targets(items: [], folders: []), ledger: ledger, using: &generator))
        }
        for device in devices.dropFirst() { try await device.engine.pull() }
        trace.add("set-up: device 0 added \(added.joined(separator: "; ")); devices 1 and 2 pulled" + Self.network(devices))
        LiveDelivery.post(published.take(), to: devices)
        for (device, faultRate) in zip(devices, faultRates) {
            await device.network.setRandomFaults([FaultProxy.RandomFault(
                probability: faultRate,
                actions: [.fail(status: 500), .fail(status: 502), .fail(status: 503), .dropBeforeForwarding, .forwardThenClose,
                          .forwardThenDrop, .truncateBody, .delay(milliseconds: 20)])], seed: seed &* 7 &+ UInt64(device.index))
        }
        phases.add("set-up", ContinuousClock.now - started)

        var snapshots: [DeviceSnapshot] = []
        for device in devices { snapshots.append(try await DeviceSnapshot.take(device)) }
        func fail(_ findings: [String]) -> SeedOutcome {
            // In a repeatable order: ids masked first (the invariants list what they find by id).
            trace.add("FAILED: " + findings.map(StepTrace.masked).sorted().joined(separator: "; "))
            return SeedOutcome(trace: trace.lines, findings: findings)
        }
        for step in 0..<steps {
            let stepStarted = ContinuousClock.now
            let seconds = Int64.random(in: 1...30, using: &clockSteps)
            time.advance(microseconds: seconds * 1_000_000)
            let device = devices[Int.random(in: 0..<devices.count, using: &generator)]
            // What the hub sent the device since it last acted arrives first (some of it).
            let heard = await live.hear(device, ledger: ledger).map { $0 + ", then " } ?? ""
            let event = heard + (try await act(device, step: step, snapshots: snapshots, ledger: ledger, trace: trace, email: email,
                                               generator: &generator, expiries: &expiries))
            LiveDelivery.post(published.take(), to: devices)
            let checking = ContinuousClock.now
            phases.add("steps", checking - stepStarted)
            // Invariants after every step.
            var findings = try Invariants.plaintextFindings(device, secrets: ledger.secrets)
            phases.add("scans after steps", ContinuousClock.now - checking)
            let snapshotting = ContinuousClock.now
            var state = "locked"
            if !device.locked {
                snapshots[device.index] = try await DeviceSnapshot.take(device)
                findings += Invariants.queueFindings(snapshots[device.index], device: device.index)
                state = snapshots[device.index].summary
            }
            trace.add("step \(step) (+\(seconds) s): device \(device.index) \(event) [\(state)]" + Self.network([device]))
            // A locked device's files did not change since its last snapshot: the union is current. A password
            // no device holds may be held by the server alone (a device's push landed and the device then kept
            // another save of that item, which meets it at its next sync): durable, not lost. The server is
            // read only then, through an observer of its own.
            var present = snapshots.reduce(into: Set<String>()) { $0.formUnion($1.passwords) }
            if !ledger.lost(present: present).isEmpty {
                let held = try await observer.passwords()
                let onServerOnly = ledger.lost(present: present).count - ledger.lost(present: present.union(held)).count
                if onServerOnly > 0 {
                    phases.count("passwords held by the server only after a step", onServerOnly)
                    trace.add("after step \(step): \(onServerOnly) password(s) held by the server only")
                }
                present.formUnion(held)
            }
            findings += ledger.lost(present: present).map { "lost after step \(step): \($0)" }
            phases.add("snapshots after steps", ContinuousClock.now - snapshotting)
            if !findings.isEmpty { return fail(findings) }
        }
        let settling = ContinuousClock.now
        time.advance(microseconds: 60_000_000)
        _ = try await settle(devices, email: email, loggingInAgain: true)
        trace.add("final rounds: faults off, everyone unlocked, syncs until the queues settle" + Self.network(devices))
        // Then every live message still on its way arrives, late and out of order (the final rounds'
        // own too): applied by revision date, none may undo what the devices agree on.
        for device in devices {
            device.partitioned = false
            device.liveInbox = []
        }
        LiveDelivery.post(published.take(), to: devices)
        for device in devices {
            while let heard = await live.hear(device, ledger: ledger, all: true) { trace.add("late: device \(device.index) \(heard)") }
        }
        var final: [DeviceSnapshot] = []
        for device in devices { final.append(try await DeviceSnapshot.take(device)) }
        let server = try await observer.snapshot()
        let checking = ContinuousClock.now
        phases.add("final rounds", checking - settling)
        var refreshes: [String: Int] = [:]
        for device in devices { refreshes.merge(await device.network.tally(pathPrefix: tokenPath)) { $0 + $1 } }
        for (device, snapshot) in zip(devices, final) {
            trace.add("end: device \(device.index): \(snapshot.summary)")
            for line in snapshot.itemLines { trace.add("end: device \(device.index) \(line)") }
        }
        trace.add("end: token refreshes: \(describeRefreshes(refreshes)); logins after the session ended: "
                  + "\(devices.map(\.loginsAgain).reduce(0, +)); ledger: "
                  + ledger.counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
        let findings = try finalFindings(devices, snapshots: final, ledger: ledger) + Invariants.serverFindings(final, server: server)
        phases.add("final checks", ContinuousClock.now - checking)
        phases.count("saves during a push", ledger.counts["save during a push"] ?? 0)
        phases.count("token refreshes", refreshes["requests"] ?? 0)
        phases.count("token refreshes meeting a fault", refreshes.filter { $0.key != "requests" }.values.reduce(0, +))
        phases.count("logins after the session ended", devices.map(\.loginsAgain).reduce(0, +))
        // Issue 24's comparison: the backups a run ends with (device 0; the devices agree), and how many
        // conflicts the devices' syncs merged, under this run's conflict policy (VAULTSYNC_SIM_CONFLICTS).
        phases.count("backups at the end", final.first.map { $0.items.values.filter { BackupName.isBackup($0.name) }.count } ?? 0)
        phases.count("merges during steps", ledger.counts["merges"] ?? 0)
        for event in ["live messages applied", "live messages dropped", "live messages duplicated", "live catch-ups"] {
            phases.count(event, ledger.counts[event] ?? 0)
        }
        if !findings.isEmpty { return fail(findings) }
        trace.add("held: every invariant after every step and at the end")
        return SeedOutcome(trace: trace.lines, findings: [])
    }

    /// One step of one device: lock or unlock, partition or heal, a clock jump, or an operation (a sync
    /// meets a save during its first push). Returns the step's event and outcome in words.
    func act(_ device: SimDevice, step: Int, snapshots: [DeviceSnapshot], ledger: Ledger, trace: StepTrace, email: String,
             generator: inout SeededRandom, expiries: inout SeededRandom) async throws -> String {
        let roll = Int.random(in: 0..<100, using: &generator)
        var event: String
        let expired = Int.random(in: 0..<5, using: &expiries) == 0
        if expired { await device.engine.invalidateAccessToken() }
        if device.locked {
            device.lockedSteps -= 1
            if device.lockedSteps > 0 {
                // A locked vault can only sync what needs no keys: nothing.
                let report = try await device.engine.sync()
                event = "sync while locked (skipped: \(report.skippedLocked))"
            } else {
                try await device.engine.unlock(email: email, password: reliabilityPassword)
                device.locked = false
                event = "unlock"
                if LiveDelivery.connected(device) { event += ", " + (await LiveDelivery.reconnect(device, ledger: ledger)) }
            }
        } else if roll < 3 {
            await device.engine.lock()
            device.locked = true
            device.liveInbox = []
            device.lockedSteps = Int.random(in: 1...3, using: &generator)
            event = "lock (for \(device.lockedSteps) steps)"
        } else if roll < 11 {
            let partitioned = Bool.random(using: &generator)
            await device.network.setPartitioned(partitioned)
            let wasPartitioned = device.partitioned
            device.partitioned = partitioned
            event = partitioned ? "partition" : "heal"
            if partitioned {
                await LiveDelivery.disconnect(device)
            } else if wasPartitioned {
                event += ", " + (await LiveDelivery.reconnect(device, ledger: ledger))
            }
        } else if roll < 14 {
            let seconds = Int64.random(in: -600...600, using: &generator)
            device.clock.jump(seconds: seconds)
            event = "clock jump \(seconds) s"
        } else {
            let operation = Operation.random(using: &generator)
            // Every sync that pushes meets a save of an item being pushed (the fallback is drawn
            // from the second sequence).
            let targets = snapshots[device.index].targets
            let saveDuringPush = operation == .sync
            let notes = StepTrace(seed: seed, verbose: false)
            if saveDuringPush {
                let fallback = targets.items.isEmpty ? nil : targets.items[Int.random(in: 0..<targets.items.count, using: &expiries)].id
                await device.saveDuringNextPush(ledger: ledger, fallback: fallback) { notes.add($0) }
            }
            let outcome = try await device.perform(operation, targets: targets, ledger: ledger, using: &generator)
            if saveDuringPush { await device.network.setForwardHook(nil) }
            event = "\(operation.rawValue) \(outcome)" + notes.lines.map { "; \($0)" }.joined()
            if device.sessionEnded {
                // The server ended the session (a refresh whose answer was lost, not retried within its
                // grace period): the user logs in again, as the message asks. A login that meets a fault
                // on the wire fails as it would for a person, who tries again later: here at the device's
                // next operation (seeds 12665 and 15898 stopped on such a 500 and 502).
                do {
                    try await device.logInAgain(email: email)
                    event += "; logged in again"
                    if LiveDelivery.connected(device) { event += ", " + (await LiveDelivery.reconnect(device, ledger: ledger)) }
                } catch let error as VaultError {
                    switch error {
                    case .storage, .crypto, .model: throw error
                    default: event += "; logging in again failed (\(error)), tried again later"
                    }
                }
            }
        }
        return expired ? "access token expired, then " + event : event
    }

    /// The requests since the last call and the faults they met (`; requests N, faults: …`).
    static func network(_ devices: [SimDevice]) -> String {
        var requests = 0
        var faults: [String] = []
        for device in devices {
            guard let transport = device.network as? InProcessTransport else { continue }
            let log = transport.takeLog()
            requests += log.requests
            faults += log.faults
        }
        return " (requests \(requests)" + (faults.isEmpty ? ")" : "; faults: \(faults.joined(separator: ", ")))")
    }
}

/// The account and its three devices, registered and logged in once per process and copied into every
/// seed's world: registering and logging in derive keys, which took most of a seed's time; a copy
/// unlocks from a sealed session without a derivation. What a copy carries that is random (ids, tokens,
/// keys) stays out of the trace; each world's time starts a minute after the template's.
struct WorldTemplate: Sendable {
    let serverDirectory: String
    let profiles: [String]
    let sealedSessions: [String]
    let sessionKey: SymmetricCryptoKey
    let email: String

    static let worldStart = SimulatedTime.start + 60_000_000

    static let shared = Task<WorldTemplate, any Error> { try await make() }

    static func make() async throws -> WorldTemplate {
        let serverDirectory = temporaryDirectory("vaultsync-sim-template")
        let email = "sim@example.com"
        let sessionKey = SymmetricCryptoKey.generate()
        let expiry = WireDate(microsecondsSinceEpoch: SimulatedTime.start + 10 * 365 * 86_400 * 1_000_000)
        let (profiles, sessions) = try await InProcessServer.run(time: SimulatedTime(), dataDirectory: serverDirectory) { server in
            var profiles: [String] = []
            var sessions: [String] = []
            // One profile per device, and one for the observer (``Simulation/ServerObserver``).
            for index in 0...Simulation.deviceCount {
                let device = try await SimDevice.inProcess(index: index, server: server, skewSeconds: 0, randomSeed: UInt64(index + 1),
                                                           email: email, registering: index == 0)
                sessions.append(try await device.engine.sealSession(with: sessionKey, expiresAt: expiry))
                try device.engine.localStore.checkpoint()
                await device.engine.shutdown()
                profiles.append(device.databasePath)
            }
            return (profiles, sessions)
        }
        return WorldTemplate(serverDirectory: serverDirectory, profiles: profiles, sealedSessions: sessions, sessionKey: sessionKey, email: email)
    }
}

/// Reads what the server holds, decrypted, for the invariants after a step: a fourth logged-in profile of
/// the template (a session of its own: its token refreshes touch no device's), made when first needed,
/// without faults. It only reads (`/api/sync`), so the devices meet the same server either way.
final class ServerObserver: @unchecked Sendable {
    let server: InProcessServer
    let template: WorldTemplate
    private var device: SimDevice?

    init(server: InProcessServer, template: WorldTemplate) {
        self.server = server
        self.template = template
    }

    /// Every password the server's items hold (current ones and histories).
    func passwords() async throws -> Set<String> {
        try await snapshot().passwords
    }

    /// What the server holds, decrypted, as a device's snapshot.
    func snapshot() async throws -> DeviceSnapshot {
        if device == nil {
            let index = Simulation.deviceCount
            device = try await SimDevice.inProcess(index: index, server: server, copying: template.profiles[index],
                                                   sealedSession: template.sealedSessions[index], sessionKey: template.sessionKey,
                                                   skewSeconds: 0, randomSeed: 0x0B5E_47E4)
        }
        guard let device else { return DeviceSnapshot() }
        _ = try await device.engine.pull()
        return try await DeviceSnapshot.take(device)
    }

    func remove() async {
        await device?.remove()
    }
}

/// What one seed did: its trace and what went wrong (empty: every invariant held).
struct SeedOutcome: Sendable {
    var trace: [String]
    var findings: [String]
}

/// A seed's trace, one line per step: what each step did and met, with the ledger's names and never a
/// wall-clock time, a random id or a ciphertext, so that a replay prints the same bytes. Printed as it
/// grows when `verbose` (a single seed).
final class StepTrace: @unchecked Sendable {
    private let lock = NSLock()
    private var recorded: [String] = []
    let seed: UInt64
    let verbose: Bool

    init(seed: UInt64, verbose: Bool) {
        self.seed = seed
        self.verbose = verbose
    }

    static let uuid = try! NSRegularExpression(pattern: "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")

    func add(_ line: String) {
        let masked = Self.masked(line)
        lock.withLock { recorded.append(masked) }
        if verbose { print("sim \(seed) | \(masked)") }
    }

    /// `text` with every UUID as `{id}`.
    static func masked(_ text: String) -> String {
        uuid.stringByReplacingMatches(in: text, range: NSRange(text.startIndex..., in: text), withTemplate: "{id}")
    }

    var lines: [String] { lock.withLock { recorded } }
}

extension DeviceSnapshot {
    /// Counts in words: items (in the trash, archived, backups), folders, queue records.
    var summary: String {
        let values = items.values
        let attention = queued.values.filter { $0 == .needsAttention }.count
        return "\(values.count) items (\(values.filter(\.deleted).count) in the trash, \(values.filter(\.archived).count) archived, "
            + "\(values.filter { BackupName.isBackup($0.name) }.count) backups), \(folders.count) folders, "
            + "\(queued.count) queued (\(attention) need attention)"
    }

    /// Every item as the user sees it, its folder by name, sorted.
    var itemLines: [String] {
        items.values.map { item in
            "\"\(item.name)\" pw=\(item.password ?? "-") history=\(item.history) deleted=\(item.deleted) archived=\(item.archived) "
                + "folder=\(item.folderID.map { "\"\(folders[$0] ?? "?")\"" } ?? "-") favorite=\(item.favorite)"
        }.sorted()
    }
}

@Suite("Deterministic simulation", .serialized)
struct SimulationTests {
    @Test("random seeds: three devices with skewed clocks on a network that drops, delays and partitions never lose an edit")
    func seeds() async throws {
        let environment = ProcessInfo.processInfo.environment
        let seeds: [UInt64]
        if let one = environment["VAULTSYNC_SIM_SEED"].flatMap({ UInt64($0) }) {
            seeds = [one]
        } else {
            let count = RunSize.value("VAULTSYNC_SIM_SEEDS", ci: 1_000, long: 100_000)
            let first = environment["VAULTSYNC_SIM_FIRST_SEED"].flatMap { UInt64($0) } ?? 1
            seeds = (0..<UInt64(count)).map { first + $0 }
        }
        // Each seed is a world of its own; lanes run seeds side by side. `VAULTSYNC_SIM_REPLAYS=N` runs
        // every seed N times and fails one whose traces differ.
        let lanes = max(1, min(RunSize.value("VAULTSYNC_SIM_LANES", ci: 2, long: 2), seeds.count))
        let replays = max(1, RunSize.value("VAULTSYNC_SIM_REPLAYS", ci: 1, long: 1))
        // `VAULTSYNC_SIM_TRACES=DIR` writes every seed's trace to DIR/<seed>.txt (two runs' folders compare with diff).
        let traces = environment["VAULTSYNC_SIM_TRACES"]
        if let traces { try FileManager.default.createDirectory(atPath: traces, withIntermediateDirectories: true) }
        let started = ContinuousClock.now
        let dispenser = SeedDispenser(seeds: seeds, stopAfterFailures: 5)
        let phases = PhaseTotals()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<lanes {
                group.addTask {
                    while let seed = await dispenser.next() {
                        await dispenser.finished(seed, findings: await Self.run(seed: seed, replays: replays, verbose: seeds.count == 1,
                                                                                phases: phases, traces: traces))
                    }
                }
            }
            try await group.waitForAll()
        }
        for (seed, findings) in await dispenser.failures {
            let line = "VAULTSYNC_SIM_SEED=\(seed) swift test --filter VaultReliabilityTests.SimulationTests"
            Issue.record("simulation seed \(seed) failed; reproduce with: \(line)\n\(findings.prefix(80).joined(separator: "\n"))")
        }
        let failed = await dispenser.failures.map(\.seed)
        let ran = await dispenser.handedOut
        print("simulation: \(ran) seeds (\(seeds.first ?? 0)…\(seeds.last ?? 0)), \(failed.count) failed \(failed), "
              + "\(lanes) lane(s), \(replays) run(s) each, \(ContinuousClock.now - started); time per phase summed over lanes: \(phases.summary)")
        print("simulation events: \(phases.countSummary)")
    }

    /// Runs `seed` `replays` times; returns the findings (with the trace) of a failed run, or of runs whose traces differ.
    static func run(seed: UInt64, replays: Int, verbose: Bool, phases: PhaseTotals, traces: String?) async -> [String] {
        var first: [String]?
        for replay in 0..<replays {
            let outcome: SeedOutcome
            do {
                outcome = try await Simulation(seed: seed, verbose: verbose && replay == 0, phases: phases).run()
            } catch {
                return ["error: \(error)"]
            }
            if replay == 0, let traces {
                _ = FileManager.default.createFile(atPath: "\(traces)/\(seed).txt", contents: Data((outcome.trace.joined(separator: "\n") + "\n").utf8))
            }
            if !outcome.findings.isEmpty { return outcome.findings + ["trace:"] + outcome.trace }
            if let first, first != outcome.trace { return ["replay \(replay + 1) differs from the first run:"] + traceDifference(first, outcome.trace) }
            first = outcome.trace
        }
        return []
    }

    /// The seed the replay test runs: faults (a delay, a cut token refresh, a closed sync, a 500), three
    /// expired access tokens, a trash that meets an edit made elsewhere (two backups), a save during a push.
    static let replaySeed: UInt64 = 128

    @Test("a seed replays exactly: ten runs print the same trace, byte for byte")
    func replay() async throws {
        let seed = ProcessInfo.processInfo.environment["VAULTSYNC_SIM_REPLAY_SEED"].flatMap { UInt64($0) } ?? Self.replaySeed
        var traces: [String] = []
        for _ in 0..<10 {
            let outcome = try await Simulation(seed: seed, verbose: false).run()
            #expect(outcome.findings.isEmpty, "seed \(seed): \(outcome.findings)")
            traces.append(outcome.trace.joined(separator: "\n") + "\n")
        }
        let first = traces[0]
        for (index, trace) in traces.enumerated().dropFirst() {
            let difference = traceDifference(first.components(separatedBy: "\n"), trace.components(separatedBy: "\n")).joined(separator: "\n")
            #expect(Array(trace.utf8) == Array(first.utf8), "run \(index + 1) of seed \(seed) differs:\n\(difference)")
        }
        // The seed is worth replaying: it meets faults, refreshes an expired token, makes a conflict backup
        // and saves during a push.
        #expect(first.contains("faults:"), "seed \(seed) meets no fault")
        #expect(first.contains(" during "), "seed \(seed) saves nothing during a push")
        #expect(first.contains("access token expired"), "seed \(seed) has no expired access token")
        #expect(first.contains(" - offline conflict "), "seed \(seed) makes no conflict backup")
        print("simulation replay: seed \(seed), 10 runs, \(first.split(separator: "\n").count) lines, \(first.utf8.count) bytes each, identical")
    }
}

/// The first line where two traces differ, with the line before it.
func traceDifference(_ first: [String], _ second: [String]) -> [String] {
    for index in 0..<max(first.count, second.count) {
        let a = index < first.count ? first[index] : "(end)"
        let b = index < second.count ? second[index] : "(end)"
        if a != b {
            return (index > 0 ? ["  same: \(first[index - 1])"] : []) + ["  first: \(a)", "  later: \(b)"]
        }
    }
    return []
}

/// Hands out seeds to lanes in order and collects failures; stops handing out after enough failures.
actor SeedDispenser {
    private let seeds: [UInt64]
    private let stopAfterFailures: Int
    private(set) var handedOut = 0
    private(set) var failures: [(seed: UInt64, findings: [String])] = []
    private(set) var finished = 0
    private let started = ContinuousClock.now

    init(seeds: [UInt64], stopAfterFailures: Int) {
        self.seeds = seeds
        self.stopAfterFailures = stopAfterFailures
    }

    func next() -> UInt64? {
        guard failures.count < stopAfterFailures, handedOut < seeds.count else { return nil }
        defer { handedOut += 1 }
        return seeds[handedOut]
    }

    /// Records a finished seed; a failure and every 1,000th seed are printed at once, so that a long
    /// run stopped midway still shows how far it got and what failed.
    func finished(_ seed: UInt64, findings: [String]) {
        finished += 1
        if !findings.isEmpty {
            failures.append((seed, findings))
            print("simulation seed \(seed) FAILED; reproduce with: VAULTSYNC_SIM_SEED=\(seed) swift test --filter VaultReliabilityTests.SimulationTests")
        }
        if finished % 1_000 == 0 {
            print("simulation progress: \(finished) seeds finished (last \(seed)), \(failures.count) failed, \(ContinuousClock.now - started)")
        }
    }
}

/// Wall time spent per phase, summed over lanes (where a seed's time goes), and counts of events
/// that the figures report.
final class PhaseTotals: @unchecked Sendable {
    private let lock = NSLock()
    private var totals: [String: Duration] = [:]
    private var order: [String] = []
    private var counts: [String: Int] = [:]

    func count(_ event: String, _ times: Int) {
        lock.withLock { counts[event, default: 0] += times }
    }

    var countSummary: String {
        lock.withLock { counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") }
    }

    func add(_ phase: String, _ duration: Duration) {
        lock.withLock {
            if totals[phase] == nil { order.append(phase) }
            totals[phase, default: .zero] += duration
        }
    }

    /// Runs `body`, adding its wall time to `phase`.
    func measure<T>(_ phase: String, _ body: () async throws -> T) async rethrows -> T {
        let started = ContinuousClock.now
        defer { add(phase, ContinuousClock.now - started) }
        return try await body()
    }

    var summary: String {
        lock.withLock {
            order.map { phase in
                let seconds = Double(totals[phase]!.components.seconds) + Double(totals[phase]!.components.attoseconds) / 1e18
                return "\(phase) \(String(format: "%.1f", seconds)) s"
            }.joined(separator: ", ")
        }
    }
}

