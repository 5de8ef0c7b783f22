import Foundation
import GRDB
import Testing
import VaultClient
import VaultExchange
import VaultCrypto
import VaultModels

/// A list reads the cache a page of 1,000 rows at a time and summarises each page on every core while the
/// next is read (`SlicedTransform`, docs/ARCHITECTURE.md "Large vaults"): across pages, nothing may be lost,
/// repeated, reordered or paired with another item's queued change.
@Suite("A list across pages")
struct ListPagesTests {
    @Test("every item once, in the stored order, with its own queued change; a damaged item is reported and hides nothing")
    func everyItemOnceAcrossPages() async throws {
        let scenario = try await Scenario.start()
        let a = try await scenario.device(register: true)
        await scenario.server.stop()
        let count = 2_600  // two full pages and a part
        let vault = ImportedVault(items: (0..<count).map { index in
            ImportedItem(view: loginItem(String(format: "Item %04d", index), username: "user\(index)"), folderName: nil, entry: "item \(index)")
        }, folderNames: [])
        _ = try await a.engine.importItems(vault)
        // One item in the second page made unreadable: another key's ciphertext in its name.
        let queue = try DatabaseQueue(path: a.profile + "/vault.sqlite")
        let storedOrder = try await queue.read { db in try String.fetchAll(db, sql: "SELECT id FROM cipher") }
        let damagedID = storedOrder[1_500]
        let foreign = try EncString.encrypt("x", key: SymmetricCryptoKey.generate()).serialized
        try await queue.write { db in
            let json = try #require(try String.fetchOne(db, sql: "SELECT json FROM cipher WHERE id = ?", arguments: [damagedID]))
            var object = try JSONParser.parseObject(Array(json.utf8))
            object["name"] = .string(foreign)
            try db.execute(sql: "UPDATE cipher SET json = ? WHERE id = ?", arguments: [JSONValue.object(object).jsonText, damagedID])
        }
        let summaries = try await a.engine.itemSummaries()
        #expect(summaries.map(\.id) == storedOrder)
        #expect(try await a.engine.items().map(\.id) == storedOrder)
        var numbers = Set<Int>()
        for summary in summaries {
            // Imported here and never sent: each item's own create waits in the queue.
            #expect(summary.pending?.itemID == summary.id)
            guard summary.id != damagedID else {
                #expect(throws: ModelError.self) { try summary.result.get() }
                continue
            }
            let item = try summary.result.get()
            let number = try #require(Int(item.name.dropFirst("Item ".count)))
            #expect(item.username == "user\(number)")
            numbers.insert(number)
        }
        #expect(numbers.count == count - 1)
        await scenario.finish([a])
    }

    /// A list reads each row's summary column (what it shows, written with the row), not the whole item;
    /// a row whose json changed without it, or stored before it existed, is read from its json.
    @Test("a list reads each item's summary, and the item itself where a write changed the json alone or left no summary")
    func summaryColumnFollowsTheItem() async throws {
        let scenario = try await Scenario.start()
        let a = try await scenario.device(register: true)
        await scenario.server.stop()
        var added: [String] = []
        for index in 0..<4 {
            added.append(try #require(try await a.engine.addItem(loginItem("Item \(index)", username: "user\(index)")).value.id))
        }
        let ids = added
        let queue = try DatabaseQueue(path: a.profile + "/vault.sqlite")
        func summaries() async throws -> [String: ItemSummary] {
            Dictionary(uniqueKeysWithValues: try await a.engine.itemSummaries().map { ($0.id, try $0.result.get()) })
        }
        func storedSummary(_ id: String) async throws -> String? {
            try await queue.read { db in try String.fetchOne(db, sql: "SELECT summary FROM cipher WHERE id = ?", arguments: [id]) }
        }
        for (index, id) in ids.enumerated() {
            let summary = try #require(try await storedSummary(id))
            #expect(!summary.contains("Item \(index)") && !summary.contains("user\(index)"), "the summary is encrypted")
        }
        // A writer that knows only json puts item 1's text in item 0's row: the trigger clears item 0's
        // summary and the list reads the json (a stale summary would still say "Item 0").
        try await queue.write { db in
            try db.execute(sql: "UPDATE cipher SET json = (SELECT json FROM cipher WHERE id = ?) WHERE id = ?", arguments: [ids[1], ids[0]])
        }
        #expect(try await storedSummary(ids[0]) == nil)
        // A row from before the column: no summary.
        try await queue.write { db in try db.execute(sql: "UPDATE cipher SET summary = NULL WHERE id = ?", arguments: [ids[2]]) }
        var listed = try await summaries()
        #expect(listed[ids[0]]?.name == "Item 1" && listed[ids[0]]?.username == "user1")
        #expect(listed[ids[2]]?.name == "Item 2" && listed[ids[2]]?.username == "user2")
        #expect(listed[ids[3]]?.name == "Item 3" && listed[ids[3]]?.favorite == false)
        // Our own writes set both: a favourite item's summary says so, and a row without one gets it back.
        _ = try await a.engine.setFavorite(id: ids[3], true)
        _ = try await a.engine.setFavorite(id: ids[2], true)
        listed = try await summaries()
        #expect(listed[ids[3]]?.favorite == true && listed[ids[2]]?.favorite == true)
        #expect(try await storedSummary(ids[2]) != nil)
        await scenario.finish([a])
    }
}
