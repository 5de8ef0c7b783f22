import Foundation
import GRDB
import GRDBSQLite
import VaultCrypto
import VaultModels
import VaultSyncCore

/// The local database of one profile: accounts, the encrypted vault cache, the pending-change queue,
/// drafts and sync state, in one SQLite file (WAL) through GRDB.
///
/// Every write is one `write { db in … }` closure = one transaction: a local change and its queue
/// record land together or not at all.
public final class VaultStore: Sendable {
    let pool: DatabasePool
    public let path: String
    let checkpoints: BackgroundCheckpoint

    /// Opens (creating and migrating) the store at `path`; the file is made owner-only.
    public init(path: String) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        let checkpoints = BackgroundCheckpoint(path: path)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA foreign_keys = ON")
            // WAL + NORMAL: a committed transaction survives any crash of the process (SIGKILL tests
            // prove it); only an OS crash or power loss can take the last commits before the next
            // checkpoint. FULL would fsync every save and cost milliseconds each.
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            // SQLite's temporary files in memory: statement journals (a statement that fires a trigger
            // inside a longer transaction keeps one) and sorts. On disk they went to the system's
            // temporary folder, outside the profile, one write per page: 259 MB for P2's settling of
            // 10,000 changes (docs/BENCHMARKS.md, measured 2026-11-26).
            try db.execute(sql: "PRAGMA temp_store = MEMORY")
            // Each commit reports the log's size; this replaces SQLite's automatic checkpoint, which
            // ran inside the commit that crossed 1,000 pages (``BackgroundCheckpoint``).
            // Unretained: the store owns it, and only the store's own calls commit on these connections.
            sqlite3_wal_hook(db.sqliteConnection, { context, _, _, pages in
                if let context { Unmanaged<BackgroundCheckpoint>.fromOpaque(context).takeUnretainedValue().committed(logPages: pages) }
                return SQLITE_OK
            }, Unmanaged.passUnretained(checkpoints).toOpaque())
        }
        // The file is created owner-only before SQLite opens it: SQLite gives the -wal and -shm files
        // it creates the main file's mode, so none of the three is ever readable by others, whatever
        // the process umask (an app using the library may not set one). Existing files are tightened.
        if !FileManager.default.fileExists(atPath: path) {
            _ = FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600])
        }
        for file in [path, path + "-wal", path + "-shm"] where FileManager.default.fileExists(atPath: file) {
            try? FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file)
        }
        do {
            pool = try DatabasePool(path: path, configuration: configuration)
            self.path = path
            self.checkpoints = checkpoints
            try Self.migrator.migrate(pool)
        } catch let error as DatabaseError where [.SQLITE_NOTADB, .SQLITE_CORRUPT].contains(error.resultCode) {
            // SQLite's own text named a pragma ("SQLite error 26: file is not a database - while executing
            // `PRAGMA synchronous = NORMAL`"), not the file or what to do (RELIABILITY bug 86).
            throw StoreError.databaseUnusable(path: path, reason: error.message ?? "\(error.resultCode)")
        }
    }

    /// The device identifiers of the accounts and remembered logins in the store file at `path`, read
    /// without migrating or writing it; `nil` when it cannot be read as a store.
    public static func deviceIdentifiers(atPath path: String) -> Set<String>? {
        var configuration = Configuration()
        configuration.readonly = true
        configuration.busyMode = .timeout(2)
        guard let queue = try? DatabaseQueue(path: path, configuration: configuration) else { return nil }
        defer { try? queue.close() }
        return try? queue.read { db in
            let accounts = try String.fetchAll(db, sql: "SELECT deviceIdentifier FROM account")
            let remembered = (try? String.fetchAll(db, sql: "SELECT deviceIdentifier FROM rememberedLogin")) ?? []
            return Set(accounts + remembered)
        }
    }

    /// Reads in a snapshot, through the store's typed parts.
    public func read<T: Sendable>(_ body: @Sendable (StoreTransaction) throws -> T) async throws -> T {
        try await pool.read { db in try body(StoreTransaction(db)) }
    }

    /// Writes in one transaction, through the store's typed parts: all of `body` commits, or nothing.
    public func write<T: Sendable>(_ body: @Sendable (StoreTransaction) throws -> T) async throws -> T {
        try await pool.write { db in try body(StoreTransaction(db)) }
    }

    /// Synchronous read (for callers without concurrency, like a crash-recovery check).
    public func readNow<T>(_ body: (StoreTransaction) throws -> T) throws -> T {
        try pool.read { db in try body(StoreTransaction(db)) }
    }

    /// Synchronous write in one transaction, for the small writes of a single save: on a busy machine
    /// every hop to GRDB's writer queue and back costs a thread wake-up, more than the write itself.
    public func writeNow<T>(_ body: (StoreTransaction) throws -> T) throws -> T {
        try pool.write { db in try body(StoreTransaction(db)) }
    }

    /// The raw database, for tests and benchmarks of this package that inspect or damage the file
    /// (counts, integrity checks, triggers); the engine goes through ``read(_:)`` and ``write(_:)``.
    package func readDatabase<T: Sendable>(_ body: @Sendable (Database) throws -> T) async throws -> T {
        try await pool.read(body)
    }

    /// The raw database in one write transaction (see ``readDatabase(_:)``).
    package func writeDatabase<T: Sendable>(_ body: @Sendable (Database) throws -> T) async throws -> T {
        try await pool.write(body)
    }

    /// Synchronous raw read (see ``readDatabase(_:)``).
    package func readDatabaseNow<T>(_ body: (Database) throws -> T) throws -> T {
        try pool.read(body)
    }

    /// Checkpoints the WAL into the main file (used before file scans and backups).
    public func checkpoint() throws {
        try pool.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
    }

    /// Runs `body` (a large write: a full sync's one transaction) without starting the background copy of the
    /// log it grows, then copies the log into the database at the caller's priority and returns when that is
    /// done. A copy started in the background by the large commit ran during the list a person asked for next,
    /// and made it 0.2–0.4 s slower at 50,000 items (docs/BENCHMARKS.md, measured 2026-11-29); at a background priority
    /// the sync could not simply wait for it either, as a busy machine starves such a thread for seconds.
    public func copyingLogAfter<T: Sendable>(isolation: isolated (any Actor)? = #isolation,
                                             _ body: () async throws -> T) async throws -> T {
        checkpoints.hold()
        let result: T
        do {
            result = try await body()
        } catch {
            await checkpoints.release()
            throw error
        }
        await checkpoints.release()
        return result
    }

    /// How many background checkpoints have finished (for tests).
    package var backgroundCheckpointsDone: Int { checkpoints.done }
    /// The nice value the last background checkpoint ran at, on Linux (for tests).
    package var backgroundCheckpointNice: Int32? { checkpoints.lastNice }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: accounts, cache, queue, drafts, sync state") { db in
            try db.create(table: "account") { t in
                t.primaryKey("userID", .text)
                t.column("email", .text).notNull().unique()
                t.column("deviceIdentifier", .text).notNull()
                t.column("kdfType", .integer).notNull()
                t.column("kdfIterations", .integer).notNull()
                t.column("kdfMemory", .integer)
                t.column("kdfParallelism", .integer)
                // Wrapped by the stretched master key; useless without the master password.
                t.column("protectedUserKey", .text).notNull()
                // PBKDF2(master key, password, 2): verifies the password offline, reveals nothing more.
                t.column("localAuthorizationHash", .text).notNull()
                t.column("encryptedPrivateKey", .text)
                t.column("publicKey", .text)
                // Access and refresh tokens, sealed with the user key.
                t.column("sealedTokens", .text)
                t.column("createdAt", .integer).notNull()
            }
            try db.create(table: "cipher") { t in
                t.column("userID", .text).notNull().references("account", onDelete: .cascade)
                t.column("id", .text).notNull()
                t.column("organizationID", .text)
                t.column("revisionDate", .integer)
                // Exactly the wire JSON: every user-visible field an EncString.
                t.column("json", .text).notNull()
                t.primaryKey(["userID", "id"])
            }
            try db.create(table: "folder") { t in
                t.column("userID", .text).notNull().references("account", onDelete: .cascade)
                t.column("id", .text).notNull()
                t.column("json", .text).notNull()
                t.primaryKey(["userID", "id"])
            }
            try db.create(table: "organization") { t in
                t.column("userID", .text).notNull().references("account", onDelete: .cascade)
                t.column("id", .text).notNull()
                t.column("json", .text).notNull()
                t.primaryKey(["userID", "id"])
            }
            try db.create(table: "collection") { t in
                t.column("userID", .text).notNull().references("account", onDelete: .cascade)
                t.column("id", .text).notNull()
                t.column("json", .text).notNull()
                t.primaryKey(["userID", "id"])
            }
            try db.create(table: "pendingChange") { t in
                t.primaryKey("id", .text)
                t.column("userID", .text).notNull().references("account", onDelete: .cascade)
                t.column("itemKind", .text).notNull()
                t.column("itemID", .text).notNull()
                // Kind, dates, counts, attempts, errors: one EncString under the user key (seed 003 option E).
                t.column("sealed", .text).notNull()
                t.uniqueKey(["userID", "itemKind", "itemID"])
            }
            try db.create(table: "draft") { t in
                t.primaryKey("id", .text)
                t.column("userID", .text).notNull().references("account", onDelete: .cascade)
                t.column("itemID", .text)
                t.column("sealed", .text).notNull()
            }
            try db.create(table: "syncState") { t in
                t.primaryKey("userID", .text).references("account", onDelete: .cascade)
                t.column("lastSyncDate", .integer)
                t.column("accountRevisionDate", .integer)
                t.column("clockOffset", .text)
                t.column("lastContactDate", .integer)
                t.column("lastContactFailed", .boolean).notNull().defaults(to: false)
            }
        }
        migrator.registerMigration("v2: conflict backups") { db in
            try db.create(table: "conflictBackup") { t in
                t.column("userID", .text).notNull().references("account", onDelete: .cascade)
                t.column("backupID", .text).notNull()
                t.column("originalID", .text).notNull()
                t.column("createdAt", .integer).notNull()
                t.primaryKey(["userID", "backupID"])
            }
        }
        migrator.registerMigration("v3: conflict backup side and review") { db in
            // Which version the backup holds ("local": this device's edit lost; "server": the server's
            // version lost), and whether the user has reviewed it (`conflicts resolve`).
            try db.alter(table: "conflictBackup") { t in
                t.add(column: "losingSide", .text).notNull().defaults(to: "unknown")
                t.add(column: "reviewedAt", .integer)
            }
        }
        migrator.registerMigration("v4: lookups of an item's queue record and drafts") { db in
            // Every save looks up the item's queue record; without these a queue of n records made n saves
            // cost n² row visits (100,000 offline saves in the P5 benchmark).
            try db.create(index: "pendingChange_item", on: "pendingChange", columns: ["userID", "itemID"])
            try db.create(index: "draft_item", on: "draft", columns: ["userID", "itemID"])
        }
        migrator.registerMigration("v5: the queue's size kept by triggers") { db in
            // Every save answers with the queue's size; `COUNT(*)` visits every record, so n offline saves
            // cost n²/2 visits (100,000 saves in the P5 benchmark). Triggers keep the count on every path
            // that adds or removes a record, account deletion's cascade included.
            try db.execute(sql: """
                CREATE TABLE pendingChangeCount (
                    userID TEXT PRIMARY KEY NOT NULL REFERENCES account(userID) ON DELETE CASCADE,
                    n INTEGER NOT NULL
                ) WITHOUT ROWID;
                INSERT INTO pendingChangeCount (userID, n) SELECT userID, COUNT(*) FROM pendingChange GROUP BY userID;
                CREATE TRIGGER pendingChange_counted_insert AFTER INSERT ON pendingChange BEGIN
                    INSERT INTO pendingChangeCount (userID, n) VALUES (NEW.userID, 1)
                        ON CONFLICT (userID) DO UPDATE SET n = n + 1;
                END;
                CREATE TRIGGER pendingChange_counted_delete AFTER DELETE ON pendingChange BEGIN
                    UPDATE pendingChangeCount SET n = n - 1 WHERE userID = OLD.userID;
                END;
                CREATE TRIGGER pendingChange_counted_move AFTER UPDATE OF userID ON pendingChange
                    WHEN OLD.userID IS NOT NEW.userID BEGIN
                    UPDATE pendingChangeCount SET n = n - 1 WHERE userID = OLD.userID;
                    INSERT INTO pendingChangeCount (userID, n) VALUES (NEW.userID, 1)
                        ON CONFLICT (userID) DO UPDATE SET n = n + 1;
                END;
                """)
        }
        migrator.registerMigration("v6: conflict backups waiting for the twin check") { db in
            // A backup this device wrote may have a twin (another device backed the same version up at the
            // same moment); the check that merges them needs the server, so it waits here until it has run.
            try db.alter(table: "conflictBackup") { t in
                t.add(column: "twinCheckPending", .boolean).notNull().defaults(to: false)
            }
        }
        migrator.registerMigration("v7: organizations the user trusted on this device") { db in
            // docs/SECURITY.md, "Injected organizations": the server can announce a membership and an
            // organization key it knows; only an organization the user trusted here, with the key it had
            // then (sealed with the user key), is ever used to encrypt the user's data.
            try db.create(table: "trustedOrganization") { t in
                t.column("userID", .text).notNull().references("account", onDelete: .cascade)
                t.column("organizationID", .text).notNull()
                t.column("sealedKey", .text).notNull()
                t.column("trustedAt", .integer).notNull()
                t.primaryKey(["userID", "organizationID"])
            }
        }
        migrator.registerMigration("v8: remembered two-step logins and device identifiers") { db in
            // docs/SECURITY.md, "Remember this device": kept across logout (no reference to the
            // account row), one per email; the token is sealed with a key derived from the master key.
            try db.create(table: "rememberedLogin") { t in
                t.primaryKey("email", .text)
                t.column("deviceIdentifier", .text).notNull()
                t.column("sealedTwoFactorToken", .text)
                t.column("updatedAt", .integer).notNull()
            }
        }
        migrator.registerMigration("v9: why the last server contact failed, when its certificate was refused") { db in
            // docs/SECURITY.md, "TLS trust and proxies": a refused certificate is shown by `status` in later
            // processes too (JSON of CertificateProblem; NULL after any other outcome).
            try db.alter(table: "syncState") { t in
                t.add(column: "lastContactProblem", .text)
            }
        }
        migrator.registerMigration("v10: conflict backups keep the comparison the merge used") { db in
            // docs/ARCHITECTURE.md, "Merging": the per-field comparison (base, mine, theirs) of the merge
            // that made the backup, sealed with the user key (it holds field values); NULL for older backups.
            try db.alter(table: "conflictBackup") { t in
                t.add(column: "sealedDifference", .text)
            }
        }
        migrator.registerMigration("v11: the sealed name index") { db in
            // Every item's id and decrypted name, with a SHA-256 of the row it was read from, as one EncString
            // under the user key (docs/ARCHITECTURE.md, "The name index"): finding an item by name opens it
            // once instead of decrypting every name. A cache that checks itself; nothing else writes it.
            try db.create(table: "nameIndex") { t in
                t.primaryKey("userID", .text).references("account", onDelete: .cascade)
                t.column("sealed", .text).notNull()
            }
        }
        migrator.registerMigration("v12: a version of each account's cached items, kept by triggers") { db in
            // Moves on every insert, update and delete of a cached item, on every path (syncs, saves, the
            // resolver, anyone writing to the file with SQL): the sealed name index notes the version it
            // was built at, and a lookup that finds it unchanged need not hash every row to trust the index.
            // A delete only moves an existing version: an account's removal cascades to its items and to
            // its version, and must not bring the version back.
            try db.execute(sql: """
                CREATE TABLE cipherVersion (
                    userID TEXT PRIMARY KEY NOT NULL REFERENCES account(userID) ON DELETE CASCADE,
                    n INTEGER NOT NULL
                ) WITHOUT ROWID;
                INSERT INTO cipherVersion (userID, n) SELECT DISTINCT userID, 1 FROM cipher;
                CREATE TRIGGER cipher_versioned_insert AFTER INSERT ON cipher BEGIN
                    INSERT INTO cipherVersion (userID, n) VALUES (NEW.userID, 1) ON CONFLICT (userID) DO UPDATE SET n = n + 1;
                END;
                CREATE TRIGGER cipher_versioned_update AFTER UPDATE ON cipher BEGIN
                    INSERT INTO cipherVersion (userID, n) VALUES (NEW.userID, 1) ON CONFLICT (userID) DO UPDATE SET n = n + 1;
                    UPDATE cipherVersion SET n = n + 1 WHERE userID = OLD.userID AND OLD.userID IS NOT NEW.userID;
                END;
                CREATE TRIGGER cipher_versioned_delete AFTER DELETE ON cipher BEGIN
                    UPDATE cipherVersion SET n = n + 1 WHERE userID = OLD.userID;
                END;
                """)
        }
        migrator.registerMigration("v13: the name index's names in a part of their own") { db in
            // The ids and names sealed apart from the digests and searched fields: finding an item by name
            // (`vaultsync get NAME`) opens only them. An index without them is rebuilt at its next use.
            try db.alter(table: "nameIndex") { t in
                t.add(column: "names", .text)
            }
        }
        migrator.registerMigration("v14: where items and folders created here went when they got their server ids") { db in
            try db.create(table: "idSwap") { t in
                t.column("userID", .text).notNull().references("account", onDelete: .cascade)
                t.column("itemKind", .text).notNull()
                t.column("oldID", .text).notNull()
                t.column("newID", .text).notNull()
                // The revision the item had at the swap (microseconds), nil for a folder or an item removed here.
                t.column("revisionDate", .integer)
                t.column("swappedAt", .integer).notNull()
                t.primaryKey(["userID", "itemKind", "oldID"])
            }
            // Forgetting the old swaps, at every swap, is a seek: a sync of 10,000 creates records 10,000 swaps.
            try db.create(index: "idSwap_age", on: "idSwap", columns: ["userID", "swappedAt"])
        }
        migrator.registerMigration("v15: the folder the profile was made in") { db in
            // One row: where this database was made (or last accepted as moved), so a copy of the profile
            // folder can be told from the original (the engine's profilePlace()).
            try db.create(table: "profilePlace") { t in
                t.column("id", .integer).primaryKey().check { $0 == 1 }
                t.column("folder", .text).notNull()
            }
        }
        return migrator
    }
}

