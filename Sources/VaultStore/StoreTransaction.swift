import Foundation
import GRDB
import VaultSyncCore

/// One read snapshot or write transaction of the store, seen through its typed parts: the only way
/// the engine touches the database. It lives inside one ``VaultStore/read(_:)`` or
/// ``VaultStore/write(_:)`` closure, so everything done through it in a write commits together or
/// not at all (a local change and its queue record land in one transaction).
///
/// Each part is scoped to what it stores: `accounts` and `rememberedLogins` are the device's,
/// the rest belong to one user (`ciphers(of:)`, `queue(of:)`, …). A part's operations say what they
/// mean ("remove the item's queue record"); the SQL behind them is the store's business.
public struct StoreTransaction {
    let db: Database

    /// Wraps an open database connection (the store's closures; this package's tests, on a raw one).
    package init(_ db: Database) {
        self.db = db
    }

    /// The accounts logged in on this device.
    public var accounts: AccountTable { AccountTable(db: db) }

    /// What the device keeps of an email across logout (device identifier, remembered two-step login).
    public var rememberedLogins: RememberedLoginTable { RememberedLoginTable(db: db) }

    /// Where the profile was made (``ProfilePlaceTable``).
    public var profilePlace: ProfilePlaceTable { ProfilePlaceTable(db: db) }

    /// The user's cached items, exactly as the server sent them or as they were encrypted here.
    public func ciphers(of userID: String) -> CipherCache { CipherCache(db: db, userID: userID) }

    /// The user's cached folders.
    public func folders(of userID: String) -> FolderCache { FolderCache(db: db, userID: userID) }

    /// The user's organization memberships, collections and the organizations trusted on this device.
    public func organizations(of userID: String) -> OrganizationCache { OrganizationCache(db: db, userID: userID) }

    /// The user's queued changes (one record per item, sealed).
    public func queue(of userID: String) -> ChangeQueue { ChangeQueue(db: db, userID: userID) }

    /// The user's autosaved drafts.
    public func drafts(of userID: String) -> DraftTable { DraftTable(db: db, userID: userID) }

    /// The user's sync bookkeeping.
    public func syncState(of userID: String) -> SyncStateTable { SyncStateTable(db: db, userID: userID) }

    /// Where the user's items and folders created here went when they got their server ids.
    public func idSwaps(of userID: String) -> IDSwapTable { IDSwapTable(db: db, userID: userID) }

    /// The conflict backups this device made or learned of for the user.
    public func backups(of userID: String) -> BackupLedger { BackupLedger(db: db, userID: userID) }

    /// The user's sealed name index.
    public func nameIndex(of userID: String) -> NameIndexTable { NameIndexTable(db: db, userID: userID) }
}

/// The sealed name index of a user (one row of two sealed parts; their format is the engine's).
public struct NameIndexTable {
    let db: Database
    let userID: String

    /// Both parts of the sealed index, or `nil` when none was written (or only by a version before the
    /// names had a part of their own).
    public func sealed() throws -> (names: String, details: String)? {
        let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT names, sealed FROM nameIndex WHERE userID = ?"), arguments: [userID])
        guard let row, let names: String = row[0], let details: String = row[1] else { return nil }
        return (names, details)
    }

    /// The names part alone (what finding an item by name reads).
    public func sealedNames() throws -> String? {
        try String.fetchOne(db.cachedStatement(sql: "SELECT names FROM nameIndex WHERE userID = ?"), arguments: [userID])
    }

    /// Replaces the sealed index.
    public func store(names: String, details: String) throws {
        try db.execute(sql: "INSERT OR REPLACE INTO nameIndex (userID, sealed, names) VALUES (?, ?, ?)", arguments: [userID, details, names])
    }
}

// MARK: Device-wide tables

/// The accounts logged in on this device (``AccountRecord``).
public struct AccountTable {
    let db: Database

    /// The account with this user id, or `nil`.
    public func find(userID: String) throws -> AccountRecord? {
        try AccountRecord.fetchOne(db, key: userID)
    }

    /// The account with this (normalised) email, or `nil`.
    public func find(email: String) throws -> AccountRecord? {
        try AccountRecord.filter(AccountRecord.Columns.email == email).fetchOne(db)
    }

    /// Every account's email, in order.
    public func emails() throws -> [String] {
        try AccountRecord.order(AccountRecord.Columns.email).fetchAll(db).map(\.email)
    }

