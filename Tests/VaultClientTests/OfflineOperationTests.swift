import Foundation
import GRDB
import Testing
import VaultAPI
import VaultClient
import VaultCrypto
import VaultModels
import VaultStore
import VaultSyncCore
import VaultTestSupport

@Suite("Offline-aware operations against the real server", .serialized)
struct OfflineOperationTests {
    @Test("online: every operation reaches the server and leaves no queue record")
    func online() async throws {
        let scenario = try await Scenario.start()
        let a = try await scenario.device(register: true)
        let b = try await scenario.device()
        let added = try await a.engine.addItem(loginItem("Bank"))
        #expect(added.outcome == .synced)
        let id = try #require(added.value.id)
        var edited = added.value
        edited.login?.password = "new-password"
        #expect(try await a.engine.updateItem(edited).outcome == .synced)
        let folder = try await a.engine.createFolder(name: "Money")
        #expect(folder.outcome == .synced)
        #expect(try await a.engine.moveItem(id: id, toFolder: folder.value.id) == .synced)
        #expect(try await a.engine.setFavorite(id: id, true) == .synced)
        #expect(try await a.engine.setArchived(id: id, true) == .synced)
        #expect(try await a.engine.setArchived(id: id, false) == .synced)
        #expect(try await a.engine.softDeleteItem(id: id) == .synced)
        #expect(try await a.engine.restoreItem(id: id) == .synced)
        #expect(try await a.engine.pendingCount() == 0)

        try await b.engine.pull()
        let seen = try #require(try await b.engine.view(named: "Bank"))
        #expect(seen.login?.password == "new-password")
        #expect(seen.passwordHistory.map(\.password) == ["hunter2"])
        #expect(seen.folderId == folder.value.id)
        #expect(seen.favorite)
        #expect(seen.deletedDate == nil && seen.archivedDate == nil)

        #expect(try await a.engine.permanentlyDeleteItem(id: id) == .synced)
        try await b.engine.pull()
        #expect(try await b.engine.views().isEmpty)
        await scenario.finish([a, b])
    }

    @Test("a queued permanent delete of an item and of a folder is listed under the name they had")
    func pendingDeleteNames() async throws {
        let scenario = try await Scenario.start()
        let a = try await scenario.device(register: true)
        let item = try await a.engine.addItem(loginItem("Old router")).value
        let folder = try await a.engine.createFolder(name: "Archive 2019").value
        await scenario.server.stop()
        _ = try await a.engine.permanentlyDeleteItem(id: item.id!)
        _ = try await a.engine.deleteFolder(id: folder.id!)
        let pending = try await a.engine.pendingChanges()
        #expect(pending.map(\.itemName) == ["Old router", "Archive 2019"], "\(pending.map(\.itemName))")
        await scenario.finish([a])
    }

