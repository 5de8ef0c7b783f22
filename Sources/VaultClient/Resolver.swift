import Foundation
import VaultAPI
import VaultCrypto
import VaultModels
import VaultStore
import VaultSyncCore

/// A backup copy made by conflict resolution.
public struct ConflictBackup: Sendable, Equatable {
    /// The backup item's id (on the server).
    public var backupID: String
    /// The item it is a copy of.
    public var originalID: String
    public var name: String
}

/// What a sync did.
public struct SyncReport: Sendable, Equatable {
    /// The vault was locked: nothing was resolved (keys and tokens are only in memory when unlocked).
    public var skippedLocked = false
    /// Queued changes that reached the server (or were settled) and left the queue.
    public var resolved = 0
    /// Backups made because two versions conflicted.
    public var backups: [ConflictBackup] = []
    /// Changes that still wait (server unreachable, backoff).
    public var stillPending = 0
    /// Changes that need the user (refused for good or tried too often); their data is kept.
    public var needsAttention = 0
    /// What happened, in user words (deletes dropped because the item was edited elsewhere…).
    public var messages: [String] = []

    public init(skippedLocked: Bool = false) {
        self.skippedLocked = skippedLocked
    }

    mutating func merge(_ other: SyncReport) {
        resolved += other.resolved
        backups += other.backups
        needsAttention += other.needsAttention
        messages += other.messages
    }
}

extension VaultEngine {
    /// Resolves the queue against the server, then applies the server's full snapshot to everything
    /// without a queue record (seed 000 §4–§7, seed 001 Flow 2). Locked: skipped.
    public func sync() async throws -> SyncReport {
        guard session != nil else { return SyncReport(skippedLocked: true) }
        var report = try await resolveQueue()
        report.messages += try await pull()
        // A twin check that could not reach the server after the resolution runs again now.
        report.backups = await mergeTwinBackups(report.backups)
        report.stillPending = try await pendingCount() - report.needsAttention
        return report
    }

    /// Resolution only: the queue against one server snapshot, without the full sync that `sync()`
    /// runs afterwards (for a caller that pushes now and refreshes later, and to measure the two apart).
    public func resolveQueue() async throws -> SyncReport {
        guard session != nil else { return SyncReport(skippedLocked: true) }
        var report = SyncReport()
        if configuration.resolutionEnabled, try await pendingCount() > 0 {
            let started = ContinuousClock.now
            // The queue is read and opened on this device while the server prepares its snapshot. The time
            // that decides what is due is read first, so that no clock read races the request's.
            let now = clock.now()
            async let queue = readQueue(dueAt: now)
            let snapshot = try await fetchSnapshot()
            logger.debug("resolution snapshot", metadata: ["items": "\(snapshot.ciphers.count)", "took": "\(ContinuousClock.now - started)"])
            report = try await resolve(queue: try await queue, against: snapshot)
        }
        report.stillPending = try await pendingCount() - report.needsAttention
        return report
    }

    /// The queue records due now (opened), and how many wait for the user (needs attention).
    struct DueQueue: Sendable {
        var changes: [PendingChange]
        var needsAttention: Int
    }

    func readQueue(dueAt now: WireDate) async throws -> DueQueue {
        let current = try requireSession()
        let rows = try await read { [userID = current.userID] tx in try tx.queue(of: userID).all() }
        var due = DueQueue(changes: [], needsAttention: 0)
        let userKey = current.keys.userKey
        for change in await concurrentCompactMap(rows, { try? $0.open(key: userKey) }) {
            if change.metadata.state == .needsAttention { due.needsAttention += 1; continue }
            if let next = change.metadata.nextAttemptDate, next > now { continue }
            due.changes.append(change)
        }
        return due
    }

