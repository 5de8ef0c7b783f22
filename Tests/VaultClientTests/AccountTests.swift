import Foundation
import GRDB
import Testing
import VaultClient
import VaultModels
import VaultStore
import VaultSyncCore
import VaultTestSupport

@Suite("Accounts, tokens and the server clock", .serialized)
struct AccountTests {
    /// A server whose clock the test moves past the tokens' lifetime (no sleeping, no timing races).
    static func scenarioWithServerClock() async throws -> (Scenario, TestClock) {
        let serverClock = TestClock()
        let server = LiveServer(configure: { $0.now = { serverClock.now().microsecondsSinceEpoch } })
        try await server.start()
        return (Scenario(server: server, email: "refresh-\(UUID().uuidString.prefix(6).lowercased())@example.com"), serverClock)
    }

    @Test("a refusal that names what was invalid (Bitwarden's validationErrors) says so, not only \"The model state is invalid.\"")
    func refusalNamesTheInvalidField() async throws {
        let scenario = try await Scenario.start()
        let device = try Device.make(url: await scenario.server.url)
        do {
            try await device.engine.register(email: scenario.email, password: scenario.password, kdf: .pbkdf2(iterations: 50_000))
            Issue.record("registered with 50,000 iterations")
        } catch {
            let text = String(describing: error)
            #expect(text.contains("The model state is invalid.") && text.contains("PBKDF2 iterations must be between 100,000 and 2,000,000."), "\(text)")
        }
        await scenario.finish([device])
    }

    @Test("an expired access token is refreshed once, transparently")
    func tokenRefresh() async throws {
        let (scenario, serverClock) = try await Self.scenarioWithServerClock()
        let a = try await scenario.device(register: true)
        serverClock.advance(seconds: 3700)
        let saved = try await a.engine.addItem(loginItem("After expiry"))
        #expect(saved.outcome == .synced)
        serverClock.advance(seconds: 3700)
        try await a.engine.pull()
        #expect(try await a.engine.view(named: "After expiry") != nil)
        await scenario.finish([a])
    }

    @Test("calls refused together after expiry share one refresh: the rotated refresh token is never sent twice")
    func concurrentRefresh() async throws {
        let (scenario, serverClock) = try await Self.scenarioWithServerClock()
        let a = try await scenario.device(register: true)
        var ids: [String] = []
        for index in 0..<8 { ids.append(try await a.engine.addItem(loginItem("Shared refresh \(index)")).value.id ?? "") }
        serverClock.advance(seconds: 3700)
        // Eight saves at once, all refused with 401: one refresh, then each one goes through. Before
        // the shared refresh, every save after the first refresh sent the old refresh token, which the
        // server had rotated: "session expired", log in again.
        let outcomes = try await withThrowingTaskGroup(of: SaveOutcome.self) { group in
            for id in ids {
                group.addTask {
                    var view = try await a.engine.item(id: id)
                    view.notes = "edited after expiry"
                    return try await a.engine.updateItem(view).outcome
                }
            }
            return try await group.reduce(into: [SaveOutcome]()) { $0.append($1) }
        }
        #expect(outcomes.count == 8 && outcomes.allSatisfy { $0 == .synced }, "\(outcomes)")
        // The session still works afterwards (its refresh token is the current one).
        serverClock.advance(seconds: 3700)
        try await a.engine.pull()
        #expect(try await a.engine.items().filter { (try? $0.result.get().notes) == "edited after expiry" }.count == 8)
        await scenario.finish([a])
    }

    @Test("a refresh whose answer is lost (the server rotated, the device never heard) does not end the session")
    func lostRefreshAnswer() async throws {
        let (scenario, serverClock) = try await Self.scenarioWithServerClock()
        let direct = try await scenario.device(register: true)
        let id = try #require(try await direct.engine.addItem(loginItem("Before the lost refresh")).value.id)
        await direct.engine.shutdown()
        let proxy = FaultProxy(upstream: await scenario.server.url)
        try await proxy.start()
        let a = try direct.reopen(url: await proxy.url)
        try await a.engine.unlock(email: scenario.email, password: scenario.password)
        serverClock.advance(seconds: 3700)
        // The refresh reaches the server, which rotates the token; the answer never arrives.
        await proxy.add(.init(method: "POST", pathPrefix: "/identity/connect/token", action: .forwardThenClose))
        var view = try await a.engine.item(id: id)
        view.login?.password = "saved while the refresh answer was lost"
        #expect(try await a.engine.updateItem(view).outcome.isOffline)
        #expect(await proxy.firedCount == 1)
        // The next contact refreshes with the token the device still holds. Before the server kept
        // the previous token, this was "session expired, log in again".
        let report = try await a.engine.sync()
        #expect(report.resolved == 1 && report.stillPending == 0 && report.needsAttention == 0, "\(report)")
        // The session goes on: the token from that refresh works for the next one.
        serverClock.advance(seconds: 3700)
        try await a.engine.pull()
        let b = try await scenario.device()
        #expect(try await b.engine.view(named: "Before the lost refresh")?.login?.password == "saved while the refresh answer was lost")
        await proxy.stop()
        await scenario.finish([a, b])
    }