    @Test("offline: each operation saves locally, queues one record per item, and sends nothing")
    func offline() async throws {
        let scenario = try await Scenario.start()
        let a = try await scenario.device(register: true)
        let bank = try await a.engine.addItem(loginItem("Bank")).value
        let mail = try await a.engine.addItem(loginItem("Mail")).value
        let folder = try await a.engine.createFolder(name: "Work").value
        let bankRevision = try #require(bank.revisionDate)
        await scenario.server.stop()

        // Update twice (password changed twice), then trash and restore.
        var edit = bank
        edit.login?.password = "offline-1"
        let first = try await a.engine.updateItem(edit)
        #expect(first.outcome == .savedOffline(pendingCount: 1))
        edit = first.value
        edit.notes = "changed offline"
        edit.login?.password = "offline-2"
        #expect(try await a.engine.updateItem(edit).outcome == .savedOffline(pendingCount: 1))
        #expect(try await a.engine.moveItem(id: bank.id!, toFolder: folder.id) == .savedOffline(pendingCount: 1))
        // Other operations on another item.
        #expect(try await a.engine.softDeleteItem(id: mail.id!) == .savedOffline(pendingCount: 2))
        // In the trash already: it keeps the date it was moved there.
        let trashedAt = try await a.engine.item(id: mail.id!).deletedDate
        #expect(trashedAt != nil)
        #expect(try await a.engine.softDeleteItem(id: mail.id!) == .savedOffline(pendingCount: 2))
        #expect(try await a.engine.item(id: mail.id!).deletedDate == trashedAt)
        let created = try await a.engine.addItem(loginItem("Offline new"))
        #expect(created.outcome == .savedOffline(pendingCount: 3))
        let newFolder = try await a.engine.createFolder(name: "Offline folder")
        #expect(newFolder.outcome == .savedOffline(pendingCount: 4))

        // The cache shows the changes.
        let local = try #require(try await a.engine.view(named: "Bank"))
        #expect(local.login?.password == "offline-2")
        #expect(local.notes == "changed offline")
        #expect(local.folderId == folder.id)
        #expect(local.passwordHistory.map(\.password) == ["offline-1", "hunter2"], "newest first (docs/PROTOCOL.md, \"Password history\")")
        #expect(try await a.engine.view(named: "Mail")?.deletedDate != nil)
        #expect(try await a.engine.view(named: "Offline new") != nil)

        // The queue records, every field.
        let pending = try await a.engine.pendingChanges()
        #expect(pending.count == 4)
        let bankChange = try #require(pending.first { $0.itemID == bank.id })
        #expect(bankChange.itemKind == .cipher)
        #expect(bankChange.itemName == "Bank")
        #expect(bankChange.metadata.kind == .update)
        #expect(bankChange.metadata.originalRevisionDate == bankRevision)
        #expect(bankChange.metadata.passwordChangeCount == 2)
        #expect(bankChange.metadata.contentChanged)
        #expect(bankChange.metadata.attempts == 0)
        #expect(bankChange.metadata.lastError == nil)
        #expect(bankChange.metadata.state == .pending)
        #expect(bankChange.metadata.updatedDate > bankChange.metadata.createdDate)
        let mailChange = try #require(pending.first { $0.itemID == mail.id })
        #expect(mailChange.metadata.kind == .softDelete)
        #expect(!mailChange.metadata.contentChanged)
        let createChange = try #require(pending.first { $0.itemID == created.value.id })
        #expect(createChange.metadata.kind == .create)
        #expect(createChange.metadata.originalRevisionDate == nil)
        #expect(UUID(uuidString: createChange.itemID) != nil, "offline creates get a client-generated UUID")
        #expect(pending.contains { $0.itemKind == .folder && $0.metadata.kind == .create && $0.itemName == "Offline folder" })

        // Nothing reached the server.
        try await scenario.server.start()
        let b = try await scenario.device()
        let serverBank = try #require(try await b.engine.view(named: "Bank"))
        #expect(serverBank.login?.password == "hunter2")
        #expect(serverBank.folderId == nil)
        #expect(try await b.engine.view(named: "Mail")?.deletedDate == nil)
        #expect(try await b.engine.view(named: "Offline new") == nil)
        #expect(try await b.engine.folders().map(\.name) == ["Work"])
        // A pull on A does not overwrite the queued items.
        try await a.engine.pull()
        #expect(try await a.engine.view(named: "Bank")?.login?.password == "offline-2")
        #expect(try await a.engine.view(named: "Offline new") != nil)
        await scenario.finish([a, b])
    }

    @Test("the password-change count survives a lock and unlock (decrypt-compare-encrypt)")
    func passwordCountAcrossLock() async throws {
        let scenario = try await Scenario.start()
        let a = try await scenario.device(register: true)
        let item = try await a.engine.addItem(loginItem("Router")).value
        await scenario.server.stop()
        var edit = item
        edit.login?.password = "one"
        _ = try await a.engine.updateItem(edit)
        await a.engine.lock()
        await #expect(throws: VaultError.locked) { try await a.engine.item(id: item.id!) }
        try await a.engine.unlock(email: scenario.email, password: scenario.password)
        var again = try await a.engine.item(id: item.id!)
        #expect(again.login?.password == "one")
        again.notes = "no password change"
        _ = try await a.engine.updateItem(again)
        again = try await a.engine.item(id: item.id!)
        again.login?.password = "two"
        _ = try await a.engine.updateItem(again)
        let change = try #require(try await a.engine.pendingChanges().first)
        #expect(change.metadata.passwordChangeCount == 2)
        #expect(change.metadata.kind == .update)
        await scenario.finish([a])
    }