    /// One pass over the queue: folders first (their new ids are referenced by items), then items.
    /// Every record is settled, retried later, or marked as needing attention; one failure never stops
    /// the others (seed 001 §7.1).
    func resolve(queue: DueQueue, against snapshot: SyncResponse) async throws -> SyncReport {
        var phases = PhaseTimer()
        var report = SyncReport()
        report.needsAttention = queue.needsAttention
        let changes = queue.changes
        phases.mark("queue read (overlapped)")
        // Only the queued items' server versions are parsed (a large vault with a few queued changes
        // pays for a few); adoption by encrypted name needs only each item's name text and id.
        let queuedIDs = Set(changes.lazy.filter { $0.itemKind == .cipher }.map(\.itemID))
        let wanted = snapshot.ciphers.filter { object in
            object["id"]?.stringValue.map { queuedIDs.contains($0.lowercased()) } ?? false
        }
        var serverCiphers: [String: CipherWire] = [:]
        serverCiphers.reserveCapacity(wanted.count)
        for wire in await concurrentCompactMap(wanted, { try? CipherWire(json: $0, path: "cipher") }) {
            guard let id = wire.id else { continue }
            serverCiphers[id] = wire
        }
        var serverNames: [String: String] = [:]
        var serverKeys: [String: String?] = [:]
        serverNames.reserveCapacity(snapshot.ciphers.count)
        serverKeys.reserveCapacity(snapshot.ciphers.count)
        for object in snapshot.ciphers {
            guard let id = object["id"]?.stringValue?.lowercased() else { continue }
            if let name = object["name"]?.stringValue { serverNames[name] = id }
            // A wrapped item key shared by two items (a copy made elsewhere) identifies neither.
            if let key = object["key"]?.stringValue { serverKeys[key] = serverKeys[key] == nil ? .some(id) : .some(nil) }
        }
        var serverFolders: [String: FolderWire] = [:]
        var folderNames: [String: FolderWire] = [:]
        for object in snapshot.folders {
            guard let wire = try? FolderWire(json: object, path: "folder"), let id = wire.id else { continue }
            serverFolders[id] = wire
            folderNames[wire.name.serialized] = wire
        }
        let context = ResolutionContext(serverCiphers: serverCiphers, serverNamesOfCiphers: serverNames,
                                        serverKeysOfCiphers: serverKeys.compactMapValues { $0 },
                                        serverFolders: serverFolders, serverNamesOfFolders: folderNames,
                                        backups: SnapshotBackups(ciphers: snapshot.ciphers))
        phases.mark("snapshot read")
        // Folders first, one by one (items may reference their new ids); then items, several at once.
        let folders = changes.filter { $0.itemKind == .folder }.sorted { $0.metadata.createdDate < $1.metadata.createdDate }
        var items = changes.filter { $0.itemKind == .cipher }.sorted { $0.metadata.createdDate < $1.metadata.createdDate }
        let total = changes.count
        var done = 0
        for change in folders {
            publishStatus(progress: (done, total))
            report.merge(try await resolveOne(change, context: context))
            done += 1
        }
        // Creates never sent yet (an import, a day of offline work) go in bulk where the server offers it,
        // each with its idempotency key; anything the bulk request does not settle takes the ordinary path.
        if configuration.bulkPushSize > 0, bulkCreateSupported != false {
            let isFreshCreate = { (change: PendingChange) in
                change.metadata.kind == .create && change.metadata.createSent != true && change.metadata.pendingBackup == nil
            }
            let creates = items.filter(isFreshCreate)
            if creates.count >= 2 {
                items = items.filter { !isFreshCreate($0) }
                let chunks = stride(from: 0, to: creates.count, by: configuration.bulkPushSize).map {
                    Array(creates[$0..<min($0 + configuration.bulkPushSize, creates.count)])
                }
                // Two chunks in flight, as for bulk updates: this device settles one while the server makes the next.
                try await withThrowingTaskGroup(of: (Int, SyncReport, [PendingChange]).self) { group in
                    var next = 0
                    func startNext() {
                        let chunk = chunks[next]
                        group.addTask {
                            guard await self.bulkCreateSupported != false else { return (0, SyncReport(), chunk) }
                            return try await self.pushCreates(chunk, context: context)
                        }
                        next += 1
                    }
                    while next < chunks.count && next < 2 { startNext() }
                    while let (pushed, partial, rest) = try await group.next() {
                        report.merge(partial)
                        items += rest
                        done += pushed
                        publishStatus(progress: (done, total))
                        if next < chunks.count { startNext() }
                    }
                }
                phases.mark("bulk creates")
            }
        }
        // Plain pushes (unchanged on the server, nothing to back up) go in bulk where the server offers it.
        // Two chunks in flight, each read, decided and pushed on its own: this device prepares and settles
        // one while the server applies the other.
        if configuration.bulkPushSize > 0, bulkUpdateSupported != false {
            let isCandidate = { (change: PendingChange) in change.metadata.kind == .update && change.metadata.pendingBackup == nil }
            let candidates = items.filter(isCandidate)
            items = items.filter { !isCandidate($0) }
            phases.mark("split")
            let chunks = stride(from: 0, to: candidates.count, by: configuration.bulkPushSize).map {
                Array(candidates[$0..<min($0 + configuration.bulkPushSize, candidates.count)])
            }
            try await withThrowingTaskGroup(of: (Int, SyncReport, [PendingChange]).self) { group in
                var next = 0
                func startNext() {
                    let chunk = chunks[next]
                    group.addTask {
                        guard await self.bulkUpdateSupported != false else { return (0, SyncReport(), chunk) }
                        let (batch, rest) = try await self.splitBatchable(chunk, context: context)
                        guard !batch.isEmpty else { return (0, SyncReport(), rest) }
                        let (partial, fallback) = try await self.pushBatch(batch)
                        return (batch.count - fallback.count, partial, rest + fallback)
                    }
                    next += 1
                }
                while next < chunks.count && next < 2 { startNext() }
                while let (pushed, partial, remaining) = try await group.next() {
                    report.merge(partial)
                    items += remaining
                    done += pushed
                    publishStatus(progress: (done, total))
                    if next < chunks.count { startNext() }
                }
            }
            phases.mark("bulk pushes")
        }
        let width = max(1, configuration.resolutionConcurrency)
        try await withThrowingTaskGroup(of: SyncReport.self) { group in
            var next = 0
            while next < items.count && next < width {
                let change = items[next]
                group.addTask { try await self.resolveOne(change, context: context) }
                next += 1
            }
            while let partial = try await group.next() {
                report.merge(partial)
                done += 1
                publishStatus(progress: (done, total))
                if next < items.count {
                    let change = items[next]
                    group.addTask { try await self.resolveOne(change, context: context) }
                    next += 1
                }
            }
        }
        phases.mark("one by one")
        report.backups = await mergeTwinBackups(report.backups)
        phases.mark("twin backups")
        logger.debug("resolution phases", metadata: ["changes": "\(total)", "took": "\(phases.summary)"])
        publishStatus(progress: nil, backups: report.backups.map(\.backupID), messages: report.messages)
        return report
    }

