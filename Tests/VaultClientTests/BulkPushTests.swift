import Foundation
import Testing
import VaultClient
import VaultModels
import VaultServer
import VaultTestSupport

/// Plain pushes go to the VaultSync server's bulk extension; every other server gets one PUT per item.
@Suite("Reconnect: bulk pushes", .serialized)
struct BulkPushTests {
    /// A edits `count` items offline; returns A unlocked behind a proxy, and the expected passwords.
    func offlineEdits(_ devices: TwoDevices, count: Int,
                      configure: (inout EngineConfiguration) -> Void = { _ in }) async throws -> (Device, FaultProxy, [String: String]) {
        var ids: [String] = []
        for index in 0..<count {
            ids.append(try await devices.a.engine.addItem(loginItem("Item \(index)")).value.id!)
        }
        let offline = try devices.offlineA()
        try await offline.engine.unlock(email: devices.scenario.email, password: devices.scenario.password)
        var expected: [String: String] = [:]
        for (index, id) in ids.enumerated() {
            var view = try await offline.engine.item(id: id)
            view.login?.password = "offline-\(index)"
            _ = try await offline.engine.updateItem(view)
            expected["Item \(index)"] = "offline-\(index)"
        }
        let proxy = FaultProxy(upstream: await devices.scenario.server.url)
        try await proxy.start()
        let device = try Device.make(url: await proxy.url, profile: devices.a.profile, configure: configure)
        try await device.engine.unlock(email: devices.scenario.email, password: devices.scenario.password)
        return (device, proxy, expected)
    }

    func serverPasswords(_ devices: TwoDevices) async throws -> [String: String] {
        _ = try await devices.b.engine.sync()
        return Dictionary(try await devices.b.engine.views().map { ($0.name, $0.login?.password ?? "") }, uniquingKeysWith: { first, _ in first })
    }

    @Test("30 plain updates resolve without a single per-item PUT")
    func bulkInsteadOfPUTs() async throws {
        let devices = try await TwoDevices.start()
        let (a, proxy, expected) = try await offlineEdits(devices, count: 30)
        // Any per-item PUT would be refused: the bulk request must carry them all.
        await proxy.add(.init(method: "PUT", pathPrefix: "/api/ciphers/", action: .fail(status: 400), times: 1000))
        let report = try await a.engine.sync()
        #expect(report.resolved == 30 && report.needsAttention == 0 && report.backups.isEmpty)
        #expect(try await a.engine.pendingCount() == 0)
        #expect(await proxy.firedCount == 0)
        #expect(try await serverPasswords(devices) == expected)
        await devices.finish()
    }

    @Test("a queue read a page at a time: every page's pushes go in one bulk request, each change once")
    func pagedQueue() async throws {
        let devices = try await TwoDevices.start()
        let (paged, proxy, expected) = try await offlineEdits(devices, count: 10) { $0.resolutionPageSize = 4 }
        await proxy.add(.init(method: "PUT", pathPrefix: "/api/ciphers/", action: .fail(status: 400), times: 1000))
        _ = await proxy.tally(pathPrefix: "/api/vaultsync/ciphers/bulk-update")
        let report = try await paged.engine.sync()
        #expect(report.resolved == 10 && report.needsAttention == 0 && report.backups.isEmpty)
        // Pages of 4, 4 and 2 changes: one request each.
        #expect(await proxy.tally(pathPrefix: "/api/vaultsync/ciphers/bulk-update")["requests"] == 3)
        #expect(await proxy.firedCount == 0)
        #expect(try await paged.engine.pendingCount() == 0)
        #expect(try await serverPasswords(devices) == expected)
        #expect(try await paged.engine.sync().resolved == 0)
        await paged.engine.shutdown()
        await devices.finish()
    }

