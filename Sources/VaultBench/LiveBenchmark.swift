import Foundation
import VaultClient
import VaultModels
import VaultSyncCore
import VaultTestSupport

/// L0 and L1 (docs/BENCHMARKS.md, "L: live sync"), release build, loopback, each next to its reference
/// in the same run:
/// - L0: an offline save on a hanging network (the connection accepted, no answer ever) returns within
///   the save deadline (3 s); reference: the same save with nothing listening (refused at once).
/// - L1: an online save on device A until device B's local store holds it, B live over the hub;
///   reference: A's online save alone (its round trip to the server).
enum LiveBenchmark {
    static func run(options: BenchOptions) async throws -> [BenchResult] {
        let server = benchServer()
        try await server.start()
        defer { Task { await server.destroy() } }
        let account = try await BenchAccount.register(url: await server.url)
        let root = temporaryDirectory("vaultsync-bench-live")
        defer { try? FileManager.default.removeItem(atPath: root) }
        var results: [BenchResult] = []

        // L0: the proxy holds every create; the save's own deadline decides.
        let proxy = FaultProxy(upstream: await server.url)
        try await proxy.start()
        await proxy.add(.init(method: "POST", pathPrefix: "/api/ciphers", action: .holdUntilReleased, times: 1_000))
        let hanging = try await device(root + "/hanging", url: await proxy.url, account: account)
        let refused = try await device(root + "/refused", url: deadServerURL(), account: account)
        let rounds = options.quick ? 3 : 10
        var hangingTimes: [Double] = []
        var refusedTimes: [Double] = []
        for round in 0..<rounds {
            hangingTimes.append(try await timed { _ = try await hanging.addItem(item("L0 hanging \(round)")) })
            refusedTimes.append(try await timed { _ = try await refused.addItem(item("L0 refused \(round)")) })
        }
        let l0 = percentile(hangingTimes, 0.99)
        results.append(BenchResult(id: "L0", what: "offline save on a hanging network (p99 of \(rounds))", value: l0 * 1000, unit: "ms",
                                   reference: percentile(refusedTimes, 0.99) * 1000, referenceWhat: "the same save, nothing listening",
                                   ratio: nil, goal: "≤ 3000 ms", met: l0 <= 3.0))
        await proxy.releaseHeld()
        await proxy.stop()

        // L1: B live; A saves online; the time until B's store holds the item.
        let a = try await device(root + "/a", url: await server.url, account: account)
        let b = try await device(root + "/b", url: await server.url, account: account)
        let events = await b.liveEvents()
        let arrived = ArrivalLog()
        let reader = Task { for await event in events { if case .itemChanged(let id, _) = event { await arrived.note(id) } } }
        await b.startLiveSync()
        while await b.liveSyncState != .live { try await Task.sleep(for: .milliseconds(5)) }
        var delivery: [Double] = []
        var saves: [Double] = []
        for round in 0..<(options.quick ? 50 : 300) {
            let start = ContinuousClock.now
            let saved = try await a.addItem(item("L1 \(round)"))
            saves.append((ContinuousClock.now - start).seconds)
            guard let id = saved.value.id else { continue }
            while await !arrived.has(id) { await Task.yield() }
            delivery.append((ContinuousClock.now - start).seconds)
        }
        reader.cancel()
        await b.stopLiveSync()
        let (p50, p99) = (percentile(delivery, 0.5), percentile(delivery, 0.99))
        results.append(BenchResult(id: "L1-p50", what: "online save on A until B's store holds it, p50", value: p50 * 1000, unit: "ms",
                                   reference: percentile(saves, 0.5) * 1000, referenceWhat: "A's online save alone", ratio: nil,
                                   goal: "≤ 100 ms", met: p50 <= 0.1))
        results.append(BenchResult(id: "L1-p99", what: "the same, p99", value: p99 * 1000, unit: "ms",
                                   reference: percentile(saves, 0.99) * 1000, referenceWhat: "A's online save alone", ratio: nil,
                                   goal: "≤ 300 ms", met: p99 <= 0.3))
        for engine in [hanging, refused, a, b] { await engine.shutdown() }
        return results
    }

    /// A device logged in against the real server, then opened pointed at `url` (the proxy, a dead port).
    static func device(_ profile: String, url: String, account: BenchAccount) async throws -> VaultEngine {
        try FileManager.default.createDirectory(atPath: profile, withIntermediateDirectories: true)
        let online = try VaultEngine(databasePath: profile + "/vault.sqlite", configuration: EngineConfiguration(serverURL: account.url),
                                     logger: quietLogger())
        try await online.login(email: account.email, password: account.password, acceptingKdf: BenchAccount.kdf)
        await online.shutdown()
        let engine = try VaultEngine(databasePath: profile + "/vault.sqlite", configuration: EngineConfiguration(serverURL: url), logger: quietLogger())
        try await engine.unlock(email: account.email, password: account.password)
        return engine
    }

    static func item(_ name: String) -> CipherView {
        var view = CipherView(type: .login, name: name)
        view.login = LoginView(username: "bench", password: "pw")
        return view
    }

    static func timed(_ body: () async throws -> Void) async throws -> Double {
        let start = ContinuousClock.now
        try await body()
        return (ContinuousClock.now - start).seconds
    }
}

/// The item ids B's live sync reported, for L1's wait.
actor ArrivalLog {
    private var ids = Set<String>()
    func note(_ id: String) { ids.insert(id) }
    func has(_ id: String) -> Bool { ids.contains(id) }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
