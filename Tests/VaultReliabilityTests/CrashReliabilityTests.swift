import Foundation
import GRDB
import Testing
import VaultClient
import VaultModels
import VaultTestSupport

/// Kills the client (a child process, `vaultsync-crash-helper`) with SIGKILL during offline saves
/// and during conflict resolution, at random moments and at named points on the wire, and checks
/// after each kill: the store opens and is intact, no acknowledged save is missing, and after the
/// next sync nothing is duplicated and the device agrees with the server.
@Suite("Crashes", .serialized)
struct CrashReliabilityTests {
    /// A crash point on the wire: the crash-helper process dies right after the server answered the `occurrence`-th
    /// request matching `method` and `pathPrefix` (the server did the work; the client never heard).
    struct CrashPoint: CustomStringConvertible {
        var method: String
        var pathPrefix: String
        var occurrence: Int

        var description: String { "\(method) \(pathPrefix)#\(occurrence)" }

        /// `METHOD PATH#N`, as printed.
        init?(_ text: String) {
            let parts = text.split(separator: " ", maxSplits: 1)
            guard parts.count == 2, let hash = parts[1].lastIndex(of: "#"), let occurrence = Int(parts[1][parts[1].index(after: hash)...]) else {
                return nil
            }
            method = String(parts[0])
            pathPrefix = String(parts[1][..<hash])
            self.occurrence = occurrence
        }

        init(method: String, pathPrefix: String, occurrence: Int) {
            self.method = method
            self.pathPrefix = pathPrefix
            self.occurrence = occurrence
        }

        static func random(using generator: inout SeededRandom) -> CrashPoint {
            let points = [("GET", "/api/sync", 1), ("POST", "/api/ciphers", 6), ("PUT", "/api/ciphers/", 10), ("GET", "/api/ciphers/", 2)]
            let (method, path, most) = points[Int.random(in: 0..<points.count, using: &generator)]
            return CrashPoint(method: method, pathPrefix: path, occurrence: Int.random(in: 1...most, using: &generator))
        }
    }

    /// Counts matching forwarded requests and kills the child at the chosen one.
    final class Trigger: @unchecked Sendable {
        let point: CrashPoint
        let pid: Int32
        private let lock = NSLock()
        private var seen = 0

        init(point: CrashPoint, pid: Int32) {
            self.point = point
            self.pid = pid
        }

        func forwarded(method: String, path: String) {
            guard method == point.method, path.hasPrefix(point.pathPrefix) else { return }
            let fire = lock.withLock { () -> Bool in
                seen += 1
                return seen == point.occurrence
            }
            if fire { kill(pid, SIGKILL) }
        }
    }

    struct Figures {
        var kills = 0
        var runs = 0
        var namedPoints = 0
        /// How long the last resolution that was not killed took from READY to SYNCED: random kills
        /// are drawn within it, so that they land during resolution in debug and optimized builds alike.
        var resolutionMilliseconds = 400
    }

    @Test("SIGKILL during offline saves and during resolution: the store opens, nothing acknowledged is lost, nothing doubles")
    func killsDuringSavesAndResolution() async throws {
        let environment = ProcessInfo.processInfo.environment
        let target = RunSize.value("VAULTSYNC_CRASH_KILLS", ci: 50, long: 1_000)
        let seed = environment["VAULTSYNC_CRASH_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...999_999)
        let forcedPoint = environment["VAULTSYNC_CRASH_POINT"].flatMap(CrashPoint.init)
        print("crash tests: \(target) kills, seed \(seed); reproduce: VAULTSYNC_CRASH_SEED=\(seed) VAULTSYNC_CRASH_KILLS=\(target) swift test --filter VaultReliabilityTests.CrashReliabilityTests")
        var generator = SeededRandom(seed: seed)
        let helper = try helperExecutable("vaultsync-crash-helper")
        let started = ContinuousClock.now
        var offline = Figures()
        var resolution = Figures()
        var round = 0
        // A fresh server and account every 25 rounds keeps the vault (and each sync) small.
        while offline.kills + resolution.kills < target, round < target * 3 {
            let server = LiveServer()
            try await server.start()
            let template = try await AccountTemplate.register(serverURL: await server.url)
            let world = try await CrashWorld(server: server, template: template)
            for _ in 0..<25 where offline.kills + resolution.kills < target {
                let tag = "r\(round)-"
                if round % 2 == 0 {
                    try await world.killDuringOfflineSaves(tag: tag, helper: helper, figures: &offline, using: &generator)
                } else {
                    try await world.killDuringResolution(tag: tag, helper: helper, forcedPoint: forcedPoint, figures: &resolution,
                                                         using: &generator)
                }
                round += 1
            }
            await world.finish()
            // Printed as it goes, so that a long run stopped midway still shows how far it got.
            print("crash progress: \(offline.kills + resolution.kills) kills in \(round) rounds, \(ContinuousClock.now - started)")
        }
        print("crash figures: \(offline.kills) kills in \(offline.runs) offline-save runs; \(resolution.kills) kills in \(resolution.runs) resolution runs "
              + "(\(resolution.namedPoints) at named wire points); \(ContinuousClock.now - started)")
        #expect(offline.kills + resolution.kills >= target)
    }
}

/// A device A (the profile the crash-helper process runs on) and an online device B of the same account.
struct CrashWorld {
    let server: LiveServer
    let template: AccountTemplate
    let a: SimDevice
    let b: SimDevice
    let proxy: FaultProxy
    let ledger: Ledger