    /// The next page is read, and opened, before the page ahead of it is resolved (`VaultEngine.resolve`):
    /// a save made while that page's own request is on the wire meets a change read well before it. Its
    /// settle finds the record written since (`ChangeQueue.changedSince`, without it the record would be
    /// taken as unchanged and dropped, and the save overwritten) and keeps it by the saved-meanwhile rule.
    @Test("an item of a page read ahead, saved while its page is on the wire: the save is kept and pushed next, nothing lost")
    func saveAfterPageReadAhead() async throws {
        let devices = try await TwoDevices.start()
        // One chunk at a time, so that the pages' requests go in their order.
        let (paged, proxy, initial) = try await offlineEdits(devices, count: 8) { $0.resolutionPageSize = 4; $0.resolutionConcurrency = 1 }
        // Pages of items 0–3 and 4–7: the first page's request goes through, the second's waits on the wire.
        await proxy.add(.init(method: "POST", pathPrefix: "/api/vaultsync/ciphers/bulk-update", action: .delay(milliseconds: 1)))
        await proxy.add(.init(method: "POST", pathPrefix: "/api/vaultsync/ciphers/bulk-update", action: .holdUntilReleased))
        let engine = paged.engine
        let syncing = Task { try await engine.sync() }
        #expect(await waitUntil { await proxy.firedCount == 2 }, "the second page is on the wire")
        var saved = try #require(try await engine.view(named: "Item 5"))
        saved.login?.password = "saved while its page was on the wire"
        _ = try await engine.updateItem(saved)
        await proxy.releaseHeld()
        let first = try await syncing.value
        #expect(first.needsAttention == 0 && first.backups.isEmpty)
        #expect(try await engine.pendingCount() == 1, "the save waits for the next pass")
        #expect(try await engine.view(named: "Item 5")?.login?.password == "saved while its page was on the wire")
        #expect(try await engine.sync().resolved == 1)
        #expect(try await engine.pendingCount() == 0)
        var expected = initial
        expected["Item 5"] = "saved while its page was on the wire"
        #expect(try await serverPasswords(devices) == expected)
        await paged.engine.shutdown()
        await devices.finish()
    }