    /// Resolves one record; failures are recorded on the record, never thrown past it.
    func resolveOne(_ change: PendingChange, context: ResolutionContext) async throws -> SyncReport {
        var report = SyncReport()
        do {
            switch change.itemKind {
            case .folder: try await resolveFolder(change, context: context, report: &report)
            case .cipher: try await resolveCipher(change, context: context, report: &report)
            }
            report.resolved += 1
        } catch let error as ServerCallError {
            report.merge(try await failureReport(error, change: change))
        } catch let error as VaultError {
            // The server answered but something about this item is wrong: keep it, ask the user.
            _ = try await recordFailure(change, error: .invalidResponse(error.description), permanent: true)
            report.needsAttention += 1
        }
        return report
    }

    /// Records a failed attempt on the change's record (retry later, or needs attention).
    func failureReport(_ error: ServerCallError, change: PendingChange) async throws -> SyncReport {
        var report = SyncReport()
        let state = try await recordFailure(change, error: error)
        if state == .needsAttention { report.needsAttention += 1 }
        switch FailureClassification.classify(error.failure) {
        case .offline: await recordContact(success: false)
        case .untrusted: await recordContact(success: false, certificateProblem: error.certificateProblem)
        case .refused: break
        }
        return report
    }

    /// A queued update that is a plain push: the server still has the version it was made from,
    /// nothing needs a backup, and trash/archive state matches (a PUT carries folder and favorite).
    struct BatchEntry: Sendable {
        var change: PendingChange
        var local: CipherWire
        var server: CipherWire
    }

