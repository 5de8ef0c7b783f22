import Foundation
import GRDB
import Testing
import VaultClient
import VaultModels
import VaultStore
import VaultSyncCore
import VaultTestSupport

@Suite("Crash safety", .serialized)
struct CrashTests {
    @Test("SIGKILL in the middle of offline saves: the store opens, every acknowledged save is there and queued")
    func killDuringOfflineSaves() async throws {
        let scenario = try await Scenario.start()
        let a = try await scenario.device(register: true)
        await scenario.server.stop()
        let helper = try helperExecutable("vaultsync-crash-helper")
        let database = a.profile + "/vault.sqlite"
        var generator = SystemRandomNumberGenerator()
        var acknowledged: [Int] = []
        for round in 0..<5 {
            // More saves than it can make before the kill, however late the kill comes on a busy machine.
            let child = KillableChild(executable: helper, arguments: [database, scenario.email, scenario.password, "100000"])
            try child.run()
            // Wait for the first acknowledged save, then kill it at a random moment.
            try await child.wait(for: "ACK ")
            let delay = UInt64.random(in: 10...500, using: &generator)
            try await Task.sleep(nanoseconds: delay * 1_000_000)
            let failure = child.killAndCollect()
            #expect(child.wasKilled, "round \(round): the helper ended on its own: \(failure)")
            let text = child.output.text
            print("crash round \(round): killed after \(text.split(separator: "\n").count - 1) acknowledged saves")
            acknowledged = text.split(separator: "\n").compactMap { line in line.hasPrefix("ACK ") ? Int(line.dropFirst(4)) : nil }

            // Reopen: the store opens and holds every acknowledged save, each with its queue record.
            let reopened = try a.reopen(url: deadServerURL())
            try await reopened.engine.unlock(email: scenario.email, password: scenario.password)
            let views = try await reopened.engine.views()
            let names = Set(views.map(\.name))
            let notes = Set(views.compactMap(\.notes))
            for index in acknowledged {
                if index % 3 == 2 {
                    // An edit of the latest created item: its note is there unless a later acked edit replaced it.
                    let replaced = acknowledged.contains { $0 > index && $0 % 3 == 2 && ($0 - index) < 3 }
                    #expect(replaced || notes.contains("crash-edit-\(index)"), "round \(round): edit \(index) lost")
                } else {
                    #expect(names.contains("crash-item-\(index)"), "round \(round): item \(index) lost")
                }
            }
            // Nothing half-written: every cached item is queued (all were created offline) and vice versa.
            let pending = try await reopened.engine.pendingChanges()
            #expect(Set(pending.map(\.itemID)) == Set(views.compactMap(\.id)), "round \(round): cache and queue disagree")
            #expect(pending.allSatisfy { $0.metadata.kind == .create })
            let check = try await reopened.engine.localStore.readDatabase { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") }
            #expect(check == "ok")
            await reopened.engine.shutdown()
        }
        #expect(!acknowledged.isEmpty)
        await scenario.finish([a])
    }
}