    /// Stores a login's account: inserted, or for a known user id the keys, KDF and tokens replaced
    /// (the device identifier and the creation date stay).
    public func storeLogin(_ account: AccountRecord) throws {
        guard var current = try find(userID: account.userID) else {
            try account.insert(db)
            return
        }
        current.kdfType = account.kdfType
        current.kdfIterations = account.kdfIterations
        current.kdfMemory = account.kdfMemory
        current.kdfParallelism = account.kdfParallelism
        current.protectedUserKey = account.protectedUserKey
        current.localAuthorizationHash = account.localAuthorizationHash
        current.encryptedPrivateKey = account.encryptedPrivateKey
        current.sealedTokens = account.sealedTokens
        try current.update(db)
    }

    /// Replaces the user's sealed session tokens.
    public func setSealedTokens(_ sealed: String?, userID: String) throws {
        try AccountRecord.filter(key: userID).updateAll(db, AccountRecord.Columns.sealedTokens.set(to: sealed))
    }

    /// Replaces the user's wrapped private key (as the last sync sent it).
    public func setEncryptedPrivateKey(_ encrypted: String, userID: String) throws {
        try AccountRecord.filter(key: userID).updateAll(db, AccountRecord.Columns.encryptedPrivateKey.set(to: encrypted))
    }

    /// The device identifiers of the accounts and remembered logins.
    public func deviceIdentifiers() throws -> Set<String> {
        Set(try String.fetchAll(db, sql: "SELECT deviceIdentifier FROM account UNION SELECT deviceIdentifier FROM rememberedLogin"))
    }

    /// Makes every account (and every remembered login) a new device: a fresh identifier from `make`,
    /// no session tokens and no remembered two-step login (both belong to the old identifier). The
    /// vault, the queue and the drafts stay.
    public func becomeNewDevice(make: () -> String) throws {
        for var account in try AccountRecord.fetchAll(db) {
            account.deviceIdentifier = make()
            account.sealedTokens = nil
            try account.update(db)
        }
        for var remembered in try RememberedLoginRow.fetchAll(db) {
            let account = try find(email: remembered.email)
            remembered.deviceIdentifier = account?.deviceIdentifier ?? make()
            remembered.sealedTwoFactorToken = nil
            try remembered.update(db)
        }
    }

    /// Removes the account of this email and, by cascade, everything the device keeps for it.
    public func remove(email: String) throws {
        _ = try AccountRecord.filter(AccountRecord.Columns.email == email).deleteAll(db)
    }

    /// How many changes the account of this email has queued (kept by migration v5's triggers: no
    /// scan; readable while locked, the count is not secret).
    public func queuedChangeCount(email: String) throws -> Int {
        guard let account = try find(email: email) else { return 0 }
        return try ChangeQueue(db: db, userID: account.userID).count()
    }
}

/// What the device keeps of an email across logout (``RememberedLoginRow``).
public struct RememberedLoginTable {
    let db: Database

    /// The entry of this (normalised) email, or `nil`.
    public func find(email: String) throws -> RememberedLoginRow? {
        try RememberedLoginRow.fetchOne(db, key: email)
    }

    /// Adds an entry for an email that has none; an existing entry stays as it is.
    public func addIfMissing(_ row: RememberedLoginRow) throws {
        if try find(email: row.email) == nil { try row.insert(db) }
    }

    /// Replaces (or with `nil` forgets) the sealed two-step token of an email that has an entry.
    public func setSealedTwoFactorToken(_ sealed: String?, email: String, at now: Int64) throws {
        guard var row = try find(email: email) else { return }
        row.sealedTwoFactorToken = sealed
        row.updatedAt = now
        try row.update(db)
    }

    /// Forgets the email's entry (its device identifier and remembered token).
    public func remove(email: String) throws {
        _ = try RememberedLoginRow.deleteOne(db, key: email)
    }
}

/// The folder the profile database was made in, or last accepted in.
public struct ProfilePlaceTable {
    let db: Database

    /// The recorded folder, `nil` before the first record.
    public func folder() throws -> String? {
        try String.fetchOne(db, sql: "SELECT folder FROM profilePlace WHERE id = 1")
    }

