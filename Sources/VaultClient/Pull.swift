import Foundation
import VaultAPI
import VaultCrypto
import VaultModels
import VaultStore
import VaultSyncCore

extension VaultEngine {
    /// Fetches the server's full snapshot and applies it to the cache, except to items that still have
    /// a queue record: those keep their local version until resolved, and are never removed (go beyond
    /// seed 001 A1's early abort: one stuck item blocks nothing else).
    ///
    /// A damaged snapshot never costs local data: when an entry cannot be read, nothing is removed in this
    /// pull (the snapshot is incomplete); a changed item whose encryption does not verify (MAC failure)
    /// does not replace a local copy that does. Returns what the user should be told about that.
    @discardableResult
    public func pull() async throws -> [String] {
        try await pullCounting().messages
    }

    /// What a pull brought: the messages for the user, and how many items it stored (new or changed
    /// on the server) and removed (gone from the server), for `sync`'s "received" line.
    struct PullOutcome: Sendable {
        var messages: [String]
        var received: Int
        var removed: Int
    }

    func pullCounting() async throws -> PullOutcome {
        let current = try requireSession()
        let userID = current.userID
        // The answer goes to a file with no name beside the vault as it arrives, and is read back mapped a
        // few MiB at a time: a vault of 100,000 items costs a window of its text, not the whole of it.
        let spool = profileFolder(of: store.path)
        // The cached items' version (store migration v12) before the snapshot is asked for: moved by the time the
        // answer is stored, something here (this process or another on the profile) wrote items meanwhile, maybe
        // after the server made the snapshot. Then an item the snapshot lacks may be one just added, and one older
        // than the copy here one just saved: neither is removed nor taken for a rollback; the next sync decides.
        let versionBefore = try await read { tx in try tx.ciphers(of: userID).version() }
        let text = try await fetchSnapshot { api, token in try await api.syncText(token: token, spoolDirectory: spool) }
        let now = clock.now().microsecondsSinceEpoch
        // One clock read for both (the simulation's clock moves with every read: a second read shifted its runs).
        let serverNow = onServerClock(WireDate(microsecondsSinceEpoch: now))
        let (keys, logger) = (current.keys, logger)
        // One write transaction: each item is compared with its cached row and stored as it arrives from the
        // parse (a thread of its own reads the answer into rows, a batch at a time, while this one stores the
        // batch before), so a large vault is held as the answer's text and a few batches, never as a tree or
        // as all its rows; an error anywhere in the text stores nothing.
        let rows = ParsedRows.start(text, userID: userID)
        defer { rows.abandon() }
        // A large snapshot's log is copied into the database before the sync goes on, at its priority, not in the
        // background during the list that usually follows (``VaultStore/copyingLogAfter(_:)``).
        let (snapshot, kept, knownOrganizations, unreadable, received, removed) = try await store.copyingLogAfter { try await write { tx -> (SyncResponse, [RefusedVersion: [String]], Set<String>, Int, Int, Int) in
            let pending = try tx.queue(of: userID).items()
            // Ciphers (unchanged rows skipped; one upsert statement per changed row). A damaged item from the
            // server is skipped and reported, never stored.
            let ciphers = tx.ciphers(of: userID)
            let cacheWasEmpty = try ciphers.isEmpty()
            let writtenMeanwhile = try ciphers.version() != versionBefore
            var serverIDs = Set<String>()
            var kept: [RefusedVersion: [String]] = [:]
            var unreadableCiphers = 0
            var received = 0, removed = 0
            func store(_ built: Result<CipherRow, SkippedItem>) throws {
                let row: CipherRow
                switch built {
                case .success(let success): row = success
                case .failure(let skipped):
                    unreadableCiphers += 1
                    // A few examples are enough; the count goes into the returned messages.
                    if unreadableCiphers <= 5 {
                        logger.warning("server item skipped", metadata: ["id": "\(skipped.id)", "reason": "\(skipped.reason)"])
                    }
                    return
                }
                // An item seen first in this answer, on a device that had none cached: nothing to compare with.
                let firstSighting = serverIDs.insert(row.id).inserted
                guard !pending.contains(QueuedItem(kind: .cipher, itemID: row.id)) else { return }
                if !(firstSighting && cacheWasEmpty), let local = try ciphers.find(id: row.id) {
                    if local.json == row.json { return }
                    if let serverWire = try? row.wire(), let localWire = try? local.wire(),
                       let refusal = Self.refusal(server: serverWire, local: localWire, keys: keys, serverNow: serverNow) {
                        if !(refusal == .older && writtenMeanwhile) { kept[refusal, default: []].append(row.id) }
                        return
                    }
                }
                try ciphers.store(row)
                received += 1
            }
            let snapshot = try rows.drain(into: store)
            // Items this device has and the answer has not go (none to look for on a device that had none).
            if unreadableCiphers == 0 && !cacheWasEmpty && !writtenMeanwhile {
                for id in try ciphers.ids() where !serverIDs.contains(id) && !pending.contains(QueuedItem(kind: .cipher, itemID: id)) {
                    try ciphers.remove(id: id)
                    removed += 1
                }
            }
            // Folders.
            var serverFolders: [FolderWire] = []
            var unreadableFolders = 0
            for object in snapshot.folders {
                if let wire = try? FolderWire(json: object, path: "folder"), wire.id != nil { serverFolders.append(wire) } else { unreadableFolders += 1 }
            }
            let folders = tx.folders(of: userID)
            let serverFolderIDs = Set(serverFolders.compactMap(\.id))
            for wire in serverFolders where !pending.contains(QueuedItem(kind: .folder, itemID: wire.id!)) {
                try folders.store(wire)
            }
            for id in try folders.ids()
            where unreadableFolders == 0 && !serverFolderIDs.contains(id) && !pending.contains(QueuedItem(kind: .folder, itemID: id)) {
                try folders.remove(id: id)
            }
            // Organizations and collections: replaced wholesale (read-only offline). The memberships
            // known before this pull are returned, to report the new ones.
            func entries(_ objects: [JSONObject]) -> [(id: String, json: String)] {
                objects.compactMap { object in
                    object["id"]?.stringValue.map { ($0.lowercased(), String(decoding: object.serialized(), as: UTF8.self)) }
                }
            }
            let organizations = (snapshot.profile["organizations"]?.arrayValue ?? []).compactMap(\.objectValue)
            let known = try tx.organizations(of: userID).replaceMemberships(entries(organizations))
            try tx.organizations(of: userID).replaceCollections(entries(snapshot.collections))
            if let privateKey = snapshot.profile["privateKey"]?.stringValue { try tx.accounts.setEncryptedPrivateKey(privateKey, userID: userID) }
            try tx.syncState(of: userID).update { $0.lastSyncDate = now }
            return (snapshot, kept, known, unreadableCiphers + unreadableFolders, received, removed)
        } }
        let organizations = (snapshot.profile["organizations"]?.arrayValue ?? []).compactMap(\.objectValue)
        // Organization keys may have changed (new membership, confirmation).
        if let account = try await read({ tx in try tx.accounts.find(userID: userID) }) {
            let orgKeys = try organizationKeys(userID: userID, account: account, userKey: current.keys.userKey)
            session?.keys.organizationKeys = orgKeys
        }
        try await purgeDrafts()
        var messages = try await membershipNotices(organizations: organizations, known: knownOrganizations,
                                                   keys: session?.keys ?? keys, userID: userID)
        for (reason, ids) in kept.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            logger.warning("server versions refused; local copies kept",
                           metadata: ["reason": "\(reason.rawValue)", "count": "\(ids.count)", "examples": "\(ids.prefix(5))"])
            messages.append(reason.message(count: ids.count))
        }
        if unreadable > 0 {
            messages.append("\(unreadable) item(s) or folder(s) from the server could not be read and were skipped; nothing was removed from this device.")
        }
        return PullOutcome(messages: messages, received: received, removed: removed)
    }

    /// Why a changed server version must not replace the local copy (which has no queued change),
    /// or `nil` when it may (docs/SECURITY.md):
    /// - it lost the item key the local copy has (a server that drops an item's key can paste in
    ///   another item's fields, and the next edit would encrypt without a key of its own);
    /// - it is older than the local copy (the local copy is the server's own last answer, so a lower
    ///   revision date is a rollback: an old password served again);
    /// - its encryption does not verify while the local copy's does.
    /// `serverNow`: the server's clock now. A local copy dated more than a day after it (a date a hostile or
    /// broken answer gave it) is no reason to refuse a version: its date alone would otherwise refuse every
    /// genuine update after it for good (RELIABILITY bug 66).
    static func refusal(server: CipherWire, local: CipherWire, keys: VaultKeys, serverNow: WireDate) -> RefusedVersion? {
        if local.key != nil, server.key == nil { return .lostItemKey }
        if let serverRevision = server.revisionDate, let localRevision = local.revisionDate, serverRevision < localRevision,
           localRevision <= serverNow.adding(microseconds: 86_400_000_000) {
            return .older
        }
        if failsVerification(server, keys: keys) && !failsVerification(local, keys: keys) { return .unverifiable }
        return nil
    }

    /// Why a server version was not taken.
    enum RefusedVersion: String, Sendable {
        case lostItemKey = "lost item key"
        case older = "older than the local copy"
        case unverifiable = "encryption does not verify"

        func message(count: Int) -> String {
            switch self {
            case .lostItemKey:
                return "\(count) item(s) from the server lost their item key; the copies on this device were kept."
            case .older:
                return "\(count) item(s) from the server are older versions than those on this device (rolled back); the copies on this device were kept."
            case .unverifiable:
                return "\(count) item(s) from the server could not be read (their encryption does not verify); the copies on this device were kept."
            }
        }
    }

    /// Whether an item's encryption fails to verify (a MAC mismatch or bad padding): damaged or tampered.
    /// A missing organization key is not a failure (the key arrives with the membership).
    /// Whether the server's answer for an item fails verification here while this device's version does not:
    /// such an answer never replaces that version (a pull keeps the local copy; a save or a resolution keeps the
    /// change queued).
    /// An answer that carries this device's encrypted content byte for byte (what an honest server echoes) is
    /// as readable as the version sent, and is not decrypted again.
    static func answerUnreadable(_ answer: CipherWire, instead local: CipherWire?, keys: VaultKeys) -> Bool {
        if let local, sameContent(answer, local) { return false }
        return failsVerification(answer, keys: keys) && !(local.map { failsVerification($0, keys: keys) } ?? true)
    }

    static func failsVerification(_ wire: CipherWire, keys: VaultKeys) -> Bool {
        do {
            _ = try wire.decrypted(with: keys)
            return false
        } catch ModelError.decryptionFailed {
            return true
        } catch {
            return false
        }
    }

    /// One `/api/sync`, noting whether the server answered.
    func fetchSnapshot() async throws -> SyncResponse {
        try await fetchSnapshot { api, token in try await api.sync(token: token) }
    }

    /// `/api/sync` made by `call` (which may take the items as they are parsed), noting whether the server answered.
    func fetchSnapshot<T: Sendable>(_ call: @Sendable (BitwardenAPI, String) async throws -> T) async throws -> T {
        do {
            let answer = try await authorized(call)
            await recordContact(success: true)
            return answer
        } catch let error as ServerCallError {
            await recordContact(success: false, certificateProblem: error.certificateProblem)
            throw Self.onlineOnly(error)
        }
    }
}