    @Test("a refresh delayed past the client's timeout and arriving after the retry does not void the retry's token")
    func delayedRefreshArrivesLate() async throws {
        let (scenario, serverClock) = try await Self.scenarioWithServerClock()
        let direct = try await scenario.device(register: true)
        await direct.engine.shutdown()
        let proxy = FaultProxy(upstream: await scenario.server.url)
        try await proxy.start()
        let refreshesAnswered = Counter()
        await proxy.setForwardHook { _, path in
            if path.hasPrefix("/identity/connect/token") { await refreshesAnswered.increment() }
        }
        // The first refresh is held in the network until the test lets it go; the client gives up after
        // 2 s and saves offline. (It used to be a 12 s delay against a 5 s timeout, and every other call
        // had 5 s too: under a full test run one took longer.)
        let impatient = try direct.reopen(url: await proxy.url) { $0.api.requestTimeout = .seconds(2) }
        try await impatient.engine.unlock(email: scenario.email, password: scenario.password)
        serverClock.advance(seconds: 3700)
        await proxy.add(.init(method: "POST", pathPrefix: "/identity/connect/token", action: .holdUntilReleased))
        #expect(try await impatient.engine.addItem(loginItem("Saved while the refresh was stuck")).outcome.isOffline)
        await impatient.engine.shutdown()
        // The app restarts with the normal timeouts; its sync refreshes again with the same token, gets
        // through and stores the new token.
        let a = try direct.reopen(url: await proxy.url)
        try await a.engine.unlock(email: scenario.email, password: scenario.password)
        let report = try await a.engine.sync()
        #expect(report.resolved == 1 && report.stillPending == 0, "\(report)")
        #expect(await refreshesAnswered.value == 1, "only the retry has reached the server")
        // Then the stuck refresh reaches the server. Before successors were derived from the token
        // presented, it rotated to a token nobody holds and the client's was void: "log in again".
        await proxy.releaseHeld()
        #expect(await waitUntil { await refreshesAnswered.value == 2 })
        serverClock.advance(seconds: 3700)
        #expect(try await a.engine.addItem(loginItem("Saved after the stuck refresh arrived")).outcome == .synced)
        #expect(try await a.engine.pendingCount() == 0)
        await proxy.stop()
        await scenario.finish([a])
    }

    @Test("wrong password: offline unlock refuses it, online login refuses it")
    func wrongPassword() async throws {
        let scenario = try await Scenario.start()
        let a = try await scenario.device(register: true)
        await a.engine.lock()
        await #expect(throws: VaultError.wrongPassword) { try await a.engine.unlock(email: scenario.email, password: "nope") }
        await #expect(throws: VaultError.loginRefused) { try await a.engine.login(email: scenario.email, password: "nope") }
        await #expect(throws: VaultError.accountNotFound("nobody@example.com")) {
            try await a.engine.unlock(email: "nobody@example.com", password: "x")
        }
        try await a.engine.unlock(email: scenario.email.uppercased(), password: scenario.password)
        #expect(await a.engine.isUnlocked)
        await scenario.finish([a])
    }

    @Test("two accounts share a profile without seeing each other's data")
    func twoAccounts() async throws {
        let scenario = try await Scenario.start()
        let a = try await scenario.device(register: true)
        _ = try await a.engine.addItem(loginItem("First account's item"))
        let second = Scenario(server: scenario.server, email: "second-\(UUID().uuidString.prefix(6).lowercased())@example.com")
        try await a.engine.register(email: second.email, password: second.password, kdf: testKDF)
        #expect(try await a.engine.views().isEmpty, "the second account starts empty")
        await scenario.server.stop()
        _ = try await a.engine.addItem(loginItem("Second account's offline item"))
        #expect(try await a.engine.accounts().count == 2)
        try await a.engine.unlock(email: scenario.email, password: scenario.password)
        #expect(try await a.engine.views().map(\.name) == ["First account's item"])
        #expect(try await a.engine.pendingCount() == 0)
        try await a.engine.logout(email: second.email)
        let remaining = try await a.engine.localStore.readDatabase { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM cipher") ?? -1 }
        #expect(remaining == 1)
        await scenario.finish([a])
    }

    @Test("the server clock offset is measured from Date headers (a device 3 hours fast)")
    func clockOffset() async throws {
        let scenario = try await Scenario.start()
        let a = try await scenario.device(register: true, clock: TestClock(skewSeconds: 3 * 3600))
        let state = try #require(try await a.engine.syncState())
        let offset = try JSONDecoder().decode(ServerClockOffset.self, from: Data(try #require(state.clockOffset).utf8))
        let expected: Int64 = -3 * 3600 * 1_000_000
        #expect(abs(offset.offsetMicroseconds - expected) <= offset.uncertaintyMicroseconds + 1_000_000)
        // The uncertainty is half the fastest round trip plus 1 s (ServerClockOffsetTests checks the
        // arithmetic); on a busy machine no call is guaranteed fast, so this only says a sample was kept
        // (the 3-hour skew itself is far outside it).
        #expect(offset.uncertaintyMicroseconds < 60_000_000)
        await scenario.finish([a])
    }
}

/// Counts events from other tasks (a proxy's hook).
actor Counter {
    private(set) var value = 0
    func increment() { value += 1 }
}
