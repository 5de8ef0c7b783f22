import Foundation
import GRDB
import Testing
import VaultClient
import VaultExchange
import VaultCrypto
import VaultModels

/// The engine's import and export (the CLI's are in VaultCLITests).
@Suite("Import and export in the engine")
struct ImportExportTests {
    @Test("an export leaves out organization items unless asked, and the trash always")
    func organizationItemsOnlyWhenAsked() async throws {
        let scenario = try await Scenario.start()
        let a = try await scenario.device(register: true)
        _ = try await OrganizationSetup.sharedItem(named: "Shared wifi", scenario: scenario, device: a)
        _ = try await a.engine.addItem(loginItem("Mine"))
        let trashed = try await a.engine.addItem(loginItem("Trashed")).value
        _ = try await a.engine.softDeleteItem(id: trashed.id!)
        let personal = try await a.engine.exportContents()
        #expect(personal.items.map(\.name) == ["Mine"])
        let everything = try await a.engine.exportContents(includeOrganizations: true)
        #expect(everything.items.map(\.name) == ["Mine", "Shared wifi"])
        // The written file carries the organization item only in the second case.
        #expect(!BitwardenJSON.export(items: personal.items, folders: personal.folders).contains("Shared wifi"))
        await scenario.finish([a])
    }

    @Test("an export is refused, naming the item, while any item cannot be decrypted")
    func refusedWhileUnreadable() async throws {
        let scenario = try await Scenario.start()
        let a = try await scenario.device(register: true)
        _ = try await a.engine.addItem(loginItem("Fine"))
        let damaged = try await a.engine.addItem(loginItem("Damaged")).value
        // Another key's ciphertext in the stored name: its MAC check fails, as after a bad write or a hostile server.
        let foreign = try EncString.encrypt("x", key: SymmetricCryptoKey.generate()).serialized
        let queue = try sideConnection(to: a.profile + "/vault.sqlite")
        try await queue.write { db in
            let json = try #require(try String.fetchOne(db, sql: "SELECT json FROM cipher WHERE id = ?", arguments: [damaged.id!]))
            var object = try JSONParser.parseObject(Array(json.utf8))
            object["name"] = .string(foreign)
            try db.execute(sql: "UPDATE cipher SET json = ? WHERE id = ?", arguments: [JSONValue.object(object).jsonText, damaged.id!])
        }
        await #expect(throws: VaultError.exportUnreadable(itemIDs: [damaged.id!])) { try await a.engine.exportContents() }
        // Once in the trash it is left out, as a readable item there is (offline: the damaged copy itself is trashed).
        await scenario.server.stop()
        #expect(try await a.engine.softDeleteItem(id: damaged.id!) == .savedOffline(pendingCount: 1))
        #expect(try await a.engine.exportContents().items.map(\.name) == ["Fine"])
        await scenario.finish([a])
    }