    /// Splits item changes into plain pushes (for one bulk request) and everything else.
    func splitBatchable(_ changes: [PendingChange], context: ResolutionContext) async throws -> ([BatchEntry], [PendingChange]) {
        let userID = try requireSession().userID
        let candidates = changes.filter { $0.metadata.kind == .update && $0.metadata.pendingBackup == nil }
        let ids = candidates.map(\.itemID)
        let locals = try await read { tx in try tx.ciphers(of: userID).find(ids: ids) }
        let localByID = Dictionary(locals.compactMap { row in (try? row.wire()).map { (row.id, $0) } }, uniquingKeysWith: { first, _ in first })
        var batch: [BatchEntry] = []
        var rest: [PendingChange] = []
        for change in changes {
            guard change.metadata.kind == .update, change.metadata.pendingBackup == nil, let local = localByID[change.itemID],
                  let server = context.serverCiphers[change.itemID], let revision = server.revisionDate else {
                rest.append(change)
                continue
            }
            let localUpdated = clockOffsetBox.current?.serverTime(forDeviceTime: change.metadata.updatedDate) ?? change.metadata.updatedDate
            let plan = ConflictMatrix.decide(change.metadata, server: .present(revisionDate: revision), localUpdatedOnServerClock: localUpdated)
            let sameState = (local.deletedDate != nil) == (server.deletedDate != nil) && (local.archivedDate != nil) == (server.archivedDate != nil)
            if plan == .pushLocal && sameState {
                batch.append(BatchEntry(change: change, local: local, server: server))
            } else {
                rest.append(change)
            }
        }
        return (batch, rest)
    }

    /// Pushes plain updates in one request and settles the accepted ones in one transaction. Returns
    /// the changes that must take the one-by-one path: "out of date" (someone wrote in between: decide
    /// again), or everything when the server has no bulk endpoint or the request failed as a whole.
    func pushBatch(_ chunk: [BatchEntry]) async throws -> (SyncReport, [PendingChange]) {
        var report = SyncReport()
        let entries = chunk.map { entry in
            var body = entry.local
            body.id = entry.change.itemID
            return (id: entry.change.itemID, cipher: body, lastKnownRevisionDate: entry.server.revisionDate)
        }
        let results: [Result<CipherWire, ServerCallError>]
        var phases = PhaseTimer()
        do {
            results = try await authorized { api, token in try await api.bulkUpdateCiphers(entries, token: token) }
            phases.mark("request")
        } catch let error as ServerCallError {
            if case .http(let status, _) = error, status == 404 || status == 405 {
                bulkUpdateSupported = false
                logger.info("the server has no bulk update; pushing one item at a time")
            }
            return (report, chunk.map(\.change))
        }
        bulkUpdateSupported = true
        var settled: [(PendingChange, CipherWire)] = []
        var fallback: [PendingChange] = []
        for (entry, result) in zip(chunk, results) {
            switch result {
            case .success(let pushed):
                do {
                    settled.append((entry.change, try await applyState(of: entry.local, to: pushed)))
                } catch let error as ServerCallError {
                    report.merge(try await failureReport(error, change: entry.change))
                }
            case .failure(let error) where error.isOutOfDate || error.isGone:
                // Written or deleted in between: read it again and decide again, one by one.
                fallback.append(entry.change)
            case .failure(let error):
                report.merge(try await failureReport(error, change: entry.change))
            }
        }
        let session = try requireSession()
        let userID = session.userID
        let key = session.keys.userKey
        let final = settled
        let rows = final.map { (CipherRow(userID: userID, wire: $0.1), $0.0, $0.1) }
        try await write { tx in
            for (row, change, pushed) in rows {
                if try Self.keepIfSavedMeanwhile(change, settled: pushed, pushedLocal: true, key: key, tx) { continue }
                try tx.ciphers(of: userID).store(row)
                try tx.queue(of: userID).remove(recordID: change.id)
            }
        }
        report.resolved += final.count
        phases.mark("settle")
        logger.debug("bulk push", metadata: ["pushed": "\(final.count)", "retry": "\(fallback.count)", "took": "\(phases.summary)"])
        return (report, fallback)
    }

