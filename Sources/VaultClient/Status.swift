import Foundation
import VaultAPI
import VaultModels
import VaultStore
import VaultSyncCore

/// The sync status a UI shows (seed 004 §5, seed 001 U3).
public struct SyncStatus: Sendable, Equatable {
    /// Whether the last server contact succeeded (`nil`: none yet).
    public var online: Bool?
    public var lastContact: WireDate?
    public var lastSync: WireDate?
    public var pendingCount: Int
    public var needsAttentionCount: Int
    /// While resolving: (done, total).
    public var resolving: (done: Int, total: Int)?
    /// Backups created by the last resolution.
    public var conflictsCreated: [String]
    /// What the last resolution told the user: merges ("\"GitHub\": merged your username with …"),
    /// deletes dropped because the item was edited elsewhere, backups made elsewhere.
    public var lastResolution: [String] = []
    public var lastError: String?
    public var locked: Bool
    /// Conflict backups the user has not reviewed yet.
    public var unreviewedConflicts: Int = 0
    /// Why the last server contact failed, when the server's certificate was refused (kept across
    /// restarts until the next contact); queued changes wait for it to be fixed.
    public var certificateProblem: CertificateProblem?
    /// How live sync keeps this device in step (hub, polling, offline); `nil` when it is not running.
    public var live: LiveState?

    public static func == (lhs: SyncStatus, rhs: SyncStatus) -> Bool {
        lhs.online == rhs.online && lhs.lastContact == rhs.lastContact && lhs.lastSync == rhs.lastSync
            && lhs.pendingCount == rhs.pendingCount && lhs.needsAttentionCount == rhs.needsAttentionCount
            && lhs.resolving?.done == rhs.resolving?.done && lhs.resolving?.total == rhs.resolving?.total
            && lhs.conflictsCreated == rhs.conflictsCreated && lhs.lastResolution == rhs.lastResolution && lhs.lastError == rhs.lastError && lhs.locked == rhs.locked
            && lhs.unreviewedConflicts == rhs.unreviewedConflicts && lhs.certificateProblem == rhs.certificateProblem && lhs.live == rhs.live
    }
}

/// A backup made by conflict resolution, as listed for the user.
public struct ConflictBackupSummary: Sendable, Equatable {
    public var backupID: String
    public var originalID: String
    public var name: String?
    public var createdAt: WireDate
    /// Whose version the backup holds: the one that lost.
    public var losingSide: ConflictSide
    /// When the user resolved (reviewed) it; `nil` while it is new.
    public var reviewedAt: WireDate?
}

/// The two sides of a conflict, from this device's point of view.
public enum ConflictSide: String, Sendable, Equatable {
    /// The version edited on this device.
    case mine
    /// The version on the server (edited elsewhere).
    case theirs
    /// Not recorded (backups made by older versions).
    case unknown

    init(losingSide: String) {
        switch losingSide {
        case "local": self = .mine
        case "server": self = .theirs
        default: self = .unknown
        }
    }
}

/// What `resolveConflict` should keep.
public enum ConflictChoice: String, Sendable, CaseIterable {
    /// This device's version.
    case mine
    /// The server's (other device's) version.
    case theirs
    /// Both: leave the live item and the backup as they are.
    case both
}

/// What resolving a conflict did.
public struct ConflictResolution: Sendable, Equatable {
    /// Whether the backup's content was copied into the live item.
    public var mergedBackupIntoItem: Bool
    /// Whether the backup was moved to the trash.
    public var trashedBackup: Bool
    public var outcome: SaveOutcome
    /// The live item had been deleted for good and the backup held the version chosen: the backup is the
    /// item again, under this (the original) name.
    public var backupBecameItem: String? = nil
}

/// What discarding a queued change gives up.
public struct DiscardedChange: Sendable, Equatable {
    public var itemID: String
    public var kind: PendingChangeKind
    /// In user words: what will be lost.
    public var lost: String
}

