import Foundation
import GRDB
import Testing
import VaultCrypto
import VaultModels
@testable import VaultStore
import VaultSyncCore
import VaultTestSupport

/// The queue's size is kept by triggers (store migration v5) instead of a `COUNT(*)` per save.
@Suite("Queue size kept by the store")
struct QueueCountTests {
    func account(_ userID: String) -> AccountRecord {
        AccountRecord(userID: userID, email: "\(userID)@example.com", deviceIdentifier: "device", kdf: .defaultPBKDF2,
                      protectedUserKey: "x", localAuthorizationHash: "y", encryptedPrivateKey: nil, publicKey: nil,
                      sealedTokens: nil, createdAt: 0)
    }

    func record(_ id: String, user: String, item: String, key: SymmetricCryptoKey) throws -> PendingChangeRow {
        let metadata = PendingChangeMetadata(kind: .update, originalRevisionDate: WireDate(microsecondsSinceEpoch: 1),
                                             createdDate: WireDate(microsecondsSinceEpoch: 2), updatedDate: WireDate(microsecondsSinceEpoch: 3))
        return try PendingChangeRow(PendingChange(id: id, userID: user, itemID: item, itemKind: .cipher, metadata: metadata), key: key)
    }

    @Test("inserts, updates, deletes and an account's removal keep the count equal to the rows, per user")
    func countFollowsRows() async throws {
        let directory = temporaryDirectory("vaultsync-count")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try VaultStore(path: directory + "/vault.sqlite")
        let key = try SymmetricCryptoKey(bytes: Array(repeating: 7, count: 64))
        let rows = try (0..<30).map { try record("r\($0)", user: $0 % 3 == 0 ? "b" : "a", item: "i\($0)", key: key) }
        // (kept count, rows counted) per user
        let counts: @Sendable (Database) throws -> [String: [Int]] = { db in
            var result: [String: [Int]] = [:]
            for user in ["a", "b", "c"] {
                let counted = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM pendingChange WHERE userID = ?", arguments: [user]) ?? 0
                result[user] = [try StoreTransaction(db).queue(of: user).count(), counted]
            }
            return result
        }
        try await store.writeDatabase { db in
            for user in ["a", "b", "c"] { try account(user).insert(db) }
            for row in rows { try row.save(db) }
        }
        #expect(try await store.readDatabase(counts) == ["a": [20, 20], "b": [10, 10], "c": [0, 0]])
        let afterChanges = try await store.writeDatabase { db in
            // Saving an existing record again is an update: no change in count.
            for row in rows.prefix(10) { try row.save(db) }
            _ = try PendingChangeRow.deleteOne(db, key: "r1")
            try db.execute(sql: "DELETE FROM pendingChange WHERE userID = 'b' AND itemID IN ('i0', 'i3')")
            try db.execute(sql: "UPDATE pendingChange SET userID = 'c' WHERE id = 'r2'")
            return try counts(db)
        }
        #expect(afterChanges == ["a": [18, 18], "b": [8, 8], "c": [1, 1]])
        // A failed transaction leaves the count with its rows.
        await #expect(throws: (any Error).self) {
            try await store.writeDatabase { db in try rows[4].insert(db) }  // r4 is there already: the primary key refuses it
        }
        #expect(try await store.readDatabase(counts) == afterChanges)
        let afterRemoval = try await store.writeDatabase { db in
            _ = try AccountRecord.deleteOne(db, key: "a")  // cascades to its records
            return try counts(db)
        }
        #expect(afterRemoval == ["a": [0, 0], "b": [8, 8], "c": [1, 1]])
    }

    @Test("a profile written before the count existed gets its count from its rows")
    func migrationCountsExistingRows() throws {
        let directory = temporaryDirectory("vaultsync-count-migration")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/vault.sqlite"
        let key = try SymmetricCryptoKey(bytes: Array(repeating: 7, count: 64))
        do {
            let queue = try DatabaseQueue(path: path)
            try VaultStore.migrator.migrate(queue, upTo: "v4: lookups of an item's queue record and drafts")
            try queue.write { db in
                for user in ["a", "b"] { try account(user).insert(db) }
                for index in 0..<7 { try record("r\(index)", user: index < 5 ? "a" : "b", item: "i\(index)", key: key).insert(db) }
            }
        }
        let store = try VaultStore(path: path)  // runs v5
        let counts = try store.readDatabaseNow { db in
            [try StoreTransaction(db).queue(of: "a").count(), try StoreTransaction(db).queue(of: "b").count(), try StoreTransaction(db).queue(of: "c").count()]
        }
        #expect(counts == [5, 2, 0])
    }

    @Test("a save's lookups use indexes, not scans (each scan made n saves cost n² row visits)")
    func lookupsUseIndexes() async throws {
        let directory = temporaryDirectory("vaultsync-plan")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try VaultStore(path: directory + "/vault.sqlite")
        let plans = try await store.readDatabase { db in
            try [
                "SELECT * FROM pendingChange WHERE userID = 'a' AND itemID = 'i'",
                "SELECT * FROM draft WHERE userID = 'a' AND itemID = 'i'",
                "SELECT n FROM pendingChangeCount WHERE userID = 'a'",
                // Every settled create records its id swap and forgets the old ones (a sync of n creates).
                "DELETE FROM idSwap WHERE userID = 'a' AND swappedAt < 5",
                "SELECT newID, revisionDate FROM idSwap WHERE userID = 'a' AND itemKind = 'cipher' AND oldID = 'i'",
            ].map { sql in try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql).map { $0["detail"] as String }.joined(separator: "; ") }
        }
        #expect(plans[0].contains("USING INDEX pendingChange_item"), "\(plans[0])")
        #expect(plans[1].contains("USING INDEX draft_item"), "\(plans[1])")
        #expect(plans[2].contains("USING PRIMARY KEY"), "\(plans[2])")
        #expect(plans[3].contains("USING COVERING INDEX idSwap_age") || plans[3].contains("USING INDEX idSwap_age"), "\(plans[3])")
        #expect(plans[4].contains("USING PRIMARY KEY") || plans[4].contains("USING INDEX sqlite_autoindex_idSwap"), "\(plans[4])")
        #expect(!plans.joined().contains("SCAN"), "\(plans)")
    }

    /// A resolution pass reads the queue a page at a time (`ChangeQueue.page`), up to the last position at
    /// its start.
    @Test("the queue's pages: in the order first queued, one user and kind, up to a bound, a rewritten record in its place")
    func queuePages() async throws {
        let directory = temporaryDirectory("vaultsync-pages")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try VaultStore(path: directory + "/vault.sqlite")
        let key = try SymmetricCryptoKey(bytes: Array(repeating: 7, count: 64))
        try await store.writeDatabase { db in
            for user in ["a", "b"] { try self.account(user).insert(db) }
        }
        // r0…r9 for "a" with one of "b" between each; r3 is a folder change.
        for index in 0..<10 {
            var change = try record("r\(index)", user: "a", item: "i\(index)", key: key).open(key: key)
            if index == 3 { change.itemKind = .folder }
            let other = try record("b\(index)", user: "b", item: "j\(index)", key: key).open(key: key)
            try store.writeNow { tx in
                try tx.queue(of: "a").store(change, key: key)
                try tx.queue(of: "b").store(other, key: key)
            }
        }
        let bound = try store.readNow { tx in try tx.queue(of: "a").lastPosition() }
        // Rewritten (its sealed part changes): the record keeps its place. Queued after the bound: not read.
        var rewritten = try record("r1", user: "a", item: "i1", key: key).open(key: key)
        rewritten.metadata.attempts = 2
        let late = try record("r10", user: "a", item: "i10", key: key).open(key: key)
        try store.writeNow { tx in
            try tx.queue(of: "a").store(rewritten, key: key)
            try tx.queue(of: "a").store(late, key: key)
        }
        var pages: [[String]] = []
        var position: Int64 = 0
        while true {
            let page = try store.readNow { tx in try tx.queue(of: "a").page(kind: .cipher, after: position, through: bound, limit: 4) }
            guard let last = page.last else { break }
            #expect(zip(page, page.dropFirst()).allSatisfy { $0.position < $1.position })
            pages.append(page.map(\.row.id))
            position = last.position
        }
        #expect(pages == [["r0", "r1", "r2", "r4"], ["r5", "r6", "r7", "r8"], ["r9"]])
        let plan = try await store.readDatabase { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN SELECT rowid, * FROM pendingChange WHERE +userID = 'a' AND +itemKind = 'cipher' AND rowid > 0 AND rowid <= 9 ORDER BY rowid LIMIT 4")
                .map { $0["detail"] as String }.joined(separator: "; ")
        }
        #expect(plan.contains("USING INTEGER PRIMARY KEY"), "a range of the table's order, not a sort of the user's records: \(plan)")
    }

    /// `ChangeQueue.changedSince`: a settling transaction learns whether a record was written since the
    /// resolution read it without opening it again when nothing was (every store seals anew, fresh IV).
    @Test("a record unchanged since it was read is known so without opening it; any store, even of the same metadata, counts as a change")
    func changedSinceRead() async throws {
        let directory = temporaryDirectory("vaultsync-changed-since")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try VaultStore(path: directory + "/vault.sqlite")
        let key = try SymmetricCryptoKey(bytes: Array(repeating: 7, count: 64))
        try await store.writeDatabase { db in try self.account("a").insert(db) }
        let made = try record("r1", user: "a", item: "i1", key: key).open(key: key)
        #expect(made.storedDigest != nil)
        try store.writeNow { tx in _ = try tx.queue(of: "a").store(made, key: key) }
        let read = try #require(try store.readNow { tx in try tx.queue(of: "a").change(id: "r1", key: key) })
        #expect(read == made, "the stored digest is not part of the value")
        // Unchanged: nil, and not opened (a wrong key would fail to open it).
        let otherKey = try SymmetricCryptoKey(bytes: Array(repeating: 9, count: 64))
        #expect(try store.readNow { tx in try tx.queue(of: "a").changedSince(read, key: otherKey) } == nil)
        // A change made in memory has no stored form: the record is opened.
        var inMemory = read
        inMemory.storedDigest = nil
        #expect(try store.readNow { tx in try tx.queue(of: "a").changedSince(inMemory, key: key) } == read)
        // Stored again with the same metadata: a new sealed form, so "changed", and opened.
        try store.writeNow { tx in _ = try tx.queue(of: "a").store(read, key: key) }
        let again = try #require(try store.readNow { tx in try tx.queue(of: "a").changedSince(read, key: key) })
        #expect(again == read && again.storedDigest != read.storedDigest)
        // Saved with a newer date: returned as stored.
        var saved = again
        saved.metadata.updatedDate = WireDate(microsecondsSinceEpoch: 4)
        try store.writeNow { tx in _ = try tx.queue(of: "a").store(saved, key: key) }
        #expect(try store.readNow { tx in try tx.queue(of: "a").changedSince(read, key: key) }?.metadata.updatedDate == saved.metadata.updatedDate)
        // Gone: nil.
        try store.writeNow { tx in try tx.queue(of: "a").remove(recordID: "r1") }
        #expect(try store.readNow { tx in try tx.queue(of: "a").changedSince(read, key: key) } == nil)
    }

    /// `ChangeQueue.replaceIfUnchanged`: a bulk create notes "create sent" in records nobody wrote since
    /// the page was read without opening them, and settling then does not open them either; a record the
    /// user saved meanwhile is left for the caller, and its save stays visible to the saved-meanwhile rule.
    @Test("a record is replaced without opening it only if nothing stored it since it was read; the digest written is carried on")
    func replaceIfUnchanged() async throws {
        let directory = temporaryDirectory("vaultsync-replace-unchanged")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try VaultStore(path: directory + "/vault.sqlite")
        let key = try SymmetricCryptoKey(bytes: Array(repeating: 7, count: 64))
        try await store.writeDatabase { db in try self.account("a").insert(db) }
        let made = try record("r1", user: "a", item: "i1", key: key).open(key: key)
        _ = try store.writeNow { tx in try tx.queue(of: "a").store(made, key: key) }
        let read = try #require(try store.readNow { tx in try tx.queue(of: "a").change(id: "r1", key: key) })

        var sent = read
        sent.metadata.createSent = true
        let written = try #require(try store.writeNow { tx in try tx.queue(of: "a").replaceIfUnchanged(sent, key: key) })
        #expect(written.storedDigest != read.storedDigest)
        #expect(try store.readNow { tx in try tx.queue(of: "a").change(id: "r1", key: key) }?.metadata.createSent == true)
        let otherKey = try SymmetricCryptoKey(bytes: Array(repeating: 9, count: 64))
        #expect(try store.readNow { tx in try tx.queue(of: "a").changedSince(written, key: otherKey) } == nil,
                "what it wrote counts as read: settling does not open it")

        // The user saves the item again: the stale copy in hand replaces nothing, and the save is seen.
        var saved = written
        saved.metadata.updatedDate = WireDate(microsecondsSinceEpoch: 9)
        _ = try store.writeNow { tx in try tx.queue(of: "a").store(saved, key: key) }
        var stale = written
        stale.metadata.attempts = 5
        #expect(try store.writeNow { tx in try tx.queue(of: "a").replaceIfUnchanged(stale, key: key) } == nil)
        let stored = try #require(try store.readNow { tx in try tx.queue(of: "a").changedSince(written, key: key) })
        #expect(stored.metadata.updatedDate == saved.metadata.updatedDate && stored.metadata.attempts == 0)
        // A change never read from the store has no digest to compare: never replaced blindly.
        var inMemory = stored
        inMemory.storedDigest = nil
        #expect(try store.writeNow { tx in try tx.queue(of: "a").replaceIfUnchanged(inMemory, key: key) } == nil)
        // Only the sealed part is rewritten when that is all that changed; a change carrying another item id
        // is stored whole, and the item index finds it under its new id only.
        var moved = stored
        moved.itemID = "i2"
        let movedWritten = try #require(try store.writeNow { tx in try tx.queue(of: "a").replaceIfUnchanged(moved, key: key) })
        #expect(try store.readNow { tx in try tx.queue(of: "a").hasRecord(forItem: "i2") } == true)
        #expect(try store.readNow { tx in try tx.queue(of: "a").hasRecord(forItem: "i1") } == false)
        #expect(try store.readNow { tx in try tx.queue(of: "a").changedSince(movedWritten, key: otherKey) } == nil)
        // Gone: nothing written.
        _ = try store.writeNow { tx in try tx.queue(of: "a").remove(recordID: "r1") }
        #expect(try store.writeNow { tx in try tx.queue(of: "a").replaceIfUnchanged(stored, key: key) } == nil)
        #expect(try store.readNow { tx in try tx.queue(of: "a").record(id: "r1") } == nil)
    }

    /// SQLite's temporary files (statement journals, sorts that outgrow the cache) would go to the
    /// system's temporary folder, outside the profile: the store keeps them in memory.
    @Test("the store keeps SQLite's temporary files in memory, on every connection")
    func temporaryFilesInMemory() async throws {
        let directory = temporaryDirectory("vaultsync-temp-store")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try VaultStore(path: directory + "/vault.sqlite")
        #expect(try await store.readDatabase { db in try Int.fetchOne(db, sql: "PRAGMA temp_store") } == 2)
        #expect(try await store.writeDatabase { db in try Int.fetchOne(db, sql: "PRAGMA temp_store") } == 2)
    }

    /// `BackgroundCheckpoint`: the log is copied into the database file by a checkpoint of its own
    /// while writes go on, never inside a commit.
    @Test("the write-ahead log is checkpointed in the background once past 1,000 pages, and every write stays")
    func backgroundCheckpoint() async throws {
        let directory = temporaryDirectory("vaultsync-checkpoint")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/vault.sqlite"
        let store = try VaultStore(path: path)
        try await store.writeDatabase { db in try self.account("a").insert(db) }
        let fileSize = { (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0 }
        let before = fileSize()
        let filler = String(repeating: "x", count: 3000)
        var written = 0
        // One transaction per row, as saves are; the log passes 1,000 pages after about 1,000 of them.
        while written < 6000, store.backgroundCheckpointsDone == 0 || written < 1500 {
            let id = "item-\(written)"
            try store.writeNow { tx in
                try tx.ciphers(of: "a").store(try CipherRow(row: ["userID": "a", "id": id, "organizationID": nil, "revisionDate": 1,
                                                                   "json": "{\"f\":\"\(filler)\"}"]))
            }
            written += 1
        }
        #expect(await waitUntil { store.backgroundCheckpointsDone >= 1 }, "a background checkpoint finished")
        #if os(Linux)
        // At a background priority (nice 10, or the process's own if that is lower already).
        #expect((store.backgroundCheckpointNice ?? 0) >= 10)
        #endif
        // Nothing but a checkpoint copies the log into the database file (the automatic one is replaced). How much
        // is in the file depends on how many copies finished before the loop ended: under a loaded suite only the
        // first (a full run on 2026-11-29, RELIABILITY bug 101: 946,176 bytes against the 1,000,000 once asserted here). The first alone
        // copies the database as of 1,000 log pages, about 230 pages of it at four to five log pages per commit
        // (the row, the rowid tree, the id index, the triggers' counters); 400 KB holds up to ten per commit.
        #expect(fileSize() > before + 400_000, "the log was copied into the file: \(before) → \(fileSize())")
        #expect(try await store.readDatabase { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM cipher") } == written)
        #expect(try await store.readDatabase { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") } == "ok")
    }

    /// What a full sync does with its one large commit (`VaultStore.copyingLogAfter`): no background copy starts
    /// meanwhile; the log is copied at the caller's priority and the call returns when that is done.
    @Test("a large write held from the background copy: the log is copied when it ends, before it returns, at the caller's priority")
    func copyingLogAfterAWrite() async throws {
        let directory = temporaryDirectory("vaultsync-checkpoint-hold")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/vault.sqlite"
        let store = try VaultStore(path: path)
        try await store.writeDatabase { db in try self.account("a").insert(db) }
        let fileSize = { (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0 }
        // A small write copies nothing.
        try await store.copyingLogAfter { try store.writeNow { tx in try tx.ciphers(of: "a").store(try Self.row("small", json: "{}")) } }
        #expect(store.backgroundCheckpointsDone == 0)
        let before = fileSize()
        // One transaction past 1,000 pages, as a full sync's is.
        let filler = String(repeating: "y", count: 3000)
        try await store.copyingLogAfter {
            try store.writeNow { tx in
                for index in 0..<2_000 { try tx.ciphers(of: "a").store(try Self.row("item-\(index)", json: "{\"f\":\"\(filler)\"}")) }
            }
            #expect(store.backgroundCheckpointsDone == 0, "no copy started while the write was held")
        }
        #expect(store.backgroundCheckpointsDone == 1, "the copy was made before the call returned")
        #expect(store.backgroundCheckpointNice == nil, "not at a background priority: the caller waits for it")
        #expect(fileSize() > before + 6_000_000, "the whole log went into the file: \(before) → \(fileSize())")
        #expect(try await store.readDatabase { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM cipher") } == 2_001)
        #expect(try await store.readDatabase { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") } == "ok")
    }

    static func row(_ id: String, json: String) throws -> CipherRow {
        try CipherRow(row: ["userID": "a", "id": id, "organizationID": nil, "revisionDate": 1, "json": json])
    }

    /// Store migration v12: the version the sealed name index trusts instead of hashing every row.
    @Test("the cached items' version moves on every insert, update and delete, per user, and goes with the account")
    func itemVersionFollowsRows() async throws {
        let directory = temporaryDirectory("vaultsync-version")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try VaultStore(path: directory + "/vault.sqlite")
        let versions: @Sendable (Database) throws -> [Int64] = { db in
            try ["a", "b"].map { try StoreTransaction(db).ciphers(of: $0).version() }
        }
        @Sendable func row(_ id: String, user: String, json: String) throws -> CipherRow {
            try CipherRow(row: ["userID": user, "id": id, "organizationID": nil, "revisionDate": 1, "json": json])
        }
        try await store.writeDatabase { db in
            for user in ["a", "b"] { try self.account(user).insert(db) }
        }
        #expect(try await store.readDatabase(versions) == [0, 0])
        var seen: [[Int64]] = [try await store.readDatabase(versions)]
        let steps: [@Sendable (Database) throws -> Void] = [
            { db in try StoreTransaction(db).ciphers(of: "a").store(try row("x", user: "a", json: "{}")) },
            { db in try StoreTransaction(db).ciphers(of: "a").store(try row("x", user: "a", json: "{\"n\":1}")) },  // upsert: an update
            { db in try db.execute(sql: "UPDATE cipher SET json = '{\"n\":2}' WHERE id = 'x'") },  // behind the store's back
            { db in try StoreTransaction(db).ciphers(of: "b").store(try row("y", user: "b", json: "{}")) },
            { db in try StoreTransaction(db).ciphers(of: "a").remove(id: "x") },
        ]
        for step in steps {
            try await store.writeDatabase(step)
            seen.append(try await store.readDatabase(versions))
        }
        #expect(seen == [[0, 0], [1, 0], [2, 0], [3, 0], [3, 1], [4, 1]])
        try await store.writeDatabase { db in _ = try db.execute(sql: "DELETE FROM account WHERE userID = 'b'") }
        #expect(try await store.readDatabase { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM cipherVersion WHERE userID = 'b'") } == 0)
    }
}