    init(server: LiveServer, template: AccountTemplate) async throws {
        self.server = server
        self.template = template
        let url = await server.url
        proxy = FaultProxy(upstream: url)
        try await proxy.start()
        a = try await SimDevice.cloned(from: template.databasePath, index: 0, proxy: proxy, url: deadServerURL(),
                                       clock: SkewedClock(skewSeconds: 0), email: template.email) { $0.api.requestTimeout = .seconds(2) }
        b = try await SimDevice.cloned(from: template.databasePath, index: 1, proxy: proxy, url: url,
                                       clock: SkewedClock(skewSeconds: 0), email: template.email) { _ in }
        ledger = Ledger(tag: "crash")
    }

    func finish() async {
        await a.remove()
        await b.remove()
        await proxy.stop()
        await server.destroy()
    }

    /// Runs the crash-helper process on A's profile; returns it once it printed `READY`.
    func launch(_ helper: URL, _ arguments: [String], tag: String, on device: SimDevice) async throws -> KillableChild {
        await device.engine.lock()
        let child = KillableChild(executable: helper, arguments: arguments, environment: ["VAULTSYNC_CRASH_TAG": tag])
        try child.run()
        try await child.wait(for: "READY")
        return child
    }

    /// After a kill: the store opens (a new engine on the profile unlocks), passes SQLite's integrity
    /// check, and its items plus the server's hold every acknowledged password.
    func checkAfterKill(context: String, on a: SimDevice) async throws {
        if ProcessInfo.processInfo.environment["VAULTSYNC_CRASH_DEBUG"] == "1" {
            let queue = try DatabaseQueue(path: a.databasePath)
            let rows = try await queue.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM cipher") ?? -1 }
            let pending = try await queue.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM pendingChange") ?? -1 }
            print("\(context): \(rows) cached items, \(pending) records in \(a.databasePath)")
            try queue.close()
        }
        try await a.restart(url: deadServerURL(), email: template.email) { $0.api.requestTimeout = .seconds(2) }
        let integrity = try await a.engine.localStore.readDatabase { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") }
        #expect(integrity == "ok", "\(context): integrity check: \(integrity ?? "-")")
        try await b.engine.pull()
        let present = try await DeviceSnapshot.take(a).passwords.union(try await DeviceSnapshot.take(b).passwords)
        let lost = ledger.lost(present: present)
        #expect(lost.isEmpty, "\(context): lost right after the kill: \(lost.prefix(10))")
    }

    /// Then the next sync (faults off, server up) settles everything: no loss, no duplicates, A = B.
    func checkAfterSync(context: String, on a: SimDevice) async throws {
        try await a.restart(url: await server.url, email: template.email) { _ in }
        let snapshots = try await settle([a, b], email: template.email, rounds: 2)
        let findings = try finalFindings([a, b], snapshots: snapshots, ledger: ledger)
        #expect(findings.isEmpty, "\(context): \(findings.prefix(20).joined(separator: "\n"))")
        await a.engine.lock()
    }

    func killDuringOfflineSaves(tag: String, helper: URL, figures: inout CrashReliabilityTests.Figures,
                                using generator: inout SeededRandom) async throws {
        // A profile of its own per round, so that one round's kill cannot hide behind another's data.
        let a = try await SimDevice.cloned(from: template.databasePath, index: 2, proxy: proxy, url: deadServerURL(),
                                           clock: SkewedClock(skewSeconds: 0), email: template.email) { $0.api.requestTimeout = .seconds(2) }
        defer { Task { await a.remove() } }
        // More saves than it can make before the kill, however late the kill comes on a busy machine (with
        // 400 a wake-up held up by seconds let the crash-helper process finish on its own).
        let child = try await launch(helper, [a.databasePath, template.email, reliabilityPassword, "100000"], tag: tag, on: a)
        try await child.wait(for: "ACK ")
        try await Task.sleep(for: .milliseconds(Int.random(in: 0...300, using: &generator)))
        let errors = child.killAndCollect()
        figures.runs += 1
        #expect(child.wasKilled, "the crash-helper ended on its own: \(errors)")
        if child.wasKilled { figures.kills += 1 }
        // What the crash-helper process acknowledged: creates (the item's password) and edits (a new password).
        for line in child.output.text.split(separator: "\n") where line.hasPrefix("ACK ") {
            guard let index = Int(line.dropFirst(4)) else { continue }
            // An edit (every third save) changes the item created just before it.
            ledger.saved(password: "crash-password-\(tag)\(index)", itemName: "crash-item-\(tag)\(index % 3 == 2 ? index - 1 : index)")
        }
        try await checkAfterKill(context: "offline saves \(tag)", on: a)
        // Everything of this run is queued (created offline), and nothing else of it is in the cache.
        let pending = Set(try await a.engine.pendingChanges().map(\.itemID))
        let ours = try await a.engine.items().filter { (try? $0.result.get().name.hasPrefix("crash-item-\(tag)")) == true }
        #expect(ours.allSatisfy { pending.contains($0.id) }, "offline saves \(tag): a saved item has no queue record")
        try await checkAfterSync(context: "offline saves \(tag), after the next sync", on: a)
    }

    func killDuringResolution(tag: String, helper: URL, forcedPoint: CrashReliabilityTests.CrashPoint?,
                              figures: inout CrashReliabilityTests.Figures, using generator: inout SeededRandom) async throws {
        // B creates items online; A has them, goes offline and changes them; B changes some meanwhile.
        var shared: [String] = []
        for index in 0..<6 {
            let name = "crash-item-\(tag)shared-\(index)"
            let password = "crash-password-\(tag)b-\(index)"
            var view = CipherView(type: .login, name: name)
            view.login = LoginView(username: "b", password: password)
            shared.append(try await b.engine.addItem(view).value.id ?? "")
            ledger.saved(password: password, itemName: name)
        }
        try await a.restart(url: await server.url, email: template.email) { _ in }
        try await a.engine.pull()
        try await a.restart(url: deadServerURL(), email: template.email) { $0.api.requestTimeout = .seconds(2) }
        for (index, id) in shared.enumerated() {
            for edit in 0..<Int.random(in: 1...5, using: &generator) {
                var view = try await a.engine.item(id: id)
                let password = "crash-password-\(tag)a-\(index)-\(edit)"
                view.login?.password = password
                _ = try await a.engine.updateItem(view)
                ledger.saved(password: password, itemName: view.name)
            }
            switch Int.random(in: 0..<4, using: &generator) {
            case 0: _ = try await a.engine.softDeleteItem(id: id)
            case 1: _ = try await a.engine.setFavorite(id: id, true)
            default: break
            }
        }
        for index in 0..<4 {
            let name = "crash-item-\(tag)new-\(index)"
            let password = "crash-password-\(tag)new-\(index)"
            var view = CipherView(type: .login, name: name)
            view.login = LoginView(username: "a", password: password)
            _ = try await a.engine.addItem(view)
            ledger.saved(password: password, itemName: name)
        }
        for (index, id) in shared.enumerated() where Bool.random(using: &generator) {
            var view = try await b.engine.item(id: id)
            let password = "crash-password-\(tag)b2-\(index)"
            view.login?.password = password
            _ = try await b.engine.updateItem(view)
            ledger.saved(password: password, itemName: view.name)
        }

        // A resolves in the helper, through the proxy; it dies at a named point or at a random moment.
        let point = forcedPoint ?? (Bool.random(using: &generator) ? CrashReliabilityTests.CrashPoint.random(using: &generator) : nil)
        let child = KillableChild(executable: helper, arguments: ["resolve", a.databasePath, template.email, reliabilityPassword, await proxy.url])
        await a.engine.lock()
        try child.run()
        let context: String
        if let point {
            let trigger = CrashReliabilityTests.Trigger(point: point, pid: child.pid)
            await proxy.setForwardHook { method, path in trigger.forwarded(method: method, path: path) }
            try await child.wait(for: "SYNCED")
            context = "resolution \(tag), killed at \(point)"
        } else {
            try await child.wait(for: "READY")
            let delay = Int.random(in: 0...max(10, figures.resolutionMilliseconds), using: &generator)
            try await Task.sleep(for: .milliseconds(delay))
            context = "resolution \(tag), killed \(delay) ms after READY"
        }
        let errors = child.killAndCollect()
        await proxy.setForwardHook(nil)
        figures.runs += 1
        if !child.wasKilled, let line = child.output.text.split(separator: "\n").first(where: { $0.hasPrefix("SYNCED") }),
           let field = line.split(separator: " ").first(where: { $0.hasPrefix("milliseconds=") }),
           let milliseconds = Int(field.dropFirst("milliseconds=".count)) {
            figures.resolutionMilliseconds = milliseconds
        }
        #expect(child.wasKilled || child.output.text.contains("SYNCED"), "\(context): the crash-helper failed: \(errors)")
        if child.wasKilled {
            figures.kills += 1
            if point != nil { figures.namedPoints += 1 }
        }
        try await checkAfterKill(context: context, on: a)
        try await checkAfterSync(context: context + ", after the next sync", on: a)
    }
}