    /// Creates `chunk` in one bulk request, each with its temporary id as the idempotency key, and settles
    /// the created ones (ids swapped, trash/archive state replayed). Returns how many were settled and the
    /// changes that take the ordinary path: those an earlier attempt may have made (a copy in the
    /// snapshot), those the server refused, or all of them when the server has no bulk endpoint or the
    /// request failed as a whole. Each record is noted "create sent" before the request, so a lost answer
    /// is settled by the ordinary path's idempotent retry, never by a second create.
    func pushCreates(_ chunk: [PendingChange], context: ResolutionContext) async throws -> (Int, SyncReport, [PendingChange]) {
        var report = SyncReport()
        let session = try requireSession()
        let userID = session.userID
        let key = session.keys.userKey
        let ids = chunk.map(\.itemID)
        let locals = try await read { tx in try tx.ciphers(of: userID).find(ids: ids) }
        let localByID = Dictionary(locals.compactMap { row in (try? row.wire()).map { (row.id, $0) } }, uniquingKeysWith: { first, _ in first })
        var batch: [(change: PendingChange, local: CipherWire)] = []
        var rest: [PendingChange] = []
        for change in chunk {
            guard let local = localByID[change.itemID], local.organizationId == nil,
                  context.copy(ofKey: local.key?.serialized, names: [local.name.serialized] + (change.metadata.earlierNames ?? [])) == nil else {
                rest.append(change)
                continue
            }
            batch.append((change, local))
        }
        guard batch.count >= 2 else { return (0, report, chunk) }
        let noted = batch.map(\.change)
        try await write { tx in
            for change in noted { _ = try Self.updateStoredRecord(change, tx, key: key) { $0.createSent = true } }
        }
        let entries = batch.map { entry in
            var body = entry.local
            body.id = nil
            return (idempotencyKey: entry.change.itemID, cipher: body)
        }
        let results: [Result<CipherWire, ServerCallError>]
        do {
            results = try await authorized { api, token in try await api.bulkCreateCiphers(entries, token: token) }
        } catch let error as ServerCallError {
            if case .http(let status, _) = error, status == 404 || status == 405 {
                bulkCreateSupported = false
                logger.info("the server has no bulk create; creating one item at a time")
            }
            return (0, report, chunk.map { change in
                var sent = change
                if noted.contains(where: { $0.id == change.id }) { sent.metadata.createSent = true }
                return sent
            })
        }
        bulkCreateSupported = true
        var created: [CreatedItem] = []
        for (entry, result) in zip(batch, results) {
            var change = entry.change
            change.metadata.createSent = true
            switch result {
            case .success(var item):
                do {
                    item = try await applyState(of: entry.local, to: item)
                    created.append(CreatedItem(temporaryID: change.itemID, created: item, change: change, pushedLocal: true))
                } catch let error as ServerCallError {
                    report.merge(try await failureReport(error, change: change))
                }
            case .failure:
                // The ordinary path repeats it with the same idempotency key and reports what the server says.
                rest.append(change)
            }
        }
        // Settled together, in one transaction.
        try await swapCipherIDs(created)
        let settled = created.count
        report.resolved += settled
        logger.debug("bulk create", metadata: ["created": "\(settled)", "retry": "\(rest.count)"])
        return (settled, report, rest)
    }

    struct ResolutionContext: Sendable {
        var serverCiphers: [String: CipherWire]
        /// Encrypted name (its exact text) → item id, for adopting creates and backups whose answer was lost.
        var serverNamesOfCiphers: [String: String]
        /// Wrapped item key (its exact text, unique to one item) → item id: finds a create whose answer was
        /// lost even after another device renamed the copy it left.
        var serverKeysOfCiphers: [String: String]

        /// The server's copy of an item this device created, found by its wrapped key or by any of its names.
        func copy(ofKey key: String?, names: [String]) -> String? {
            if let key, let id = serverKeysOfCiphers[key] { return id }
            return names.lazy.compactMap { serverNamesOfCiphers[$0] }.first
        }
        var serverFolders: [String: FolderWire]
        var serverNamesOfFolders: [String: FolderWire]

