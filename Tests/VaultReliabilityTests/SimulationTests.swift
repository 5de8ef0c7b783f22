import Foundation
import Testing
import VaultClient
import VaultModels
import VaultTestSupport

/// One seed of the simulation: 3 devices of one account on one real server (SQLite), each with a
/// skewed clock and its own network (a fault proxy that drops, delays, truncates and partitions),
/// doing a random sequence of operations, locks, syncs, partitions and clock jumps. Everything random
/// comes from the seed; the same seed replays the same sequence.
struct Simulation {
    let seed: UInt64
    let verbose: Bool

    static let deviceCount = 3

    /// Each device's base clock skew for the whole run (seeds add jumps): hours off in both directions.
    static let baseSkews: [Int64] = [-7_980, 420, 10_800]

    /// Runs the seed on `devices` (unlocked, with empty vaults, as is the server's); returns what went
    /// wrong (empty: every invariant held after every step and at the end).
    func run(template: AccountTemplate, devices: [SimDevice]) async throws -> [String] {
        var generator = SeededRandom(seed: seed)
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
        if verbose { print("seed \(seed): set-up \(ContinuousClock.now - started)") }
        return try await play(steps: steps, devices: devices, template: template, ledger: ledger, trace: &trace, using: &generator)
    }

    func play(steps: Int, devices: [SimDevice], template: AccountTemplate, ledger: Ledger, trace: inout [String],
              using generator: inout SeededRandom) async throws -> [String] {
        var snapshots: [DeviceSnapshot] = []
        for device in devices { snapshots.append(try await DeviceSnapshot.take(device)) }

        func fail(_ findings: [String], _ trace: [String]) -> [String] {
            findings + ["trace:"] + trace.suffix(40)
        }
        for step in 0..<steps {
            let device = devices[Int.random(in: 0..<devices.count, using: &generator)]
            let roll = Int.random(in: 0..<100, using: &generator)
            var event: String
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
                try await device.perform(operation, targets: snapshots[device.index].targets, ledger: ledger, using: &generator)
                event = operation.rawValue
            }
            trace.append("step \(step): device \(device.index) \(event)")
            if verbose { print("seed \(seed) step \(step): device \(device.index) \(event)") }

            // Invariants after every step.
            var findings = try Invariants.plaintextFindings(profile: device.profile, secrets: ledger.secrets)
            if !device.locked {
                snapshots[device.index] = try await DeviceSnapshot.take(device)
                findings += Invariants.queueFindings(snapshots[device.index], device: device.index)
            }
            // A locked device's files did not change since its last snapshot: the union is current.
            let present = snapshots.reduce(into: Set<String>()) { $0.formUnion($1.passwords) }
            findings += ledger.lost(present: present).map { "lost after step \(step): \($0)" }
            if !findings.isEmpty { return fail(findings, trace) }
        }
        let settling = ContinuousClock.now
        let final = try await settle(devices, email: template.email)
        if verbose { print("seed \(seed): final rounds \(ContinuousClock.now - settling)") }
        let findings = try finalFindings(devices, snapshots: final, ledger: ledger)
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
        let started = ContinuousClock.now
        // One server for all seeds; each seed starts from an empty vault on fresh devices.
        let server = LiveServer()
        try await server.start()
        let upstream = await server.url
        let template = try await AccountTemplate.register(serverURL: upstream)
        // The janitor talks to the server directly.
        // The janitor talks to the server directly.
        let janitor = try await SimDevice.cloned(from: template.databasePath, index: -1, proxy: FaultProxy(upstream: upstream), url: upstream,
                                                 clock: SkewedClock(skewSeconds: 0), email: template.email) { _ in }
        // The devices live through all seeds (unlocking costs a key derivation); each seed starts them
        // with empty vaults and their base clock skews.
        var devices: [SimDevice] = []
        for index in 0..<Simulation.deviceCount {
            let proxy = FaultProxy(upstream: upstream)
            try await proxy.start()
            devices.append(try await SimDevice.cloned(from: template.databasePath, index: index, proxy: proxy,
                                                      clock: SkewedClock(skewSeconds: Simulation.baseSkews[index]),
                                                      email: template.email) { $0.resolutionConcurrency = 1 })
        }

        var failed: [UInt64] = []
        for seed in seeds {
            let findings = try await Simulation(seed: seed, verbose: seeds.count == 1).run(template: template, devices: devices)
            if !findings.isEmpty {
                failed.append(seed)
                let line = "VAULTSYNC_SIM_SEED=\(seed) swift test --filter VaultReliabilityTests.SimulationTests"
                Issue.record("simulation seed \(seed) failed; reproduce with: \(line)\n\(findings.prefix(60).joined(separator: "\n"))")
                if failed.count >= 5 { break }
            }
            try await emptyVault(janitor)
            for device in devices {
                if device.locked {
                    try await device.engine.unlock(email: template.email, password: reliabilityPassword)
                    device.locked = false
                }
                try await device.emptyLocalVault()
            }
        }
        print("simulation: \(seeds.count) seeds (\(seeds.first ?? 0)…\(seeds.last ?? 0)), \(failed.count) failed \(failed), \(ContinuousClock.now - started)")
        for device in devices {
            await device.proxy.stop()
            await device.remove()
        }
        await janitor.remove()
        await server.destroy()
    }

    /// Deletes everything on the server so the next seed starts from an empty vault.
    func emptyVault(_ janitor: SimDevice) async throws {
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
}
