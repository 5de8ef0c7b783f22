import Foundation
import Testing
import VaultAPI
import VaultCrypto
import VaultExchange
import VaultModels
import VaultStore
import VaultTestSupport
@testable import VaultClient

/// The full sync's two-thread pull (`ParsedRows`, docs/ARCHITECTURE.md "Large vaults"), on answers made here:
/// the order items arrive in, damaged items, a storing side that fails or never begins, deep nesting on the
/// parsing thread.
@Suite("The pull's pipeline")
struct PullPipelineTests {
    static let keys = VaultKeys(userKey: SymmetricCryptoKey.generate())

    /// An answer of `count` items (item `i` named "Item i"), `damaged` positions holding items without an id.
    static func answer(items count: Int, damaged: Set<Int> = [], extra: JSONValue? = nil) throws -> [UInt8] {
        let item = try keys.newItem(type: .secureNote, name: "template").encrypted(with: keys)
        let ciphers = try (0..<count).map { index -> JSONValue in
            var wire = item
            wire.id = damaged.contains(index) ? nil : "00000000-0000-0000-0000-\(String(format: "%012d", index))"
            wire.name = try EncString.encrypt("Item \(index)", key: keys.userKey)
            var object = wire.jsonObject()
            if index == 0, let extra { object["deep"] = extra }
            return .object(object)
        }
        return JSONValue.object(["profile": .object(["id": .string("user")]), "folders": .array([]), "ciphers": .array(ciphers),
                                 "collections": .array([])]).serialized()
    }

    static func waitForParseEnd(_ rows: ParsedRows) async -> Bool {
        await waitUntil { rows.parseEnded }
    }

    /// The full sync's one large commit copies its log at the sync's priority before the sync returns
    /// (`VaultStore.copyingLogAfter`): no background copy is left running into what the person does next.
    @Test("a full sync past 1,000 log pages has copied its log when it returns, not at a background priority")
    func fullSyncCopiesItsLog() async throws {
        let scenario = try await Scenario.start()
        let a = try await scenario.device(register: true)
        // About 5 MB of items: the new device's one pull transaction writes well over 1,000 log pages.
        let notes = String(repeating: "0123456789", count: 700)
        let items = (0..<600).map { index in
            var view = CipherView(type: .secureNote, name: "Long note \(index)")
            view.notes = notes
            return ImportedItem(view: view, folderName: nil, entry: "item \(index)")
        }
        _ = try await a.engine.importItems(ImportedVault(items: items))
        let pushed = try await a.engine.sync()
        #expect(pushed.stillPending == 0, "\(pushed)")
        let b = try await scenario.device()
        #expect(try await b.engine.items().count == 600)
        let store = await b.engine.store
        #expect(store.backgroundCheckpointsDone >= 1, "the log was copied before the login's sync returned")
        #expect(store.backgroundCheckpointNice == nil, "by the sync itself, not by a thread at a background priority")
        await scenario.finish([a, b])
    }

    @Test("every item reaches the storing side once, in the answer's order, across batches; damaged ones as skipped")
    func orderAcrossBatches() throws {
        let count = ParsedRows.batchSize * 3 + 17
        let rows = ParsedRows.start(SyncText(bytes: try Self.answer(items: count, damaged: [3, 1_200])), userID: "u")
        defer { rows.abandon() }
        var seen: [Int] = []
        var skipped = 0
        let snapshot = try rows.drain { built in
            switch built {
            case .success(let row): seen.append(Int(row.id.suffix(12))!)
            case .failure: skipped += 1
            }
        }
        #expect(seen == (0..<count).filter { $0 != 3 && $0 != 1_200 })
        #expect(skipped == 2)
        #expect(snapshot.profile["id"] == .string("user") && snapshot.ciphers.isEmpty)
    }

    @Test("a storing side that fails stops the parse; one that never begins stops it too")
    func storingSideGivesUp() async throws {
        let text = try Self.answer(items: ParsedRows.batchSize * 8)
        struct StoreFailed: Error {}
        let failing = ParsedRows.start(SyncText(bytes: text), userID: "u")
        var stored = 0
        #expect(throws: StoreFailed.self) {
            _ = try failing.drain { _ in
                stored += 1
                if stored == 700 { throw StoreFailed() }
            }
        }
        failing.abandon()
        #expect(await Self.waitForParseEnd(failing), "the parsing thread waits forever for a batch nobody takes")
        let neverBegun = ParsedRows.start(SyncText(bytes: text), userID: "u")
        neverBegun.abandon()
        #expect(await Self.waitForParseEnd(neverBegun))
    }

    @Test("a damaged answer reaches the storing side after the items before the damage, as an error")
    func damageAfterItems() throws {
        var text = try Self.answer(items: ParsedRows.batchSize + 10)
        text.removeLast(2)  // "]}" gone: the answer ends inside the items
        let rows = ParsedRows.start(SyncText(bytes: text), userID: "u")
        defer { rows.abandon() }
        var stored = 0
        #expect(throws: (any Error).self) { _ = try rows.drain { _ in stored += 1 } }
        #expect(stored >= ParsedRows.batchSize)
    }

    @Test("an item nested as deep as the parser allows is parsed on the pipeline's thread; deeper is refused, not a crash")
    func deepNestingOnTheParsingThread() throws {
        func nested(_ depth: Int) -> JSONValue { (0..<depth).reduce(JSONValue.number("1")) { inner, _ in .array([inner]) } }
        // The item's object and the answer's are two levels; the nesting starts at the third.
        let fits = ParsedRows.start(SyncText(bytes: try Self.answer(items: 3, extra: nested(JSONParser.maximumDepth - 3))), userID: "u")
        defer { fits.abandon() }
        var rows: [CipherRow] = []
        _ = try fits.drain { built in if case .success(let row) = built { rows.append(row) } }
        #expect(rows.count == 3 && rows[0].json.contains(#""deep":[[["#))
        let tooDeep = ParsedRows.start(SyncText(bytes: try Self.answer(items: 3, extra: nested(JSONParser.maximumDepth + 50))), userID: "u")
        defer { tooDeep.abandon() }
        #expect(throws: (any Error).self) { _ = try tooDeep.drain { _ in } }
    }
}
