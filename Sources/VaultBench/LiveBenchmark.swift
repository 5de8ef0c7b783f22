import Foundation
import Logging
import VaultClient
import VaultCrypto
import VaultModels
import VaultSyncCore
import VaultServer
import VaultTestSupport

/// L0 and L1 (docs/BENCHMARKS.md, "L: live sync"), release build, loopback, each next to its reference
/// in the same run (L2 is ``HubScaleBenchmark``, L3 ``ReconnectBenchmark``):
/// - L0: an offline save on a hanging network (the connection accepted, no answer ever) returns within
///   the save deadline (3 s); reference: the same save with nothing listening (refused at once).
/// - L1: an online save on device A until device B's local store holds it, B live over the hub;
///   reference: A's online save alone (its round trip to the server). On one node, and with
///   `--postgres` across two nodes on one PostgreSQL database (A on the first, B on the second).
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
        let rounds1 = options.quick ? 50 : 300
        let sameNode = try await delivery(from: a, to: b, rounds: rounds1)
        results += sameNode.rows(prefix: "L1", place: "", p99Goal: 0.3)
        for engine in [hanging, refused, a, b] { await engine.shutdown() }

        // L1 across two nodes: A on node 1, B on node 2, one PostgreSQL database; the change reaches
        // node 2 through NOTIFY/LISTEN.
        if let adminURL = options.postgresURL {
            results += try await withThrowawayDatabase(adminURL: adminURL) { databaseURL in
                // Nodes sharing a database share the token signing key (README, "Token signing key").
                let tokenKey = SystemRandomSource().bytes(count: 64)
                let first = benchServer(postgresURL: databaseURL, tokenKey: tokenKey)
                let second = benchServer(postgresURL: databaseURL, tokenKey: tokenKey)
                try await first.start()
                try await second.start()
                let shared = try await BenchAccount.register(url: await first.url)
                let onFirst = try await device(root + "/node1", url: await first.url, account: shared)
                let onSecond = try await device(root + "/node2", url: await second.url, account: shared)
                let measured = try await delivery(from: onFirst, to: onSecond, rounds: rounds1)
                for engine in [onFirst, onSecond] { await engine.shutdown() }
                await second.destroy()
                await first.destroy()
                return measured.rows(prefix: "L1-pg", place: "2 nodes, PostgreSQL", p99Goal: 0.5)
            }
        } else {
            let reason = "skipped: no --postgres URL (nor VAULTSYNC_TEST_POSTGRES_URL)"
            print("L1-pg: \(reason)")
            results.append(BenchResult(id: "L1-pg-p99", what: reason, value: 0, unit: "ms", goal: "≤ 500 ms", met: nil))
        }
        return results
    }

    /// L1's figures: each round A saves online and waits until B's live sync has stored the item.
    struct Delivery {
        var delivery: [Double] = []
        var saves: [Double] = []

        /// `place`: where A and B are, for the row's text (empty: one node).
        func rows(prefix: String, place: String, p99Goal: Double) -> [BenchResult] {
            let (p50, p99) = (percentile(delivery, 0.5), percentile(delivery, 0.99))
            return [
                BenchResult(id: "\(prefix)-p50", what: place.isEmpty ? "online save on A until B's store has it, p50" : "the same, \(place), p50",
                            value: p50 * 1000, unit: "ms", reference: percentile(saves, 0.5) * 1000, referenceWhat: "A's online save alone, p50",
                            ratio: nil, goal: "≤ 100 ms", met: p50 <= 0.1),
                BenchResult(id: "\(prefix)-p99", what: "the same, \(place.isEmpty ? "" : place + ", ")p99 of \(delivery.count)", value: p99 * 1000,
                            unit: "ms", reference: percentile(saves, 0.99) * 1000, referenceWhat: "A's online save alone, p99", ratio: nil,
                            goal: "≤ \(Int(p99Goal * 1000)) ms", met: p99 <= p99Goal),
            ]
        }
    }

    /// B runs live sync; `rounds` times, A saves an item online and the clock runs until B's live sync
    /// reports it stored (its `itemChanged` event).
    static func delivery(from a: VaultEngine, to b: VaultEngine, rounds: Int) async throws -> Delivery {
        let events = await b.liveEvents()
        let arrived = ArrivalLog()
        let reader = Task {
            for await event in events {
                if case .itemChanged(let id, _) = event { await arrived.note(id, at: .now) }
            }
        }
        defer { reader.cancel() }
        await b.startLiveSync()
        try await waitFor("B's live sync to connect", within: .seconds(30)) { await b.liveSyncState == .live }
        var measured = Delivery()
        for round in 0..<rounds {
            let start = ContinuousClock.now
            let saved = try await a.addItem(item("L1 \(round)"))
            measured.saves.append((ContinuousClock.now - start).seconds)
            guard saved.outcome == .synced, let id = saved.value.id else { throw LiveBenchError.notSynced("L1 round \(round): \(saved.outcome)") }
            // The time is the event's, taken as it arrived; the wait only polls for it (a loop of yields
            // would keep one of the two cores' cooperative threads, which B and the server need).
            try await waitFor("B to store item \(round)", within: .seconds(30), poll: .milliseconds(1)) { await arrived.arrival(id) != nil }
            guard let arrival = await arrived.arrival(id) else { continue }
            measured.delivery.append((arrival - start).seconds)
        }
        await b.stopLiveSync()
        return measured
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

/// The item ids B's live sync reported and when, for L1's wait.
actor ArrivalLog {
    private var arrivals: [String: ContinuousClock.Instant] = [:]
    func note(_ id: String, at instant: ContinuousClock.Instant) { arrivals[id] = arrivals[id] ?? instant }
    func arrival(_ id: String) -> ContinuousClock.Instant? { arrivals[id] }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

enum LiveBenchError: Error, CustomStringConvertible {
    /// A save meant to reach the server did not.
    case notSynced(String)
    /// What a round waited for did not happen in time.
    case timedOut(String)
    /// What the round needs could not be set up.
    case setup(String)

    var description: String {
        switch self {
        case .notSynced(let what): return "not saved online: \(what)"
        case .timedOut(let what): return "timed out waiting for \(what)"
        case .setup(let what): return what
        }
    }
}

/// Polls `condition` every `poll` until it holds, failing after `within`.
func waitFor(_ what: String, within limit: Duration, poll: Duration = .milliseconds(5),
             _ condition: () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + limit
    while try await !condition() {
        guard ContinuousClock.now < deadline else { throw LiveBenchError.timedOut(what) }
        try await Task.sleep(for: poll)
    }
}

/// Runs `body` with the URL of a new database in the PostgreSQL server of `adminURL`, dropped afterwards.
func withThrowawayDatabase<T>(adminURL: String, _ body: (String) async throws -> T) async throws -> T {
    let name = "vaultbench_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(12)
    let admin = try PostgresDatabase(url: adminURL, logger: Logger(label: "bench-admin"))
    try await admin.executeOutsideTransaction("CREATE DATABASE \(name)")
    guard var components = URLComponents(string: adminURL) else { throw LiveBenchError.setup("unreadable PostgreSQL URL") }
    components.path = "/\(name)"
    do {
        let value = try await body(components.string ?? adminURL)
        try? await admin.executeOutsideTransaction("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        await admin.close()
        return value
    } catch {
        try? await admin.executeOutsideTransaction("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        await admin.close()
        throw error
    }
}
