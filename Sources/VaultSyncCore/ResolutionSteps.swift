import VaultModels

/// Resolution as a plan (issue 22, item 3; docs/ARCHITECTURE.md): what one queued change does on
/// reconnect, decided once, purely, as a list of steps the engine only executes. Progress through the
/// steps is kept in the change's sealed record (``ResolutionProgress``), so a crash or a failed call
/// resumes at the next step instead of deciding again from clues.
///
/// This file is the decision; the engine's executor (`VaultClient/PlanExecution.swift`) is the other
/// half: it gathers the facts, runs the steps in order, and plans again when a step meets new facts
/// (the server answered "out of date", or a create was answered with a copy an earlier attempt made).

/// Which version of the item a step works with.
public enum PlanVersion: String, Sendable, Equatable, Codable {
    /// This device's version (the cached item the queue record belongs to).
    case local
    /// The server's version the plan was made against.
    case server
    /// The three-way merge of the two against the version the change started from.
    case merged
}

/// What settling keeps as the item's baseline if the user saved it again during the resolution (the
/// saved-meanwhile rule, one rule: the newer save is never lost, its record stays).
public enum SettleBaseline: String, Sendable, Equatable, Codable {
    /// The settled version carries the local version: the record is rebased on it, and the newer save
    /// is pushed on top at the next run.
    case rebaseOnResult
    /// The settled version is the server's content (taken, or a merge): the record keeps its old
    /// baseline and meets the result as a conflict (or merge) at the next run.
    case keepBaseline
}

/// What the user is told.
public enum PlanNotice: String, Sendable, Equatable, Codable {
    /// The item was edited elsewhere after the delete was queued: the edit wins, the delete is dropped.
    case deleteDropped
    /// The two versions were merged field by field.
    case merged
    /// The item was deleted for good elsewhere and only its trash/archive/folder/favorite state changed
    /// here: the change goes with the item instead of bringing its content back.
    case stateDropped
    /// A folder renamed here was deleted on another device: it was made again under the new name, without the
    /// items the delete took out of it.
    case folderRecreated
    /// An item edited here had been deleted for good elsewhere: it was made again from this device's version (the
    /// step follows the create, so a create answered with another device's re-creation, which plans the rest
    /// anew, does not say it).
    case itemRecreated
}

/// One step of a plan.
public enum ResolutionStep: Sendable, Equatable {
    /// Writes a backup copy of this version to the server, before anything can overwrite it.
    case backUp(PlanVersion)
    /// Posts the local version as a new item (or folder) with this idempotency key.
    case create(idempotencyKey: String)
    /// Puts this version over the server's with `lastKnownRevisionDate` = the revision the plan was made
    /// against (someone writing in between makes the server answer "out of date": plan again).
    case push(PlanVersion)
    /// Applies this device's trash/archive/folder/favorite intents to the result.
    case replayState
    /// Moves the item to the trash on the server.
    case trash
    /// Deletes the item for good on the server (already gone counts as done).
    case deleteForGood
    /// Finds the copy an unanswered create left on the server (by its key) and deletes it unless it
    /// was edited elsewhere since.
    case deleteLostCopy
    /// The server's id replaces the temporary one everywhere on this device.
    case swapID
    /// The cache takes the result and the record goes (or stays, rebased as said, if saved meanwhile).
    case settle(SettleBaseline)
    /// The item and its record go from this device (nothing left to do on the server).
    case removeLocally
    /// Tells the user.
    case tell(PlanNotice)
    /// Uploads the attachments added here (announced once, the file sent to the id handed out) and
    /// deletes the ones deleted here, on the item as it is on the server now.
    case syncAttachments
}

/// What the planner needs to know about the server's side.
public enum ServerFacts: Sendable, Equatable {
    /// The server has no such item.
    case gone
    /// The server's version, with its revision; `holdsLocal`: it carries this device's version byte for
    /// byte (an earlier push whose answer was lost).
    case present(revision: WireDate, holdsLocal: Bool)
}

