import Foundation
import Testing
import VaultClient
import VaultTestSupport

@Suite("Faults on the wire", .serialized)
struct FaultScenarioTests {
    /// Several devices of one account, each behind its own fault proxy (30% of requests get a 500,
    /// 502 or 503, a connection dropped before or after forwarding, a delay past the client's timeout
    /// or a truncated body), do random offline-capable operations concurrently. Then the faults stop,
    /// everyone syncs, and every saved password must still exist, nothing twice, all devices alike.
    @Test("devices under a 30% fault rate lose nothing, duplicate nothing and agree once the faults stop")
    func randomOperationsUnderFaults() async throws {
        let environment = ProcessInfo.processInfo.environment
        let operations = RunSize.value("VAULTSYNC_FAULT_OPERATIONS", ci: 800, long: 10_000)
        let deviceCount = RunSize.value("VAULTSYNC_FAULT_DEVICES", ci: 4, long: 4)
        let faultRate = 0.3
        let seed = environment["VAULTSYNC_FAULT_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...999_999)
        let reproduce = "VAULTSYNC_FAULT_SEED=\(seed) VAULTSYNC_FAULT_OPERATIONS=\(operations) swift test --filter VaultReliabilityTests.FaultScenarioTests"
        print("fault scenario: \(operations) operations on \(deviceCount) devices at \(Int(faultRate * 100))% faults; reproduce: \(reproduce)")
        let started = ContinuousClock.now

        // Short-lived access tokens: every device refreshes many times, under the same faults (a refresh
        // whose answer is lost after the server rotated the token must not end the session).
        let tokenSeconds = RunSize.value("VAULTSYNC_FAULT_TOKEN_SECONDS", ci: 10, long: 10)
        let server = LiveServer(configure: { $0.accessTokenLifetime = Int64(tokenSeconds) })
        try await server.start()
        let upstream = await server.url
        let template = try await AccountTemplate.register(serverURL: upstream)
        // Short timeouts while the faults run, so that a delayed request times out on the client.
        let impatient: @Sendable (inout EngineConfiguration) -> Void = { configuration in
            configuration.api.requestTimeout = .seconds(2)
            configuration.api.connectTimeout = .seconds(2)
        }
        var devices: [SimDevice] = []
        for index in 0..<deviceCount {
            let proxy = FaultProxy(upstream: upstream)
            try await proxy.start()
            let clock = SkewedClock(skewSeconds: index == 0 ? 0 : Int64(index * 1_234 - 2_000))
            // Each device logs in on its own (a long-mode run can outlast the access token's hour), with
            // the normal timeouts (the server's password hash can take seconds on a busy machine), then
            // restarts impatient.
            let device = try await SimDevice.cloned(from: template.databasePath, index: index, proxy: proxy, clock: clock,
                                                    email: template.email, ownLogin: true) { _ in }
            try await device.restart(url: await proxy.url, email: template.email, configure: impatient)
            _ = await proxy.tally(pathPrefix: tokenPath)
            devices.append(device)
            await proxy.setRandomFaults([.everything(probability: faultRate, delayMilliseconds: 2_500)], seed: seed &+ UInt64(index))
        }
        let ledger = Ledger(tag: "f\(seed)")

        let share = operations / deviceCount
        try await withThrowingTaskGroup(of: Void.self) { group in
            for device in devices {
                group.addTask {
                    var generator = SeededRandom(seed: seed &* 31 &+ UInt64(device.index))
                    for _ in 0..<share {
                        let operation = Operation.random(using: &generator)
                        try await device.perform(operation, targets: try await device.targetsFromCache(), ledger: ledger, using: &generator)
                    }
                }
            }
            try await group.waitForAll()
        }
        let chaos = ContinuousClock.now - started

        var fired: [String: Int] = [:]
        var requests = 0
        var refreshes: [String: Int] = [:]
        for device in devices {
            fired.merge(await device.proxy.firedByAction) { $0 + $1 }
            requests += await device.proxy.requestCount
            refreshes.merge(await device.proxy.tally(pathPrefix: tokenPath)) { $0 + $1 }
        }
        // Faults off; an app restart with normal timeouts; sync rounds.
        for device in devices {
            try await device.restart(url: await device.proxy.url, email: template.email) { _ in }
        }
        let snapshots = try await settle(devices, email: template.email)
        let findings = try finalFindings(devices, snapshots: snapshots, ledger: ledger)

        let backups = snapshots[0].items.values.filter { $0.name.contains(" - offline conflict ") }.count
        let attention = snapshots.reduce(0) { $0 + $1.queued.count }
        print("fault scenario figures: seed \(seed), \(ledger.counts.filter { !$0.key.contains(" ") }.values.reduce(0, +)) operations done, "
              + "\(requests) requests, \(fired.values.reduce(0, +)) faults \(fired.sorted { $0.key < $1.key }), "
              + "\(ledger.savedPasswordCount) passwords saved, \(snapshots[0].items.count) items on the server (\(backups) conflict backups), "
              + "\(attention) records needing attention, chaos \(chaos), total \(ContinuousClock.now - started)")
        print("fault scenario token refreshes (access tokens live \(tokenSeconds) s): \(describeRefreshes(refreshes))")
        print("fault scenario outcomes: \(ledger.counts.sorted { $0.key < $1.key })")
        #expect(findings.isEmpty, "fault scenario seed \(seed) (\(reproduce)):\n\(findings.prefix(30).joined(separator: "\n"))")

        for device in devices {
            await device.proxy.stop()
            await device.remove()
        }
        await server.destroy()
    }
}
