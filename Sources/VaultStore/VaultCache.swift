import Foundation
import GRDB
import VaultCrypto
import VaultModels
import VaultSyncCore

/// The user's cached items (``CipherRow``): every user-visible field an EncString, as on the wire.
public struct CipherCache {
    let db: Database
    let userID: String

    private var mine: QueryInterfaceRequest<CipherRow> { CipherRow.filter(CipherRow.Columns.userID == userID) }

    /// The item with this id, or `nil`.
    public func find(id: String) throws -> CipherRow? {
        try CipherRow.fetchOne(try db.cachedStatement(sql: "SELECT * FROM cipher WHERE userID = ? AND id = ?"), arguments: [userID, id])
    }

    /// Whether the user has no cached item (a fresh device before its first sync).
    public func isEmpty() throws -> Bool {
        try !Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM cipher WHERE userID = ?)", arguments: [userID])!
    }

    /// Every cached item of the user.
    public func all() throws -> [CipherRow] {
        try mine.fetchAll(db)
    }

    /// The version of the user's cached items: it moves whenever any of them is inserted, changed or
    /// removed, by any path (store migration v12's triggers). 0 before the first.
    public func version() throws -> Int64 {
        try Int64.fetchOne(db.cachedStatement(sql: "SELECT n FROM cipherVersion WHERE userID = ?"), arguments: [userID]) ?? 0
    }

    /// The ids of the user's cached items.
    public func ids() throws -> [String] {
        try String.fetchAll(db.cachedStatement(sql: "SELECT id FROM cipher WHERE userID = ?"), arguments: [userID])
    }

    /// Every cached item of the user, handed to `body` a page of `size` rows at a time: the rows of a large
    /// vault are never all in memory at once.
    public func forEachPage(of size: Int, _ body: ([CipherRow]) throws -> Void) throws {
        let cursor = try mine.fetchCursor(db)
        var page: [CipherRow] = []
        page.reserveCapacity(size)
        while let row = try cursor.next() {
            page.append(row)
            if page.count == size {
                try body(page)
                page.removeAll(keepingCapacity: true)
            }
        }
        if !page.isEmpty { try body(page) }
    }

    /// Every row's id with the SHA-256 of its stored JSON, read through a cursor: no row's JSON is copied
    /// out of SQLite (what the name index compares with).
    public func jsonDigests() throws -> [(id: String, digest: ContentDigest)] {
        let cursor = try Row.fetchCursor(db, sql: "SELECT id, json FROM cipher WHERE userID = ?", arguments: [userID])
        var digests: [(id: String, digest: ContentDigest)] = []
        while let row = try cursor.next() {
            let id: String = row[0]
            guard let digest = try row.withUnsafeData(atIndex: 1, { data in data.map { $0.withUnsafeBytes { ContentDigest(of: $0) } } }) else { continue }
            digests.append((id, digest))
        }
        return digests
    }

    /// The cached items among these ids (any number: read in slices, as SQLite limits the values
    /// bound to one statement).
    public func find(ids: [String]) throws -> [CipherRow] {
        try stride(from: 0, to: ids.count, by: 5000).flatMap { start in
            let slice = Array(ids[start..<min(start + 5000, ids.count)])
            return try mine.filter(slice.contains(CipherRow.Columns.id)).fetchAll(db)
        }
    }

    /// The cached items whose id starts with `prefix` (compared exactly, byte for byte).
    public func find(idPrefix prefix: String) throws -> [CipherRow] {
        try CipherRow.fetchAll(db, sql: "SELECT * FROM cipher WHERE userID = ? AND substr(id, 1, length(?)) = ?", arguments: [userID, prefix, prefix])
    }

    /// Stores the item (inserted or replaced).
    public func store(_ wire: CipherWire) throws {
        try store(CipherRow(userID: userID, wire: wire))
    }

    /// Stores a row made for this user (inserted or replaced, one cached statement: the hot path of
    /// bulk settles and full syncs).
    public func store(_ row: CipherRow) throws {
        let statement = try db.cachedStatement(sql: """
            INSERT INTO cipher (userID, id, organizationID, revisionDate, json) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (userID, id) DO UPDATE SET organizationID = excluded.organizationID,
                revisionDate = excluded.revisionDate, json = excluded.json
            """)
        try statement.execute(arguments: [userID, row.id, row.organizationID, row.revisionDate, row.json])
    }

    /// Removes the item from the cache (nothing if it is not there).
    public func remove(id: String) throws {
        try db.cachedStatement(sql: "DELETE FROM cipher WHERE userID = ? AND id = ?").execute(arguments: [userID, id])
    }

    /// Moves the items of folder `folderID` to `newFolderID` (`nil`: no folder), revision dates kept,
    /// as the server does when a folder goes or gets its id. Returns how many moved. Only rows whose
    /// text holds the folder id are parsed (an import makes many folders; each parsed every item before).
    @discardableResult
    public func moveItems(ofFolder folderID: String, to newFolderID: String?) throws -> Int {
        let rows = try mine.filter(CipherRow.Columns.json.like("%\(folderID)%")).fetchAll(db)
        var moved = 0
        for row in rows {
            guard var wire = try? row.wire(), wire.folderId == folderID else { continue }
            wire.folderId = newFolderID
            try store(wire)
            moved += 1
        }
        return moved
    }
}

