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
        let queue = try sideConnection(to: a.profile + "/vault.sqlite")
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
}