    @Test("an item created offline stays a create through edits; deleted for good it leaves no trace")
    func offlineCreateThenDelete() async throws {
        let scenario = try await Scenario.start()
        let registered = try await scenario.device(register: true)
        // A dead port, not a stopped server: the engine's pooled connection to a server that just stopped
        // can carry the create before the close is noticed, and a create that may have reached the server
        // is rightly not forgotten (its delete is queued to find the copy); this test is about one that
        // never left the device.
        await registered.engine.shutdown()
        let a = try registered.reopen(url: deadServerURL())
        try await a.engine.unlock(email: scenario.email, password: scenario.password)
        let created = try await a.engine.addItem(loginItem("Ephemeral")).value
        // Its temporary id is time-ordered, by the time the item was made (docs/ARCHITECTURE.md, "Time-ordered ids").
        let madeAt = try #require(created.creationDate).microsecondsSinceEpoch / 1000
        #expect(TimeOrderedID.milliseconds(of: try #require(created.id)) == madeAt)
        var edit = created
        edit.login?.password = "edited"
        _ = try await a.engine.updateItem(edit)
        #expect(try await a.engine.softDeleteItem(id: created.id!) == .savedOffline(pendingCount: 1))
        #expect(try await a.engine.restoreItem(id: created.id!) == .savedOffline(pendingCount: 1))
        #expect(try await a.engine.pendingChanges().first?.metadata.kind == .create)
        #expect(try await a.engine.permanentlyDeleteItem(id: created.id!) == .savedOffline(pendingCount: 0))
        #expect(try await a.engine.pendingCount() == 0)
        #expect(try await a.engine.items().isEmpty)
        let rows = try await a.engine.localStore.readDatabase { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM cipher") ?? -1 }
        #expect(rows == 0)
        await a.engine.shutdown()
        let back = try a.reopen(url: await scenario.server.url)
        try await back.engine.unlock(email: scenario.email, password: scenario.password)
        try await back.engine.pull()
        #expect(try await back.engine.items().isEmpty, "the server never heard of it")
        await scenario.finish([back])
    }

    @Test("logout removes the account's cache, queue and drafts")
    func logoutPurges() async throws {
        let scenario = try await Scenario.start()
        let a = try await scenario.device(register: true)
        _ = try await a.engine.addItem(loginItem("Kept on server"))
        await scenario.server.stop()
        _ = try await a.engine.addItem(loginItem("Queued"))
        try await a.engine.saveDraft(loginItem("Draft"))
        try await a.engine.logout(email: scenario.email)
        let counts = try await a.engine.localStore.readDatabase { db in
            try ["account", "cipher", "folder", "pendingChange", "draft", "syncState"].map {
                try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \($0)") ?? -1
            }
        }
        #expect(counts == [0, 0, 0, 0, 0, 0])
        await #expect(throws: VaultError.self) { try await a.engine.items() }
        await scenario.finish([a])
    }

    @Test("organization items are readable offline; offline edits, deletes and moves are refused and nothing is queued")
    func organizationItemsOffline() async throws {
        let scenario = try await Scenario.start()
        let a = try await scenario.device(register: true)
        let item = try await OrganizationSetup.sharedItem(named: "Shared wifi", scenario: scenario, device: a)
        await scenario.server.stop()
        #expect(try await a.engine.item(id: item.id!).login?.password == "hunter2")
        var edit = item
        edit.login?.password = "changed"
        await #expect(throws: VaultError.organizationItemOffline) { try await a.engine.updateItem(edit) }
        await #expect(throws: VaultError.organizationItemOffline) { try await a.engine.softDeleteItem(id: item.id!) }
        await #expect(throws: VaultError.organizationItemOffline) { try await a.engine.moveItem(id: item.id!, toFolder: nil) }
        await #expect(throws: VaultError.organizationItemOffline) { try await a.engine.permanentlyDeleteItem(id: item.id!) }
        #expect(try await a.engine.pendingCount() == 0)
        #expect(try await a.engine.item(id: item.id!).login?.password == "hunter2")
        let message = VaultError.organizationItemOffline.localizedDescription
        #expect(message == "Organization items cannot be edited while offline. Reconnect to save changes to this item.")
        await scenario.finish([a])
    }

    @Test("bad input gets a typed error and changes nothing")
    func badInput() async throws {
        let scenario = try await Scenario.start()
        let a = try await scenario.device(register: true)
        await #expect(throws: VaultError.invalidItem("a name is required")) { try await a.engine.addItem(loginItem("  ")) }
        // A folder's errors name a folder (RELIABILITY bug 53).
        await #expect(throws: VaultError.invalidFolder("a folder name is required")) { try await a.engine.createFolder(name: " ") }
        await #expect(throws: VaultError.invalidFolder("the name is longer than the server accepts")) {
            try await a.engine.createFolder(name: String(repeating: "f", count: 601))
        }
        // White space of every kind (tab, line breaks, no-break and ideographic spaces, line separator) is no name.
        for blank in ["", "\t\n\r", "\u{A0}\u{2003}", "\u{3000}\u{2028}\u{85}"] {
            await #expect(throws: VaultError.invalidItem("a name is required")) { try await a.engine.addItem(loginItem(blank)) }
        }
        // A zero-width space is not white space: Foundation's `whitespacesAndNewlines` does not hold it either.
        let zeroWidth = try await a.engine.addItem(loginItem("\u{200B}")).value
        #expect(zeroWidth.name == "\u{200B}")
        _ = try await a.engine.permanentlyDeleteItem(id: zeroWidth.id!)
        var mixed = loginItem("Mixed")
        mixed.card = CardView(values: [.number: "4111111111111111"])
        await #expect(throws: VaultError.self) { try await a.engine.addItem(mixed) }
        var huge = loginItem("Huge")
        huge.notes = String(repeating: "x", count: 20_000)
        await #expect {
            try await a.engine.addItem(huge)
        } throws: { error in
            guard case VaultError.invalidItem(let reason) = error else { return false }
            return reason.contains("notes")
        }
        await #expect(throws: VaultError.itemNotFound("no-such-id")) { try await a.engine.softDeleteItem(id: "no-such-id") }
        await #expect(throws: VaultError.folderNotFound("00000000-0000-0000-0000-000000000000")) {
            try await a.engine.moveItem(id: "x", toFolder: "00000000-0000-0000-0000-000000000000")
        }
        // Offline, the same checks apply before anything is queued.
        await scenario.server.stop()
        await #expect(throws: VaultError.self) { try await a.engine.addItem(huge) }
        #expect(try await a.engine.pendingCount() == 0)
        #expect(try await a.engine.items().isEmpty)
        await a.engine.lock()
        await #expect(throws: VaultError.locked) { try await a.engine.addItem(loginItem("Locked")) }
        await scenario.finish([a])
    }
}

