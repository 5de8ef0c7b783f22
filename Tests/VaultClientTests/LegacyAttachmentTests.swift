import Foundation
import Testing
import VaultAPI
import VaultClient
import VaultCrypto
import VaultModels
import VaultTestSupport

/// Attachment uploads by the other routes (issue 23): against a server without the v2 flow (the real
/// server behind a proxy that answers its announce route 404, as an older Bitwarden-compatible server
/// does) the client falls back to the legacy one-step upload, which the real server serves; a resumed
/// upload asks for its target again (renew).
@Suite("Attachments, legacy upload and renew", .serialized)
struct LegacyAttachmentTests {
    /// A proxy in front of the devices' server whose `/attachment/v2` route is missing.
    func withoutV2(_ devices: TwoDevices) async throws -> FaultProxy {
        let proxy = FaultProxy(upstream: await devices.scenario.server.url)
        try await proxy.start()
        await proxy.add(.init(method: "POST", pathPrefix: "/api/ciphers/", pathSuffix: "/attachment/v2", action: .fail(status: 404), times: 1000))
        return proxy
    }

    /// The legacy uploads the client sent through `proxy`.
    func legacyPosts(_ proxy: FaultProxy) async -> Int {
        await proxy.requestLog.filter { $0.hasPrefix("POST /api/ciphers/") && $0.hasSuffix("/attachment") }.count
    }

    @Test("online: the announce answers 404, the file goes up in one step; another device downloads the same bytes; a rename goes the same way")
    func online() async throws {
        let devices = try await TwoDevices.start()
        let item = try await devices.a.engine.addItem(loginItem("Recovery")).value
        let id = try #require(item.id)
        let proxy = try await withoutV2(devices)
        let a = try devices.a.reopen(url: await proxy.url)
        try await a.engine.unlock(email: devices.scenario.email, password: devices.scenario.password)
        let contents = SystemRandomSource().bytes(count: 200_000)
        let added = try await a.engine.addAttachment(itemID: id, fileName: "codes.txt", contents: contents)
        #expect(!added.pending)
        #expect(await legacyPosts(proxy) == 1)
        #expect(await proxy.firedCount == 1, "one announce refused, then the legacy route")

        try await devices.b.engine.pull()
        let seen = try await devices.b.engine.attachments(itemID: id)
        #expect(seen.map(\.id) == [added.id] && seen.map(\.fileName) == ["codes.txt"])
        #expect(try await devices.b.engine.attachmentContents(itemID: id, attachmentID: added.id) == contents)

        // The rename re-attaches the same encrypted bytes under the same wrapped key: the new attachment is
        // told from the old one by its freshly encrypted name.
        let renamed = try await a.engine.renameAttachment(itemID: id, attachmentID: added.id, to: "codes-2026.txt")
        #expect(renamed.id != added.id)
        try await devices.b.engine.pull()
        let after = try await devices.b.engine.attachments(itemID: id)
        #expect(after.map(\.fileName) == ["codes-2026.txt"] && after.map(\.id) == [renamed.id])
        #expect(try await devices.b.engine.attachmentContents(itemID: id, attachmentID: renamed.id) == contents)
        await a.engine.shutdown()
        await proxy.stop()
        await devices.finish()
    }

    @Test("added offline, its legacy upload's answer lost: the next sync finds the file on the item by its key and name, attached once")
    func lostAnswer() async throws {
        let devices = try await TwoDevices.start()
        let item = try await devices.a.engine.addItem(loginItem("Deed")).value
        let id = try #require(item.id)
        let offline = try devices.offlineA()
        try await offline.engine.unlock(email: devices.scenario.email, password: devices.scenario.password)
        let contents = SystemRandomSource().bytes(count: 90_000)
        #expect(try await offline.engine.addAttachment(itemID: id, fileName: "deed.pdf", contents: contents).pending)
        await offline.engine.shutdown()

        let proxy = try await withoutV2(devices)
        // The server stores the file; the client hears a broken connection.
        await proxy.add(.init(method: "POST", pathPrefix: "/api/ciphers/\(id)/attachment", pathSuffix: "/attachment", action: .forwardThenDrop))
        let clock = TestClock()
        let a = try Device.make(url: await proxy.url, profile: devices.a.profile, clock: clock)
        try await a.engine.unlock(email: devices.scenario.email, password: devices.scenario.password)
        let first = try await a.engine.sync()
        #expect(first.stillPending == 1 && first.needsAttention == 0, "a broken connection: tried again later")
        // The next try, once the change's backoff has passed.
        clock.advance(seconds: 3600)
        let second = try await a.engine.sync()
        #expect(second.resolved == 1)
        #expect(try await a.engine.pendingCount() == 0)
        #expect(await legacyPosts(proxy) == 1, "the second attempt found the first one's file instead of sending it again")

        try await devices.b.engine.pull()
        let seen = try await devices.b.engine.attachments(itemID: id)
        #expect(seen.map(\.fileName) == ["deed.pdf"])
        #expect(try await devices.b.engine.attachmentContents(itemID: id, attachmentID: try #require(seen.first?.id)) == contents)
        await a.engine.shutdown()
        await proxy.stop()
        await devices.finish()
    }

    @Test("a resumed upload asks where its file goes now (renew), then sends it there once")
    func resumedUploadRenews() async throws {
        let devices = try await TwoDevices.start()
        let item = try await devices.a.engine.addItem(loginItem("Scan")).value
        let id = try #require(item.id)
        let offline = try devices.offlineA()
        try await offline.engine.unlock(email: devices.scenario.email, password: devices.scenario.password)
        let contents = SystemRandomSource().bytes(count: 70_000)
        #expect(try await offline.engine.addAttachment(itemID: id, fileName: "scan.pdf", contents: contents).pending)
        await offline.engine.shutdown()

        let proxy = FaultProxy(upstream: await devices.scenario.server.url)
        try await proxy.start()
        // Announced, then the upload itself fails: the record keeps the server's attachment id.
        // (The first rule lets the announce through unchanged; the second then meets the upload.)
        await proxy.add(.init(method: "POST", pathPrefix: "/api/ciphers/\(id)/attachment/v2", action: .delay(milliseconds: 0)))
        await proxy.add(.init(method: "POST", pathPrefix: "/api/ciphers/\(id)/attachment/", action: .fail(status: 503)))
        let clock = TestClock()
        let a = try Device.make(url: await proxy.url, profile: devices.a.profile, clock: clock)
        try await a.engine.unlock(email: devices.scenario.email, password: devices.scenario.password)
        _ = try await a.engine.sync()
        #expect(try await a.engine.pendingCount() == 1)
        clock.advance(seconds: 3600)
        #expect(try await a.engine.sync().resolved == 1)
        let log = await proxy.requestLog.filter { $0.contains("/attachment") }
        #expect(log.filter { $0.hasSuffix("/attachment/v2") }.count == 1, "announced once: \(log)")
        #expect(log.contains { $0.hasPrefix("GET ") && $0.hasSuffix("/renew") }, "\(log)")
        try await devices.b.engine.pull()
        let seen = try await devices.b.engine.attachments(itemID: id)
        #expect(seen.map(\.fileName) == ["scan.pdf"])
        #expect(try await devices.b.engine.attachmentContents(itemID: id, attachmentID: try #require(seen.first?.id)) == contents)
        await a.engine.shutdown()
        await proxy.stop()
        await devices.finish()
    }
}
