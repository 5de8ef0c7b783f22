import Foundation
import VaultClient
import VaultTestSupport

/// L3 (docs/BENCHMARKS.md, "L: live sync"): the server comes back, and a change queued while it was
/// away reaches it by itself. Device A runs live sync (what `vaultsync watch` runs); the server stops,
/// A saves offline (queued), the server stays away for a while and starts again on the same port with
/// the same data. The figure is the time from the server listening again until it holds A's change
/// (its account's revision date moves). The reconnection backs off with jitter, capped at 30 s, so a
/// long outage is the worst case: the rounds' outages grow until the backoff is at its cap.
///
/// Reference, in the same rounds: device C, of another account, queued a change the same way and calls
/// `sync()` right when the server is back; its time until the server holds C's change.
enum ReconnectBenchmark {
    static func run(options: BenchOptions) async throws -> [BenchResult] {
        // Seconds the server stays away in each round. From about 30 s of outage on, the backoff's
        // ceiling is its 30 s cap (0.5 s doubled each failure), so the last rounds are the worst case.
        let outages: [Double] = options.quick ? [2, 6] : [3, 10, 45, 60, 60]
        let server = benchServer()
        try await server.start()
        defer { Task { await server.destroy() } }
        let url = await server.url
        let live = try await BenchAccount.register(url: url)
        let manual = try await BenchAccount.register(url: url)
        let root = temporaryDirectory("vaultsync-bench-l3")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let a = try await LiveBenchmark.device(root + "/a", url: url, account: live)
        let c = try await LiveBenchmark.device(root + "/c", url: url, account: manual)
        await a.startLiveSync()
        try await waitFor("A's live sync to connect", within: .seconds(30)) { await a.liveSyncState == .live }

        var byItself: [Double] = []
        var byHand: [Double] = []
        for (round, outage) in outages.enumerated() {
            let liveBefore = try await live.api.revisionDate(token: live.accessToken)
            let manualBefore = try await manual.api.revisionDate(token: manual.accessToken)
            await server.stop()
            try await waitFor("A to notice the server is gone", within: .seconds(30)) { await a.liveSyncState == .offline }
            for (engine, name) in [(a, "A"), (c, "C")] {
                let saved = try await engine.addItem(LiveBenchmark.item("L3 \(name) \(round)"))
                guard case .savedOffline = saved.outcome else {
                    throw LiveBenchError.setup("L3 round \(round): \(name)'s save with the server away was \(saved.outcome), not queued")
                }
            }
            // The outage itself is what the round sets: its length decides where A's backoff stands.
            try await Task.sleep(for: .milliseconds(Int(outage * 1000)))
            try await server.start()
            let back = ContinuousClock.now
            async let manualTime = syncByHand(c, since: back, round: round)
            // The server holds A's change once A's account's revision date moves (nothing else writes to it).
            try await waitFor("the server to hold A's queued change", within: .seconds(90)) {
                (try? await live.api.revisionDate(token: live.accessToken)).map { $0 != liveBefore } ?? false
            }
            byItself.append((ContinuousClock.now - back).seconds)
            byHand.append(try await manualTime)
            guard try await manual.api.revisionDate(token: manual.accessToken) != manualBefore else {
                throw LiveBenchError.notSynced("L3 round \(round): the server does not hold C's change after its sync")
            }
            print(String(format: "L3 round %ld: server away %.0f s; A's queued change accepted %.2f s after it was back (by itself), C's %.3f s (sync by hand)",
                         round, outage, byItself.last!, byHand.last!))
            try await waitFor("A's live sync to reconnect", within: .seconds(60)) { await a.liveSyncState == .live }
        }
        await a.stopLiveSync()
        for engine in [a, c] { await engine.shutdown() }
        let worst = byItself.max() ?? .nan
        print(String(format: "L3: p50 %.1f s, worst %.1f s over outages of ", percentile(byItself, 0.5), worst)
              + outages.map { String(Int($0)) }.joined(separator: ", ") + " s")
        return [
            BenchResult(id: "L3", what: "server back → queued change in, max of \(outages.count)",
                        value: worst, unit: "s", reference: byHand.max(), referenceWhat: "sync() by hand when the server is back, worst",
                        ratio: nil, goal: "≤ 30 s", met: worst <= 30),
        ]
    }

    /// The reference: C syncs by hand as soon as the server is back; seconds from `back` until the
    /// server holds C's queued change.
    static func syncByHand(_ c: VaultEngine, since back: ContinuousClock.Instant, round: Int) async throws -> Double {
        let report = try await c.sync()
        guard report.stillPending == 0 else { throw LiveBenchError.notSynced("L3 round \(round): C's sync left \(report.stillPending) queued") }
        return (ContinuousClock.now - back).seconds
    }
}