/// An item of the answer that could not be read (never stored; counted and reported).
struct SkippedItem: Error {
    var id: String
    var reason: any Error
}

/// The pull's pipeline: a thread of its own parses the answer, and each batch of parsed items is read into
/// stored rows (checked, and written in the stored form) on every core while the thread parses the next
/// batch; the rows are handed over a batch at a time, at most two batches ahead, to the write transaction
/// that compares and stores them, in the answer's order. The pull takes about the longest part's time
/// instead of their sum (a fresh device's sync of 50,000 items: 4.6 s with one thread, 2.6–3.2 s with two,
/// 2.2–2.6 s with the rows read on both cores; docs/BENCHMARKS.md, measured 2026-11-27 and 2026-11-28).
final class ParsedRows: @unchecked Sendable {
    typealias Built = Result<CipherRow, SkippedItem>
    static let batchSize = 500
    static let batchesAhead = 2

    private let condition = NSCondition()
    // Guarded by `condition`.
    private var batches: [[Built]] = []
    private var end: Result<SyncResponse, any Error>?
    private var abandoned = false

    /// Starts parsing `text` on a thread of its own.
    static func start(_ text: SyncText, userID: String) -> ParsedRows {
        let rows = ParsedRows()
        Thread.detachNewThread {
            let result = Result {
                // The parse is one pass over one text; reading each parsed item into its row is not: a batch of
                // trees is read into rows on every core (`SlicedTransform`) while this thread parses the next.
                var trees: [JSONObject] = []
                trees.reserveCapacity(batchSize)
                var previous: SlicedTransform<Built>?
                func build() throws {
                    let batch = SlicedTransform(trees) { object in
                        Result {
                            let wire = try CipherWire(json: object, path: "cipher")
                            guard wire.id != nil else { throw ModelError.invalidValue(path: "cipher.id", reason: "missing") }
                            return CipherRow(userID: userID, wire: wire)
                        }.mapError { SkippedItem(id: object["id"]?.stringValue ?? "?", reason: $0) }
                    }
                    trees.removeAll(keepingCapacity: true)
                    if let previous { try rows.hand(previous.results()) }
                    previous = batch
                }
                let snapshot: SyncResponse
                do {
                    snapshot = try text.parse { _, object in
                        trees.append(object)
                        if trees.count == batchSize { try build() }
                    }
                } catch {
                    // The items read before the damage still go first, then the error (as one thread did).
                    if let previous { try? rows.hand(previous.results()) }
                    throw error
                }
                try build()
                if let previous { try rows.hand(previous.results()) }
                return snapshot
            }
            rows.condition.withLock {
                rows.end = result
                rows.condition.broadcast()
            }
        }
        return rows
    }