        /// The server's copy of a folder this device created, found by any of its names (folders have no key).
        func folderCopy(names: [String]) -> FolderWire? {
            names.lazy.compactMap { serverNamesOfFolders[$0] }.first
        }

        /// The conflict backups in the snapshot, searched before a backup is made.
        var backups: SnapshotBackups
    }

    /// Counts a failed attempt: transient → retry after backoff, or needs attention when exhausted;
    /// a refusal → needs attention at once. The data stays.
    func recordFailure(_ change: PendingChange, error: ServerCallError, permanent: Bool = false) async throws -> PendingChangeState {
        let current = try requireSession()
        let key = current.keys.userKey
        let backoff = Backoff()
        let refused = permanent || FailureClassification.classify(error.failure) == .refused
        // The jitter comes from the engine's random source, like everything random it does (a test's
        // seeded source replays the same backoff).
        let unit = Double(random.bytes(count: 8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } >> 11) / Double(1 << 53)
        let now = clock.now()
        let description = error.description
        // Read and written in one transaction: the stored record may have moved on during this attempt
        // (a backup noted, or the user saved the item again), and keeps what it has.
        let updated = try await write { tx in
            try Self.updateStoredRecord(change, tx, key: key) { metadata in
                metadata.attempts += 1
                metadata.lastError = description
                if refused || backoff.isExhausted(afterAttempts: metadata.attempts) {
                    metadata.state = .needsAttention
                    metadata.nextAttemptDate = nil
                } else {
                    let delay = backoff.delay(afterAttempts: metadata.attempts, unit: unit)
                    metadata.nextAttemptDate = now.adding(microseconds: Int64(delay * 1_000_000))
                }
            }
        }
        guard let updated else { return .pending }
        publishStatus(lastError: error.description)
        logger.warning("queued change not resolved", metadata: ["item": "\(change.itemID)", "state": "\(updated.metadata.state.rawValue)",
                                                                  "attempts": "\(updated.metadata.attempts)"])
        return updated.metadata.state
    }

    // MARK: Folders

    func resolveFolder(_ change: PendingChange, context: ResolutionContext, report: inout SyncReport) async throws {
        let current = try requireSession()
        let userID = current.userID
        let local = try await read { tx in try tx.folders(of: userID).find(id: change.itemID) }.flatMap { try? $0.wire() }
        switch change.metadata.kind {
        case .create:
            guard let local else { return try await dropRecord(change) }
            // Idempotent: an answer lost after the server created it shows up in the snapshot, under the
            // current name or one it was renamed from here since (then the rename goes on top).
            var created: FolderWire
            var change = change
            if let adopted = context.folderCopy(names: [local.name.serialized] + (change.metadata.earlierNames ?? []).reversed()) {
                created = adopted
                if let adoptedID = adopted.id, adopted.name.serialized != local.name.serialized {
                    created = try await authorized { api, token in try await api.renameFolder(id: adoptedID, name: local.name, token: token) }
                }
            } else {
                try await noteCreateSent(&change)
                // Its temporary id is its idempotency key: a server that honours it answers a retry, a rename
                // retried or a post delayed past the timeout, with the folder the first attempt made.
                let key = change.itemID
                do {
                    created = try await authorized { api, token in try await api.createFolder(name: local.name, idempotencyKey: key, token: token) }
                } catch let error as ServerCallError where error.isCreatedSinceDeleted {
                    // Made by an earlier attempt and deleted for good elsewhere since: as for a folder renamed
                    // here and deleted elsewhere, the local one comes back (under a key of its own).
                    let recreation = Self.recreationKey(change)
                    created = try await authorized { api, token in
                        try await api.createFolder(name: local.name, idempotencyKey: recreation, token: token)
                    }
                }
                // The key's answer is the folder an earlier attempt made, as it is now: renamed elsewhere
                // since, it takes the local name, as a copy adopted from the snapshot does.
                if let createdID = created.id, created.name.serialized != local.name.serialized {
                    created = try await authorized { api, token in try await api.renameFolder(id: createdID, name: local.name, token: token) }
                }
            }
            try await swapFolderID(from: change.itemID, to: created, change: change)
        case .update:
            guard let local else { return try await dropRecord(change) }
            guard context.serverFolders[change.itemID] != nil else {
                // Deleted on the server: recreate it with the local name (nothing lost).
                let key = Self.recreationKey(change)
                let created = try await authorized { api, token in try await api.createFolder(name: local.name, idempotencyKey: key, token: token) }
                return try await swapFolderID(from: change.itemID, to: created, change: change)
            }
            if let kept = try await keptServerFolderName(change, local: local, context: context, report: &report) {
                return try await write { tx in
                    try tx.folders(of: userID).store(kept)
                    try tx.queue(of: userID).remove(recordID: change.id)
                }
            }
            let renamed = try await authorized { api, token in try await api.renameFolder(id: change.itemID, name: local.name, token: token) }
            try await write { tx in
                try tx.folders(of: userID).store(renamed)
                try tx.queue(of: userID).remove(recordID: change.id)
            }
        case .softDelete, .hardDelete:
            // A folder created here and deleted before its create's answer arrived: found by its names.
            let lostCreate = change.metadata.createSent == true && change.metadata.originalRevisionDate == nil
            let serverID = context.serverFolders[change.itemID] != nil
                ? change.itemID : lostCreate ? context.folderCopy(names: (change.metadata.earlierNames ?? []).reversed())?.id : nil
            if let serverID {
                do {
                    try await authorized { api, token in try await api.deleteFolder(id: serverID, token: token) }
                } catch let error as ServerCallError where error.isGone {}
            }
            try await dropRecord(change)
        }
    }

