import Foundation
import Testing
import VaultClient
import VaultModels
import VaultTestSupport

/// A save never waits long for a server that does not answer (docs/PROTOCOL.md, "Live sync (client)",
/// Saves): on a network that accepts the connection and never replies, the save's own deadline
/// (`APIConfiguration.saveTimeout`) keeps and queues the change, and the request that reaches the
/// server later is harmless.
@Suite("The save deadline")
struct SaveDeadlineTests {
    @Test("a create the network holds is kept and queued at the save's deadline, long before the request timeout; it reaches the server once")
    func heldCreateIsQueued() async throws {
        let scenario = try await Scenario.start()
        let registered = try await scenario.device(register: true)
        let proxy = FaultProxy(upstream: await scenario.server.url)
        try await proxy.start()
        await proxy.add(.init(method: "POST", pathPrefix: "/api/ciphers", action: .holdUntilReleased))
        // A request timeout no save may wait out in this test; the save's deadline is short.
        let device = try registered.reopen(url: await proxy.url) {
            $0.api.requestTimeout = .seconds(600)
            $0.api.saveTimeout = .milliseconds(300)
        }
        try await device.engine.unlock(email: scenario.email, password: scenario.password)

        let saved = try await device.engine.addItem(loginItem("Held"))
        #expect(saved.outcome.isOffline, "\(saved.outcome)")
        #expect(await proxy.requestLog.contains { $0.hasPrefix("POST /api/ciphers") }, "the create was on the wire")
        #expect(try await device.engine.pendingCount() == 1)

        // The held request reaches the server after all; the next sync does not make a second item.
        await proxy.releaseHeld()
        let report = try await device.engine.sync()
        #expect(report.stillPending == 0 && report.needsAttention == 0, "\(report)")
        let observer = try await scenario.device()
        let names = try await observer.engine.views().map(\.name).filter { $0 == "Held" }
        #expect(names.count == 1, "one item, not two: \(names)")
        await device.engine.shutdown()
        await proxy.stop()
        await scenario.finish([registered, observer])
    }
}