extension VaultEngine {
    /// The current status.
    public func status() async throws -> SyncStatus {
        guard let current = session else {
            return SyncStatus(pendingCount: 0, needsAttentionCount: 0, conflictsCreated: [], locked: true)
        }
        let userID = current.userID
        let (state, rows, unreviewed) = try await read { tx in
            (try tx.syncState(of: userID).current(), try tx.queue(of: userID).all(), try tx.backups(of: userID).unreviewedCount())
        }
        let changes = rows.compactMap { try? $0.open(key: current.keys.userKey) }
        let attention = changes.filter { $0.metadata.state == .needsAttention }.count
        let problem = state?.lastContactFailed == true ? Self.certificateProblem(of: state) : nil
        var status = SyncStatus(
            online: state?.lastContactDate == nil ? nil : !(state?.lastContactFailed ?? false),
            lastContact: state?.lastContactDate.map(WireDate.init(microsecondsSinceEpoch:)),
            lastSync: state?.lastSyncDate.map(WireDate.init(microsecondsSinceEpoch:)),
            pendingCount: changes.count - attention, needsAttentionCount: attention, resolving: statusProgress,
            conflictsCreated: statusBackups, lastError: statusLastError, locked: false,
            unreviewedConflicts: unreviewed)
        status.certificateProblem = problem
        status.live = liveState
        status.lastResolution = statusMessages
        if let problem, status.lastError == nil { status.lastError = problem.description }
        return status
    }

    /// A stream of status updates: one now, then one after every change to it. Ends when the consumer stops.
    public func statusUpdates() -> AsyncStream<SyncStatus> {
        let (stream, continuation) = AsyncStream<SyncStatus>.makeStream(bufferingPolicy: .bufferingNewest(16))
        let id = UUID()
        statusContinuations[id] = continuation
        continuation.onTermination = { [weak self] _ in
            Task { await self?.removeStatusContinuation(id) }
        }
        Task { await self.emitStatus() }
        return stream
    }

    func removeStatusContinuation(_ id: UUID) {
        statusContinuations[id] = nil
    }

    /// Records progress/backups/errors and tells the listeners.
    func publishStatus(progress: (Int, Int)?? = .none, backups: [String]? = nil, messages: [String]? = nil, lastError: String? = nil) {
        if case .some(let value) = progress { statusProgress = value.map { (done: $0.0, total: $0.1) } }
        if let backups { statusBackups = backups }
        if let messages { statusMessages = messages }
        if let lastError { statusLastError = lastError }
        guard !statusContinuations.isEmpty else { return }
        Task { await self.emitStatus() }
    }

    func emitStatus() async {
        guard let status = try? await status() else { return }
        for continuation in statusContinuations.values { continuation.yield(status) }
    }

    /// The per-field comparison (base, mine, theirs) of the merge that made this backup, with secret
    /// values masked unless `reveal`; `nil` for a backup made without a merge (the backup policy, or a
    /// record older than merging).
    public func conflictDifference(backupID: String, reveal: Bool = false) async throws -> ItemMerge.ItemDifference? {
        let current = try requireSession()
        let userID = current.userID
        guard let sealed = try await read({ tx in try tx.backups(of: userID).sealedDifference(of: backupID) }) else { return nil }
        let difference = try Sealed.open(ItemMerge.ItemDifference.self, from: sealed, key: current.keys.userKey)
        return reveal ? difference : difference.masked
    }

    /// The backups conflict resolution made, newest first: this device's, and those another device of the
    /// account made (found in the vault by their name, outside the trash; whose version each holds is not known
    /// here, and the live item is the one item of the original name, if there is exactly one).
    public func conflictBackups() async throws -> [ConflictBackupSummary] {
        let made = try await conflictBackupsMadeHere()
        return (made + (try await conflictBackupsMadeElsewhere(besides: Set(made.map(\.backupID))))).sorted { $0.createdAt > $1.createdAt }
    }

    /// The backups this device's resolution made (its own table), newest first.
    func conflictBackupsMadeHere() async throws -> [ConflictBackupSummary] {
        let userID = try requireSession().userID
        let rows = try await read { tx in try tx.backups(of: userID).newestFirst() }
        var result: [ConflictBackupSummary] = []
        for row in rows {
            let name = try? await item(id: row.backupID).name
            result.append(ConflictBackupSummary(backupID: row.backupID, originalID: row.originalID, name: name,
                                                createdAt: WireDate(microsecondsSinceEpoch: row.createdAt),
                                                losingSide: ConflictSide(losingSide: row.losingSide),
                                                reviewedAt: row.reviewedAt.map(WireDate.init(microsecondsSinceEpoch:))))
        }
        return result
    }

