import Foundation
import GRDB
import Testing
import VaultAPI
import VaultClient
import VaultCrypto
import VaultModels
import VaultSyncCore
import VaultTestSupport

/// Attachments on the real server, online (issue 23, first step): encrypted here with a key of their
/// own, the v2 flow, downloads through the server's link, deletes.
@Suite("Attachments, online")
struct AttachmentTests {
    @Test("a file attached on one device is listed and downloaded byte for byte on another; deleted, it is gone on both")
    func roundTrip() async throws {
        let devices = try await TwoDevices.start()
        let item = try await devices.a.engine.addItem(loginItem("Passport")).value
        let id = try #require(item.id)
        let contents = SystemRandomSource().bytes(count: 300_000)
        let added = try await devices.a.engine.addAttachment(itemID: id, fileName: "passport scan.pdf", contents: contents)
        #expect(try await devices.a.engine.attachments(itemID: id).map(\.fileName) == ["passport scan.pdf"])

        try await devices.b.engine.pull()
        let seen = try await devices.b.engine.attachments(itemID: id)
        #expect(seen.map(\.id) == [added.id] && seen.map(\.fileName) == ["passport scan.pdf"])
        #expect(try await devices.b.engine.attachmentContents(itemID: id, attachmentID: added.id) == contents)
        #expect(try await devices.b.engine.attachment(itemID: id, reference: "passport scan.pdf").id == added.id)

        // The server holds ciphertext only: the wrapped key, the encrypted name, the encrypted body.
        let wire = try #require(try await devices.b.engine.localStore.readDatabase { db in
            try String.fetchOne(db, sql: "SELECT json FROM cipher WHERE id = ?", arguments: [id])
        })
        #expect(!wire.contains("passport scan.pdf"))

        try await devices.a.engine.deleteAttachment(itemID: id, attachmentID: added.id)
        #expect(try await devices.a.engine.attachments(itemID: id).isEmpty)
        try await devices.b.engine.pull()
        #expect(try await devices.b.engine.attachments(itemID: id).isEmpty)
        await devices.finish()
    }

    @Test("offline, or with changes of the item still queued, an attachment change is refused and nothing changes")
    func needsServer() async throws {
        let devices = try await TwoDevices.start()
        let item = try await devices.a.engine.addItem(loginItem("Keys")).value
        let id = try #require(item.id)
        let offline = try devices.offlineA()
        try await offline.engine.unlock(email: devices.scenario.email, password: devices.scenario.password)
        await #expect(throws: VaultError.self) {
            try await offline.engine.addAttachment(itemID: id, fileName: "key.txt", contents: Array("secret".utf8))
        }
        var edit = item
        edit.notes = "queued"
        #expect(try await offline.engine.updateItem(edit).outcome.isOffline)
        await offline.engine.shutdown()

        let back = try devices.a.reopen(url: await devices.scenario.server.url)
        try await back.engine.unlock(email: devices.scenario.email, password: devices.scenario.password)
        do {
            try await back.engine.addAttachment(itemID: id, fileName: "key.txt", contents: Array("secret".utf8))
            Issue.record("an item with a queued change took an attachment")
        } catch VaultError.attachmentNeedsServer(let message) {
            #expect(message.contains("vaultsync sync"))
        }
        _ = try await back.engine.sync()
        try await back.engine.addAttachment(itemID: id, fileName: "key.txt", contents: Array("secret".utf8))
        #expect(try await back.engine.item(id: id).notes == "queued", "the queued edit went first, then the attachment")
        await #expect(throws: VaultError.attachmentNotFound(item: "Keys", reference: "nope.txt")) {
            try await back.engine.attachment(itemID: id, reference: "nope.txt")
        }
        await devices.finish()
    }
}