    /// A folder renamed here while the server's copy was renamed elsewhere (docs/ARCHITECTURE.md,
    /// "Merging"; merge policy only): returns the server's folder when it is to stay as it is — it has
    /// the same name already, or both renamed it differently and the other rename is newer — and notes
    /// which name was kept. `nil`: push the local rename (the server's name did not change since the
    /// rename here started, or the rename here is newer, or the backup policy: the local rename wins).
    func keptServerFolderName(_ change: PendingChange, local: FolderWire, context: ResolutionContext,
                              report: inout SyncReport) async throws -> FolderWire? {
        guard configuration.conflictPolicy == .merge, let server = context.serverFolders[change.itemID],
              let baseText = change.metadata.baseVersion, let base = try? FolderWire(jsonBytes: Array(baseText.utf8)) else { return nil }
        let keys = try requireSession().keys
        guard let baseName = try? base.decrypted(with: keys).name, let mine = try? local.decrypted(with: keys).name,
              let theirs = try? server.decrypted(with: keys).name else { return nil }
        if theirs == mine { return server }
        guard theirs != baseName, let revision = server.revisionDate else { return nil }
        let localUpdated = clockOffsetBox.current?.serverTime(forDeviceTime: change.metadata.updatedDate) ?? change.metadata.updatedDate
        let keepTheirs = revision >= localUpdated
        let note = keepTheirs
            ? "Folder \"\(theirs)\": renamed on another device later than you renamed it \"\(mine)\" here; the newer name was kept."
            : "Folder \"\(mine)\": renamed here later than another device renamed it \"\(theirs)\"; the newer name was kept."
        report.messages.append(note)
        return keepTheirs ? server : nil
    }

    func swapFolderID(from temporaryID: String, to created: FolderWire, change: PendingChange) async throws {
        let current = try requireSession()
        let userID = current.userID
        let key = current.keys.userKey
        guard let newID = created.id else { throw ServerCallError.invalidResponse("created folder has no id") }
        try await write { tx in
            // Renamed or deleted here while it was being created: that change goes to the new folder.
            let meanwhile = try Self.savedMeanwhile(change, key: key, tx)
            let newerLocal = try tx.folders(of: userID).find(id: temporaryID).flatMap { try? $0.wire() }
            // In the same transaction: an item saved between a separate read and this write would be
            // replaced by its older copy.
            try tx.folders(of: userID).remove(id: temporaryID)
            try tx.ciphers(of: userID).moveItems(ofFolder: temporaryID, to: newID)
            if var record = meanwhile {
                record.itemID = newID
                record.metadata.originalRevisionDate = created.revisionDate
                if record.metadata.kind == .create { record.metadata.kind = .update }
                if record.metadata.kind == .update, var local = newerLocal {
                    local.id = newID
                    local.revisionDate = created.revisionDate
                    try tx.folders(of: userID).store(local)
                }
                try tx.queue(of: userID).store(record, key: key)
            } else {
                try tx.folders(of: userID).store(created)
                try tx.queue(of: userID).remove(recordID: change.id)
            }
        }
    }

