import Foundation
import VaultClient
import VaultCrypto
import VaultTestSupport

/// P3: a fresh device's full sync of a large vault (login, download, store), then decrypting every item
/// for a list, in a child process (its own peak RSS), next to a Python script (`requests` +
/// `cryptography`) doing the same fetch and decryption against the same server in the same run.
enum FullSyncBenchmark {
    struct ChildOutput: Codable {
        var syncSeconds: Double
        var decryptSeconds: Double
        var items: Int
        var peakRSSMiB: Double
        /// The high-water mark after the sync, before the list.
        var syncPeakRSSMiB: Double
        /// The CPU time (user + system, every thread) of the list: above its wall time when it used both cores.
        var decryptCPUSeconds: Double
    }

    struct ReferenceInput: Codable {
        var url: String
        var token: String
        var userKey: String
    }

    struct ReferenceOutput: Codable {
        var fetchSeconds: Double
        var decryptSeconds: Double
        var items: Int
        var fields: Int
        var peakRSSMiB: Double
    }

    static func run(options: BenchOptions) async throws -> [BenchResult] {
        let count = options.quick ? 10_000 : 50_000
        let (server, url, account) = try await BenchAccount.serverWithVault(items: count)
        defer { Task { await server.destroy() } }
        let profile = temporaryDirectory("vaultsync-bench-p3")
        defer { try? FileManager.default.removeItem(atPath: profile) }

        let ours = try await runChild("p3", input: AccountProfile(url: url, email: account.email, password: account.password,
                                                               profile: profile + "/vault.sqlite"), as: ChildOutput.self)
        precondition(ours.items == count, "the child listed \(ours.items) of \(count) items")
        print(String(format: "P3: peak RSS %.0f MiB after the sync, %.0f MiB after the list; the list took %.2f s of CPU in %.2f s",
                     ours.syncPeakRSSMiB, ours.peakRSSMiB, ours.decryptCPUSeconds, ours.decryptSeconds))
        var reference: ReferenceOutput?
        var skipped: String?
        do {
            reference = try await runReference(url: url, account: account, count: count)
        } catch let error as ReferenceUnavailable {
            skipped = error.reason
            print("P3: the Python reference was skipped: \(error.reason)")
        }
        let size = "\(count / 1000)k items" + (options.quick ? " (quick; full run: 50k)" : "")
        let total = ours.syncSeconds + ours.decryptSeconds
        let referenceTotal = reference.map { $0.fetchSeconds + $0.decryptSeconds }
        let referenceWhat = skipped.map { "Python reference skipped: \($0)" } ?? "Python requests + cryptography, same fetch/decrypt"
        // The time goals are for 50k items; a quick run checks them scaled to its size.
        let scale = Double(count) / 50_000
        let (syncGoal, decryptGoal) = (3 * scale, 1 * scale)
        func goal(_ seconds: Double, full: Double) -> String {
            options.quick ? String(format: "≤ %.1f s (%.0f s / 50k)", seconds, full) : String(format: "≤ %.0f s", full)
        }
        return [
            BenchResult(id: "P3-sync", what: "login + full sync (download, store), \(size)", value: ours.syncSeconds, unit: "s",
                        reference: reference?.fetchSeconds, referenceWhat: referenceWhat + " (fetch + JSON parse only)",
                        ratio: reference.map { ours.syncSeconds / $0.fetchSeconds }, goal: goal(syncGoal, full: 3),
                        met: ours.syncSeconds <= syncGoal),
            BenchResult(id: "P3-dec", what: "decrypt for a list (names, usernames), \(size)", value: ours.decryptSeconds, unit: "s",
                        reference: reference?.decryptSeconds, referenceWhat: referenceWhat + " (every field of every item)",
                        ratio: reference.map { ours.decryptSeconds / $0.decryptSeconds }, goal: goal(decryptGoal, full: 1),
                        met: ours.decryptSeconds <= decryptGoal),
            BenchResult(id: "P3-all", what: "sync + decrypt vs Python (ratio: Python / ours)", value: total, unit: "s",
                        reference: referenceTotal, referenceWhat: referenceWhat,
                        ratio: referenceTotal.map { $0 / total }, goal: "≥ 5× faster", met: referenceTotal.map { $0 / total >= 5 }),
            BenchResult(id: "P3-rss", what: "peak RSS of the syncing process, \(size)", value: ours.peakRSSMiB, unit: "MiB",
                        reference: reference?.peakRSSMiB, referenceWhat: "Python process peak RSS",
                        ratio: reference.map { ours.peakRSSMiB / $0.peakRSSMiB }, goal: "≤ 300 MB", met: ours.peakRSSMiB * 1.048576 <= 300),
        ]
    }

