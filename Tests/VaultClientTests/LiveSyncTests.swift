import Foundation
import Testing
import VaultClient
import VaultModels
import VaultSyncCore
import VaultTestSupport

/// The events of one engine's live sync, collected as they come, for a test to wait on.
actor LiveEventLog {
    private(set) var events: [LiveEvent] = []
    private var task: Task<Void, Never>?

    static func listening(to engine: VaultEngine) async -> LiveEventLog {
        let log = LiveEventLog()
        let stream = await engine.liveEvents()
        await log.start(stream)
        return log
    }

    private func start(_ stream: AsyncStream<LiveEvent>) {
        task = Task { for await event in stream { self.append(event) } }
    }

    private func append(_ event: LiveEvent) { events.append(event) }

    func contains(_ match: @Sendable (LiveEvent) -> Bool) -> Bool { events.contains(where: match) }

    /// Waits until an event matches (the limit only ends a broken run; it is no timing margin).
    nonisolated func waitFor(_ match: @escaping @Sendable (LiveEvent) -> Bool) async -> Bool {
        await waitUntil { await self.contains(match) }
    }

    func stop() { task?.cancel() }
}

/// Live sync on the real server over real sockets (docs/PROTOCOL.md, "The notifications hub"): a
/// change on one device reaches another without a `sync`, and queued changes leave by themselves.
@Suite("Live sync")
struct LiveSyncTests {
    /// Reconnects quickly in tests (the schedule's shape is LiveMessageTests'); the server answers on loopback.
    static let options = LiveSyncOptions(pollInterval: .milliseconds(200), reconnect: ReconnectSchedule(base: 0.05, cap: 0.5))

    @Test("an item saved, edited and deleted on A reaches B's store without a sync; B's own saves are not echoed back as changes")
    func changesReachOtherDevice() async throws {
        let scenario = try await Scenario.start()
        let a = try await scenario.device(register: true)
        let b = try await scenario.device()
        let log = await LiveEventLog.listening(to: b.engine)
        await b.engine.startLiveSync(Self.options)
        #expect(await log.waitFor { $0 == .state(.live) })

        let saved = try await a.engine.addItem(loginItem("GitHub"))
        #expect(saved.outcome == .synced)
        let id = try #require(saved.value.id)
        #expect(await log.waitFor { $0 == .itemChanged(id: id, name: "GitHub") })
        #expect(try await b.engine.view(named: "GitHub")?.login?.username == "alice")

        var edited = saved.value
        edited.login?.username = "alice-2"
        _ = try await a.engine.updateItem(edited)
        #expect(await waitUntil { (try? await b.engine.view(named: "GitHub")?.login?.username) == "alice-2" })

        // B's own save: the hub's echo names B's device, so it is not reported as another device's change.
        let own = try await b.engine.addItem(loginItem("Bank"))
        let ownID = try #require(own.value.id)
        _ = try await a.engine.permanentlyDeleteItem(id: id)
        #expect(await log.waitFor { $0 == .itemRemoved(id: id, name: "GitHub") })
        #expect(try await b.engine.view(named: "GitHub") == nil)
        #expect(await !log.contains { $0 == .itemChanged(id: ownID, name: "Bank") })
        #expect(await b.engine.liveSyncState == .live)

        await b.engine.stopLiveSync()
        #expect(await b.engine.liveSyncState == nil)
        await log.stop()
        await scenario.finish([a, b])
    }

    @Test("a change saved while the server is away leaves by itself when it is back, and the other device receives it")
    func queuedChangesLeaveByThemselves() async throws {
        let scenario = try await Scenario.start()
        let a = try await scenario.device(register: true)
        let b = try await scenario.device()
        let logA = await LiveEventLog.listening(to: a.engine)
        let logB = await LiveEventLog.listening(to: b.engine)
        await a.engine.startLiveSync(Self.options)
        await b.engine.startLiveSync(Self.options)
        #expect(await logA.waitFor { $0 == .state(.live) })
        #expect(await logB.waitFor { $0 == .state(.live) })

        await scenario.server.stop()
        #expect(await logA.waitFor { $0 == .state(.offline) })
        let offline = try await a.engine.addItem(loginItem("Written offline"))
        #expect(offline.outcome != .synced)
        #expect(try await a.engine.pendingCount() == 1)

        try await scenario.server.start()
        #expect(await logA.waitFor { if case .synced(let sent, _, _) = $0 { return sent == 1 } else { return false } })
        #expect(try await a.engine.pendingCount() == 0)
        #expect(await waitUntil { (try? await b.engine.view(named: "Written offline")) != nil }, "B hears of it without a sync")

        await a.engine.stopLiveSync()
        await b.engine.stopLiveSync()
        await logA.stop()
        await logB.stop()
        await scenario.finish([a, b])
    }
}
