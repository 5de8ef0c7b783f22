import Foundation
import Testing
@testable import VaultServer

@Suite("Embedded server lifecycle")
struct EmbeddedServerTests {
    @Test("a start on a port another server holds fails with an error instead of waiting forever")
    func portTaken() async throws {
        let directory = NSTemporaryDirectory() + "vaultsync-embedded-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var configuration = ServerConfiguration()
        configuration.host = "127.0.0.1"
        configuration.port = 0
        configuration.dataDirectory = directory + "/first"
        configuration.logLevel = .critical
        let first = EmbeddedServer(configuration: configuration)
        try await first.start()
        var second = configuration
        second.port = await first.port
        second.dataDirectory = directory + "/second"
        let intruder = EmbeddedServer(configuration: second)
        await #expect(throws: (any Error).self) { try await intruder.start() }
        #expect(await !intruder.isRunning)
        await first.stop()
    }
}
