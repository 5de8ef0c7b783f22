import Foundation
import GRDB
import Testing
@testable import VaultClient
import VaultCrypto
import VaultModels
import VaultTestSupport

/// The sealed name index (issue 25, P7-get): names by id without decrypting every name, checked
/// against the rows on every read, so it is never wrong, whoever changed them.
@Suite("The sealed name index", .serialized)
struct NameIndexTests {
    /// What a full decrypt says, by id (the truth the index must match).
    func truth(_ engine: VaultEngine) async throws -> [String: String] {
        Dictionary(uniqueKeysWithValues: try await engine.views().map { ($0.id ?? "", $0.name) })
    }

    func indexed(_ engine: VaultEngine) async throws -> [String: String] {
        Dictionary(uniqueKeysWithValues: try await engine.itemNames().map { ($0.id, (try? $0.name.get()) ?? "<failed>") })
    }

    func sealedIndex(_ engine: VaultEngine) async throws -> String? {
        try await engine.localStore.readDatabase { db in try String.fetchOne(db, sql: "SELECT names || ' ' || sealed FROM nameIndex") }
    }

    @Test("names match a full decrypt through edits, offline saves, pulls and deletes; unchanged rows leave the index as written")
    func followsTheRows() async throws {
        let devices = try await TwoDevices.start()
        let a = devices.a.engine
        var ids: [String] = []
        for index in 0..<12 { ids.append(try #require(try await a.addItem(loginItem("Entry \(index)")).value.id)) }
        #expect(try await indexed(a) == (try await truth(a)))
        let written = try #require(try await sealedIndex(a))
        #expect(try await indexed(a) == (try await truth(a)))
        #expect(try await sealedIndex(a) == written, "nothing changed: the index is read, not written again")

        var renamed = try await a.item(id: ids[3])
        renamed.name = "Renamed here"
        _ = try await a.updateItem(renamed)
        _ = try await a.permanentlyDeleteItem(id: ids[5])
        _ = try await devices.b.engine.pull()
        var elsewhere = try await devices.b.engine.item(id: ids[7])
        elsewhere.name = "Renamed on B"
        _ = try await devices.b.engine.updateItem(elsewhere)
        _ = try await a.pull()
        let names = try await indexed(a)
        #expect(names == (try await truth(a)))
        #expect(names[ids[3]] == "Renamed here" && names[ids[7]] == "Renamed on B" && names[ids[5]] == nil)
        #expect(try await sealedIndex(a) != written)

        let offline = try devices.offlineA()
        try await offline.engine.unlock(email: devices.scenario.email, password: devices.scenario.password)
        var saved = try await offline.engine.item(id: ids[9])
        saved.name = "Saved offline"
        #expect(try await offline.engine.updateItem(saved).outcome.isOffline)
        #expect(try await indexed(offline.engine)[ids[9]] == "Saved offline")
        await offline.engine.shutdown()
        await devices.finish()
    }

    @Test("a damaged index, or rows swapped between items behind the engine's back: the names still follow the rows")
    func checksItself() async throws {
        let devices = try await TwoDevices.start()
        let a = devices.a.engine
        let first = try #require(try await a.addItem(loginItem("First")).value.id)
        let second = try #require(try await a.addItem(loginItem("Second")).value.id)
        _ = try await indexed(a)
        // Someone with the file swaps the two rows' contents: each id now holds the other's sealed item.
        try await a.localStore.writeDatabase { db in
            let json = try Dictionary(uniqueKeysWithValues: Row.fetchAll(db, sql: "SELECT id, json FROM cipher").map { ($0["id"] as String, $0["json"] as String) })
            try db.execute(sql: "UPDATE cipher SET json = ? WHERE id = ?", arguments: [json[second], first])
            try db.execute(sql: "UPDATE cipher SET json = ? WHERE id = ?", arguments: [json[first], second])
        }
        let swapped = try await indexed(a)
        #expect(swapped[first] == "Second" && swapped[second] == "First")
        // A damaged index is rebuilt, and so is one that is not sealed with this account's key.
        try await a.localStore.writeDatabase { db in try db.execute(sql: "UPDATE nameIndex SET sealed = '2.AAAA|BBBB|CCCC'") }
        #expect(try await indexed(a) == swapped)
        try await a.localStore.writeDatabase { db in try db.execute(sql: "UPDATE nameIndex SET names = '2.AAAA|BBBB|CCCC'") }
        #expect(try await a.items(named: "First").map(\.id) == [second])
        #expect(try await indexed(a) == swapped)
        let foreign = try EncString.encrypt(Array("vaultsync-names-5".utf8), key: SymmetricCryptoKey(bytes: SystemRandomSource().bytes(count: 64)))
        try await a.localStore.writeDatabase { db in try db.execute(sql: "UPDATE nameIndex SET sealed = ?, names = ?", arguments: [foreign.serialized, foreign.serialized]) }
        #expect(try await a.items(named: "Second").map(\.id) == [first])
        #expect(try await indexed(a) == swapped)
        #expect(try await sealedIndex(a) != foreign.serialized + " " + foreign.serialized, "rebuilt under the account's key")
        await devices.finish()
    }

    @Test("kept in memory (the agent's engine): lookups and searches answer without opening the sealed index, and follow every change")
    func inMemory() async throws {
        let devices = try await TwoDevices.start()
        let a = devices.a.engine
        await a.keepNameIndexInMemory(true)
        for name in ["Bank", "Mail"] { _ = try await a.addItem(loginItem(name)) }
        _ = try await a.itemNames()
        await a.sealNameIndexInMemory()
        // The sealed copy damaged behind the engine's back: the index in memory still answers, and nothing is rewritten.
        try await a.localStore.writeDatabase { db in try db.execute(sql: "UPDATE nameIndex SET sealed = 'damaged', names = 'damaged'") }
        #expect(try await a.items(named: "bank").count == 1)
        #expect(try await a.items(matching: "mai").count == 1)
        #expect(try await a.localStore.readDatabase { db in try String.fetchOne(db, sql: "SELECT sealed FROM nameIndex") } == "damaged")
        // A change: the rows' version moves, the new row is read; the sealed copy is written a moment later, off
        // the lookup's path, and at the latest when the keys go.
        _ = try await a.addItem(loginItem("BANK"))
        #expect(try await a.items(named: "bank").count == 2)
        await a.lock()
        #expect(try await a.localStore.readDatabase { db in try String.fetchOne(db, sql: "SELECT sealed FROM nameIndex") } != "damaged")
        await #expect(throws: (any Error).self) { try await a.items(named: "bank") }
        await devices.finish()
    }

    @Test("an engine that keeps the index in memory finds by name and searches from its table exactly as every decrypted item answers, in the rows' order, after changes too")
    func tableInMemory() async throws {
        let devices = try await TwoDevices.start()
        let a = devices.a.engine
        await a.keepNameIndexInMemory(true)
        for name in ["Bank", "bank", "Mail", "Café Crème", "ÉCOLE", "école", "Straße", "Item 1", "Item 10", "BANK"] {
            _ = try await a.addItem(loginItem(name, username: name == "Mail" ? "carol" : "dave"))
        }
        func names(_ name: String) async throws -> [String] {
            let ordered = try await a.itemNames().map(\.id)
            let matching = Set(try await a.views().filter { $0.name.caseInsensitiveCompare(name) == .orderedSame }.compactMap(\.id))
            return ordered.filter(matching.contains)
        }
        func check() async throws {
            for name in ["BANK", "mail", "café crème", "École", "straße", "STRASSE", "Item 1", "item 10", "Item", "nothing", "", "post"] {
                #expect(try await a.items(named: name).map(\.id) == (try await names(name)), "\(name)")
            }
            for text in ["BAN", "carol", "é", "item 1", "nothing like it"] {
                let reference = Set(try await a.views().filter { [$0.name, $0.login?.username].contains { $0?.localizedCaseInsensitiveContains(text) ?? false } }.compactMap(\.id))
                #expect(Set(try await a.items(matching: text).map(\.id)) == reference, "\(text)")
            }
        }
        try await check()
        let mail = try #require(try await a.views().first { $0.name == "Mail" })
        var renamed = mail
        renamed.name = "Post"
        _ = try await a.updateItem(renamed)
        try await check()
        #expect(try await a.items(named: "post").map(\.id) == [mail.id!])
        _ = try await a.permanentlyDeleteItem(id: mail.id!)
        try await check()
        #expect(try await a.items(named: "post").isEmpty)
        await devices.finish()
    }

    @Test("a search through the index finds exactly what a search of every decrypted item finds: name, username, notes, URIs, any case")
    func search() async throws {
        let devices = try await TwoDevices.start()
        let a = devices.a.engine
        for index in 0..<20 {
            var item = loginItem("Account \(index)", username: index % 3 == 0 ? "Carol.\(index)" : "dave")
            if index % 4 == 0 { item.notes = "kept in the Blue binder" }
            _ = try await a.addItem(item)
        }
        let secret = try #require(try await a.views().first { $0.name == "Account 7" })
        var changed = secret
        changed.login?.username = "renamed-user"
        _ = try await a.updateItem(changed)
        func reference(_ text: String) async throws -> Set<String> {
            let needles: (CipherView) -> [String?] = { [$0.name, $0.login?.username, $0.notes] + ($0.login?.uris.map(\.uri) ?? []) }
            return Set(try await a.views().filter { view in needles(view).contains { $0?.localizedCaseInsensitiveContains(text) ?? false } }.compactMap(\.id))
        }
        for text in ["account 1", "CAROL", "blue BINDER", "account-12.example", "renamed-user", "dave", "nothing like it"] {
            let found = try await a.items(matching: text)
            #expect(Set(found.map(\.id)) == (try await reference(text)), "\(text)")
            #expect(found.allSatisfy { (try? $0.result.get()) != nil })
        }
        #expect(try await a.items(matching: "Account 7").count == 1)
        await devices.finish()
    }

    @Test("finding by name through the names part alone gives what every decrypted name gives: any case, non-ASCII, duplicates, after changes")
    func byName() async throws {
        let devices = try await TwoDevices.start()
        let a = devices.a.engine
        for name in ["Bank", "bank", "Mail", "Café Crème", "ÉCOLE", "école", "Straße", "Item 1", "Item 10"] { _ = try await a.addItem(loginItem(name)) }
        func reference(_ name: String) async throws -> Set<String> {
            Set(try await a.views().filter { $0.name.caseInsensitiveCompare(name) == .orderedSame }.compactMap(\.id))
        }
        let wanted = ["BANK", "mail", "café crème", "CAFÉ CRÈME", "École", "straße", "STRASSE", "Item 1", "item 10", "Item", "nothing", ""]
        _ = try await a.itemNames()  // the index is current: every lookup below walks the names part alone
        let written = try #require(try await sealedIndex(a))
        for name in wanted {
            #expect(Set(try await a.items(named: name).map(\.id)) == (try await reference(name)), "\(name)")
        }
        #expect(try await sealedIndex(a) == written, "a lookup through the names part writes nothing")
        // Only the names part is read: with the other part damaged, the lookup still answers and nothing is rebuilt.
        try await a.localStore.writeDatabase { db in try db.execute(sql: "UPDATE nameIndex SET sealed = 'damaged'") }
        #expect(Set(try await a.items(named: "bank").map(\.id)) == (try await reference("bank")))
        #expect(try await a.localStore.readDatabase { db in try String.fetchOne(db, sql: "SELECT sealed FROM nameIndex") } == "damaged")
        _ = try await a.itemNames()
        let rebuilt = try #require(try await sealedIndex(a))
        #expect(!rebuilt.hasSuffix(" damaged"), "the full path rebuilds the damaged part")
        #expect(try await a.items(named: "bank").count == 2)
        // Rows changed after the index was written (here behind the engine's back): the lookup does not
        // trust the names part, refreshes the index, and finds the new name.
        let mail = try #require(try await a.views().first { $0.name == "Mail" })
        var renamed = mail
        renamed.name = "Post"
        _ = try await a.updateItem(renamed)
        #expect(try await a.items(named: "mail").isEmpty)
        #expect(try await a.items(named: "POST").map(\.id) == [mail.id!])
        #expect(try await sealedIndex(a) != written)
        for name in wanted + ["post"] {
            #expect(Set(try await a.items(named: name).map(\.id)) == (try await reference(name)), "\(name)")
        }
        // An id prefix: compared exactly.
        let id = try #require(mail.id)
        #expect(try await a.items(idPrefix: String(id.prefix(8))).map(\.id) == [id])
        #expect(try await a.items(idPrefix: "zzzzzzzz").isEmpty)
        await devices.finish()
    }

    @Test("no name reaches the profile in plaintext through the index")
    func sealed() async throws {
        let devices = try await TwoDevices.start()
        let marker = "NAME-INDEX-MARKER-\(UUID().uuidString)"
        _ = try await devices.a.engine.addItem(loginItem(marker))
        #expect(try await devices.a.engine.itemNames().contains { (try? $0.name.get()) == marker })
        #expect(try await sealedIndex(devices.a.engine) != nil)
        try devices.a.engine.localStore.checkpoint()
        let bytes = Array(marker.utf8)
        for path in [devices.a.profile + "/vault.sqlite", devices.a.profile + "/vault.sqlite-wal"] {
            guard let data = readFileKeepingLocks(path) else { continue }
            let found = data.withUnsafeBytes { haystack in bytes.withUnsafeBytes { byteSearch(haystack, contains: $0) } }
            #expect(!found, "\(path) holds the name in plaintext")
        }
        await devices.finish()
    }
}

@Suite("UUID text in the name index")
struct UUIDTextTests {
    @Test("a lowercase UUID's text and its 16 bytes round-trip exactly; any other text is not taken for one")
    func roundTrip() throws {
        for _ in 0..<200 {
            let text = UUID().uuidString.lowercased()
            let bytes = try #require(UUIDText.bytes(text))
            #expect(bytes.count == 16)
            #expect(UUIDText.text(bytes[...]) == text)
            #expect(bytes.elementsEqual(withUnsafeBytes(of: UUID(uuidString: text)!.uuid) { Array($0) }))
        }
        let sample = "0a6bc14a-a675-4758-ae22-9edd882879a8"
        for other in [sample.uppercased(), String(sample.dropLast()), sample + "0", sample.replacingOccurrences(of: "-", with: "_"),
                      "0a6bc14aa675-4758-ae22-9edd882879a8-", "0a6bc14a-a675-4758-ae22-9edd882879ag", "", "item-1"] {
            #expect(UUIDText.bytes(other) == nil, "\(other)")
        }
        #expect(UUIDText.text([1, 2, 3][...]) == nil)
    }
}