    /// Records `folder` as the profile's place.
    public func record(_ folder: String) throws {
        try db.execute(sql: "INSERT INTO profilePlace (id, folder) VALUES (1, ?) ON CONFLICT(id) DO UPDATE SET folder = excluded.folder",
                       arguments: [folder])
    }
}

// MARK: One user's tables

/// The user's sync bookkeeping (``SyncStateRow``).
public struct SyncStateTable {
    let db: Database
    let userID: String

    /// The stored state, or `nil` before the first contact.
    public func current() throws -> SyncStateRow? {
        // A cached statement: read by every save (the known-offline check) and every recorded contact.
        try SyncStateRow.fetchOne(try db.cachedStatement(sql: "SELECT * FROM syncState WHERE userID = ?"), arguments: [userID])
    }

    /// Reads the state (a fresh one if none), lets `change` edit it, stores it.
    public func update(_ change: (inout SyncStateRow) -> Void) throws {
        var state = try current() ?? SyncStateRow(userID: userID)
        change(&state)
        try state.save(db)
    }
}

/// Where items and folders created on this device went when a sync gave them their server ids (or found
/// them on the server under another id): a caller may still hold the temporary id (a view read before that
/// sync, a window left open) and the engine follows it (docs/ARCHITECTURE.md, "Ids that change").
public struct IDSwapTable {
    let db: Database
    let userID: String

    /// How long a swap is remembered (microseconds): 30 days.
    static let kept: Int64 = 30 * 86_400 * 1_000_000

    /// Records that `oldID` is now `newID`, with the item's revision then (microseconds; `nil` for a folder or an
    /// item that went from this device), and forgets swaps older than 30 days.
    public func record(kind: PendingItemKind, from oldID: String, to newID: String, revision: Int64?, at now: Int64) throws {
        try db.cachedStatement(sql: "DELETE FROM idSwap WHERE userID = ? AND swappedAt < ?").execute(arguments: [userID, now - Self.kept])
        try db.cachedStatement(sql: """
            INSERT INTO idSwap (userID, itemKind, oldID, newID, revisionDate, swappedAt) VALUES (?, ?, ?, ?, ?, ?)
            ON CONFLICT (userID, itemKind, oldID) DO UPDATE SET newID = excluded.newID, revisionDate = excluded.revisionDate,
                swappedAt = excluded.swappedAt
            """).execute(arguments: [userID, kind.rawValue, oldID, newID, revision, now])
    }

    /// The id `oldID` was given and the revision the item had then, or `nil` when it was never swapped.
    public func swap(kind: PendingItemKind, from oldID: String) throws -> (newID: String, revision: Int64?)? {
        let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT newID, revisionDate FROM idSwap WHERE userID = ? AND itemKind = ? AND oldID = ?"),
                                   arguments: [userID, kind.rawValue, oldID])
        return row.map { ($0[0], $0[1]) }
    }
}

/// The user's autosaved drafts (``DraftRow``).
public struct DraftTable {
    let db: Database
    let userID: String

    private var mine: QueryInterfaceRequest<DraftRow> { DraftRow.filter(DraftRow.Columns.userID == userID) }

    /// Every draft of the user.
    public func all() throws -> [DraftRow] {
        try mine.fetchAll(db)
    }

    /// The draft with this id, or `nil`.
    public func find(id: String) throws -> DraftRow? {
        try mine.filter(DraftRow.Columns.id == id).fetchOne(db)
    }

    /// The id of the item's draft, or `nil` (an item has at most one draft saved by autosave).
    public func draftID(ofItem itemID: String) throws -> String? {
        try String.fetchOne(db, mine.filter(DraftRow.Columns.itemID == itemID).select(DraftRow.Columns.id))
    }

    /// Inserts or replaces a draft.
    public func store(_ draft: DraftRow) throws {
        try draft.save(db)
    }

    /// Removes the draft with this id; returns whether there was one.
    @discardableResult
    public func remove(id: String) throws -> Bool {
        try mine.filter(DraftRow.Columns.id == id).deleteAll(db) > 0
    }

    /// Removes the drafts with these ids.
    public func remove(ids: [String]) throws {
        _ = try mine.filter(ids.contains(DraftRow.Columns.id)).deleteAll(db)
    }

    /// Removes the item's drafts (its last save reached the store or the server).
    public func removeDrafts(ofItem itemID: String) throws {
        let statement = try db.cachedStatement(sql: "DELETE FROM draft WHERE userID = ? AND itemID = ?")
        try statement.execute(arguments: [userID, itemID])
    }