    /// Backups in the vault that this device has no record of: made by another device's resolution. Reads every
    /// item's name (the list's summaries), so it runs only for conflict commands, never for `status`.
    func conflictBackupsMadeElsewhere(besides known: Set<String>) async throws -> [ConflictBackupSummary] {
        let summaries = try await itemSummaries().compactMap { try? $0.result.get() }.filter { !$0.isDeleted }
        let live = Dictionary(grouping: summaries.filter { !BackupName.isBackup($0.name) }, by: \.name)
        var result: [ConflictBackupSummary] = []
        for summary in summaries where BackupName.isBackup(summary.name) {
            guard let id = summary.id, !known.contains(id) else { continue }
            let originals = live[BackupName.originalName(of: summary.name)] ?? []
            let made = (try? await item(id: id).creationDate) ?? nil
            result.append(ConflictBackupSummary(backupID: id, originalID: originals.count == 1 ? originals[0].id ?? "" : "",
                                                name: summary.name, createdAt: made ?? WireDate(microsecondsSinceEpoch: 0),
                                                losingSide: .unknown, reviewedAt: nil))
        }
        return result
    }

    /// Settles a conflict the user has reviewed. `.both` leaves both items as they are; otherwise the
    /// chosen version ends up in the live item (the backup's content is copied in when the backup holds
    /// it) and the backup goes to the trash — recoverable, never deleted for good. Works offline: it
    /// goes through the same offline-aware saves as any edit. Either way the backup counts as reviewed.
    ///
    /// The live item may have been deleted for good since (on another device, or here). The backup then
    /// holds the only version left: chosen, it becomes the item again (``reinstate(backupID:)``); the other
    /// side chosen is gone, and nothing is changed (``VaultError/conflictVersionGone(item:backup:keep:deleteQueued:)``),
    /// since trashing the backup would leave the vault without either version.
    public func resolveConflict(backupID: String, keep choice: ConflictChoice) async throws -> ConflictResolution {
        let current = try requireSession()
        // This device's own backups first: the vault is searched only for one another device made.
        let madeHere = try await conflictBackupsMadeHere()
        let madeElsewhere = madeHere.contains { $0.backupID == backupID }
            ? [] : try await conflictBackupsMadeElsewhere(besides: Set(madeHere.map(\.backupID)))
        guard let summary = (madeHere + madeElsewhere).first(where: { $0.backupID == backupID }) else {
            throw VaultError.itemNotFound(backupID)
        }
        var resolution = ConflictResolution(mergedBackupIntoItem: false, trashedBackup: false, outcome: .synced)
        if choice != .both {
            if summary.losingSide == .unknown {
                throw VaultError.invalidItem("this backup does not record whose version it holds; edit the item by hand or keep both")
            }
            let backupHoldsChoice = (choice == .mine) == (summary.losingSide == .mine)
            let live: CipherView
            do {
                live = try await item(id: summary.originalID)
            } catch VaultError.itemNotFound {
                // Deleted for good since (RELIABILITY bug 74: "No item …" was all the user got).
                guard backupHoldsChoice else {
                    let backupName = summary.name ?? backupID
                    let deleteQueued = try await pendingChange(itemKind: .cipher, itemID: summary.originalID, userID: current.userID)?
                        .metadata.kind == .hardDelete
                    throw VaultError.conflictVersionGone(item: BackupName.originalName(of: backupName), backup: backupName,
                                                         keep: choice, deleteQueued: deleteQueued)
                }
                let (outcome, name) = try await reinstate(backupID: backupID)
                resolution.outcome = outcome
                resolution.backupBecameItem = name
                try await write { [userID = current.userID] tx in try tx.backups(of: userID).forget(backupID) }
                publishStatus()
                logger.info("conflict backup reinstated", metadata: ["item": "\(summary.originalID)", "backup": "\(backupID)"])
                return resolution
            }
            if backupHoldsChoice {
                let backup = try await item(id: backupID)
                let base = try await conflictBase(backupID: backupID)
                let merged = Self.merge(backup: backup, into: live, base: base)
                resolution.outcome = try await updateItem(merged).outcome
                resolution.mergedBackupIntoItem = true
            }
            let backup = try await item(id: backupID)
            if !backup.isDeleted {
                resolution.outcome = Self.later(resolution.outcome, try await softDeleteItem(id: backupID))
                resolution.trashedBackup = true
            }
        }
        let userID = current.userID
        let now = clock.now().microsecondsSinceEpoch
        let made = summary.createdAt.microsecondsSinceEpoch
        try await write { tx in
            // A backup another device made is noted here once reviewed, so that it is no longer new here.
            if !madeElsewhere.isEmpty {
                try tx.backups(of: userID).note(backupID, of: summary.originalID, createdAt: made, losingSide: "", twinCheckPending: false)
            }
            try tx.backups(of: userID).markReviewed(backupID, at: now)
        }
        publishStatus()
        return resolution
    }