/// Errors of the local store.
public enum StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A sealed record could not be opened with this user key.
    case sealedRecordUnreadable(table: String, id: String)
    /// Stored JSON could not be read.
    case corruptRecord(table: String, id: String, reason: String)
    /// The database file is not an SQLite database, or is damaged where SQLite reads it first.
    case databaseUnusable(path: String, reason: String)

    public var description: String {
        switch self {
        case .databaseUnusable(let path, let reason):
            return """
                The vault database \(path) is damaged or is not a VaultSync database (SQLite: \(reason)). \
                Restore it from a backup; or move it aside and log in again: the vault comes back from the server, \
                but changes this device had not synced are only in that file.
                """
        case .sealedRecordUnreadable(let table, let id): return "The \(table) record \(id) could not be decrypted with this account's key."
        case .corruptRecord(let table, let id, let reason): return "The \(table) record \(id) is damaged: \(reason)."
        }
    }
}

/// Seals small values with the user key: JSON, then one type-2 EncString. Models with hand-written JSON
/// (`JSONObjectConvertible`) use the `json:` pair; other Codable values Foundation's coders.
public enum Sealed {
    public static func seal<T: JSONObjectConvertible>(json value: T, key: SymmetricCryptoKey) throws -> String {
        try EncString.encrypt(value.jsonBytes(), key: key).serialized
    }