/// Organization fixtures made through the API (the client has no organization administration yet).
enum OrganizationSetup {
    /// An organization (with one collection) owned by the scenario's account, then a login item in it
    /// saved through `device` (online).
    static func sharedItem(named name: String, scenario: Scenario, device: Device) async throws -> CipherView {
        let ids = try await create(serverURL: await scenario.server.url, email: scenario.email, password: scenario.password)
        try await device.engine.pull()
        // The user created it (through another session): they trust it on this device.
        try await device.engine.trustOrganization(id: ids.organization)
        var shared = loginItem(name)
        shared.organizationId = ids.organization
        shared.collectionIds = [ids.collection]
        return try await device.engine.addItem(shared).value
    }

    static func create(serverURL: String, email: String, password: String) async throws -> (organization: String, collection: String) {
        // A second, raw API session of the same user.
        let http = HTTPClientHolder.shared
        let api = BitwardenAPI(baseURL: serverURL, httpClient: http)
        let kdf = try await api.prelogin(email: email)
        let master = try MasterKey.derive(password: password, salt: email, kdf: kdf)
        let tokens = try await api.login(email: email, passwordHash: master.serverAuthorizationHash(password: password),
                                         deviceIdentifier: UUID().uuidString, deviceName: "setup").tokens()
        let userKey = try master.decryptUserKey(EncString(tokens.key!))
        let privateKey = try RSAPrivateKey.decrypt(EncString(tokens.privateKey!), userKey: userKey)
        let orgKey = SymmetricCryptoKey.generate()
        let body: JSONObject = [
            "name": .string("Family"), "billingEmail": .string(email), "planType": .int(0),
            "key": .string(try privateKey.publicKey.wrap(orgKey).serialized),
            "collectionName": .string(try EncString.encrypt("Default", key: orgKey).serialized),
        ]
        let org = try await api.rawJSON(.POST, "/api/organizations", token: tokens.accessToken, body: .object(body))
        let orgID = org["id"]!.stringValue!
        let sync = try await api.sync(token: tokens.accessToken)
        let collection = sync.collections.first!["id"]!.stringValue!
        return (orgID, collection)
    }
}