/// What the engine found when it compared the versions field by field.
public enum MergeFacts: Sendable, Equatable {
    /// No merge: the backup policy, no base version, or versions that cannot be opened.
    case notApplicable
    /// No field was changed on both sides differently.
    case clean
    /// At least one field was changed on both sides differently.
    case conflicting
}

/// Everything a plan depends on, gathered by the engine before planning.
public struct ResolutionFacts: Sendable, Equatable {
    public var itemKind: PendingItemKind
    public var record: PendingChangeMetadata
    /// The local version exists (a create or an edit has one; a delete for good does not).
    public var localPresent: Bool
    public var server: ServerFacts
    /// The record's last content change on the server's clock (`PendingChangeMetadata.contentEditDate`).
    public var localEditedOnServerClock: WireDate
    /// The server version's content was seen unchanged under this earlier revision during this resolution
    /// (only its trash, archive, folder or favorite state moved the revision since): the date its content
    /// was last changed, as far as this device knows. `nil`: its revision.
    public var serverContentDate: WireDate?
    public var merge: MergeFacts
    /// The idempotency key of a create (the device-made id) or of a re-creation.
    public var createKey: String
    /// The server's content is still the version the change started from, byte for byte: only its trash,
    /// archive, folder or favorite state moved since (known for deletes; a state change is no edit to keep).
    public var serverContentIsBase = false

    public init(itemKind: PendingItemKind, record: PendingChangeMetadata, localPresent: Bool, server: ServerFacts,
                localEditedOnServerClock: WireDate, serverContentDate: WireDate? = nil, merge: MergeFacts = .notApplicable,
                createKey: String) {
        self.itemKind = itemKind
        self.record = record
        self.localPresent = localPresent
        self.server = server
        self.localEditedOnServerClock = localEditedOnServerClock
        self.serverContentDate = serverContentDate
        self.merge = merge
        self.createKey = createKey
    }
}

/// A version kept in a backup copy: which side, and the date that identifies it (the server's revision,
/// or the local content change's date). A version is backed up once, however often its change is planned again.
public struct BackedUpVersion: Sendable, Equatable, Codable {
    public var version: PlanVersion
    public var date: WireDate
    public var backupID: String

    public init(version: PlanVersion, date: WireDate, backupID: String) {
        self.version = version
        self.date = date
        self.backupID = backupID
    }
}

/// A backup being written: its exact body is kept in the record before it is posted, so the next attempt
/// (after a lost answer, a failure or a crash) posts the same backup with the same key, never a second one.
public struct BackupInFlight: Sendable, Equatable, Codable {
    public var version: PlanVersion
    public var date: WireDate
    /// The item it is a backup of (its id on the server).
    public var originalID: String
    /// `nil` only for a backup recorded before keys were kept with it.
    public var idempotencyKey: String?
    /// The backup as posted (wire JSON, every field encrypted).
    public var body: String
    /// The attachments of the version it keeps, copied to the backup once it exists.
    public var attachments: [AttachmentCopy]?

    public init(version: PlanVersion, date: WireDate, originalID: String, idempotencyKey: String?, body: String,
                attachments: [AttachmentCopy]? = nil) {
        self.version = version
        self.date = date
        self.originalID = originalID
        self.idempotencyKey = idempotencyKey
        self.body = body
        self.attachments = attachments
    }
}

/// A merge this device pushed: its exact body and the local version it was merged from (wire JSON, every
/// field encrypted), kept in the record before the push. If the push's answer is lost and another device
/// then backs the merge up and writes over it, the next attempt finds this device's version kept in that
/// backup (the merge holds every field changed here) instead of backing it up a second time; only while
/// the local content is still the one merged (a trash, archive, folder or favorite change since does not
/// count: a backup keeps content).
public struct PushedMerge: Sendable, Equatable, Codable {
    public var body: String
    public var local: String

    public init(body: String, local: String) {
        self.body = body
        self.local = local
    }
}

/// An attachment a backup copy keeps: the file stays the same encrypted bytes (its own attachment key),
/// read from the item it came from; the attachment key and file name are wrapped anew for the backup's
/// item key.
public struct AttachmentCopy: Sendable, Equatable, Codable {
    public var sourceItemID: String
    public var sourceAttachmentID: String
    /// The file name, encrypted with the backup's item key.
    public var fileName: String
    /// The attachment key, wrapped with the backup's item key.
    public var key: String