    public static func open<T: JSONObjectConvertible>(json type: T.Type, from text: String, key: SymmetricCryptoKey) throws -> T {
        try T(jsonBytes: EncString(text).decrypt(key: key))
    }

    public static func seal<T: Encodable>(_ value: T, key: SymmetricCryptoKey) throws -> String {
        let data = try JSONEncoder().encode(value)
        return try EncString.encrypt(data, key: key).serialized
    }

    public static func open<T: Decodable>(_ type: T.Type, from text: String, key: SymmetricCryptoKey) throws -> T {
        let data = try EncString(text).decrypt(key: key)
        return try JSONDecoder().decode(T.self, from: data)
    }
}

/// Checkpoints the write-ahead log off the write path (docs/ARCHITECTURE.md, "The store"). SQLite's
/// automatic checkpoint runs inside the commit that takes the log past 1,000 pages: one offline save in
/// about a hundred paid for copying the log into the database file and syncing it, milliseconds where
/// a save takes a fraction of one (P1's p99). Here every commit reports the log's size
/// (`sqlite3_wal_hook`), and past the same 1,000 pages a passive checkpoint runs on a thread and a
/// connection of its own while writes go on: a passive checkpoint neither waits for nor holds up the
/// writer or any reader, and copies what no reader still needs. One runs at a time. Durability is as
/// before: a commit survives a crash of the process; the log is synced when a checkpoint copies it.
/// The thread runs at a background priority; it still runs, only later, when both cores are busy. A
/// priority was not enough after a full sync's one large commit: its copy, running during the list that
/// followed, made that list 0.2–0.4 s slower at 50,000 items (it takes the cores the list leaves idle between
/// its pages, and the disk). A sync therefore makes that copy itself before it returns
/// (``VaultStore/copyingLogAfter(_:)``: that copy runs at the sync's priority; docs/BENCHMARKS.md, measured
/// 2026-11-28 and 2026-11-29).
final class BackgroundCheckpoint: @unchecked Sendable {
    static let logPages: Int32 = 1000
    let path: String
    private let lock = NSLock()
    private var running = false
    private var finished = 0
    /// Callers of ``release()`` waiting for the running checkpoint.
    private var waiters: [CheckedContinuation<Void, Never>] = []
    /// While above 0 (``hold()``), commits start no copy; `heldPages` is the largest log size they reported.
    private var holds = 0
    private var heldPages: Int32 = 0

