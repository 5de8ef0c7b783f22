import Foundation
import Testing
import VaultClient
import VaultModels
import VaultTestSupport

/// An item or folder created offline has a temporary id until a sync gives it the server's; a caller that still
/// holds the temporary id (a window opened before that sync, a command that looked a name up beside it) reaches
/// the item under its new id (docs/ARCHITECTURE.md, "Ids that change").
@Suite("Ids that change: a temporary id still reaches its item after the sync that swapped it", .serialized)
struct IDSwapTests {
    /// A, offline, creates an item and a folder; back online, A syncs and both get their server ids.
    func createdOfflineThenSynced(_ devices: TwoDevices) async throws -> (online: Device, item: CipherView, folderID: String) {
        let offline = try devices.offlineA()
        try await offline.engine.unlock(email: devices.scenario.email, password: devices.scenario.password)
        let item = try await offline.engine.addItem(loginItem("Made offline", password: "first")).value
        let folderID = try #require(try await offline.engine.createFolder(name: "Made offline too").value.id)
        await offline.engine.shutdown()
        let online = try Device.make(url: await devices.scenario.server.url, profile: devices.a.profile)
        try await online.engine.unlock(email: devices.scenario.email, password: devices.scenario.password)
        let report = try await online.engine.sync()
        #expect(report.needsAttention == 0 && report.backups.isEmpty, "\(report)")
        #expect(try await !online.engine.views().contains { $0.id == item.id }, "the sync gave the item its server id")
        return (online, item, folderID)
    }

    @Test("an edit, a move into the folder, an item added into it, a rename, an attachment, trash and deletes under the temporary ids reach the item and the folder")
    func temporaryIDsFollowed() async throws {
        let devices = try await TwoDevices.start()
        let (online, item, temporaryFolderID) = try await createdOfflineThenSynced(devices)
        let temporaryID = try #require(item.id)
        let serverID = try #require(try await online.engine.view(named: "Made offline")?.id)
        let serverFolderID = try #require(try await online.engine.folders().first?.id)
        #expect(serverID != temporaryID && serverFolderID != temporaryFolderID)

        #expect(try await online.engine.listedItem(id: temporaryID).id == serverID)
        #expect(try await online.engine.hasItem(id: temporaryID))
        var edited = item
        edited.login?.password = "second"
        let saved = try await online.engine.updateItem(edited)
        #expect(saved.outcome == .synced && saved.value.id == serverID, "\(saved.outcome)")
        #expect(try await online.engine.moveItem(id: temporaryID, toFolder: temporaryFolderID) == .synced)
        #expect(try await online.engine.renameFolder(id: temporaryFolderID, name: "Renamed") == .synced)
        #expect(try await online.engine.attachments(itemID: temporaryID).isEmpty)
        #expect(try await online.engine.currentFolderID(temporaryFolderID) == serverFolderID)
        var filed = loginItem("Filed by the old folder id")
        filed.folderId = temporaryFolderID
        let added = try await online.engine.addItem(filed)
        #expect(added.outcome == .synced && added.value.folderId == serverFolderID)
        var refiled = added.value
        refiled.folderId = nil
        refiled = try await online.engine.updateItem(refiled).value
        #expect(refiled.folderId == nil)
        refiled.folderId = temporaryFolderID
        #expect(try await online.engine.updateItem(refiled).value.folderId == serverFolderID, "an edit into the folder by its old id")
        #expect(try await online.engine.permanentlyDeleteItem(id: try #require(added.value.id)) == .synced)

        _ = try await devices.b.engine.sync()
        let onB = try await devices.b.engine.views()
        #expect(onB.count == 1, "one item, no copy: \(onB.map(\.name))")
        #expect(onB.first?.login?.password == "second" && onB.first?.folderId == serverFolderID)
        #expect(onB.first?.passwordHistory.map(\.password) == ["first"])
        #expect(try await devices.b.engine.folders().map(\.name) == ["Renamed"])

        let attached = try await online.engine.addAttachment(itemID: temporaryID, fileName: "a.txt", contents: Array("kept".utf8))
        #expect(try await online.engine.attachmentContents(itemID: temporaryID, attachmentID: attached.id) == Array("kept".utf8))
        #expect(try await online.engine.softDeleteItem(id: temporaryID) == .synced)
        #expect(try await online.engine.item(id: serverID).deletedDate != nil)
        #expect(try await online.engine.deleteFolder(id: temporaryFolderID) == .synced)
        #expect(try await online.engine.folders().isEmpty)
        #expect(try await online.engine.permanentlyDeleteItem(id: temporaryID) == .synced)
        #expect(try await !online.engine.hasItem(id: temporaryID))
        #expect(try await !online.engine.hasItem(id: serverID))
        await online.engine.shutdown()
        await devices.finish()
    }

    @Test("an edit of a view read before the swap, after another device changed the item, keeps both versions")
    func followedAfterAnotherDeviceChanged() async throws {
        let devices = try await TwoDevices.start()
        let (online, item, _) = try await createdOfflineThenSynced(devices)
        _ = try await devices.b.engine.sync()
        var onB = try #require(try await devices.b.engine.view(named: "Made offline"))
        onB.login?.password = "from B"
        #expect(try await devices.b.engine.updateItem(onB).outcome == .synced)
        _ = try await online.engine.sync()

        // The view was read before either sync: its password edit meets B's.
        var edited = item
        edited.login?.password = "from A"
        _ = try await online.engine.updateItem(edited)
        _ = try await online.engine.sync()
        let views = try await online.engine.views()
        let passwords = Set(views.compactMap(\.login?.password))
        #expect(passwords.contains("from A") && passwords.contains("from B"), "both versions kept: \(views.map { ($0.name, $0.login?.password) })")
        await online.engine.shutdown()
        await devices.finish()
    }

    @Test("an id nothing ever had is still not found")
    func unknownIDNotFound() async throws {
        let devices = try await TwoDevices.start()
        await #expect(throws: VaultError.itemNotFound("no-such-item")) { try await devices.a.engine.softDeleteItem(id: "no-such-item") }
        await #expect(throws: VaultError.folderNotFound("no-such-folder")) { try await devices.a.engine.renameFolder(id: "no-such-folder", name: "x") }
        await devices.finish()
    }
}
