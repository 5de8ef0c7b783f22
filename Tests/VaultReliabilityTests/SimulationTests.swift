import Foundation
import Testing
@testable import VaultClient
import VaultModels
import VaultTestSupport

/// One seed of the simulation: 3 devices of one account on one real server (SQLite), each with a
/// skewed clock and its own network (a fault proxy that drops, delays, truncates and partitions),
/// doing a random sequence of operations, locks, syncs, partitions and clock jumps. Everything random
/// comes from the seed; the same seed replays the same sequence.
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

    /// Runs the seed on `devices` (unlocked, with empty vaults, as is the server's); returns what went
    /// wrong (empty: every invariant held after every step and at the end).
    func run(template: AccountTemplate, devices: [SimDevice]) async throws -> [String] {
        var generator = SeededRandom(seed: seed)
        var expiries = SeededRandom(seed: seed ^ Self.expirySeedMask)
        let started = ContinuousClock.now
        let steps = Int.random(in: 4...12, using: &generator)
        let ledger = Ledger(tag: "s\(seed)")
        var trace: [String] = []
        var faultRates: [Double] = []
        for device in devices {
            let faultRate = [0, 0.05, 0.15, 0.3][Int.random(in: 0..<4, using: &generator)]
            faultRates.append(faultRate)
            await device.proxy.setRandomFaults([], seed: 0)
            await device.proxy.setPartitioned(false)
            device.clock.set(skewSeconds: Self.baseSkews[device.index])
            trace.append("device \(device.index): skew \(device.clock.skewSeconds) s, fault rate \(faultRate)")
        }
        // A few items everyone has, so that edits on different devices meet.
        for _ in 0..<2 { try await devices[0].perform(.add, targets: Targets(items: [], folders: []), ledger: ledger, using: &generator) }
        for device in devices.dropFirst() { try await device.engine.pull() }
        for (device, faultRate) in zip(devices, faultRates) {
            await device.proxy.setRandomFaults([FaultProxy.RandomFault(
                probability: faultRate,
                actions: [.fail(status: 500), .fail(status: 502), .fail(status: 503), .dropBeforeForwarding, .forwardThenClose,
                          .forwardThenDrop, .truncateBody, .delay(milliseconds: 20)])], seed: seed &* 7 &+ UInt64(device.index))
        }
        phases.add("set-up", ContinuousClock.now - started)
        if verbose { print("seed \(seed): set-up \(ContinuousClock.now - started)") }
        return try await play(steps: steps, devices: devices, template: template, ledger: ledger, trace: &trace,
                              using: &generator, expiries: &expiries)
    }

    func play(steps: Int, devices: [SimDevice], template: AccountTemplate, ledger: Ledger, trace: inout [String],
              using generator: inout SeededRandom, expiries: inout SeededRandom) async throws -> [String] {
        var snapshots: [DeviceSnapshot] = []
        for device in devices { snapshots.append(try await DeviceSnapshot.take(device)) }

        func fail(_ findings: [String], _ trace: [String]) -> [String] {
            findings + ["trace:"] + trace.suffix(40)
        }
        for step in 0..<steps {
            let stepStarted = ContinuousClock.now
            let device = devices[Int.random(in: 0..<devices.count, using: &generator)]
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
                    try await device.engine.unlock(email: template.email, password: reliabilityPassword)
                    device.locked = false
                    event = "unlock"
                }
            } else if roll < 3 {
                await device.engine.lock()
                device.locked = true
                device.lockedSteps = Int.random(in: 1...3, using: &generator)
                event = "lock"
            } else if roll < 11 {
                let partitioned = Bool.random(using: &generator)
                await device.proxy.setPartitioned(partitioned)
                event = partitioned ? "partition" : "heal"
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
                if saveDuringPush {
                    let fallback = targets.items.isEmpty ? nil : targets.items[Int.random(in: 0..<targets.items.count, using: &expiries)].id
                    await device.saveDuringNextPush(ledger: ledger, fallback: fallback)
                }
                try await device.perform(operation, targets: targets, ledger: ledger, using: &generator)
                if saveDuringPush { await device.proxy.setForwardHook(nil) }
                event = operation.rawValue + (saveDuringPush ? " (a save if it pushes)" : "")
            }
            if expired { event = "access token expired, then " + event }
            trace.append("step \(step): device \(device.index) \(event)")
            if verbose { print("seed \(seed) step \(step): device \(device.index) \(event)") }

            let checking = ContinuousClock.now
            phases.add("steps", checking - stepStarted)
            // Invariants after every step.
            var findings = try Invariants.plaintextFindings(device, secrets: ledger.secrets)
            phases.add("scans after steps", ContinuousClock.now - checking)
            let snapshotting = ContinuousClock.now
            if !device.locked {
                snapshots[device.index] = try await DeviceSnapshot.take(device)
                findings += Invariants.queueFindings(snapshots[device.index], device: device.index)
            }
            // A locked device's files did not change since its last snapshot: the union is current.
            let present = snapshots.reduce(into: Set<String>()) { $0.formUnion($1.passwords) }
            findings += ledger.lost(present: present).map { "lost after step \(step): \($0)" }
            phases.add("snapshots after steps", ContinuousClock.now - snapshotting)
            if !findings.isEmpty { return fail(findings, trace) }
        }
        let settling = ContinuousClock.now
        let final = try await settle(devices, email: template.email)
        let checking = ContinuousClock.now
        phases.add("final rounds", checking - settling)
        if verbose { print("seed \(seed): final rounds \(checking - settling)") }
        let findings = try finalFindings(devices, snapshots: final, ledger: ledger)
        phases.add("final checks", ContinuousClock.now - checking)
        phases.count("saves during a push", ledger.counts["save during a push"] ?? 0)
        if verbose { print("seed \(seed): \(ledger.counts.sorted { $0.key < $1.key })") }
        return findings.isEmpty ? [] : fail(findings, trace)
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
        // Lanes run seeds side by side, each with its own account and devices, on the one server.
        // A seed's sequence depends on its seed only, whichever lane runs it.
        let lanes = max(1, min(RunSize.value("VAULTSYNC_SIM_LANES", ci: 2, long: 2), seeds.count))
        let started = ContinuousClock.now
        let server = LiveServer()
        try await server.start()
        let upstream = await server.url
        let dispenser = SeedDispenser(seeds: seeds, stopAfterFailures: 5)
        let phases = PhaseTotals()
        let refreshes = try await withThrowingTaskGroup(of: [String: Int].self) { group in
            for _ in 0..<lanes {
                group.addTask {
                    let lane = try await SimulationLane.open(upstream: upstream)
                    do {
                        try await lane.run(dispenser: dispenser, phases: phases, verbose: seeds.count == 1)
                    } catch {
                        await lane.close()
                        throw error
                    }
                    var refreshes: [String: Int] = [:]
                    for device in lane.devices { refreshes.merge(await device.proxy.tally(pathPrefix: tokenPath)) { $0 + $1 } }
                    await lane.close()
                    return refreshes
                }
            }
            return try await group.reduce(into: [String: Int]()) { $0.merge($1) { $0 + $1 } }
        }
        for (seed, findings) in await dispenser.failures {
            let line = "VAULTSYNC_SIM_SEED=\(seed) swift test --filter VaultReliabilityTests.SimulationTests"
            Issue.record("simulation seed \(seed) failed; reproduce with: \(line)\n\(findings.prefix(60).joined(separator: "\n"))")
        }
        let failed = await dispenser.failures.map(\.seed)
        let ran = await dispenser.handedOut
        print("simulation: \(ran) seeds (\(seeds.first ?? 0)…\(seeds.last ?? 0)), \(failed.count) failed \(failed), "
              + "\(lanes) lane(s), \(ContinuousClock.now - started); time per phase summed over lanes: \(phases.summary)")
        print("simulation token refreshes: \(describeRefreshes(refreshes)); events: \(phases.countSummary)")
        await server.destroy()
    }
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