    @Test("an import is one transaction: an item the server would refuse stops it before anything is stored")
    func oneTransaction() async throws {
        let scenario = try await Scenario.start()
        let a = try await scenario.device(register: true)
        await scenario.server.stop()
        var tooLong = CipherView(type: .secureNote, name: "Too long")
        tooLong.notes = String(repeating: "x", count: 20_000)
        let vault = ImportedVault(items: [
            ImportedItem(view: loginItem("Fine"), folderName: "New folder", entry: "item 1"),
            ImportedItem(view: tooLong, folderName: nil, entry: "item 2"),
        ], folderNames: ["New folder"])
        await #expect {
            try await a.engine.importItems(vault)
        } throws: { error in
            guard case VaultError.invalidItem(let reason) = error else { return false }
            // Said once: "The item cannot be saved: item 2 of the file: notes is too long…", not nested twice.
            return reason.hasPrefix("item 2 of the file: notes is too long") && !reason.contains("The item cannot be saved")
        }
        #expect(try await a.engine.items().isEmpty)
        #expect(try await a.engine.folders().isEmpty)
        #expect(try await a.engine.pendingCount() == 0)
        await scenario.finish([a])
    }

    @Test("an item the file lists in the trash is imported into the trash, and is in the trash on the server after the sync")
    func trashedItem() async throws {
        let scenario = try await Scenario.start()
        let a = try await scenario.device(register: true)
        var trashed = loginItem("Old router")
        trashed.deletedDate = WireDate(iso8601: "2025-02-03T04:05:06Z")
        trashed.creationDate = WireDate(iso8601: "2023-01-01T00:00:00Z")
        trashed.revisionDate = WireDate(iso8601: "2024-01-02T03:04:05Z")
        let vault = ImportedVault(items: [ImportedItem(view: trashed, folderName: nil, entry: "item 1"),
                                          ImportedItem(view: loginItem("Live"), folderName: nil, entry: "item 2")], folderNames: [])
        _ = try await a.engine.importItems(vault)
        func state(_ device: Device) async throws -> [String: Bool] {
            Dictionary(uniqueKeysWithValues: try await device.engine.items().compactMap { try? $0.result.get() }.map { ($0.name, $0.isDeleted) })
        }
        #expect(try await state(a) == ["Old router": true, "Live": false])
        // The file's dates until the first sync (docs/IMPORT-FORMATS.md, "Dates").
        let imported = try #require(try await a.engine.view(named: "Old router"))
        #expect(imported.creationDate == trashed.creationDate && imported.revisionDate == trashed.revisionDate)
        let report = try await a.engine.sync()
        #expect(report.stillPending == 0 && report.needsAttention == 0)
        let b = try await scenario.device()
        #expect(try await state(b) == ["Old router": true, "Live": false])
        await scenario.finish([a, b])
    }

    @Test("an import's temporary ids follow the file's order, folders first (docs/ARCHITECTURE.md, \"Time-ordered ids\")")
    func importIDsInOrder() async throws {
        let scenario = try await Scenario.start()
        let a = try await scenario.device(register: true)
        await scenario.server.stop()
        let names = (0..<300).map { String(format: "Item %03d", $0) }
        let vault = ImportedVault(items: names.map { ImportedItem(view: loginItem($0), folderName: "Imported", entry: $0) },
                                  folderNames: ["Imported"])
        _ = try await a.engine.importItems(vault)
        let folderID = try #require(try await a.engine.folders().first { $0.name == "Imported" }?.id)
        let idOfName = Dictionary(uniqueKeysWithValues: try await a.engine.items().compactMap { try? $0.result.get() }.map { ($0.name, $0.id!) })
        let ids = names.compactMap { idOfName[$0] }
        #expect(ids.count == names.count)
        let made = [folderID] + ids
        #expect(zip(made, made.dropFirst()).allSatisfy { $0 < $1 }, "made one after another, they sort one after another")
        #expect(ids.allSatisfy { TimeOrderedID.milliseconds(of: $0) != nil })
        await scenario.finish([a])
    }

    @Test("nested folder names make their parents; existing folders are matched by name")
    func folders() async throws {
        let scenario = try await Scenario.start()
        let a = try await scenario.device(register: true)
        _ = try await a.engine.createFolder(name: "Work")
        let vault = ImportedVault(items: [ImportedItem(view: loginItem("Bastion"), folderName: "Work/Servers/Prod", entry: "line 2")],
                                  folderNames: ["Work/Servers/Prod"])
        let summary = try await a.engine.importItems(vault)
        #expect(summary.foldersMatched == ["Work"])
        #expect(summary.foldersCreated == ["Work/Servers", "Work/Servers/Prod"])
        let folders = try await a.engine.folders()
        #expect(Set(folders.map(\.name)) == ["Work", "Work/Servers", "Work/Servers/Prod"])
        let bastion = try #require(try await a.engine.items().compactMap { try? $0.result.get() }.first { $0.name == "Bastion" })
        #expect(bastion.folderId == folders.first { $0.name == "Work/Servers/Prod" }?.id)
        await scenario.finish([a])
    }
}