    public init(sourceItemID: String, sourceAttachmentID: String, fileName: String, key: String) {
        self.sourceItemID = sourceItemID
        self.sourceAttachmentID = sourceAttachmentID
        self.fileName = fileName
        self.key = key
    }
}

/// How far a change's resolution got, kept in its sealed record across attempts, crashes and re-plans.
public struct ResolutionProgress: Sendable, Equatable {
    /// The versions already kept in backup copies.
    public var backups: [BackedUpVersion]
    /// A backup posted without an answer yet: finished before anything else is planned.
    public var inFlight: BackupInFlight?
    /// The merge last pushed, whose answer may have been lost.
    public var pushedMerge: PushedMerge?

    public init(backups: [BackedUpVersion] = [], inFlight: BackupInFlight? = nil, pushedMerge: PushedMerge? = nil) {
        self.backups = backups
        self.inFlight = inFlight
        self.pushedMerge = pushedMerge
    }


    /// Whether this version of the facts is kept in a backup already.
    public func hasBackup(of version: PlanVersion, facts: ResolutionFacts) -> Bool {
        guard let date = ResolutionPlanner.identity(of: version, facts) else { return false }
        return backups.contains { $0.version == version && ConflictMatrix.isSameRevision($0.date, date) }
    }

    /// The backup in flight is on the server now (or was found there).
    public mutating func finish(backupID: String) {
        guard let done = inFlight else { return }
        backups.append(BackedUpVersion(version: done.version, date: done.date, backupID: backupID))
        inFlight = nil
    }
}

/// The version a resolution settled on, as the saved-meanwhile rule needs it.
public struct SettledVersion: Sendable {
    public var revision: WireDate?
    public var creationDate: WireDate?
    /// The settled version as wire JSON (the merge base of a rebased record).
    public var body: String
    public var state: ItemState?
    /// Made by this resolution: the temporary id gave way to the server's.
    public var created: Bool
    /// The settled version is this device's merge push, whose newest edit is from this date.
    public var mergedContentDate: WireDate?

    public init(revision: WireDate?, creationDate: WireDate?, body: String, state: ItemState?, created: Bool,
                mergedContentDate: WireDate? = nil) {
        self.revision = revision
        self.creationDate = creationDate
        self.body = body
        self.state = state
        self.created = created
        self.mergedContentDate = mergedContentDate
    }
}

extension PendingChangeMetadata {
    /// The saved-meanwhile rule, the one place it is written (docs/ARCHITECTURE.md, "Settling"): the user
    /// saved the item again on this device while its record was being resolved. That newer save is
    /// never lost: its record stays, and is made to meet the settled version correctly at the next run.
    /// - `rebaseOnResult` (the settled version carries the local version the save was made on): the
    ///   record's baseline becomes the settled version, so the newer save is pushed on top (no conflict,
    ///   no backup of our own push).
    /// - `keepBaseline` (the server's content, or a merge): the baseline stays, so the next run meets the
    ///   settled version as a conflict (or a merge) again; a merge push notes that its revision is only as
    ///   new as the edits merged into it. An item created by this resolution keeps the version first
    ///   created as its baseline, so a copy adopted with later edits elsewhere meets them as a conflict.
    /// A create becomes an update of the created item. Failures before are forgotten: this is a fresh intent.
    public mutating func keep(afterSettling settled: SettledVersion, baseline: SettleBaseline) {
        if settled.created, kind == .create {
            kind = .update
            contentChanged = true
        }
        switch baseline {
        case .rebaseOnResult:
            originalRevisionDate = settled.revision
            baseVersion = settled.body
            originalState = settled.state
        case .keepBaseline where settled.created:
            originalRevisionDate = settled.creationDate ?? settled.revision
            baseVersion = nil
            originalState = settled.state
        case .keepBaseline:
            break
        }
        if let date = settled.mergedContentDate {
            mergedPushRevision = settled.revision
            mergedContentDate = date
        }
        progress.inFlight = nil
        progress.pushedMerge = nil
        attempts = 0
        lastError = nil
        nextAttemptDate = nil
        state = .pending
    }
}

