import Foundation
import Testing
import VaultClient
import VaultModels
import VaultTestSupport

/// Two programs on one profile (two `vaultsync` processes, an app and a script): each save of an item starts
/// from the item as stored, and a save that lands in between is carried over, never written over
/// (docs/ARCHITECTURE.md, "Saves from several processes").
@Suite("Saves from several processes on one profile")
struct ConcurrentSaveTests {
    func field(_ name: String, _ view: CipherView) -> String? {
        view.fields.first { $0.name == name }?.value
    }

    func adding(_ name: String, to view: CipherView) -> CipherView {
        var edited = view
        edited.fields.append(FieldView(type: .text, name: name, value: "v"))
        return edited
    }

    @Test("an edit read before another process's save carries its own change over onto it (offline, both queued)")
    func editReadBeforeAnotherSave() async throws {
        let scenario = try await Scenario.start()
        let registered = try await scenario.device(register: true)
        let id = try #require(try await registered.engine.addItem(loginItem("Shared")).value.id)
        await registered.engine.shutdown()
        let first = try registered.reopen(url: deadServerURL())
        let second = try registered.reopen(url: deadServerURL())
        for device in [first, second] { try await device.engine.unlock(email: scenario.email, password: scenario.password) }

        let readByFirst = try await first.engine.item(id: id)
        let readBySecond = try await second.engine.item(id: id)
        #expect(try await second.engine.updateItem(adding("b", to: readBySecond), basedOn: readBySecond).outcome.isOffline)
        var edit = adding("a", to: readByFirst)
        edit.login?.password = "from-first"
        #expect(try await first.engine.updateItem(edit, basedOn: readByFirst).outcome.isOffline)

        for device in [first, second] {
            let stored = try await device.engine.item(id: id)
            #expect(field("a", stored) == "v" && field("b", stored) == "v" && stored.login?.password == "from-first", "\(stored.fields)")
        }
        #expect(try await first.engine.pendingCount() == 1)
        await first.engine.shutdown()
        await second.engine.shutdown()
        await scenario.finish([registered])
    }

    @Test("a save queued by another process while this one's push is on the wire stays queued, and both reach the server")
    func queuedWhilePushOnTheWire() async throws {
        let scenario = try await Scenario.start()
        let registered = try await scenario.device(register: true)
        let id = try #require(try await registered.engine.addItem(loginItem("On the wire")).value.id)
        await registered.engine.shutdown()
        let proxy = FaultProxy(upstream: await scenario.server.url)
        try await proxy.start()
        await proxy.add(.init(method: "PUT", pathPrefix: "/api/ciphers/\(id)", action: .holdUntilReleased))
        let online = try registered.reopen(url: await proxy.url)
        let offline = try registered.reopen(url: deadServerURL())
        for device in [online, offline] { try await device.engine.unlock(email: scenario.email, password: scenario.password) }

        let readOnline = try await online.engine.item(id: id)
        async let pushed = online.engine.updateItem(adding("a", to: readOnline), basedOn: readOnline)
        #expect(await waitUntil { await proxy.requestLog.contains { $0.hasPrefix("PUT /api/ciphers/\(id)") } })
        let readOffline = try await offline.engine.item(id: id)
        #expect(try await offline.engine.updateItem(adding("b", to: readOffline), basedOn: readOffline).outcome.isOffline)
        await proxy.releaseHeld()
        #expect(try await pushed.outcome == .synced)
        #expect(try await online.engine.pendingCount() == 1, "the other process's save stays queued")

        let report = try await online.engine.sync()
        #expect(report.needsAttention == 0 && report.backups.isEmpty, "\(report)")
        let observer = try await scenario.device()
        let onServer = try await observer.engine.item(id: id)
        #expect(field("a", onServer) == "v" && field("b", onServer) == "v", "both saves: \(onServer.fields)")
        for device in [online, offline] { await device.engine.shutdown() }
        await proxy.stop()
        await scenario.finish([registered, observer])
    }

    @Test("an edit read before another process's sync brought another device's change to the same field: both versions kept, not written over")
    func sameFieldChangedOnAnotherDevice() async throws {
        let scenario = try await Scenario.start()
        let a = try await scenario.device(register: true)
        let b = try await scenario.device()
        let id = try #require(try await a.engine.addItem(loginItem("Same field")).value.id)
        _ = try await b.engine.sync()
        let read = try await a.engine.item(id: id)
        var theirs = try await b.engine.item(id: id)
        theirs.notes = "from b"
        #expect(try await b.engine.updateItem(theirs).outcome == .synced)
        try await a.engine.pull()  // another process's sync on A's profile, while A's edit is open
        var mine = read
        mine.notes = "from a"
        #expect(try await a.engine.updateItem(mine, basedOn: read).outcome == .savedForConflict(pendingCount: 1))
        let report = try await a.engine.sync()
        #expect(report.backups.count == 1, "\(report)")
        _ = try await b.engine.sync()
        let notes = Set(try await b.engine.views().compactMap(\.notes))
        #expect(notes == ["from a", "from b"], "both versions kept: \(notes)")
        await scenario.finish([a, b])
    }

    /// RELIABILITY bug 59: an item added by one process while another's sync was downloading disappeared until the
    /// next sync (the snapshot, made before the add, lacked it), and an edit made meanwhile was reported as a
    /// rollback by the server.
    @Test("items added or edited while another process's sync downloads: kept, and no rollback is reported")
    func writesDuringADownload() async throws {
        let scenario = try await Scenario.start()
        let registered = try await scenario.device(register: true)
        let editedID = try #require(try await registered.engine.addItem(loginItem("Edited meanwhile")).value.id)
        await registered.engine.shutdown()
        let proxy = FaultProxy(upstream: await scenario.server.url)
        try await proxy.start()
        let syncing = try registered.reopen(url: await proxy.url)
        let writing = try registered.reopen(url: await scenario.server.url)
        for device in [syncing, writing] { try await device.engine.unlock(email: scenario.email, password: scenario.password) }
        // The server has made the snapshot; before it reaches the syncing process, the other one writes.
        let once = Once()
        let writer = writing.engine
        await proxy.setForwardHook { method, path in
            guard method == "GET", path.hasPrefix("/api/sync"), once.first() else { return }
            _ = try? await writer.addItem(loginItem("Added meanwhile"))
            if var edited = try? await writer.item(id: editedID) {
                edited.login?.password = "changed meanwhile"
                _ = try? await writer.updateItem(edited)
            }
        }
        let messages = try await syncing.engine.pull()
        #expect(once.fired)
        #expect(messages.isEmpty, "no rollback reported: \(messages)")
        let names = Set(try await syncing.engine.views().map(\.name))
        #expect(names == ["Added meanwhile", "Edited meanwhile"], "\(names)")
        #expect(try await syncing.engine.view(named: "Edited meanwhile")?.login?.password == "changed meanwhile")
        // The next sync sees both as the server has them.
        await proxy.setForwardHook(nil)
        _ = try await syncing.engine.pull()
        #expect(Set(try await syncing.engine.views().map(\.name)) == names)
        await proxy.stop()
        await scenario.finish([syncing, writing])
    }
}
