import AsyncHTTPClient
import Foundation
import Logging
import VaultAPI
import VaultClient
import VaultCrypto
import VaultModels
import VaultTestSupport

/// P2: resolve N queued offline updates against the local server, next to the seeds' algorithm (one GET
/// and one PUT per item, sequential) on the same server in the same run.
enum ResolutionBenchmark {
    static func run(options: BenchOptions) async throws -> [BenchResult] {
        let count = options.quick ? 1_000 : 10_000
        let (server, url, account) = try await BenchAccount.serverWithVault(items: count)
        defer { Task { await server.destroy() } }
        let (email, password, api, keys) = (account.email, account.password, account.api, account.keys)

        let profile = temporaryDirectory("vaultsync-bench")
        defer { try? FileManager.default.removeItem(atPath: profile) }
        var configuration = EngineConfiguration(serverURL: url)
        configuration.resolutionConcurrency = 8
        if let size = ProcessInfo.processInfo.environment["VAULTSYNC_BULK_SIZE"].flatMap(Int.init) { configuration.bulkPushSize = size }
        if let size = ProcessInfo.processInfo.environment["VAULTSYNC_PAGE_SIZE"].flatMap(Int.init) { configuration.resolutionPageSize = size }
        // VAULTSYNC_LOG=debug shows the resolution's phase timings.
        var engineLogger = Logger(label: "vaultsync.engine")
        engineLogger.logLevel = ProcessInfo.processInfo.environment["VAULTSYNC_LOG"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        let online = try VaultEngine(databasePath: profile + "/vault.sqlite", configuration: configuration, logger: engineLogger)
        try await online.login(email: email, password: password, acceptingKdf: BenchAccount.kdf)

        // N offline updates (the real offline path: a dead server, encrypt, store, queue).
        var offlineConfiguration = EngineConfiguration(serverURL: deadServerURL())
        offlineConfiguration.api.requestTimeout = .seconds(2)
        let offline = try VaultEngine(databasePath: profile + "/vault.sqlite", configuration: offlineConfiguration, logger: quietLogger())
        try await offline.unlock(email: email, password: password)
        let views = try await offline.items().compactMap { try? $0.result.get() }
        for var view in views {
            let changed = (view.login?.password ?? "") + "-offline"
            view.login?.password = changed
            _ = try await offline.updateItem(view)
        }
        let queued = try await offline.pendingCount()
        precondition(queued == count, "expected \(count) queued changes, found \(queued)")

        // Ours: one sync resolves them all (resolution, then the full sync that follows it, timed apart).
        try await online.unlock(email: email, password: password)
        var report = SyncReport()
        let perf = PerfControl.fromEnvironment()
        perf?.send("enable")
        let ours = try await measureAsync { report = try await online.resolveQueue() }
        perf?.send("disable")
        precondition(report.resolved == count && report.backups.isEmpty, "resolution incomplete: \(report)")
        let oursFullSync = try await measureAsync { _ = try await online.pull() }

        // The seeds' way, same server, same items: GET then PUT, one item at a time.
        let sync = try await api.sync(token: account.accessToken)
        let wires = sync.ciphers.compactMap { try? CipherWire(json: $0, path: "cipher") }
        // Their queue holds encrypted bodies too (encrypted at save time, with each item's own key), so
        // encryption is not timed: one GET, then one PUT of the queued body, per item.
        let bodies = try wires.map { wire in
            let fieldKey = try keys.fieldKey(itemKey: wire.key, organizationId: wire.organizationId, itemID: wire.id)
            var body = wire
            body.notes = try EncString.encrypt("reference", key: fieldKey)
            return body
        }
        let reference = try await measureAsync {
            for body in bodies {
                let fresh = try await api.getCipher(id: body.id!, token: account.accessToken)
                _ = try await api.updateCipher(body, id: body.id!, lastKnownRevisionDate: fresh.revisionDate, token: account.accessToken)
            }
        }
        // The seeds' flow also ends with a full sync (seed 001 Flow 2): the same engine's, after their pushes.
        let referenceFullSync = try await measureAsync { _ = try await online.pull() }
        await online.shutdown()
        await offline.shutdown()
        let ratio = reference / ours
        let withSync = (ours: ours + oursFullSync, reference: reference + referenceFullSync)
        return [BenchResult(id: "P2", what: "resolve \(count) queued updates (local server, SQLite)", value: ours, unit: "s",
                            reference: reference, referenceWhat: "seeds' per-item GET + PUT, sequential", ratio: ratio,
                            goal: count == 10_000 ? "≤ 10 s; ≥ 10× faster" : "≥ 10× faster (quick: 1k)",
                            met: ratio >= 10 && (count < 10_000 || ours <= 10)),
                BenchResult(id: "P2-sync", what: "the same plus the full sync that follows (`sync()`)", value: withSync.ours, unit: "s",
                            reference: withSync.reference, referenceWhat: "seeds' pushes + the same full sync",
                            ratio: withSync.reference / withSync.ours, goal: "report", met: nil)]
    }
}

/// `VAULTSYNC_PERF_CTL=FIFO`: the control fifo of `perf record --control=fifo:FIFO -D -1`, so a profile
/// covers only the timed resolution (not the vault's setup or the reference).
struct PerfControl {
    let handle: FileHandle

    static func fromEnvironment() -> PerfControl? {
        guard let path = ProcessInfo.processInfo.environment["VAULTSYNC_PERF_CTL"],
              let handle = FileHandle(forWritingAtPath: path) else { return nil }
        return PerfControl(handle: handle)
    }

    func send(_ command: String) { handle.write(Data((command + "\n").utf8)) }
}

/// Seconds taken by an async body.
func measureAsync(_ body: () async throws -> Void) async rethrows -> Double {
    let clock = ContinuousClock()
    let start = clock.now
    try await body()
    let elapsed = clock.now - start
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
}
