import AsyncHTTPClient
import Foundation
import Logging
import NIOHTTP1
import Testing
@testable import VaultClient
import VaultCrypto
import VaultAPI
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

    /// Starts `engine`'s live sync with `options` and collects its events; expects it to go live (or `state`).
    static func live(_ engine: VaultEngine, _ options: LiveSyncOptions = LiveSyncTests.options, until state: LiveState = .live,
                     sourceLocation: SourceLocation = #_sourceLocation) async -> LiveEventLog {
        let log = await listening(to: engine)
        await engine.startLiveSync(options)
        #expect(await log.waitFor { $0 == .state(state) }, "live sync reaches \(state)", sourceLocation: sourceLocation)
        return log
    }
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
        let log = await LiveEventLog.live(b.engine)

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
        let logA = await LiveEventLog.live(a.engine)
        let logB = await LiveEventLog.live(b.engine)

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
    @Test("the server ends every session (log out everywhere): a live device hears LogOut, locks and forgets its tokens")
    func logOutFromServer() async throws {
        let scenario = try await Scenario.start()
        let a = try await scenario.device(register: true)
        let b = try await scenario.device()
        let log = await LiveEventLog.live(b.engine)

        let master = try MasterKey.derive(password: scenario.password, salt: scenario.email, kdf: testKDF)
        let hash = master.serverAuthorizationHash(password: scenario.password)
        _ = try? await a.engine.authorized { api, token in
            try await api.rawJSON(.POST, "/api/accounts/security-stamp", token: token, body: .object(["masterPasswordHash": .string(hash)]))
        }
        #expect(await log.waitFor { $0 == .loggedOut })
        #expect(await waitUntil { await b.engine.liveSyncState == nil }, "the live loop ends with the session")
        #expect(try await b.engine.status().locked)
        // The tokens are gone from the profile too: unlocked again, it may read its copy but not reach the server.
        let reopened = try b.reopen(url: await scenario.server.url)
        try await reopened.engine.unlock(email: scenario.email, password: scenario.password)
        await #expect(throws: VaultError.self) { _ = try await reopened.engine.sync() }
        await log.stop()
        await scenario.finish([a, b, reopened])
    }

    @Test("a server whose hub refuses the upgrade (404): the device polls the revision date and still receives changes")
    func pollsWithoutHub() async throws {
        let scenario = try await Scenario.start()
        let a = try await scenario.device(register: true)
        let proxy = FaultProxy(upstream: await scenario.server.url)
        try await proxy.start()
        await proxy.add(.init(method: "GET", pathPrefix: "/notifications/hub", action: .fail(status: 404), times: 1_000))
        let b = try Device.make(url: await proxy.url)
        try await b.engine.login(email: scenario.email, password: scenario.password, acceptingKdf: testKDF)
        let log = await LiveEventLog.live(b.engine, Self.options, until: .polling)

        _ = try await a.engine.addItem(loginItem("Polled"))
        #expect(await waitUntil { (try? await b.engine.view(named: "Polled")) != nil }, "the next poll sees the revision move and syncs")
        #expect(await b.engine.liveSyncState == .polling)
        await b.engine.stopLiveSync()
        await log.stop()
        await proxy.stop()
        await scenario.finish([a, b])
    }

    @Test("an item with a change waiting here is not overwritten by another device's live change: the next sync keeps both")
    func queuedItemKeptForResolution() async throws {
        let scenario = try await Scenario.start()
        let a = try await scenario.device(register: true)
        // B's API requests go through a transport that can refuse one (its hub connection is a WebSocket of its own).
        let refusing = RefusingTransport()
        let b = try await scenario.device(transport: refusing)
        let saved = try await a.engine.addItem(loginItem("Shared", password: "first"))
        let id = try #require(saved.value.id)
        _ = try await b.engine.sync()
        // The queue's look-out must not send B's change before A's live change arrives (that order is the next test's).
        var options = Self.options
        options.queueCheckInterval = .seconds(3_600)
        let log = await LiveEventLog.live(b.engine, options)

        // B's edit does not reach the server (503): it waits in B's queue.
        refusing.refuseNext(method: "PUT", pathPrefix: "/api/ciphers/")
        var mine = try #require(try await b.engine.view(named: "Shared"))
        mine.login?.password = "written on B"
        let queued = try await b.engine.updateItem(mine)
        #expect(queued.outcome != .synced)
        var theirs = saved.value
        theirs.login?.password = "written on A"
        _ = try await a.engine.updateItem(theirs)
        #expect(await log.waitFor { $0 == .itemKeptForResolution(id: id) })
        #expect(try await b.engine.view(named: "Shared")?.login?.password == "written on B", "B's own change stays in place")

        _ = try await b.engine.sync()
        let passwords = Set(try await b.engine.views().compactMap(\.login?.password))
        #expect(passwords.isSuperset(of: ["written on A", "written on B"]), "both versions kept: \(passwords)")
        await b.engine.stopLiveSync()
        await log.stop()
        await scenario.finish([a, b])
    }

    @Test("a change queued while the hub stays connected (the server refused it once) leaves by itself once its retry is due")
    func queuedWhileConnectedLeaves() async throws {
        let scenario = try await Scenario.start()
        let a = try await scenario.device(register: true)
        let refusing = RefusingTransport()
        let b = try await scenario.device(transport: refusing)
        let logA = await LiveEventLog.live(a.engine)
        var options = Self.options
        options.queueCheckInterval = .milliseconds(100)
        let logB = await LiveEventLog.live(b.engine, options)

        refusing.refuseNext(method: "POST", pathPrefix: "/api/ciphers")
        let queued = try await b.engine.addItem(loginItem("Refused once"))
        #expect(queued.outcome != .synced)
        #expect(await logB.waitFor { if case .synced(let sent, _, _) = $0 { return sent == 1 } else { return false } })
        #expect(try await b.engine.pendingCount() == 0)
        #expect(await logA.waitFor { if case .itemChanged(_, let name) = $0 { return name == "Refused once" } else { return false } },
                "A hears of it live")
        await a.engine.stopLiveSync()
        await b.engine.stopLiveSync()
        await logA.stop()
        await logB.stop()
        await scenario.finish([a, b])
    }
}

/// The production transport (AsyncHTTPClient), except that it answers the next request matching a
/// method and path with a 503 of its own, as a failing server would (a fault for one request; a device's
/// hub connection is a WebSocket of its own and never passes here).
final class RefusingTransport: HTTPTransport, @unchecked Sendable {
    private let inner = AsyncHTTPClientTransport(client: HTTPClient.shared)
    private let lock = NSLock()
    private var refusal: (method: String, pathPrefix: String)?

    func refuseNext(method: String, pathPrefix: String) {
        lock.withLock { refusal = (method, pathPrefix) }
    }

    func execute(_ request: TransportRequest, logger: Logger) async throws -> TransportResponse {
        let path = URLComponents(string: request.url)?.path ?? ""
        let refused = lock.withLock { () -> Bool in
            guard let refusal, refusal.method == request.method.rawValue, path.hasPrefix(refusal.pathPrefix) else { return false }
            self.refusal = nil
            return true
        }
        if refused { return TransportResponse(status: 503, headers: HTTPHeaders(), body: Array("refused once".utf8)) }
        return try await inner.execute(request, logger: logger)
    }

    func download(_ request: TransportRequest, into descriptor: Int32, progress: (@Sendable (Int) -> Void)?,
                  logger: Logger) async throws -> TransportResponse {
        try await inner.download(request, into: descriptor, progress: progress, logger: logger)
    }
}