    /// The parsing thread: waits while `batchesAhead` batches wait to be stored; throws once the storing
    /// side gave up (an error, or a pull that never began), which ends the parse.
    private func hand(_ batch: [Built]) throws {
        guard !batch.isEmpty else { return }
        try condition.withLock {
            while batches.count >= Self.batchesAhead && !abandoned { condition.wait() }
            if abandoned { throw CancellationError() }
            batches.append(batch)
            condition.broadcast()
        }
    }

    /// The storing side: hands every item to `store`, in order, and returns the rest of the answer (its
    /// profile, folders and collections); throws what the parse threw.
    func drain(into store: (Built) throws -> Void) throws -> SyncResponse {
        while true {
            let (batch, finished) = condition.withLock { () -> ([Built]?, Result<SyncResponse, any Error>?) in
                while batches.isEmpty && end == nil { condition.wait() }
                guard batches.isEmpty else {
                    condition.broadcast()
                    return (batches.removeFirst(), nil)
                }
                return (nil, end)
            }
            if let batch {
                for built in batch { try store(built) }
            } else if let finished {
                return try finished.get()
            }
        }
    }

    /// Whether the parsing thread has ended (its answer parsed, or stopped by an error or by ``abandon()``).
    var parseEnded: Bool { condition.withLock { end != nil } }

    /// The storing side is done (or never began): a parse still running stops at its next batch.
    func abandon() {
        condition.withLock {
            abandoned = true
            batches = []
            condition.broadcast()
        }
    }
}