/// The user's cached folders (``FolderRow``).
public struct FolderCache {
    let db: Database
    let userID: String

    private var mine: QueryInterfaceRequest<FolderRow> { FolderRow.filter(FolderRow.Columns.userID == userID) }

    /// The folder with this id, or `nil`.
    public func find(id: String) throws -> FolderRow? {
        try FolderRow.fetchOne(db, key: [FolderRow.Columns.userID.name: userID, FolderRow.Columns.id.name: id])
    }

    /// Every cached folder of the user.
    public func all() throws -> [FolderRow] {
        try mine.fetchAll(db)
    }

    /// The ids of the cached folders.
    public func ids() throws -> [String] {
        try String.fetchAll(db, mine.select(FolderRow.Columns.id))
    }

    /// Stores the folder (inserted or replaced).
    public func store(_ wire: FolderWire) throws {
        try FolderRow(userID: userID, wire: wire).save(db)
    }

    /// Removes the folder from the cache (nothing if it is not there).
    public func remove(id: String) throws {
        _ = try FolderRow.deleteOne(db, key: [FolderRow.Columns.userID.name: userID, FolderRow.Columns.id.name: id])
    }
}

/// The user's organization memberships and collections as the last sync sent them (read-only
/// offline, replaced wholesale), and the organizations the user trusted on this device.
public struct OrganizationCache {
    let db: Database
    let userID: String

    /// Every membership of the user.
    public func all() throws -> [OrganizationRow] {
        try OrganizationRow.filter(OrganizationRow.Columns.userID == userID).fetchAll(db)
    }

    /// The membership of this organization, or `nil`.
    public func find(id: String) throws -> OrganizationRow? {
        try OrganizationRow.fetchOne(db, key: [OrganizationRow.Columns.userID.name: userID, OrganizationRow.Columns.id.name: id])
    }

    /// Replaces every membership with these (id, profile JSON) pairs; returns the ids known before.
    @discardableResult
    public func replaceMemberships(_ memberships: [(id: String, json: String)]) throws -> Set<String> {
        let mine = OrganizationRow.filter(OrganizationRow.Columns.userID == userID)
        let known = Set(try String.fetchAll(db, mine.select(OrganizationRow.Columns.id)))
        _ = try mine.deleteAll(db)
        for membership in memberships {
            try OrganizationRow(userID: userID, id: membership.id, json: membership.json).insert(db)
        }
        return known
    }

    /// Replaces every collection with these (id, JSON) pairs.
    /// The collections of the user's organizations from the last sync (their names encrypted with the organization's key).
    public func collections() throws -> [CollectionRow] {
        try CollectionRow.filter(CollectionRow.Columns.userID == userID).fetchAll(db)
    }

    public func replaceCollections(_ collections: [(id: String, json: String)]) throws {
        _ = try CollectionRow.filter(CollectionRow.Columns.userID == userID).deleteAll(db)
        for collection in collections {
            try CollectionRow(userID: userID, id: collection.id, json: collection.json).insert(db)
        }
    }