    /// The backup becomes the item again, its live item being deleted for good: renamed back to the
    /// original name (an ordinary offline-aware edit, so it works offline too), with every field, its
    /// password history and its attachments. One the resolution filed in the conflict folder goes back to
    /// the folder both versions started in, when that folder is still there (else to no folder). Returns the
    /// save's outcome and the name.
    func reinstate(backupID: String) async throws -> (SaveOutcome, String) {
        var view = try await item(id: backupID)
        view.name = BackupName.originalName(of: view.name)
        if let folderID = view.folderId {
            let folders = try await folders()
            if folders.first(where: { $0.id == folderID })?.name == Self.conflictFolderName {
                let before = try await conflictBase(backupID: backupID)?.folderId
                view.folderId = before.flatMap { id in folders.contains { $0.id == id } ? id : nil }
            }
        }
        return (try await updateItem(view).outcome, view.name)
    }

    /// The version the conflict's two sides started from, when the merge that made the backup kept it.
    func conflictBase(backupID: String) async throws -> CipherView? {
        guard let text = try await conflictDifference(backupID: backupID, reveal: true)?.baseVersion,
              let wire = try? CipherWire(jsonBytes: Array(text.utf8)) else { return nil }
        return try? wire.decrypted(with: try requireSession().keys)
    }

    /// The live item with the backup's content: its id, item key, folder and trash/archive state stay;
    /// both password histories are kept, so no password is lost either way. With the version both sides
    /// started from (`base`), only what the backup's side changed is taken from it: a field the live item got
    /// from the other side without a conflict (merged cleanly) stays, so choosing one side's password does
    /// not drop the other side's new username.
    static func merge(backup: CipherView, into live: CipherView, base: CipherView? = nil) -> CipherView {
        var backup = backup
        backup.name = BackupName.originalName(of: backup.name)
        var merged = base.map { ItemMerge.merge(base: $0, mine: live, theirs: backup, winner: .theirs).merged } ?? backup
        merged.id = live.id
        merged.itemKey = live.itemKey
        merged.organizationId = live.organizationId
        merged.collectionIds = live.collectionIds
        merged.folderId = live.folderId
        merged.deletedDate = live.deletedDate
        merged.archivedDate = live.archivedDate
        merged.creationDate = live.creationDate
        merged.revisionDate = live.revisionDate
        merged.attachments = live.attachments
        var history = live.passwordHistory
        for entry in backup.passwordHistory where !history.contains(where: { $0.password == entry.password && $0.lastUsedDate == entry.lastUsedDate }) {
            history.append(entry)
        }
        merged.passwordHistory = history.sorted { $0.lastUsedDate > $1.lastUsedDate }
        return merged
    }

    /// The outcome of two saves in a row: offline if either went offline.
    static func later(_ first: SaveOutcome, _ second: SaveOutcome) -> SaveOutcome {
        if second.isOffline { return second }
        return first
    }

    /// Puts changes that need attention (or one item's) back in line for the next sync.
    @discardableResult
    public func retryPending(itemID: String? = nil) async throws -> Int {
        let current = try requireSession()
        let userID = current.userID
        let key = current.keys.userKey
        // Read and written in one transaction, so that a save or a resolution step in between keeps
        // what it wrote into a record.
        let (count, itemKnown) = try await write { tx -> (Int, Bool) in
            let queue = tx.queue(of: userID)
            let rows = try queue.all()
            var count = 0
            for row in rows where itemID == nil || row.itemID == itemID {
                guard var change = try? row.open(key: key) else { continue }
                guard change.metadata.state == .needsAttention || change.metadata.nextAttemptDate != nil else { continue }
                change.metadata.state = .pending
                change.metadata.nextAttemptDate = nil
                change.metadata.attempts = 0
                try queue.store(change, key: key)
                count += 1
            }
            return (count, itemID.map { id in rows.contains { $0.itemID == id } } ?? true)
        }
        if count == 0, !itemKnown, let itemID { throw VaultError.itemNotFound(itemID) }
        publishStatus()
        return count
    }

