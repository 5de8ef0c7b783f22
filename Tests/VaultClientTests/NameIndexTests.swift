import Foundation
import GRDB
import Testing
import VaultClient
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
        try await engine.localStore.readDatabase { db in try String.fetchOne(db, sql: "SELECT sealed FROM nameIndex") }
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
        let foreign = try EncString.encrypt(Array("vaultsync-names-1".utf8), key: SymmetricCryptoKey(bytes: SystemRandomSource().bytes(count: 64)))
        try await a.localStore.writeDatabase { db in try db.execute(sql: "UPDATE nameIndex SET sealed = ?", arguments: [foreign.serialized]) }
        #expect(try await indexed(a) == swapped)
        #expect(try await sealedIndex(a) != foreign.serialized, "rebuilt under the account's key")
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