    /// Points the item's drafts at its new id (a create got its server id).
    public func moveDrafts(ofItem itemID: String, to newID: String) throws {
        try db.cachedStatement(sql: "UPDATE draft SET itemID = ? WHERE userID = ? AND itemID = ?").execute(arguments: [newID, userID, itemID])
    }
}

/// The conflict backups this device made or learned of for the user (``ConflictBackupRow``).
public struct BackupLedger {
    let db: Database
    let userID: String

    private var mine: QueryInterfaceRequest<ConflictBackupRow> { ConflictBackupRow.filter(ConflictBackupRow.Columns.userID == userID) }

    /// The backups still to be reviewed somewhere: in the vault and outside the trash. One deleted or settled
    /// on any device (settling moves it to the trash) is in no device's list, nor in the count of new ones.
    private var listed: QueryInterfaceRequest<ConflictBackupRow> {
        mine.filter(sql: """
            EXISTS (SELECT 1 FROM cipher WHERE cipher.userID = conflictBackup.userID AND cipher.id = conflictBackup.backupID
                    AND json_extract(cipher.json, '$.deletedDate') IS NULL)
            """)
    }

    /// Lists a backup (replacing an entry with the same backup id). `twinCheckPending`: this device
    /// wrote it, so it waits for the check that merges a twin made by another device at the same moment.
    public func note(_ backupID: String, of originalID: String, createdAt: Int64, losingSide: String, twinCheckPending: Bool) throws {
        try ConflictBackupRow(userID: userID, backupID: backupID, originalID: originalID, createdAt: createdAt, losingSide: losingSide,
                              reviewedAt: nil, twinCheckPending: twinCheckPending).insert(db, onConflict: .replace)
    }

    /// Every backup still listed (``listed``), newest first.
    public func newestFirst() throws -> [ConflictBackupRow] {
        try listed.order(ConflictBackupRow.Columns.createdAt.desc).fetchAll(db)
    }

    /// The ids of the backups waiting for the twin check, oldest first.
    public func waitingForTwinCheck() throws -> [String] {
        try String.fetchAll(db, mine.filter(ConflictBackupRow.Columns.twinCheckPending == true)
            .order(ConflictBackupRow.Columns.createdAt).select(ConflictBackupRow.Columns.backupID))
    }

    /// Keeps the sealed comparison of the merge that made this backup.
    public func setSealedDifference(_ sealed: String, of backupID: String) throws {
        _ = try mine.filter(ConflictBackupRow.Columns.backupID == backupID)
            .updateAll(db, ConflictBackupRow.Columns.sealedDifference.set(to: sealed))
    }

    /// The sealed comparison kept with this backup, if any.
    public func sealedDifference(of backupID: String) throws -> String? {
        try mine.filter(ConflictBackupRow.Columns.backupID == backupID).fetchOne(db)?.sealedDifference
    }

    /// The twin check of this backup has run.
    public func twinCheckDone(_ backupID: String) throws {
        _ = try mine.filter(ConflictBackupRow.Columns.backupID == backupID)
            .updateAll(db, ConflictBackupRow.Columns.twinCheckPending.set(to: false))
    }

    /// A twin was merged into `keeper`: the entry of `removed` now names the copy that stays (an
    /// entry for `keeper` already there is replaced).
    public func merge(_ removed: String, into keeper: String) throws {
        _ = try mine.filter(ConflictBackupRow.Columns.backupID == removed)
            .updateAll(db, onConflict: .replace, ConflictBackupRow.Columns.backupID.set(to: keeper))
    }

    /// How many backups the user has not reviewed yet.
    public func unreviewedCount() throws -> Int {
        try listed.filter(ConflictBackupRow.Columns.reviewedAt == nil).fetchCount(db)
    }

    /// The backup is no backup any more (it became the item again): it leaves every list.
    public func forget(_ backupID: String) throws {
        _ = try mine.filter(ConflictBackupRow.Columns.backupID == backupID).deleteAll(db)
    }

    /// The user reviewed this backup.
    public func markReviewed(_ backupID: String, at now: Int64) throws {
        _ = try mine.filter(ConflictBackupRow.Columns.backupID == backupID)
            .updateAll(db, ConflictBackupRow.Columns.reviewedAt.set(to: now))
    }
}
