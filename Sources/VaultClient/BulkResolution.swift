import Foundation
import VaultAPI
import VaultCrypto
import VaultModels
import VaultStore
import VaultSyncCore

/// What one resolution pass knows of the server: one `/api/sync` snapshot, read once.
struct ResolutionContext: Sendable {
    /// The queued items' server versions (only those are parsed: a large vault with a few queued
    /// changes pays for a few).
    var serverCiphers: [String: CipherWire]
    /// Wrapped item key (its exact text, unique to one item) → item id: the one clue to a create whose
    /// answer was lost on a server that ignores idempotency keys, even after another device renamed it.
    var serverKeysOfCiphers: [String: String]
    var serverFolders: [String: FolderWire]
    /// Encrypted folder name (its exact, IV-unique text) → folder: folders have no key, so a folder create
    /// whose answer was lost on such a server is found by its names (docs/PROTOCOL.md, best effort).
    var serverNamesOfFolders: [String: FolderWire]
    /// The conflict backups in the snapshot, searched before a backup is made.
    var backups: SnapshotBackups
    /// Queued items and the folders the snapshot lists but this device cannot read (a broken or hostile
    /// answer). The server has them: never taken for gone (which would re-create them, or drop a change made
    /// here).
    var unreadable: Set<String>

    init(snapshot: SyncResponse, queuedItemIDs queuedIDs: Set<String>) async {
        let wanted = snapshot.ciphers.filter { object in object["id"]?.stringValue.map { queuedIDs.contains($0.lowercased()) } ?? false }
        serverCiphers = [:]
        for wire in await concurrentCompactMap(wanted, { try? CipherWire(json: $0, path: "cipher") }) {
            if let id = wire.id { serverCiphers[id] = wire }
        }
        unreadable = Set(wanted.compactMap { $0["id"]?.stringValue?.lowercased() }).subtracting(serverCiphers.keys)
        var keys: [String: String?] = [:]
        keys.reserveCapacity(snapshot.ciphers.count)
        for object in snapshot.ciphers {
            guard let id = object["id"]?.stringValue?.lowercased(), let key = object["key"]?.stringValue else { continue }
            // A wrapped item key shared by two items (a copy made elsewhere) identifies neither.
            keys[key] = keys[key] == nil ? .some(id) : .some(nil)
        }
        serverKeysOfCiphers = keys.compactMapValues { $0 }
        serverFolders = [:]
        serverNamesOfFolders = [:]
        for object in snapshot.folders {
            guard let wire = try? FolderWire(json: object, path: "folder"), let id = wire.id else {
                if let id = object["id"]?.stringValue?.lowercased() { unreadable.insert(id) }
                continue
            }
            serverFolders[id] = wire
            serverNamesOfFolders[wire.name.serialized] = wire
        }
        backups = SnapshotBackups(ciphers: snapshot.ciphers)
    }

    /// Throws when the snapshot lists the change's item or folder but it cannot be read here: the change waits
    /// for the user instead of meeting a server copy taken for gone.
    func requireReadable(_ change: PendingChange) throws {
        guard unreadable.contains(change.itemID) else { return }
        throw VaultError.serverAnswerInvalid("the server's copy of this \(change.itemKind == .folder ? "folder" : "item") could not be read; the change made here is kept")
    }

    /// The server's copy of a folder this device created, found by any of its names.
    func folderCopy(names: [String]) -> FolderWire? {
        names.lazy.compactMap { serverNamesOfFolders[$0] }.first
    }
}

extension Array {
    /// The elements that satisfy `belongs`, and the others, each in order.
    func partitioned(_ belongs: (Element) -> Bool) -> ([Element], [Element]) {
        var (yes, no): ([Element], [Element]) = ([], [])
        for element in self {
            if belongs(element) { yes.append(element) } else { no.append(element) }
        }
        return (yes, no)
    }
}

/// The bulk paths of a resolution pass (where the server offers them): creates never sent, and plain
/// pushes, many per request. Each change in them is planned like any other; only the changes whose plan is
/// a plain create or push go in bulk, everything else (and anything a bulk answer does not settle) takes
/// the one-by-one path.
extension VaultEngine {
    /// A queued update whose plan is a plain push (the server still has the version it was made from,
    /// nothing needs a backup) and whose trash/archive state matches (a PUT carries folder and favorite).
    struct BatchEntry: Sendable {
        var change: PendingChange
        var local: CipherWire
        var server: CipherWire
    }