    /// The child: a fresh profile logs in (full sync), then lists every item decrypted.
    static func child() async throws {
        let input = try readChildInput(AccountProfile.self)
        let engine = try VaultEngine(databasePath: input.profile, configuration: EngineConfiguration(serverURL: input.url))
        // `VAULTSYNC_PERF_CTL` (see ``PerfControl``) profiles one phase: `VAULTSYNC_PERF_P3=sync` (the default) or `list`.
        let perfPhase = ProcessInfo.processInfo.environment["VAULTSYNC_PERF_P3"] ?? "sync"
        let perf = PerfControl.fromEnvironment()
        if perfPhase == "sync" { perf?.send("enable") }
        let syncSeconds = try await measureAsync { try await engine.login(email: input.email, password: input.password, acceptingKdf: BenchAccount.kdf) }
        if perfPhase == "sync" { perf?.send("disable") }
        let syncPeak = peakRSSMiB()
        var listed = 0
        let cpuBefore = processCPUSeconds()
        if perfPhase == "list" { perf?.send("enable") }
        let decryptSeconds = try await measureAsync {
            // What `vaultsync list` decrypts: each item's name and username (the rest when an item is opened).
            listed = try await engine.itemSummaries().filter { (try? $0.result.get()) != nil }.count
        }
        if perfPhase == "list" { perf?.send("disable") }
        let decryptCPU = processCPUSeconds() - cpuBefore
        await engine.shutdown()
        try writeChildOutput(ChildOutput(syncSeconds: syncSeconds, decryptSeconds: decryptSeconds, items: listed, peakRSSMiB: peakRSSMiB(),
                                         syncPeakRSSMiB: syncPeak, decryptCPUSeconds: decryptCPU))
    }

    struct ReferenceUnavailable: Error {
        var reason: String
    }

    /// Runs `scripts/bench_p3_reference.py` with the account's token and user key on stdin.
    static func runReference(url: String, account: BenchAccount, count: Int) async throws -> ReferenceOutput {
        guard let script = referenceScript() else { throw ReferenceUnavailable(reason: "scripts/bench_p3_reference.py not found") }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin"
        guard let python = path.split(separator: ":").map({ $0 + "/python3" }).first(where: FileManager.default.isExecutableFile(atPath:)) else {
            throw ReferenceUnavailable(reason: "python3 not installed")
        }
        let input = ReferenceInput(url: url, token: account.accessToken, userKey: Data(account.keys.userKey.rawBytes).base64EncodedString())
        do {
            let output = try await runChild("python reference", executable: python, arguments: [script], input: input, as: ReferenceOutput.self)
            guard output.items == count else { throw ReferenceUnavailable(reason: "the script decrypted \(output.items) of \(count) items") }
            return output
        } catch ChildProcessError.failed(_, let status, let stderr) where status == 3 {
            throw ReferenceUnavailable(reason: stderr.trimmingCharacters(in: .whitespacesAndNewlines))
        }
    }

    static func referenceScript() -> String? {
        let relative = "scripts/bench_p3_reference.py"
        let fromSource = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../" + relative).standardized.path
        return [FileManager.default.currentDirectoryPath + "/" + relative, fromSource].first(where: FileManager.default.fileExists(atPath:))
    }
}