public enum ResolutionPlanner {
    /// The steps for one queued change. Every path that overwrites a version that holds something the
    /// other does not backs it up first; a create is one create through every attempt (its key). A
    /// version `progress` says is backed up already is not backed up again.
    public static func plan(_ facts: ResolutionFacts, progress: ResolutionProgress = ResolutionProgress()) -> [ResolutionStep] {
        let steps = facts.itemKind == .folder ? folderPlan(facts) : withAttachments(itemPlan(facts), facts)
        return steps.filter { step in
            if case .backUp(let version) = step { return !progress.hasBackup(of: version, facts: facts) }
            return true
        }
    }

    /// A create answered with a copy an earlier attempt made (its key, or its wrapped item key in the
    /// snapshot) that does not carry the local version: the copy is the item now, and the local version
    /// meets it as an update would, then settles under its id. Untouched since it was made, it holds an
    /// older version of this device's own item: the local version goes on top. Edited since (another
    /// device pulled it), or a re-creation (never overwritten unseen), it is a conflict like any other:
    /// the newer one wins, the other is backed up first (folders: the folder policy, with the merge the
    /// engine reports). A copy with a queue record of its own here (pulled and changed) stays the live
    /// item, and the local version becomes its backup.
    public static func planAfterAdoption(_ facts: ResolutionFacts, untouched: Bool, adoptedHasRecord: Bool,
                                         progress: ResolutionProgress = ResolutionProgress()) -> [ResolutionStep] {
        guard case .present(let revision, _) = facts.server else { return plan(facts, progress: progress) }
        var adopted = facts
        adopted.record.kind = .update
        adopted.record.contentChanged = true
        adopted.record.passwordChangeCount = 0
        adopted.record.originalRevisionDate = untouched ? revision : nil
        adopted.record.mergedPushRevision = nil
        adopted.server = .present(revision: revision, holdsLocal: false)
        if facts.itemKind == .cipher { adopted.merge = .notApplicable }
        if adoptedHasRecord {
            let attachments: [ResolutionStep] = facts.record.hasAttachmentWork ? [.syncAttachments] : []
            return (progress.hasBackup(of: .local, facts: adopted) ? [] : [.backUp(.local)]) + attachments + [.removeLocally]
        }
        return plan(adopted, progress: progress).flatMap { step -> [ResolutionStep] in
            if case .settle = step { return [.swapID, step] }
            return [step]
        }
    }

    /// Which side wins a field both changed, when the plan merges: the local version when it is newer.
    /// `nil`: the facts do not call for a merge (no conflict on the content, or the server did not move).
    public static func mergeWinner(_ facts: ResolutionFacts) -> ItemMerge.Side? {
        guard facts.itemKind == .cipher, facts.record.kind == .update, facts.record.contentChanged, facts.localPresent,
              case .present(let revision, false) = facts.server, serverMoved(facts) else { return nil }
        return localIsNewer(facts, than: revision) ? .mine : .theirs
    }

    /// "Newer" on the server's clock, comparing content changes on both sides: the server's version is as
    /// new as its content (``ResolutionFacts/serverContentDate``), and this device's own merge push as the
    /// edits it merged, not as the push.
    static func localIsNewer(_ facts: ResolutionFacts, than revision: WireDate) -> Bool {
        let record = facts.record
        let serverEdited = record.mergedPushRevision.flatMap { ConflictMatrix.isSameRevision($0, revision) ? record.mergedContentDate : nil }
            ?? facts.serverContentDate ?? revision
        return facts.localEditedOnServerClock > serverEdited
    }

    /// The date that identifies a version of the facts: the server's content date (its revision unless
    /// ``ResolutionFacts/serverContentDate`` says the content is older), or the date of the local content
    /// change (a favorite, folder or archive change since is not a new version to back up: a backup keeps
    /// content).
    public static func identity(of version: PlanVersion, _ facts: ResolutionFacts) -> WireDate? {
        switch version {
        case .server:
            if case .present(let revision, _) = facts.server { return facts.serverContentDate ?? revision }
            return nil
        case .local: return facts.record.contentEditDate
        case .merged: return nil
        }
    }

