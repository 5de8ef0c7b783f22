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
        var unlockedRSSMiB: Double
        /// The high-water mark after the resolution (`resolveQueue()`), before the full sync.
        var resolutionPeakRSSMiB: Double
        var peakRSSMiB: Double
    }

    static func run(options: BenchOptions) async throws -> [BenchResult] {
        let (small, large) = options.quick ? (200, 2_000) : (1_000, 100_000)
        if options.quick { print("P5: quick run resolves \(small) vs \(large) queued changes (full run: 1k vs 100k)") }
        let server = benchServer()
        try await server.start()
        defer { Task { await server.destroy() } }
        let url = await server.url
        var outputs: [ChildOutput] = []
        for size in [small, large] {
            // A fresh account per size: each resolution starts from the same empty server vault.
            let account = try await BenchAccount.register(url: url)
            let profile = temporaryDirectory("vaultsync-bench-p5")
            defer { try? FileManager.default.removeItem(atPath: profile) }
            let path = profile + "/vault.sqlite"
            try await queueOfflineCreates(size, account: account, path: path)
            let output = try await runChild("p5", input: AccountProfile(url: url, email: account.email, password: account.password, profile: path),
                                            as: ChildOutput.self)
            precondition(output.resolved == size, "resolved \(output.resolved) of \(size)")
            print(String(format: "P5: %d queued changes resolved in %.1f s, peak RSS %.0f MiB (%.0f MiB after unlock, %.0f MiB after the resolution, before the full sync)",
                         size, output.seconds, output.peakRSSMiB, output.unlockedRSSMiB, output.resolutionPeakRSSMiB))
            outputs.append(output)
        }
        let ratio = outputs[1].peakRSSMiB / outputs[0].peakRSSMiB
        return [BenchResult(id: "P5", what: "peak RSS resolving \(large) vs \(small) queued creates" + (options.quick ? " (quick)" : ""),
                            value: outputs[1].peakRSSMiB, unit: "MiB", reference: outputs[0].peakRSSMiB,
                            referenceWhat: "the same with \(small) queued creates", ratio: ratio, goal: "ratio ≤ 2", met: ratio <= 2)]
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
        let input = try readChildInput(AccountProfile.self)
        var configuration = EngineConfiguration(serverURL: input.url)
        configuration.resolutionConcurrency = 8
        let engine = try VaultEngine(databasePath: input.profile, configuration: configuration, logger: quietLogger())
        try await engine.unlock(email: input.email, password: input.password)
        let unlocked = peakRSSMiB()
        // `sync()` in its two parts, so the high-water mark of each is known.
        var report = SyncReport()
        var afterResolution = 0.0
        let seconds = try await measureAsync {
            report = try await engine.resolveQueue()
            afterResolution = peakRSSMiB()
            _ = try await engine.pull()
        }
        guard report.stillPending == 0, report.needsAttention == 0 else {
            throw ChildProcessError.unreadable("p5", output: "resolution incomplete: \(report)")
        }
        await engine.shutdown()
        try writeChildOutput(ChildOutput(resolved: report.resolved, seconds: seconds, unlockedRSSMiB: unlocked,
                                         resolutionPeakRSSMiB: afterResolution, peakRSSMiB: peakRSSMiB()))
    }
}
