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
    /// Why it was made.
    public var reason: Reason = .conflict

    public enum Reason: String, Sendable, Equatable {
        /// Both versions changed: the one that lost is kept.
        case conflict
        /// No conflict: the password was changed several times offline, and the server's version is kept for
        /// its password history (the soft conflict, docs/ARCHITECTURE.md).
        case passwordHistory
    }
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
    /// Items the server's snapshot brought to this device: new, or changed by another device.
    public var received = 0
    /// Items removed here because the server no longer has them (deleted for good elsewhere).
    public var removedByServer = 0

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
        do {
            let pulled = try await pullCounting()
            report.messages += pulled.messages
            report.received = pulled.received
            report.removedByServer = pulled.removed
        } catch let error as VaultError where !report.backups.isEmpty || !report.messages.isEmpty {
            // What the resolution did is said even when the download after it fails (a dropped delete is told once);
            // its pending count is `resolveQueue`'s, which a pull does not change.
            throw VaultError.syncIncomplete(report, cause: error)
        }
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
            // The queue's outline and its first page are read and opened on this device while the server
            // prepares its snapshot. The time that decides what is due is read first, so that no clock read
            // races the request's.
            let now = clock.now()
            async let outline = queueOutline(dueAt: now)
            let snapshot = try await fetchSnapshot()
            logger.debug("resolution snapshot", metadata: ["items": "\(snapshot.ciphers.count)", "took": "\(ContinuousClock.now - started)"])
            report = try await resolve(try await outline, against: snapshot, dueAt: now)
        }
        report.stillPending = try await pendingCount() - report.needsAttention
        return report
    }

    /// Queue records due now (opened), and how many of those read wait for the user or for a later
    /// attempt.
    struct DueChanges: Sendable {
        var changes: [PendingChange] = []
        var needsAttention = 0
        var notDue = 0
    }

    /// The queue at the start of a pass: its folder changes (few, opened at once), the ids of its queued
    /// items (for the snapshot's context), the position up to which its item changes are read, a page
    /// at a time (`EngineConfiguration.resolutionPageSize`): a queue of 100,000 creates is never opened
    /// whole; and its first page, opened.
    struct QueueOutline: Sendable {
        var folders: DueChanges
        var itemIDs: Set<String>
        var itemCount: Int
        var lastPosition: Int64
        var firstPage: OpenedPage
    }

    /// A page of item changes, opened; `end`: the position of its last record (`nil`: the page is empty,
    /// the queue read to its end).
    struct OpenedPage: Sendable {
        var due: DueChanges
        var end: Int64?
    }

    func queueOutline(dueAt now: WireDate) async throws -> QueueOutline {
        let current = try requireSession()
        let pageSize = max(1, configuration.resolutionPageSize)
        let (folderRows, itemIDs, lastPosition, firstRows) = try await read { [userID = current.userID] tx in
            let queue = tx.queue(of: userID)
            let lastPosition = try queue.lastPosition()
            return (try queue.all(kind: .folder), try queue.itemIDs(kind: .cipher), lastPosition,
                    try queue.page(kind: .cipher, after: 0, through: lastPosition, limit: pageSize))
        }
        return QueueOutline(folders: await due(folderRows, at: now), itemIDs: itemIDs, itemCount: itemIDs.count, lastPosition: lastPosition,
                            firstPage: await open(page: firstRows, at: now))
    }

    /// The item changes after `position` (at most up to `through`), one page.
    func pageRows(after position: Int64, through: Int64) async throws -> [(position: Int64, row: PendingChangeRow)] {
        let (userID, pageSize) = (try requireSession().userID, max(1, configuration.resolutionPageSize))
        return try await read { tx in try tx.queue(of: userID).page(kind: .cipher, after: position, through: through, limit: pageSize) }
    }

    func open(page rows: [(position: Int64, row: PendingChangeRow)], at now: WireDate) async -> OpenedPage {
        OpenedPage(due: await due(rows.map(\.row), at: now), end: rows.last?.position)
    }

    /// Opens `rows` (on every core) and keeps the ones due at `now`.
    func due(_ rows: [PendingChangeRow], at now: WireDate) async -> DueChanges {
        let userKey = session?.keys.userKey
        var due = DueChanges()
        guard let userKey else { return due }
        for change in await concurrentCompactMap(rows, { try? $0.open(key: userKey) }) {
            if change.metadata.state == .needsAttention {
                due.needsAttention += 1
            } else if let next = change.metadata.nextAttemptDate, next > now {
                due.notDue += 1
            } else {
                due.changes.append(change)
            }
        }
        return due
    }

    /// One pass over the queue: folders first (their new ids are referenced by items), then items a page
    /// at a time in the order they were queued: creates never sent and plain pushes in bulk where the server
    /// offers it, the rest one by one, several at once. Every record is settled, retried later, or marked as
    /// needing attention; one failure never stops the others (seed 001 §7.1).
    func resolve(_ outline: QueueOutline, against snapshot: SyncResponse, dueAt now: WireDate) async throws -> SyncReport {
        var phases = PhaseTimer()
        var pass = ResolutionPass(total: outline.folders.changes.count + outline.itemCount)
        pass.report.needsAttention = outline.folders.needsAttention
        let context = await ResolutionContext(snapshot: snapshot, queuedItemIDs: outline.itemIDs)
        phases.mark("snapshot read")
        for change in outline.folders.changes.sorted(by: { $0.metadata.createdDate < $1.metadata.createdDate }) {
            publishStatus(progress: (pass.done, pass.total))
            pass.report.merge(try await resolveOne(change, context: context))
            pass.done += 1
        }
        try await resolveItems(outline, context: context, pass: &pass, dueAt: now)
        phases.mark("items")
        pass.report.backups = await mergeTwinBackups(pass.report.backups)
        phases.mark("twin backups")
        logger.debug("resolution phases", metadata: ["changes": "\(pass.total)", "took": "\(phases.summary)"])
        publishStatus(progress: nil, backups: pass.report.backups.map(\.backupID), messages: pass.report.messages)
        return pass.report
    }

    /// A bulk request's worth of creates or plain pushes.
    struct BulkChunk: Sendable {
        var creates: Bool
        var changes: [PendingChange]
    }

    /// The item changes, page by page. The bulk chunks flow from one page into the next, two in flight (at
    /// most `resolutionConcurrency`): this device prepares and settles one while the server makes the
    /// other, and the server is not left idle at a page's end. A page's other changes (and what its chunks
    /// hand back) go one by one once its chunks are settled, with no chunk in flight, as before the flow.
    /// Each page is read when the page ahead of it starts (a fixed point: a simulated run, one chunk at a
    /// time, replays exactly) and opened while that page's chunks wait for the server. A save made after the
    /// read meets the saved-meanwhile rule when its change settles, as a save made during any push does.
    func resolveItems(_ outline: QueueOutline, context: ResolutionContext, pass: inout ResolutionPass, dueAt now: WireDate) async throws {
        var (chunks, single, page, more): ([BulkChunk], [PendingChange], Task<OpenedPage, Never>?, Bool) = ([], [], nil, true)
        var upcoming: OpenedPage? = outline.firstPage
        defer { page?.cancel() }
        func nextChunk() async throws -> BulkChunk? {
            while chunks.isEmpty {
                // Changes for the one-by-one path: the window drains first.
                guard single.isEmpty else { return nil }
                if upcoming == nil { upcoming = await page?.value }
                guard let opened = upcoming, let end = opened.end else {
                    more = false
                    return nil
                }
                upcoming = nil
                let rows = try await pageRows(after: end, through: outline.lastPosition)
                page = Task { await self.open(page: rows, at: now) }
                pass.report.needsAttention += opened.due.needsAttention
                pass.done += opened.due.needsAttention + opened.due.notDue
                (chunks, single) = bulkChunks(opened.due.changes.sorted { $0.metadata.createdDate < $1.metadata.createdDate })
            }
            return chunks.removeFirst()
        }
        while more {
            try await windowed(width: min(2, max(1, configuration.resolutionConcurrency)), next: nextChunk, { chunk in
                chunk.creates ? try await self.pushCreates(chunk.changes, context: context) : try await self.pushUpdates(chunk.changes, context: context)
            }) { (settled, partial, rest) in
                pass.report.merge(partial)
                single += rest
                pass.done += settled
                publishStatus(progress: (pass.done, pass.total))
            }
            try await oneByOne(single, pass: &pass, context: context)
            single = []
        }
    }

    /// A page's creates never sent (two or more) and plain pushes, in chunks of the bulk size where the
    /// server offers bulk requests; the rest.
    func bulkChunks(_ changes: [PendingChange]) -> ([BulkChunk], [PendingChange]) {
        let size = configuration.bulkPushSize
        guard size > 0 else { return ([], changes) }
        func chunked(_ changes: [PendingChange], creates: Bool) -> [BulkChunk] {
            stride(from: 0, to: changes.count, by: size).map { BulkChunk(creates: creates, changes: Array(changes[$0..<min($0 + size, changes.count)])) }
        }
        var (chunks, rest) = ([BulkChunk](), changes)
        if bulkCreateSupported != false {
            // A create with attachments to upload takes the one-by-one path, whose plan uploads them.
            let (creates, others) = rest.partitioned { change in
                let record = change.metadata
                return record.kind == .create && record.createSent != true && record.progress.inFlight == nil && !record.hasAttachmentWork
            }
            if creates.count >= 2 { (chunks, rest) = (chunked(creates, creates: true), others) }
        }
        if bulkUpdateSupported != false {
            let (updates, others) = rest.partitioned { $0.metadata.kind == .update && $0.metadata.progress.inFlight == nil }
            (chunks, rest) = (chunks + chunked(updates, creates: false), others)
        }
        return (chunks, rest)
    }

    /// How far one pass over the queue got.
    struct ResolutionPass {
        var total: Int
        var done = 0
        var report = SyncReport()
    }

    /// The ordinary path, `resolutionConcurrency` changes at once.
    func oneByOne(_ items: [PendingChange], pass: inout ResolutionPass, context: ResolutionContext) async throws {
        var left = items[...]
        try await windowed(width: max(1, configuration.resolutionConcurrency), next: { left.popFirst() }, { try await self.resolveOne($0, context: context) }) { partial in
            pass.report.merge(partial)
            pass.done += 1
            publishStatus(progress: (pass.done, pass.total))
        }
    }

    /// Runs `work` over what `next` hands out (until it answers `nil`), at most `width` at once, handing each
    /// result to `take` as it comes.
    func windowed<Element: Sendable, Result: Sendable>(width: Int, next: () async throws -> Element?,
                                                         _ work: @escaping @Sendable (Element) async throws -> Result,
                                                         take: (Result) -> Void) async throws {
        try await withThrowingTaskGroup(of: Result.self) { group in
            var running = 0
            while true {
                while running < width, let element = try await next() {
                    group.addTask { try await work(element) }
                    running += 1
                }
                guard let result = try await group.next() else { return }
                running -= 1
                take(result)
            }
        }
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
        } catch is KeptChanging {
            // Others are writing the item right now: nothing is wrong with it, it is tried again later (backoff).
            _ = try await recordFailure(change, description: KeptChanging.message, refused: false)
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

    /// Counts a failed attempt: transient → retry after backoff, or needs attention when exhausted;
    /// a refusal → needs attention at once. The data stays.
    func recordFailure(_ change: PendingChange, error: ServerCallError, permanent: Bool = false) async throws -> PendingChangeState {
        try await recordFailure(change, description: error.description,
                                refused: permanent || FailureClassification.classify(error.failure) == .refused)
    }

    func recordFailure(_ change: PendingChange, description: String, refused: Bool) async throws -> PendingChangeState {
        let current = try requireSession()
        let key = current.keys.userKey
        let backoff = Backoff()
        // The jitter comes from the engine's random source, like everything random it does (a test's
        // seeded source replays the same backoff).
        let unit = Double(random.bytes(count: 8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } >> 11) / Double(1 << 53)
        let now = clock.now()
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
        publishStatus(lastError: description)
        // A change that waits for the user is a warning; one that is simply tried again later (the server went
        // away mid-sync: every queued change) is not, or a queue of thousands floods the terminal.
        logger.log(level: updated.metadata.state == .needsAttention ? .warning : .info, "queued change not resolved",
                   metadata: ["item": "\(change.itemID)", "state": "\(updated.metadata.state.rawValue)", "attempts": "\(updated.metadata.attempts)"])
        return updated.metadata.state
    }

    /// The idempotency keys of a re-creation this device decides on while resolving `change`: of an item or
    /// folder the server no longer has (docs/PROTOCOL.md, "Idempotent creates").
    /// - First, a key made from the id of what it re-creates: the same on every device of the account, so
    ///   devices that re-create one item at the same moment make one item between them. A device whose
    ///   version differs from the one the server made is answered with it and meets it as a conflict (the
    ///   newer wins, the other is backed up): one item and a backup, never two items of one name.
    /// - Then, if that re-creation was deleted for good again since (`410`), a key of this record alone:
    ///   the queue record's id (a random UUID kept with it) and the item's id.
    /// Both are fixed before the first attempt, so every attempt carries the same keys; a later re-creation
    /// of the item it makes has another id. `itemID`: the server's id of an item created here whose create
    /// key answered `410` naming it (by default the change's item).
    static func recreationKeys(_ change: PendingChange, of itemID: String? = nil) -> [String] {
        let id = itemID ?? change.itemID
        return ["recreate-\(id)", "recreate-\(change.id)-\(id)"]
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
    await VaultEngine.inSlices(elements, transform).compactMap { $0 }
}