    /// The organizations the user trusted on this device, by id.
    public func trusted() throws -> [String: TrustedOrganizationRow] {
        let rows = try TrustedOrganizationRow.filter(TrustedOrganizationRow.Columns.userID == userID).fetchAll(db)
        return Dictionary(rows.map { ($0.organizationID, $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// The trust of one organization, or `nil`.
    public func trusted(id organizationID: String) throws -> TrustedOrganizationRow? {
        try TrustedOrganizationRow.fetchOne(db, key: [TrustedOrganizationRow.Columns.userID.name: userID,
                                                      TrustedOrganizationRow.Columns.organizationID.name: organizationID])
    }

    /// Records (or renews) the user's trust in an organization.
    public func trust(_ row: TrustedOrganizationRow) throws {
        try row.save(db)
    }
}

/// One queued item: which kind, which id.
public struct QueuedItem: Hashable, Sendable {
    public var kind: PendingItemKind
    public var itemID: String

    public init(kind: PendingItemKind, itemID: String) {
        self.kind = kind
        self.itemID = itemID
    }
}

/// The user's queue of changes waiting for the server: one record per item (``PendingChangeRow``),
/// ids readable, everything else sealed with the user key.
public struct ChangeQueue {
    let db: Database
    let userID: String

    private var mine: QueryInterfaceRequest<PendingChangeRow> { PendingChangeRow.filter(PendingChangeRow.Columns.userID == userID) }

    /// Every record of the user.
    public func all() throws -> [PendingChangeRow] {
        try mine.fetchAll(db)
    }

    /// Every record of one kind.
    public func all(kind: PendingItemKind) throws -> [PendingChangeRow] {
        try mine.filter(PendingChangeRow.Columns.itemKind == kind.rawValue).fetchAll(db)
    }

    /// The item's record, or `nil`.
    public func record(kind: PendingItemKind, itemID: String) throws -> PendingChangeRow? {
        // Cached statements here and below: every save reads, writes and counts the queue (P1).
        try PendingChangeRow.fetchOne(try db.cachedStatement(sql: "SELECT * FROM pendingChange WHERE userID = ? AND itemKind = ? AND itemID = ?"),
                                      arguments: [userID, kind.rawValue, itemID])
    }

    /// A position no record queued so far is after (0 when none): a resolution pass reads the records up
    /// to it, so that a save made during the pass waits for the next pass and its fresh snapshot.
    public func lastPosition() throws -> Int64 {
        // Every account's newest: an upper bound read from the table's last row, not a scan.
        try Int64.fetchOne(db.cachedStatement(sql: "SELECT MAX(rowid) FROM pendingChange")) ?? 0
    }

    /// Up to `limit` records of one kind after position `after` and at most at `through`, in the order
    /// they were first queued (a record keeps its position when it is rewritten), with their positions:
    /// the queue read a page at a time (a range of the table's own order: `+` keeps SQLite off the
    /// user index, which would sort every record of the user for each page).
    public func page(kind: PendingItemKind, after: Int64, through: Int64, limit: Int) throws -> [(position: Int64, row: PendingChangeRow)] {
        let statement = try db.cachedStatement(sql: """
            SELECT rowid, * FROM pendingChange WHERE +userID = ? AND +itemKind = ? AND rowid > ? AND rowid <= ?
            ORDER BY rowid LIMIT ?
            """)
        return try Row.fetchAll(statement, arguments: [userID, kind.rawValue, after, through, limit]).map { row in
            (row[0], try PendingChangeRow(row: row))
        }
    }

    /// The record with this record id, or `nil` (settled, or discarded, meanwhile).
    public func record(id: String) throws -> PendingChangeRow? {
        // Cached statements on the settling path (once or twice per item of a bulk settle): the query
        // interface would build the same SQL again each time.
        try PendingChangeRow.fetchOne(try db.cachedStatement(sql: "SELECT * FROM pendingChange WHERE id = ? AND userID = ?"),
                                      arguments: [id, userID])
    }

    /// The record with this record id, opened with `key`, or `nil`.
    public func change(id: String, key: SymmetricCryptoKey) throws -> PendingChange? {
        try record(id: id)?.open(key: key)
    }

    /// The record of `change` as stored now, opened with `key`, if anything stored it since `change` was
    /// read (its stored form differs: see ``PendingChange/storedDigest``); `nil` if it is gone, or
    /// unchanged since that read (not opened again: the settling path of a bulk resolution asks this of
    /// every item).
    public func changedSince(_ change: PendingChange, key: SymmetricCryptoKey) throws -> PendingChange? {
        guard let row = try record(id: change.id), row.storedDigest != change.storedDigest else { return nil }
        return try row.open(key: key)
    }

    /// Stores `change` over its record if nothing stored the record since `change` was read (the same
    /// stored form), without opening it; returns `change` carrying the digest of what it wrote, so that
    /// ``changedSince(_:key:)`` answers `nil` for it until someone else writes. `nil`: the record moved on
    /// (or went) since, and nothing was written (the caller modifies the stored record instead).
    public func replaceIfUnchanged(_ change: PendingChange, key: SymmetricCryptoKey) throws -> PendingChange? {
        guard change.storedDigest != nil, let row = try record(id: change.id), row.storedDigest == change.storedDigest else { return nil }
        var written = change
        guard row.itemID == change.itemID, row.itemKind == change.itemKind.rawValue else {
            written.storedDigest = try store(change, key: key)
            return written
        }
        // Only the sealed part changes: the item index's entry is left in place (an upsert rewrites it, one
        // random page per record of a bulk create's "create sent" note).
        let sealed = try PendingChangeRow(change, key: key)
        try db.cachedStatement(sql: "UPDATE pendingChange SET sealed = ? WHERE id = ? AND userID = ?").execute(arguments: [sealed.sealed, change.id, userID])
        written.storedDigest = sealed.storedDigest
        return written
    }

    /// Whether any record (of either kind) is queued for this item id.
    public func hasRecord(forItem itemID: String) throws -> Bool {
        try Bool.fetchOne(try db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM pendingChange WHERE userID = ? AND itemID = ?)"),
                          arguments: [userID, itemID]) ?? false
    }

    /// The queued items (read through a cursor: a queue of 100,000 changes is not held as rows first).
    public func items() throws -> Set<QueuedItem> {
        var items = Set<QueuedItem>()
        let rows = try Row.fetchCursor(db.cachedStatement(sql: "SELECT itemKind, itemID FROM pendingChange WHERE userID = ?"), arguments: [userID])
        while let row = try rows.next() {
            items.insert(QueuedItem(kind: PendingItemKind(rawValue: row[0]) ?? .cipher, itemID: row[1]))
        }
        return items
    }

    /// The ids of the items with a queued change of this kind.
    public func itemIDs(kind: PendingItemKind) throws -> Set<String> {
        var ids = Set<String>()
        let cursor = try String.fetchCursor(db.cachedStatement(sql: "SELECT itemID FROM pendingChange WHERE userID = ? AND itemKind = ?"),
                                            arguments: [userID, kind.rawValue])
        while let id = try cursor.next() { ids.insert(id) }
        return ids
    }

    /// The number of records (kept by migration v5's triggers: no scan).
    public func count() throws -> Int {
        try Int.fetchOne(db.cachedStatement(sql: "SELECT n FROM pendingChangeCount WHERE userID = ?"), arguments: [userID]) ?? 0
    }

    /// Seals and stores a record (inserted, or replacing the one with the same record id) and returns the
    /// digest of the sealed form written. One statement: an update fires the update triggers only, an insert
    /// the insert triggers (v5's count).
    @discardableResult
    public func store(_ change: PendingChange, key: SymmetricCryptoKey) throws -> ContentDigest {
        let row = try PendingChangeRow(change, key: key)
        let statement = try db.cachedStatement(sql: """
            INSERT INTO pendingChange (id, userID, itemKind, itemID, sealed) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (id) DO UPDATE SET userID = excluded.userID, itemKind = excluded.itemKind,
                itemID = excluded.itemID, sealed = excluded.sealed
            """)
        try statement.execute(arguments: [row.id, row.userID, row.itemKind, row.itemID, row.sealed])
        return row.storedDigest
    }

    /// Removes the item's record of this kind.
    public func remove(kind: PendingItemKind, itemID: String) throws {
        let statement = try db.cachedStatement(sql: "DELETE FROM pendingChange WHERE userID = ? AND itemKind = ? AND itemID = ?")
        try statement.execute(arguments: [userID, kind.rawValue, itemID])
    }

    /// Removes the item's records of either kind.
    public func removeRecords(ofItem itemID: String) throws {
        _ = try mine.filter(PendingChangeRow.Columns.itemID == itemID).deleteAll(db)
    }

    /// Removes the record with this record id (settled).
    public func remove(recordID: String) throws {
        let statement = try db.cachedStatement(sql: "DELETE FROM pendingChange WHERE id = ? AND userID = ?")
        try statement.execute(arguments: [recordID, userID])
    }
}