    init(path: String) {
        self.path = path
    }

    var done: Int { lock.withLock { finished } }
    /// The nice value the last background checkpoint's thread ran at (Linux; for tests).
    var lastNice: Int32? { lock.withLock { nice } }
    private var nice: Int32?

    /// Called by SQLite after each commit, on the committing thread: must return quickly.
    func committed(logPages pages: Int32) {
        guard pages >= Self.logPages else { return }
        let start = lock.withLock { () -> Bool in
            if holds > 0 {
                heldPages = max(heldPages, pages)
                return false
            }
            guard !running else { return false }
            running = true
            return true
        }
        guard start else { return }
        run(inBackground: true)
    }

    /// Commits start no copy until the matching ``release()``.
    func hold() {
        lock.withLock { holds += 1 }
    }

    /// Ends a ``hold()``. When it was the last one and a commit meanwhile grew the log past the threshold, the
    /// log is copied now, on a thread at the caller's priority, and this returns when that copy is done (after
    /// waiting for a background copy already running, which cannot copy what was committed after it began).
    func release() async {
        let due = lock.withLock { () -> Bool in
            holds -= 1
            return holds == 0 && heldPages >= Self.logPages
        }
        guard due else { return }
        while await !copyUnlessRunning() {}
    }

    /// Starts a copy at the caller's priority unless one is running, and returns when the running one (ours, or
    /// the one found) is done: `true` when it was ours.
    private func copyUnlessRunning() async -> Bool {
        var started = false
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            started = lock.withLock {
                waiters.append(continuation)
                guard !running else { return false }
                running = true
                heldPages = 0
                return true
            }
            if started { run(inBackground: false) }
        }
        return started
    }

    /// Copies the log on a thread of its own (at a background priority when `inBackground`), then wakes the waiters.
    private func run(inBackground: Bool) {
        let thread = Thread { [self] in
            let nice = inBackground ? Self.lowerThisThreadsPriority() : nil
            checkpoint()
            let waiting = lock.withLock {
                running = false
                finished += 1
                if inBackground { self.nice = nice }
                defer { waiters = [] }
                return waiters
            }
            for waiter in waiting { waiter.resume() }
        }
        if inBackground { thread.qualityOfService = .utility }
        thread.start()
    }

    /// Apple platforms take the thread's quality of service; on Linux the nice value is the thread's own
    /// (setpriority(2): with NPTL, `who` 0 is the calling thread), so the copy yields to the threads a
    /// person waits for, and is never starved (nice 10 still gets about a tenth of a busy core).
    private static func lowerThisThreadsPriority() -> Int32? {
        #if os(Linux)
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 10)
        return getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
        #else
        return nil
        #endif
    }

    private func checkpoint() {
        var db: OpaquePointer?
        // Read-write but never create: a store whose files were removed meanwhile has nothing to copy.
        defer { sqlite3_close(db) }
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, nil) == SQLITE_OK else { return }
        // A new connection learns that the file is in WAL mode on its first read.
        sqlite3_busy_timeout(db, 1000)
        guard sqlite3_exec(db, "SELECT 1 FROM sqlite_master LIMIT 1", nil, nil, nil) == SQLITE_OK else { return }
        sqlite3_wal_checkpoint_v2(db, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
    }
}
