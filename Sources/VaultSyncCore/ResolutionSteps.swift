import VaultModels

/// Resolution as a plan (issue 22, item 3; docs/ARCHITECTURE.md): what one queued change does on
/// reconnect, decided once, purely, as a list of steps the engine only executes. Progress through the
/// steps is kept in the change's sealed record (``ResolutionProgress``), so a crash or a failed call
/// resumes at the next step instead of deciding again from clues.
///
/// This file is the decision; the engine's executor is the other half (it runs the same decisions
/// through `ConflictMatrix` today, and moves onto these steps next).

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
    /// The record's last save on the server's clock.
    public var localUpdatedOnServerClock: WireDate
    public var merge: MergeFacts
    /// The idempotency key of a create (the device-made id) or of a re-creation.
    public var createKey: String

    public init(itemKind: PendingItemKind, record: PendingChangeMetadata, localPresent: Bool, server: ServerFacts,
                localUpdatedOnServerClock: WireDate, merge: MergeFacts = .notApplicable, createKey: String) {
        self.itemKind = itemKind
        self.record = record
        self.localPresent = localPresent
        self.server = server
        self.localUpdatedOnServerClock = localUpdatedOnServerClock
        self.merge = merge
        self.createKey = createKey
    }
}

/// A version kept in a backup copy: which side, and the date that identifies it (the server's revision,
/// or the local save's date). A version is backed up once, however often its change is planned again.
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

/// How far a change's resolution got, kept in its sealed record across attempts, crashes and re-plans.
public struct ResolutionProgress: Sendable, Equatable, Codable {
    /// The versions already kept in backup copies.
    public var backups: [BackedUpVersion]

    public init(backups: [BackedUpVersion] = []) {
        self.backups = backups
    }

    /// Whether this version of the facts is kept in a backup already.
    public func hasBackup(of version: PlanVersion, facts: ResolutionFacts) -> Bool {
        guard let date = ResolutionPlanner.identity(of: version, facts) else { return false }
        return backups.contains { $0.version == version && ConflictMatrix.isSameRevision($0.date, date) }
    }
}

public enum ResolutionPlanner {
    /// The steps for one queued change. Every path that overwrites a version that holds something the
    /// other does not backs it up first; a create is one create through every attempt (its key). A
    /// version `progress` says is backed up already is not backed up again.
    public static func plan(_ facts: ResolutionFacts, progress: ResolutionProgress = ResolutionProgress()) -> [ResolutionStep] {
        let steps = facts.itemKind == .folder ? folderPlan(facts) : itemPlan(facts)
        return steps.filter { step in
            if case .backUp(let version) = step { return !progress.hasBackup(of: version, facts: facts) }
            return true
        }
    }

    /// The date that identifies a version of the facts: the server's revision, or the local save's date.
    public static func identity(of version: PlanVersion, _ facts: ResolutionFacts) -> WireDate? {
        switch version {
        case .server:
            if case .present(let revision, _) = facts.server { return revision }
            return nil
        case .local: return facts.record.updatedDate
        case .merged: return nil
        }
    }

    static func itemPlan(_ facts: ResolutionFacts) -> [ResolutionStep] {
        if case .present(_, holdsLocal: true) = facts.server, facts.record.kind == .update, facts.record.contentChanged {
            // Our own earlier push: its answer was lost. Settle on it.
            return [.replayState, .settle(.rebaseOnResult)]
        }
        let side: ServerSide
        switch facts.server {
        case .gone: side = .gone
        case .present(let revision, _): side = .present(revisionDate: revision)
        }
        let decision = ConflictMatrix.decide(facts.record, server: side, localUpdatedOnServerClock: facts.localUpdatedOnServerClock)
        let needsLocal: Set<ResolutionPlan> = [.create, .recreateFromLocal, .pushLocal, .backupServerThenPushLocal, .backupLocalThenTakeServer]
        if needsLocal.contains(decision), !facts.localPresent { return [.removeLocally] }
        switch decision {
        case .create, .recreateFromLocal:
            return [.create(idempotencyKey: facts.createKey), .replayState, .swapID, .settle(.rebaseOnResult)]
        case .pushLocal:
            return [.push(.local), .replayState, .settle(.rebaseOnResult)]
        case .backupServerThenPushLocal:
            if serverMoved(facts) { return mergedPlan(facts, localWins: true) ?? [.backUp(.server), .push(.local), .replayState, .settle(.rebaseOnResult)] }
            return [.backUp(.server), .push(.local), .replayState, .settle(.rebaseOnResult)]
        case .backupLocalThenTakeServer:
            return mergedPlan(facts, localWins: false) ?? [.backUp(.local), .replayState, .settle(.keepBaseline)]
        case .takeServerWithLocalState:
            return [.replayState, .settle(.keepBaseline)]
        case .pushSoftDelete:
            return [.trash, .settle(.rebaseOnResult)]
        case .pushHardDelete:
            return [.deleteForGood, .removeLocally]
        case .dropDeleteKeepServer:
            return [.tell(.deleteDropped), .settle(.keepBaseline)]
        case .backupLocalThenDropDelete:
            return facts.localPresent
                ? [.backUp(.local), .tell(.deleteDropped), .settle(.keepBaseline)]
                : [.tell(.deleteDropped), .settle(.keepBaseline)]
        case .removeLocally:
            return [.removeLocally]
        case .hardDeleteLostCreate:
            return [.deleteLostCopy, .removeLocally]
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

    static func serverMoved(_ facts: ResolutionFacts) -> Bool {
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
            return facts.localPresent ? [.create(idempotencyKey: facts.createKey), .swapID, .settle(.rebaseOnResult)] : [.removeLocally]
        case (.update, .present(let revision, _)):
            guard facts.localPresent else { return [.removeLocally] }
            switch facts.merge {
            case .clean:
                return [.settle(.keepBaseline)]
            case .conflicting where revision >= facts.localUpdatedOnServerClock:
                return [.tell(.merged), .settle(.keepBaseline)]
            case .conflicting:
                return [.push(.local), .tell(.merged), .settle(.rebaseOnResult)]
            case .notApplicable:
                return [.push(.local), .settle(.rebaseOnResult)]
            }
        case (.softDelete, _), (.hardDelete, _):
            return [.deleteForGood, .removeLocally]
        }
    }
}
