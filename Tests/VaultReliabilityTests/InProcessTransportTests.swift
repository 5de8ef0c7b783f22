import AsyncHTTPClient
import Foundation
import Testing
import VaultAPI
import VaultSyncCore
import VaultTestSupport

/// The simulation's in-process transport must fail as the network does: each fault it applies reaches
/// the engine as the same `ServerCallError` (so the same offline decision, and the same "may have
/// reached the server") as that fault from a fault proxy on real sockets.
@Suite("In-process transport")
struct InProcessTransportTests {
    static let faults: [FaultProxy.Action] = [.fail(status: 503), .dropBeforeForwarding, .forwardThenClose, .forwardThenDrop, .truncateBody]

    @Test("each fault fails in process exactly as it fails on the wire", arguments: faults)
    func sameFailure(_ action: FaultProxy.Action) async throws {
        let rule = FaultProxy.Rule(method: "POST", pathPrefix: "/identity/accounts/prelogin", action: action)
        let server = LiveServer()
        try await server.start()
        let proxy = FaultProxy(upstream: await server.url)
        try await proxy.start()
        await proxy.add(rule)
        let onTheWire = await Self.failure(of: BitwardenAPI(baseURL: await proxy.url, httpClient: HTTPClient.shared))
        await proxy.stop()
        await server.destroy()

        let inProcess = try await InProcessServer.run(time: SimulatedTime()) { server in
            let transport = InProcessTransport(server: server)
            transport.add(rule)
            return await Self.failure(of: BitwardenAPI(baseURL: InProcessServer.url, transport: transport))
        }
        #expect(onTheWire != nil, "\(action.name): the call through the proxy did not fail")
        #expect(inProcess == onTheWire, "\(action.name): in process \(String(describing: inProcess)), on the wire \(String(describing: onTheWire))")
    }

    @Test("an answer carries the server clock's time in its Date header, as on the wire")
    func dateHeader() async throws {
        let time = SimulatedTime()
        let samples = SampleBox()
        _ = try await InProcessServer.run(time: time) { server in
            let api = BitwardenAPI(baseURL: InProcessServer.url, transport: InProcessTransport(server: server),
                                   onClockSample: { samples.add($0.serverDate.microsecondsSinceEpoch) })
            return try await api.prelogin(email: "nobody@example.com")
        }
        // The server's clock ticked a millisecond for the request; the header has whole seconds.
        #expect(samples.values == [SimulatedTime.start])
        #expect(InProcessServer.httpDate(microseconds: SimulatedTime.start) == "Thu, 01 Jan 2026 00:00:00 GMT")
        #expect(InProcessServer.httpDate(microseconds: 951_827_696_000_000) == "Tue, 29 Feb 2000 12:34:56 GMT")
    }

    /// How a prelogin call fails (`nil`: it did not).
    static func failure(of api: BitwardenAPI) async -> ServerCallError? {
        do {
            _ = try await api.prelogin(email: "nobody@example.com")
            return nil
        } catch let error as ServerCallError {
            return error
        } catch {
            return .invalidResponse("not a ServerCallError: \(error)")
        }
    }
}

final class SampleBox: @unchecked Sendable {
    private let lock = NSLock()
    private var recorded: [Int64] = []

    func add(_ value: Int64) { lock.withLock { recorded.append(value) } }
    var values: [Int64] { lock.withLock { recorded } }
}