    /// Describes what discarding an item's queued change would lose (for a confirmation prompt).
    public func describeDiscard(itemID: String) async throws -> DiscardedChange {
        let current = try requireSession()
        var found = try await pendingChange(itemKind: .cipher, itemID: itemID, userID: current.userID)
        if found == nil { found = try await pendingChange(itemKind: .folder, itemID: itemID, userID: current.userID) }
        guard let change = found else { throw VaultError.itemNotFound(itemID) }
        let isFolder = change.itemKind == .folder
        let named = isFolder ? ((try? await folders())?.first { $0.id == itemID }?.name) : try? await item(id: itemID).name
        let name = named ?? itemID
        let lost: String
        switch change.metadata.kind {
        case .create: lost = "the \(isFolder ? "folder" : "item") \"\(name)\", which exists only on this device, will be deleted"
        case .update: lost = "the changes made to \"\(name)\" on this device since \(change.metadata.createdDate.iso8601) will be replaced by the server's version"
        case .softDelete: lost = "the move of \"\(name)\" to the trash will be undone (and any edits made here before it)"
        case .hardDelete: lost = "the permanent deletion of \"\(name)\" will be undone; the server's version comes back"
        }
        return DiscardedChange(itemID: itemID, kind: change.metadata.kind, lost: lost)
    }

    /// Gives up an item's queued change: the record goes, with the files of attachments added to it here
    /// (staged, never uploaded); an offline-only item goes with it; otherwise the cached copy goes back to the
    /// version the change started from (the record's `baseVersion`: the server's, as last synced here), and
    /// the next sync brings the server's latest.
    ///
    /// The cached copy must not keep the discarded version until that sync (RELIABILITY bug 82): a later save
    /// starts from the cached copy, so an edit made offline after the discard queued the discarded changes
    /// again and sent them, and `get` showed them meanwhile. A record without a base (written by an older
    /// version, or a create settled while saved meanwhile) keeps the cached copy, as before.
    @discardableResult
    public func discardPending(itemID: String) async throws -> DiscardedChange {
        let description = try await describeDiscard(itemID: itemID)
        let current = try requireSession()
        let (userID, key) = (current.userID, current.keys.userKey)
        let staged = try await write { tx -> [StagedAttachment] in
            let queue = tx.queue(of: userID)
            let itemRecord = try queue.record(kind: .cipher, itemID: itemID).map { try Self.opened($0, key: key) }
            let folderRecord = try queue.record(kind: .folder, itemID: itemID).map { try Self.opened($0, key: key) }
            try queue.removeRecords(ofItem: itemID)
            if description.kind == .create {
                try tx.ciphers(of: userID).remove(id: itemID)
                try tx.folders(of: userID).remove(id: itemID)
            } else {
                if let base = itemRecord?.metadata.baseVersion, let wire = try? CipherWire(jsonBytes: Array(base.utf8)), wire.id == itemID {
                    try tx.ciphers(of: userID).store(wire)
                }
                if let base = folderRecord?.metadata.baseVersion, let wire = try? FolderWire(jsonBytes: Array(base.utf8)), wire.id == itemID {
                    try tx.folders(of: userID).store(wire)
                }
            }
            return itemRecord?.metadata.attachmentAdds ?? []
        }
        removeStaged(staged, userID: userID)
        publishStatus()
        return description
    }
}

/// What `checkServer()` found.
public enum ServerCheck: Sendable, Equatable {
    /// The server answered, after this long.
    case answered(Duration)
    /// It did not (unreachable, refused, a certificate refused): the error, to be described at the edge.
    case failed(VaultError)
}

extension VaultEngine {
    /// Asks the server now whether it answers: the account's revision date when unlocked (the contact is
    /// recorded, so `status()` shows it), else its public configuration (nothing is recorded: the
    /// sync state is the account's, and locked it is not open).
    public func checkServer() async -> ServerCheck {
        let started = ContinuousClock.now
        do {
            if session?.tokens?.accessToken != nil {
                do {
                    _ = try await authorized { api, token in try await api.revisionDate(token: token) }
                    await recordContact(success: true)
                } catch let error as ServerCallError {
                    await recordContact(success: false, certificateProblem: error.certificateProblem)
                    throw error
                }
            } else {
                try requireUsableServer()
                _ = try await api.notificationsAddress()
            }
            return .answered(ContinuousClock.now - started)
        } catch let error as VaultError {
            return .failed(error)
        } catch let error as ServerCallError {
            return .failed(Self.onlineOnly(error))
        } catch {
            return .failed(.serverUnreachable(String(describing: error)))
        }
    }
}