    static let plainPush: [ResolutionStep] = [.push(.local), .replayState, .settle(.rebaseOnResult)]

    /// The cached items of `changes`, by id (one read; parsed on the reading thread, not the engine's).
    func localCiphers(of changes: [PendingChange]) async throws -> [String: CipherWire] {
        let (userID, ids) = (try requireSession().userID, changes.map(\.itemID))
        return try await read { tx in
            Dictionary(try tx.ciphers(of: userID).find(ids: ids).compactMap { row in (try? row.wire()).map { (row.id, $0) } },
                       uniquingKeysWith: { first, _ in first })
        }
    }

    /// Pushes the plain pushes among `changes` in one request (where the server offers it). Returns how many
    /// were settled, and the changes that take the one-by-one path.
    func pushUpdates(_ changes: [PendingChange], context: ResolutionContext) async throws -> (Int, SyncReport, [PendingChange]) {
        guard bulkUpdateSupported != false else { return (0, SyncReport(), changes) }
        let (batch, rest) = try await splitBatchable(changes, context: context)
        guard !batch.isEmpty else { return (0, SyncReport(), rest) }
        let (partial, fallback) = try await pushBatch(batch)
        return (batch.count - fallback.count, partial, rest + fallback)
    }

    /// Splits item changes into plain pushes (for one bulk request) and everything else.
    func splitBatchable(_ changes: [PendingChange], context: ResolutionContext) async throws -> ([BatchEntry], [PendingChange]) {
        let localByID = try await localCiphers(of: changes)
        var batch: [BatchEntry] = []
        var rest: [PendingChange] = []
        for change in changes {
            let run = PlanRun<CipherWire>(change: change, local: localByID[change.itemID], server: context.serverCiphers[change.itemID])
            guard let local = run.local, let server = run.server,
                  ResolutionPlanner.plan(cipherFacts(run), progress: change.metadata.progress) == Self.plainPush,
                  (local.deletedDate != nil) == (server.deletedDate != nil), (local.archivedDate != nil) == (server.archivedDate != nil) else {
                rest.append(change)
                continue
            }
            batch.append(BatchEntry(change: change, local: local, server: server))
        }
        return (batch, rest)
    }

    /// Pushes plain updates in one request and settles the accepted ones in one transaction. Returns
    /// the changes that must take the one-by-one path: "out of date" (someone wrote in between: plan
    /// again), or everything when the server has no bulk endpoint or the request failed as a whole.
    func pushBatch(_ chunk: [BatchEntry]) async throws -> (SyncReport, [PendingChange]) {
        var report = SyncReport()
        let entries = chunk.map { entry in
            var body = entry.local
            body.id = entry.change.itemID
            return (id: entry.change.itemID, cipher: body, lastKnownRevisionDate: entry.server.revisionDate)
        }
        let results: [Result<CipherWire, ServerCallError>]
        do {
            results = try await authorized { api, token in try await api.bulkUpdateCiphers(entries, token: token) }
        } catch let error as ServerCallError {
            if error.isMissingRoute {
                bulkUpdateSupported = false
                logger.info("the server has no bulk update; pushing one item at a time")
            }
            return (report, chunk.map(\.change))
        }
        bulkUpdateSupported = true
        let userID = try requireSession().userID
        var settled: [Settling] = []
        var fallback: [PendingChange] = []
        for (entry, result) in zip(chunk, results) {
            switch result {
            case .success(let pushed):
                do {
                    let final = try await applyState(of: entry.local, to: pushed)
                    if let message = await folderDropped(wanted: entry.local.folderId, result: final, name: entry.local) { report.messages.append(message) }
                    settled.append(Settling(change: entry.change, settled: final, swapping: false, baseline: .rebaseOnResult,
                                            row: CipherRow(userID: userID, wire: final)))
                } catch let error as ServerCallError {
                    report.merge(try await failureReport(error, change: entry.change))
                }
            case .failure(let error) where error.isOutOfDate || error.isGone:
                fallback.append(entry.change)
            case .failure(let error):
                report.merge(try await failureReport(error, change: entry.change))
            }
        }
        try await settleAll(settled)
        report.resolved += settled.count
        logger.debug("bulk push", metadata: ["pushed": "\(settled.count)", "retry": "\(fallback.count)"])
        return (report, fallback)
    }