    /// The bulk chunks flow from one page into the next (`VaultEngine.resolveItems`): a page's slow request
    /// holds one of the two places, never the pages after it.
    @Test("a page's bulk request held on the wire: the next page's requests go and settle meanwhile")
    func chunksFlowAcrossPages() async throws {
        let devices = try await TwoDevices.start()
        // Pages of four changes, two requests of two each; the held request never times out.
        let (paged, proxy, expected) = try await offlineEdits(devices, count: 8) {
            $0.resolutionPageSize = 4
            $0.bulkPushSize = 2
            $0.api.requestTimeout = .seconds(600)
        }
        // Every change goes in bulk: a per-item PUT would be refused.
        await proxy.add(.init(method: "PUT", pathPrefix: "/api/ciphers/", action: .fail(status: 400), times: 1000))
        // The first page's two requests leave together: the first to arrive goes through, the second waits.
        await proxy.add(.init(method: "POST", pathPrefix: "/api/vaultsync/ciphers/bulk-update", action: .delay(milliseconds: 1)))
        await proxy.add(.init(method: "POST", pathPrefix: "/api/vaultsync/ciphers/bulk-update", action: .holdUntilReleased))
        _ = await proxy.tally(pathPrefix: "/api/vaultsync/ciphers/bulk-update")
        let engine = paged.engine
        let syncing = Task { try await engine.sync() }
        // Drained at the first page's end, the second page would wait for the held request.
        #expect(await waitUntil { await proxy.tally(pathPrefix: "/api/vaultsync/ciphers/bulk-update")["requests"] == 4 },
                "the second page's requests went while the first page's was held")
        #expect(await waitUntil { (try? await engine.pendingCount()) == 2 }, "all but the held request's changes settled")
        await proxy.releaseHeld()
        let report = try await syncing.value
        #expect(report.resolved == 8 && report.needsAttention == 0 && report.backups.isEmpty)
        #expect(await proxy.firedCount == 2, "no per-item PUT")
        #expect(try await engine.pendingCount() == 0)
        #expect(try await serverPasswords(devices) == expected)
        await paged.engine.shutdown()
        await devices.finish()
    }

    @Test("a bulk answer lost on the way back: the rerun recognises its own pushes (no backup, no loss)")
    func lostBulkAnswer() async throws {
        let devices = try await TwoDevices.start()
        let (a, proxy, expected) = try await offlineEdits(devices, count: 12)
        await proxy.add(.init(method: "POST", pathPrefix: "/api/vaultsync/ciphers/bulk-update", action: .forwardThenDrop))
        let report = try await a.engine.sync()
        #expect(await proxy.firedCount == 1)
        #expect(report.backups.isEmpty && report.needsAttention == 0)
        #expect(try await a.engine.pendingCount() == 0)
        #expect(try await serverPasswords(devices) == expected)
        #expect(try await a.engine.views().count == 12)
        await devices.finish()
    }

    @Test("a server without the extension gets one PUT per item, with the same result")
    func fallbackWithoutExtension() async throws {
        let devices = try await TwoDevices.start(server: { $0.bulkUpdateEnabled = false })
        let (a, _, expected) = try await offlineEdits(devices, count: 10)
        let report = try await a.engine.sync()
        #expect(report.resolved == 10 && report.needsAttention == 0 && report.backups.isEmpty)
        #expect(try await serverPasswords(devices) == expected)
        await devices.finish()
    }

    @Test("a conflicting item in the same run still gets its backup while the others go in bulk")
    func conflictBesideBulk() async throws {
        let devices = try await TwoDevices.start()
        let (a, _, _) = try await offlineEdits(devices, count: 5)
        // B edits item 3 after A's offline edit: B is newer, A's version becomes a backup.
        try await Task.sleep(for: .milliseconds(20))
        _ = try await devices.b.engine.sync()
        var fromB = try #require(try await devices.b.engine.view(named: "Item 3"))
        fromB.login?.password = "from-b"
        _ = try await devices.b.engine.updateItem(fromB)
        let report = try await a.engine.sync()
        #expect(report.resolved == 5 && report.backups.count == 1)
        var expected = Dictionary(uniqueKeysWithValues: (0..<5).map { ("Item \($0)", "offline-\($0)") })
        expected["Item 3"] = "from-b"
        expected[report.backups.first?.name ?? "?"] = "offline-3"
        #expect(try await serverPasswords(devices) == expected)
        await devices.finish()
    }

    @Test("one by one (bulk off), offline creates need one POST each and no PUT; a lost create answer plus later edits: adopted, edits pushed, no duplicate")
    func createsAdoptedWithLaterEdits() async throws {
        let devices = try await TwoDevices.start()
        let offline = try devices.offlineA()
        try await offline.engine.unlock(email: devices.scenario.email, password: devices.scenario.password)
        let lostAnswer = try await offline.engine.addItem(loginItem("Lost answer", password: "first")).value
        try await Task.sleep(for: .milliseconds(5))
        _ = try await offline.engine.addItem(loginItem("Plain create"))
        let proxy = FaultProxy(upstream: await devices.scenario.server.url)
        try await proxy.start()
        // One record at a time: the first POST (the one whose answer is dropped) is "Lost answer".
        let a = try Device.make(url: await proxy.url, profile: devices.a.profile) {
            $0.resolutionConcurrency = 1
            $0.bulkPushSize = 0
        }
        try await a.engine.unlock(email: devices.scenario.email, password: devices.scenario.password)
        // Creates must not need a PUT; the lost-answer create reaches the server but A never hears.
        await proxy.add(.init(method: "PUT", pathPrefix: "/api/ciphers/", action: .fail(status: 400), times: 1))
        await proxy.add(.init(method: "POST", pathPrefix: "/api/ciphers", action: .forwardThenDrop, times: 1))
        _ = try? await a.engine.sync()
        #expect(await proxy.firedCount == 1, "only the dropped POST: no create needed a PUT")
        // Edited offline again before the next sync: the adopted server copy must get this edit. (The pull
        // after the lost answer also brought the server's copy in under its own id; this edits the
        // device's own copy, the queued create. Editing the other copy is `adoptedCreateAlsoEditedHere`.)
        let offlineAgain = try devices.offlineA()
        try await offlineAgain.engine.unlock(email: devices.scenario.email, password: devices.scenario.password)
        var view = try await offlineAgain.engine.item(id: try #require(lostAnswer.id))
        view.login?.password = "second"
        _ = try await offlineAgain.engine.updateItem(view)
        let report = try await devices.a.reopen(url: await devices.scenario.server.url).engine.syncAfterUnlock(devices)
        #expect(report.needsAttention == 0)
        let server = try await serverPasswords(devices)
        #expect(server == ["Plain create": "hunter2", "Lost answer": "second"], "\(server)")
        #expect(try await devices.b.engine.views().count == 2, "no duplicate")
        await devices.finish()
    }

    /// A makes `count` items offline (an import, a day without network); returns A unlocked behind a proxy.
    func offlineCreates(_ devices: TwoDevices, count: Int) async throws -> (Device, FaultProxy) {
        let offline = try devices.offlineA()
        try await offline.engine.unlock(email: devices.scenario.email, password: devices.scenario.password)
        for index in 0..<count { _ = try await offline.engine.addItem(loginItem("New \(index)")) }
        let proxy = FaultProxy(upstream: await devices.scenario.server.url)
        try await proxy.start()
        let device = try Device.make(url: await proxy.url, profile: devices.a.profile)
        try await device.engine.unlock(email: devices.scenario.email, password: devices.scenario.password)
        return (device, proxy)
    }

    /// The names on the server (B's view after a sync), with how often each occurs.
    func serverNames(_ devices: TwoDevices) async throws -> [String: Int] {
        _ = try await devices.b.engine.sync()
        return try await devices.b.engine.views().reduce(into: [:]) { $0[$1.name, default: 0] += 1 }
    }

    @Test("30 items created offline reach the server in one bulk request, not one POST each")
    func bulkCreates() async throws {
        let devices = try await TwoDevices.start()
        let (a, proxy) = try await offlineCreates(devices, count: 30)
        // Any per-item create would be refused: the bulk request must carry them all.
        await proxy.add(.init(method: "POST", pathPrefix: "/api/ciphers", action: .fail(status: 400), times: 1000))
        _ = await proxy.tally(pathPrefix: "/api/vaultsync/ciphers/bulk-create")
        let report = try await a.engine.sync()
        #expect(report.resolved == 30 && report.needsAttention == 0 && report.backups.isEmpty)
        #expect(await proxy.firedCount == 0)
        #expect(await proxy.tally(pathPrefix: "/api/vaultsync/ciphers/bulk-create")["requests"] == 1)
        #expect(try await a.engine.pendingCount() == 0)
        // A holds the server's ids now, and the server holds each item once.
        let names = try await serverNames(devices)
        #expect(names.count == 30 && names.values.allSatisfy { $0 == 1 })
        #expect(Set(try await a.engine.views().compactMap(\.id)) == Set(try await devices.b.engine.views().compactMap(\.id)))
        await devices.finish()
    }

    @Test("a bulk create whose answer is lost: the same run settles each item by its idempotency key, no duplicate")
    func lostBulkCreateAnswer() async throws {
        let devices = try await TwoDevices.start()
        let (a, proxy) = try await offlineCreates(devices, count: 12)
        await proxy.add(.init(method: "POST", pathPrefix: "/api/vaultsync/ciphers/bulk-create", action: .forwardThenDrop))
        let report = try await a.engine.sync()
        #expect(await proxy.firedCount == 1)
        #expect(report.backups.isEmpty && report.needsAttention == 0)
        #expect(try await a.engine.pendingCount() == 0)
        let names = try await serverNames(devices)
        #expect(names.count == 12 && names.values.allSatisfy { $0 == 1 }, "\(names)")
        #expect(try await a.engine.views().count == 12)
        await devices.finish()
    }

    @Test("a server without the extension gets one POST per item, with the same result")
    func createFallbackWithoutExtension() async throws {
        let devices = try await TwoDevices.start(server: { $0.bulkUpdateEnabled = false })
        let (a, proxy) = try await offlineCreates(devices, count: 10)
        _ = await proxy.tally(pathPrefix: "/api/ciphers")
        let report = try await a.engine.sync()
        #expect(report.resolved == 10 && report.needsAttention == 0)
        #expect(await proxy.tally(pathPrefix: "/api/ciphers")["requests"] == 10)
        let names = try await serverNames(devices)
        #expect(names.count == 10 && names.values.allSatisfy { $0 == 1 })
        await devices.finish()
    }

}

extension VaultEngine {
    func syncAfterUnlock(_ devices: TwoDevices) async throws -> SyncReport {
        try await unlock(email: devices.scenario.email, password: devices.scenario.password)
        return try await sync()
    }
}
