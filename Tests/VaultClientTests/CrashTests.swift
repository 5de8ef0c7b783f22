import Crypto
import Foundation
import GRDB
import Testing
import VaultClient
import VaultCrypto
import VaultModels
import VaultStore
import VaultSyncCore
import VaultTestSupport

@Suite("Crash safety", .serialized)
struct CrashTests {
    @Test("SIGKILL while a staged attachment uploads: the next run finishes it, once, byte for byte")
    func killDuringAttachmentUpload() async throws {
        let devices = try await TwoDevices.start()
        let item = try await devices.a.engine.addItem(loginItem("Archive")).value
        let id = try #require(item.id)
        let offline = try devices.offlineA()
        try await offline.engine.unlock(email: devices.scenario.email, password: devices.scenario.password)
        let contents = SystemRandomSource().bytes(count: 24 * 1_048_576)
        #expect(try await offline.engine.addAttachment(itemID: id, fileName: "archive.tar", contents: contents).pending)
        await offline.engine.shutdown()

        let helper = try helperExecutable("vaultsync-crash-helper")
        let url = await devices.scenario.server.url
        var killed = 0
        for round in 0..<6 {
            let child = KillableChild(executable: helper, arguments: ["resolve", devices.a.profile + "/vault.sqlite",
                                                                      devices.scenario.email, devices.scenario.password, url])
            try child.run()
            try await child.wait(for: "READY")
            // Kills spread over unlock, announce and upload: 0, 120, … 600 ms after READY. Round 0 lands before
            // the sync can end, whatever the machine's speed (a random delay let a fast run finish first).
            try await Task.sleep(nanoseconds: UInt64(round) * 120_000_000)
            child.killAndCollect()
            if child.wasKilled { killed += 1 }
            print("attachment crash round \(round): \(child.wasKilled ? "killed" : "finished first")")
        }
        let back = try devices.a.reopen(url: url)
        try await back.engine.unlock(email: devices.scenario.email, password: devices.scenario.password)
        _ = try await back.engine.sync()
        #expect(try await back.engine.pendingCount() == 0)
        try await devices.b.engine.pull()
        let seen = try await devices.b.engine.attachments(itemID: id)
        #expect(seen.map(\.fileName) == ["archive.tar"], "exactly one attachment, however many attempts were cut off")
        let downloaded = try await devices.b.engine.attachmentContents(itemID: id, attachmentID: try #require(seen.first?.id))
        #expect(SHA256.hash(data: downloaded) == SHA256.hash(data: contents))
        #expect(killed > 0, "at least one run was cut off")
        await back.engine.shutdown()
        await devices.finish()
    }

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
            #expect(child.wasKilled, "round \(round): the crash-helper ended on its own: \(failure)")
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