    /// Settles many changes in one transaction.
    func settleAll(_ settled: [Settling]) async throws {
        let current = try requireSession()
        let now = clock.now().microsecondsSinceEpoch
        try await write { [userID = current.userID, key = current.keys.userKey] tx in
            for settling in settled { try Self.settle(settling, userID: userID, key: key, now: now, tx) }
        }
    }

    /// Notes "create sent" in each record as it stands (`sent` carry the note already). A record unchanged
    /// since the page was read takes the change in hand as it is (not opened again), and keeps the digest
    /// written, so settling does not open it either.
    func noteCreatesSent(_ sent: [PendingChange], key: SymmetricCryptoKey) async throws -> [PendingChange] {
        try await write { tx in
            try sent.map { change in
                if let written = try tx.queue(of: change.userID).replaceIfUnchanged(change, key: key) { return written }
                _ = try Self.updateStoredRecord(change, tx, key: key) { $0.createSent = true }
                return change
            }
        }
    }

    /// Creates `chunk` in one bulk request, each with its temporary id as the idempotency key, and settles
    /// the created ones (ids swapped, trash/archive state replayed). Returns how many were settled and the
    /// changes that take the ordinary path: those an earlier attempt may have made (a copy in the snapshot
    /// by their wrapped key), those the server refused, or all of them when the server has no bulk endpoint
    /// or the request failed as a whole. Each record is noted "create sent" before the request, so a lost
    /// answer is settled by the ordinary path's idempotent retry, never by a second create.
    func pushCreates(_ chunk: [PendingChange], context: ResolutionContext) async throws -> (Int, SyncReport, [PendingChange]) {
        var report = SyncReport()
        guard bulkCreateSupported != false else { return (0, report, chunk) }
        let session = try requireSession()
        let key = session.keys.userKey
        let localByID = try await localCiphers(of: chunk)
        var (batch, rest): ([(change: PendingChange, local: CipherWire)], [PendingChange]) = ([], [])
        for change in chunk {
            guard let local = localByID[change.itemID], local.organizationId == nil,
                  local.key.map({ context.serverKeysOfCiphers[$0.serialized] == nil }) ?? true else {
                rest.append(change)
                continue
            }
            var sent = change
            sent.metadata.createSent = true
            batch.append((sent, local))
        }
        guard batch.count >= 2 else { return (0, report, chunk) }
        let noted = try await noteCreatesSent(batch.map(\.change), key: key)
        for index in batch.indices { batch[index].change = noted[index] }
        let entries = batch.map { entry in
            var body = entry.local
            body.id = nil
            return (idempotencyKey: entry.change.itemID, cipher: body)
        }
        let results: [Result<CipherWire, ServerCallError>]
        do {
            results = try await authorized { api, token in try await api.bulkCreateCiphers(entries, token: token) }
        } catch let error as ServerCallError {
            if error.isMissingRoute {
                bulkCreateSupported = false
                logger.info("the server has no bulk create; creating one item at a time")
            }
            return (0, report, rest + noted)
        }
        bulkCreateSupported = true
        var created: [Settling] = []
        for (entry, result) in zip(batch, results) {
            guard case .success(let item) = result, !Self.answerUnreadable(item, instead: entry.local, keys: session.keys) else {
                // The ordinary path repeats it with the same idempotency key and reports what the server says (an
                // answer that does not decrypt here is not settled on).
                rest.append(entry.change)
                continue
            }
            do {
                let final = try await applyState(of: entry.local, to: item)
                if let message = await folderDropped(wanted: entry.local.folderId, result: final, name: entry.local) { report.messages.append(message) }
                created.append(Settling(change: entry.change, settled: final, swapping: true, baseline: .rebaseOnResult,
                                        row: CipherRow(userID: session.userID, wire: final)))
            } catch let error as ServerCallError {
                report.merge(try await failureReport(error, change: entry.change))
            }
        }
        try await settleAll(created)
        report.resolved += created.count
        logger.debug("bulk create", metadata: ["created": "\(created.count)", "retry": "\(rest.count)"])
        return (created.count, report, rest)
    }
}