/// One lane of the simulation: an account with a janitor (talking to the server directly) and the
/// simulated devices (each behind its own fault proxy). The devices live through all of the lane's
/// seeds (unlocking costs a key derivation); each seed starts them with empty vaults.
struct SimulationLane: Sendable {
    let template: AccountTemplate
    let janitor: SimDevice
    let devices: [SimDevice]

    static func open(upstream: String) async throws -> SimulationLane {
        let template = try await AccountTemplate.register(serverURL: upstream)
        let janitor = try await SimDevice.cloned(from: template.databasePath, index: -1, proxy: FaultProxy(upstream: upstream), url: upstream,
                                                 clock: SkewedClock(skewSeconds: 0), email: template.email, ownLogin: true) { _ in }
        var devices: [SimDevice] = []
        for index in 0..<Simulation.deviceCount {
            let proxy = FaultProxy(upstream: upstream)
            try await proxy.start()
            devices.append(try await SimDevice.cloned(from: template.databasePath, index: index, proxy: proxy,
                                                      clock: SkewedClock(skewSeconds: Simulation.baseSkews[index]),
                                                      email: template.email, ownLogin: true) { $0.resolutionConcurrency = 1 })
            _ = await proxy.tally(pathPrefix: tokenPath)
        }
        return SimulationLane(template: template, janitor: janitor, devices: devices)
    }

    func run(dispenser: SeedDispenser, phases: PhaseTotals, verbose: Bool) async throws {
        while let seed = await dispenser.next() {
            let findings: [String]
            do {
                findings = try await Simulation(seed: seed, verbose: verbose, phases: phases).run(template: template, devices: devices)
            } catch {
                // An error out of a seed (a device's session ended, storage failed) fails the seed: it is
                // printed with its reproduction line before the lane stops.
                await dispenser.finished(seed, findings: ["error: \(error)"])
                throw error
            }
            await dispenser.finished(seed, findings: findings)
            try await phases.measure("emptying") {
                try await emptyVault()
                for device in devices {
                    if device.locked {
                        try await device.engine.unlock(email: template.email, password: reliabilityPassword)
                        device.locked = false
                    }
                    try await device.emptyLocalVault()
                }
            }
        }
    }

    /// Deletes everything on the server so the next seed starts from an empty vault.
    func emptyVault() async throws {
        try await janitor.engine.pull()
        for item in try await janitor.engine.items() {
            _ = try await janitor.engine.permanentlyDeleteItem(id: item.id)
        }
        for folder in try await janitor.engine.folders() {
            if let id = folder.id { _ = try await janitor.engine.deleteFolder(id: id) }
        }
        try await janitor.engine.pull()
        let left = try await janitor.engine.items().count + janitor.engine.folders().count
        try #require(left == 0, "the vault could not be emptied between seeds")
    }

    func close() async {
        for device in devices {
            await device.proxy.stop()
            await device.remove()
        }
        await janitor.remove()
    }
}