    /// The idempotency key of a create this device decides on while resolving `change`: the re-creation
    /// of an item or folder the server no longer has. Derived from the queue record's id (a random UUID
    /// kept with the record) and the id of what it re-creates, both durable before the first attempt, so
    /// every attempt carries the same key; a later re-creation of the item it makes has another id.
    static func recreationKey(_ change: PendingChange) -> String {
        "recreate-\(change.id)-\(change.itemID)"
    }

    /// The idempotency key of a conflict backup, the same for every attempt (the marker is stored with
    /// the backup before it is first posted). A backup of the server's version (`server:REVISION`) is
    /// keyed by the item and that revision: the same version for every device of the account, so two
    /// devices backing it up at once make one backup on a server that honours keys (bug 20's twins; a
    /// fault-scenario run made two and renamed each before the twin check merged them). A backup of
    /// this device's version (`local:…`) is keyed by the queue record, which only this device has.
    static func backupKey(_ change: PendingChange, marker: String) -> String {
        marker.hasPrefix("server:") ? "backup-\(change.itemID)-\(marker)" : "backup-\(change.id)-\(marker)"
    }

    func dropRecord(_ change: PendingChange) async throws {
        try await write { tx in try tx.queue(of: change.userID).remove(recordID: change.id) }
    }
}

extension VaultEngine {
    /// An optional background loop: syncs every `interval`; after failures (server unreachable) it
    /// waits by exponential backoff with jitter instead. Cancel the returned task to stop it.
    public func startAutomaticSync(every interval: Duration, backoff: Backoff = Backoff(base: 1, cap: 300)) -> Task<Void, Never> {
        Task { [weak self] in
            var failures = 0
            while !Task.isCancelled, let engine = self {
                var wait = interval
                do {
                    if await engine.isUnlocked { _ = try await engine.sync() }
                    failures = 0
                } catch {
                    failures += 1
                    var generator = SystemRandomNumberGenerator()
                    let seconds = backoff.delay(afterAttempts: failures, unit: Double.random(in: 0..<1, using: &generator))
                    wait = .milliseconds(Int64(seconds * 1000))
                }
                try? await Task.sleep(for: wait)
            }
        }
    }
}

/// Durations of consecutive phases, for debug logs.
struct PhaseTimer {
    private var last = ContinuousClock.now
    private var phases: [(String, Duration)] = []

    mutating func mark(_ name: String) {
        let now = ContinuousClock.now
        phases.append((name, now - last))
        last = now
    }

    var summary: String {
        phases.map { "\($0.0) \($0.1.formatted(.units(allowed: [.milliseconds], width: .narrow)))" }.joined(separator: ", ")
    }
}

/// `compactMap` on all cores, order kept: for CPU-bound work over thousands of elements (parsing a
/// snapshot, opening queue records); small inputs stay on the calling task.
func concurrentCompactMap<Element: Sendable, Result: Sendable>(_ elements: [Element],
                                                             _ transform: @escaping @Sendable (Element) -> Result?) async -> [Result] {
    let parts = max(1, min(ProcessInfo.processInfo.activeProcessorCount, elements.count / 500))
    guard parts > 1 else { return elements.compactMap(transform) }
    let size = (elements.count + parts - 1) / parts
    return await withTaskGroup(of: (Int, [Result]).self) { group in
        for part in 0..<parts {
            let slice = elements[min(part * size, elements.count)..<min((part + 1) * size, elements.count)]
            group.addTask { (part, slice.compactMap(transform)) }
        }
        var results = Array(repeating: [Result](), count: parts)
        for await (part, values) in group { results[part] = values }
        return results.flatMap { $0 }
    }
}