    /// The conflict matrix (seed 000 §6, with 001/002's decisions and this project's refinements), as
    /// steps. Every path keeps both versions when they conflict; none loses data.
    static func itemPlan(_ facts: ResolutionFacts) -> [ResolutionStep] {
        let record = facts.record
        let create: [ResolutionStep] = [.create(idempotencyKey: facts.createKey), .replayState, .swapID, .settle(.rebaseOnResult)]
        let recreate: [ResolutionStep] = [.create(idempotencyKey: facts.createKey), .replayState, .swapID, .tell(.itemRecreated), .settle(.rebaseOnResult)]
        let push: [ResolutionStep] = [.push(.local), .replayState, .settle(.rebaseOnResult)]
        guard case .present(let revision, let holdsLocal) = facts.server else {
            switch record.kind {
            case .update where !record.contentChanged && !record.hasAttachmentWork:
                // Deleted for good elsewhere, and only its state changed here: re-creating it would bring back
                // the content another device's user removed, for a favorite or a folder. Content edits are
                // re-created below (an edit is never lost); state changes go with the item, as a trash does.
                return facts.localPresent ? [.tell(.stateDropped), .removeLocally] : [.removeLocally]
            case .create:
                return facts.localPresent ? create : [.removeLocally]
            case .update:
                // Deleted for good elsewhere (or lost by the server): made again from the local version, and said.
                return facts.localPresent ? recreate : [.removeLocally]
            case .softDelete where record.contentChanged && facts.localPresent:
                // Moved to the trash and edited here: the edit is kept as any edit is, re-created in the trash.
                return recreate
            case .hardDelete where record.createSent == true && record.originalRevisionDate == nil:
                // Deleted for good before any answer to its create: the copy that create may have left goes too.
                return [.deleteLostCopy, .removeLocally]
            case .softDelete, .hardDelete:
                return [.removeLocally]
            }
        }
        let unchanged = record.originalRevisionDate.map { ConflictMatrix.isSameRevision($0, revision) } ?? false
        switch record.kind {
        case .create:
            return facts.localPresent ? create : [.removeLocally]
        case .update:
            // Our own earlier push, its answer lost: settle on it. A push moves the revision; a server that
            // shows this device's version under the revision it started from did not take a push (a hostile
            // or confused answer): the push is still owed.
            if holdsLocal && record.contentChanged && !unchanged { return [.replayState, .settle(.rebaseOnResult)] }
            if !unchanged && !record.contentChanged { return [.replayState, .settle(.keepBaseline)] }
            guard facts.localPresent else { return [.removeLocally] }
            if unchanged { return keepsPasswordHistory(facts) ? [.backUp(.server)] + push : push }
            // Both changed it: the newer wins and the other is backed up first, or they merge.
            if localIsNewer(facts, than: revision) {
                return mergedPlan(facts, localWins: true) ?? [.backUp(.server)] + push
            }
            return mergedPlan(facts, localWins: false) ?? [.backUp(.local), .replayState, .settle(.keepBaseline)]
        case .softDelete, .hardDelete:
            // A favorite, folder, archive or trash move made elsewhere is no edit: the delete goes ahead.
            guard unchanged || facts.serverContentIsBase else {
                // Edited elsewhere after the delete was queued: the edit wins. Edits made here before the
                // trash move are not dropped with the delete: they are backed up.
                let backUp = record.kind == .softDelete && record.contentChanged && facts.localPresent
                return (backUp ? [.backUp(.local)] : []) + [.tell(.deleteDropped), .settle(.keepBaseline)]
            }
            if record.kind == .hardDelete { return [.deleteForGood, .removeLocally] }
            // Edits made before the trash move are pushed with it, so the trash holds them.
            guard record.contentChanged else { return [.trash, .settle(.rebaseOnResult)] }
            return facts.localPresent ? push : [.removeLocally]
        }
    }

