import Foundation
import VaultClient
import VaultModels
import VaultTestSupport

/// P5: peak RSS of a process that resolves a small and a large queue of offline changes (each in its
/// own child process, so each peak is its own), against the same local server. The queues are made
/// through the real offline path (new items saved while the server is unreachable).
enum QueueMemoryBenchmark {
    struct ChildOutput: Codable {
        var resolved: Int
        var seconds: Double
        /// The resolution alone (`resolveQueue()`), without the full sync after it.
        var resolutionSeconds: Double
        var unlockedRSSMiB: Double
        /// The high-water mark after the resolution (`resolveQueue()`), before the full sync.
        var resolutionPeakRSSMiB: Double
        var peakRSSMiB: Double
    }

    /// What a child resolves with: the profile, and whether bulk creates are used (`false`: one create
    /// per item, as against a server without the bulk route).
    struct ChildInput: Codable {
        var account: AccountProfile
        var bulk: Bool
    }

    static func run(options: BenchOptions) async throws -> [BenchResult] {
        let (small, large) = options.quick ? (200, 2_000) : (1_000, 100_000)
        if options.quick { print("P5: quick run resolves \(small) vs \(large) queued changes (full run: 1k vs 100k)") }
        let server = benchServer()
        try await server.start()
        defer { Task { await server.destroy() } }
        let url = await server.url
        // A fresh account per run: each resolution starts from the same empty server vault.
        func resolve(_ size: Int, bulk: Bool) async throws -> ChildOutput {
            let account = try await BenchAccount.register(url: url)
            let profile = temporaryDirectory("vaultsync-bench-p5")
            defer { try? FileManager.default.removeItem(atPath: profile) }
            let path = profile + "/vault.sqlite"
            try await queueOfflineCreates(size, account: account, path: path)
            let input = ChildInput(account: AccountProfile(url: url, email: account.email, password: account.password, profile: path), bulk: bulk)
            let output = try await runChild("p5", input: input, as: ChildOutput.self)
            precondition(output.resolved == size, "resolved \(output.resolved) of \(size)")
            print(String(format: "P5: %d queued creates%@ resolved in %.1f s (with the full sync after it %.1f s), peak RSS %.0f MiB (%.0f MiB after unlock, %.0f MiB after the resolution, before the full sync)",
                         size, bulk ? "" : " (one create per item)", output.resolutionSeconds, output.seconds, output.peakRSSMiB,
                         output.unlockedRSSMiB, output.resolutionPeakRSSMiB))
            return output
        }
        let (few, many) = (try await resolve(small, bulk: true), try await resolve(large, bulk: true))
        // The other servers' path (no bulk route: one POST each) at the small size; its rate says what
        // the large queue would take there.
        let single = try await resolve(small, bulk: false)
        let ratio = many.peakRSSMiB / few.peakRSSMiB
        let goalSeconds = 30.0 * Double(large) / 100_000
        let perItem = single.resolutionSeconds / Double(small)
        return [
            BenchResult(id: "P5", what: "peak RSS resolving \(large) vs \(small) queued creates" + (options.quick ? " (quick)" : ""),
                        value: many.peakRSSMiB, unit: "MiB", reference: few.peakRSSMiB,
                        referenceWhat: "the same with \(small) queued creates", ratio: ratio, goal: "ratio ≤ 2", met: ratio <= 2),
            BenchResult(id: "P5-time", what: "resolve \(large) queued creates, our server (bulk)" + (options.quick ? " (quick)" : ""),
                        value: many.resolutionSeconds, unit: "s", reference: perItem * Double(large),
                        referenceWhat: String(format: "one create per item (other servers): %.2f ms each, measured on %d, × %d", perItem * 1000, small, large),
                        ratio: many.resolutionSeconds / (perItem * Double(large)),
                        goal: String(format: "≤ %g s (30 s / 100k)", goalSeconds), met: many.resolutionSeconds <= goalSeconds),
        ]
    }

    /// Logs a profile in (empty vault), then saves `count` new items with the server unreachable.
    static func queueOfflineCreates(_ count: Int, account: BenchAccount, path: String) async throws {
        let online = try VaultEngine(databasePath: path, configuration: EngineConfiguration(serverURL: account.url))
        try await online.login(email: account.email, password: account.password, acceptingKdf: BenchAccount.kdf)
        await online.shutdown()
        var configuration = EngineConfiguration(serverURL: deadServerURL())
        configuration.api.requestTimeout = .seconds(2)
        let offline = try VaultEngine(databasePath: path, configuration: configuration, logger: quietLogger())
        try await offline.unlock(email: account.email, password: account.password)
        for index in 0..<count {
            var view = CipherView(type: .login, name: "Queued \(index)")
            view.login = LoginView(uris: [LoginURIView(uri: "https://queued\(index).example")], username: "user\(index)", password: "pw-\(index)")
            _ = try await offline.addItem(view)
        }
        let queued = try await offline.pendingCount()
        precondition(queued == count, "expected \(count) queued changes, found \(queued)")
        await offline.shutdown()
    }

    /// The child: unlock offline, then one sync resolves the whole queue.
    static func child() async throws {
        let child = try readChildInput(ChildInput.self)
        let input = child.account
        var configuration = EngineConfiguration(serverURL: input.url)
        configuration.resolutionConcurrency = 8
        if !child.bulk { configuration.bulkPushSize = 0 }
        let engine = try VaultEngine(databasePath: input.profile, configuration: configuration, logger: quietLogger())
        try await engine.unlock(email: input.email, password: input.password)
        let unlocked = peakRSSMiB()
        // `sync()` in its two parts, so the high-water mark of each is known.
        var report = SyncReport()
        var afterResolution = 0.0
        var resolutionSeconds = 0.0
        let seconds = try await measureAsync {
            resolutionSeconds = try await measureAsync { report = try await engine.resolveQueue() }
            afterResolution = peakRSSMiB()
            _ = try await engine.pull()
        }
        guard report.stillPending == 0, report.needsAttention == 0 else {
            throw ChildProcessError.unreadable("p5", output: "resolution incomplete: \(report)")
        }
        await engine.shutdown()
        try writeChildOutput(ChildOutput(resolved: report.resolved, seconds: seconds, resolutionSeconds: resolutionSeconds, unlockedRSSMiB: unlocked,
                                         resolutionPeakRSSMiB: afterResolution, peakRSSMiB: peakRSSMiB()))
    }
}