    /// The soft conflict: the server did not move, but the password was changed here so often offline that
    /// the server's version (whose password history is the only copy of older passwords) is backed up before
    /// the push. No conflict: the user is told why the copy was made.
    public static func keepsPasswordHistory(_ facts: ResolutionFacts) -> Bool {
        let record = facts.record
        guard facts.itemKind == .cipher, record.kind == .update, record.contentChanged, facts.localPresent,
              case .present(let revision, _) = facts.server,
              record.originalRevisionDate.map({ ConflictMatrix.isSameRevision($0, revision) }) == true else { return false }
        return record.passwordChangeCount >= ConflictMatrix.softConflictPasswordChanges
    }

    /// Attachment work recorded here goes to the item wherever it lives on when the plan settles it (the
    /// winner, a re-created item); a plan that removes the item drops it (the engine removes the staged files).
    static func withAttachments(_ steps: [ResolutionStep], _ facts: ResolutionFacts) -> [ResolutionStep] {
        guard facts.record.hasAttachmentWork else { return steps }
        return steps.flatMap { step -> [ResolutionStep] in
            if case .settle = step { return [.syncAttachments, step] }
            return [step]
        }
    }

    /// Both sides changed the content: with a merge, one-sided fields are taken and only a field both
    /// changed needs the loser's backup; the merged version is pushed and settled as the server's content.
    static func mergedPlan(_ facts: ResolutionFacts, localWins: Bool) -> [ResolutionStep]? {
        switch facts.merge {
        case .notApplicable: return nil
        case .clean: return [.push(.merged), .replayState, .tell(.merged), .settle(.keepBaseline)]
        case .conflicting:
            return [.backUp(localWins ? .server : .local), .push(.merged), .replayState, .tell(.merged), .settle(.keepBaseline)]
        }
    }

    /// Whether the server's version moved since the version the change started from (no such version: yes).
    public static func serverMoved(_ facts: ResolutionFacts) -> Bool {
        guard case .present(let revision, _) = facts.server, let original = facts.record.originalRevisionDate else { return true }
        return !ConflictMatrix.isSameRevision(original, revision)
    }

    /// Folders have one field, their name: created, renamed, or deleted. For a rename the engine reports
    /// `.clean` when the server's name is the local one already, `.conflicting` when the server's copy
    /// was renamed differently since the rename here started (the newer rename wins, merge policy), and
    /// `.notApplicable` otherwise (the local rename is pushed).
    static func folderPlan(_ facts: ResolutionFacts) -> [ResolutionStep] {
        switch (facts.record.kind, facts.server) {
        case (.create, _):
            return facts.localPresent ? [.create(idempotencyKey: facts.createKey), .swapID, .settle(.rebaseOnResult)] : [.removeLocally]
        case (.update, .gone):
            return facts.localPresent ? [.create(idempotencyKey: facts.createKey), .swapID, .tell(.folderRecreated), .settle(.rebaseOnResult)] : [.removeLocally]
        case (.update, .present(let revision, _)):
            guard facts.localPresent else { return [.removeLocally] }
            switch facts.merge {
            case .clean:
                return [.settle(.keepBaseline)]
            case .conflicting where revision >= facts.localEditedOnServerClock:
                return [.tell(.merged), .settle(.keepBaseline)]
            case .conflicting:
                return [.push(.local), .tell(.merged), .settle(.rebaseOnResult)]
            case .notApplicable:
                return [.push(.local), .settle(.rebaseOnResult)]
            }
        case (.softDelete, .present(let revision, _)), (.hardDelete, .present(let revision, _)):
            // Renamed elsewhere after the delete was queued (a folder's one field): the rename wins and the
            // delete is dropped, as an edit wins over a delete for items.
            if let original = facts.record.originalRevisionDate, !ConflictMatrix.isSameRevision(original, revision) {
                return [.tell(.deleteDropped), .settle(.keepBaseline)]
            }
            return [.deleteForGood, .removeLocally]
        case (.softDelete, .gone), (.hardDelete, .gone):
            return [.deleteForGood, .removeLocally]
        }
    }
}
