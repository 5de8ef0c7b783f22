import Testing
import VaultModels
@testable import VaultSyncCore

@Suite("Resolution as a plan: the steps of each queued change, decided once")
struct ResolutionPlannerTests {
    static let original = WireDate(microsecondsSinceEpoch: 1_700_000_000_000_000)
    static let later = original.adding(microseconds: 60_000_000)

    static func record(_ kind: PendingChangeKind, content: Bool = true, passwordChanges: Int = 0,
                       updated: WireDate = original) -> PendingChangeMetadata {
        PendingChangeMetadata(kind: kind, originalRevisionDate: kind == .create ? nil : original, passwordChangeCount: passwordChanges,
                              contentChanged: content, createdDate: original, updatedDate: updated)
    }

    static func facts(_ record: PendingChangeMetadata, _ server: ServerFacts, local: Bool = true, localTime: WireDate = original,
                      merge: MergeFacts = .notApplicable, kind: PendingItemKind = .cipher) -> ResolutionFacts {
        ResolutionFacts(itemKind: kind, record: record, localPresent: local, server: server, localEditedOnServerClock: localTime,
                        merge: merge, createKey: "temp-1")
    }

    static let unchanged = ServerFacts.present(revision: original, holdsLocal: false)
    static let moved = ServerFacts.present(revision: later, holdsLocal: false)
    static let newer = later.adding(microseconds: 1_000_000)

    @Test("every row of the matrix, as steps", arguments: [
        // create / re-create: one create through every attempt, then the id swap
        (facts(record(.create), .gone), [ResolutionStep.create(idempotencyKey: "temp-1"), .replayState, .swapID, .settle(.rebaseOnResult)]),
        (facts(record(.create), .gone, local: false), [.removeLocally]),
        (facts(record(.update), .gone), [.create(idempotencyKey: "temp-1"), .replayState, .swapID, .tell(.itemRecreated), .settle(.rebaseOnResult)]),
        // deleted for good elsewhere, only its state changed here: the change goes with it (no re-creation)
        (facts(record(.update, content: false), .gone), [.tell(.stateDropped), .removeLocally]),
        (facts(record(.update, content: false), .gone, local: false), [.removeLocally]),
        // update, server unchanged: a push; four password changes back the server's version up first
        (facts(record(.update), unchanged), [.push(.local), .replayState, .settle(.rebaseOnResult)]),
        (facts(record(.update, passwordChanges: 4), unchanged), [.backUp(.server), .push(.local), .replayState, .settle(.rebaseOnResult)]),
        (facts(record(.update, passwordChanges: 4), unchanged, merge: .clean),
         [.backUp(.server), .push(.local), .replayState, .settle(.rebaseOnResult)]),
        // our own push, its answer lost
        (facts(record(.update), .present(revision: later, holdsLocal: true)), [.replayState, .settle(.rebaseOnResult)]),
        // …never under the revision the change started from (no push happened: a server echoing this device's version)
        (facts(record(.update), .present(revision: original, holdsLocal: true)), [.push(.local), .replayState, .settle(.rebaseOnResult)]),
        // update, server changed: newer wins, the loser backed up first
        (facts(record(.update), moved, localTime: newer), [.backUp(.server), .push(.local), .replayState, .settle(.rebaseOnResult)]),
        (facts(record(.update), moved, localTime: original), [.backUp(.local), .replayState, .settle(.keepBaseline)]),
        // …or merged: no backup when clean, the loser's backup when a field was changed on both sides
        (facts(record(.update), moved, localTime: newer, merge: .clean),
         [.push(.merged), .replayState, .tell(.merged), .settle(.keepBaseline)]),
        (facts(record(.update), moved, localTime: original, merge: .clean),
         [.push(.merged), .replayState, .tell(.merged), .settle(.keepBaseline)]),
        (facts(record(.update), moved, localTime: newer, merge: .conflicting),
         [.backUp(.server), .push(.merged), .replayState, .tell(.merged), .settle(.keepBaseline)]),
        (facts(record(.update), moved, localTime: original, merge: .conflicting),
         [.backUp(.local), .push(.merged), .replayState, .tell(.merged), .settle(.keepBaseline)]),
        // only trash/archive/folder/favorite changed here
        (facts(record(.update, content: false), moved), [.replayState, .settle(.keepBaseline)]),
        // deletes
        (facts(record(.softDelete, content: false), unchanged), [.trash, .settle(.rebaseOnResult)]),
        (facts(record(.softDelete, content: true), unchanged), [.push(.local), .replayState, .settle(.rebaseOnResult)]),
        (facts(record(.hardDelete), unchanged, local: false), [.deleteForGood, .removeLocally]),
        (facts(record(.hardDelete), moved, local: false), [.tell(.deleteDropped), .settle(.keepBaseline)]),
        (facts(record(.softDelete, content: false), moved), [.tell(.deleteDropped), .settle(.keepBaseline)]),
        (facts(record(.softDelete, content: true), moved), [.backUp(.local), .tell(.deleteDropped), .settle(.keepBaseline)]),
        (facts(record(.softDelete, content: false), .gone), [.removeLocally]),
        // trashed and edited here, deleted for good elsewhere: the edit comes back, in the trash (seed 936547)
        (facts(record(.softDelete, content: true), .gone), [.create(idempotencyKey: "temp-1"), .replayState, .swapID, .tell(.itemRecreated), .settle(.rebaseOnResult)]),
        (facts(record(.hardDelete), .gone, local: false), [.removeLocally]),
    ] as [(ResolutionFacts, [ResolutionStep])])
    func items(facts: ResolutionFacts, expected: [ResolutionStep]) {
        #expect(ResolutionPlanner.plan(facts) == expected)
    }

    @Test("a delete meets a version another device only favorited, archived, moved or trashed: no edit to keep, the delete goes ahead")
    func deleteAfterStateOnlyChange() {
        for (kind, content, expected) in [(PendingChangeKind.hardDelete, true, [ResolutionStep.deleteForGood, .removeLocally]),
                                          (.softDelete, false, [.trash, .settle(.rebaseOnResult)]),
                                          (.softDelete, true, [.push(.local), .replayState, .settle(.rebaseOnResult)])] {
            var stateOnly = Self.facts(Self.record(kind, content: content), Self.moved, local: kind != .hardDelete)
            stateOnly.serverContentIsBase = true
            #expect(ResolutionPlanner.plan(stateOnly) == expected, "\(kind)")
            stateOnly.serverContentIsBase = false
            #expect(ResolutionPlanner.plan(stateOnly).contains(.tell(.deleteDropped)), "an edit elsewhere still wins: \(kind)")
        }
    }

    @Test("an item deleted for good elsewhere: a state change here goes with it; an attachment added here brings it back")
    func goneWithStateOnly() {
        var record = Self.record(.update, content: false)
        #expect(ResolutionPlanner.plan(Self.facts(record, .gone)) == [.tell(.stateDropped), .removeLocally])
        record.attachmentAdds = [StagedAttachment(id: "staged-1", fileName: "2.name", key: "2.key", size: 10)]
        #expect(ResolutionPlanner.plan(Self.facts(record, .gone)) == [.create(idempotencyKey: "temp-1"), .replayState, .swapID, .tell(.itemRecreated), .syncAttachments,
                                                                      .settle(.rebaseOnResult)])
    }

    @Test("an item created here and deleted for good before any answer: find the copy the create may have left, then go")
    func lostCreateDeleted() {
        var record = PendingChangeMetadata(kind: .hardDelete, originalRevisionDate: nil, createdDate: Self.original, updatedDate: Self.original)
        record.createSent = true
        #expect(ResolutionPlanner.plan(Self.facts(record, .gone, local: false)) == [.deleteLostCopy, .removeLocally])
        record.createSent = nil
        #expect(ResolutionPlanner.plan(Self.facts(record, .gone, local: false)) == [.removeLocally])
    }

    @Test("a step that needs the local version is never planned without it: the record just goes")
    func noLocalVersion() {
        for server in [Self.unchanged, Self.moved] {
            #expect(ResolutionPlanner.plan(Self.facts(Self.record(.update), server, local: false, localTime: Self.newer)) == [.removeLocally])
        }
    }

    @Test("a version backed up before a crash or a failed push is not backed up again when the change is planned again")
    func backupsSurviveReplanning() {
        let localWins = Self.facts(Self.record(.update, updated: Self.newer), Self.moved, localTime: Self.newer)
        var progress = ResolutionProgress(backups: [BackedUpVersion(version: .server, date: Self.later, backupID: "b1")])
        #expect(ResolutionPlanner.plan(localWins, progress: progress) == [.push(.local), .replayState, .settle(.rebaseOnResult)])
        // Someone wrote in between ("out of date"): the server's newer version is a different version.
        let movedAgain = ServerFacts.present(revision: Self.newer.adding(microseconds: 5_000_000), holdsLocal: false)
        var again = localWins
        again.server = movedAgain
        again.localEditedOnServerClock = Self.newer.adding(microseconds: 9_000_000)
        #expect(ResolutionPlanner.plan(again, progress: progress).first == .backUp(.server))
        // The local version kept already: a later conflict on the same save does not copy it twice.
        progress.backups = [BackedUpVersion(version: .local, date: Self.original, backupID: "b2")]
        let serverWins = Self.facts(Self.record(.update), Self.moved, localTime: Self.original, merge: .conflicting)
        #expect(ResolutionPlanner.plan(serverWins, progress: progress) == [.push(.merged), .replayState, .tell(.merged), .settle(.keepBaseline)])
        // A new save here is a new version.
        let resaved = Self.facts(Self.record(.update, updated: Self.original.adding(microseconds: 5_000_000)), Self.moved, localTime: Self.original)
        #expect(ResolutionPlanner.plan(resaved, progress: progress).first == .backUp(.local))
    }

    @Test("the server's content seen unchanged under an earlier revision: that date is what \"newer\" compares and what identifies its backup")
    func serverContentDate() {
        // Planned against `later`; the re-read shows the same content under a revision after the local edit (an archive
        // made elsewhere).
        let archived = ServerFacts.present(revision: Self.newer.adding(microseconds: 5_000_000), holdsLocal: false)
        var facts = Self.facts(Self.record(.update, updated: Self.newer), archived, localTime: Self.newer)
        #expect(ResolutionPlanner.plan(facts) == [.backUp(.local), .replayState, .settle(.keepBaseline)], "by the revision alone, the server wins")
        facts.serverContentDate = Self.later
        #expect(ResolutionPlanner.plan(facts) == [.backUp(.server), .push(.local), .replayState, .settle(.rebaseOnResult)])
        #expect(ResolutionPlanner.mergeWinner(facts) == .mine)
        let keptAtFirstRead = ResolutionProgress(backups: [BackedUpVersion(version: .server, date: Self.later, backupID: "b1")])
        #expect(ResolutionPlanner.plan(facts, progress: keptAtFirstRead) == [.push(.local), .replayState, .settle(.rebaseOnResult)],
                "the version backed up at the first read is the same version")
    }

    @Test("folders: created once by key, renamed (the newer rename wins when both renamed), deleted", arguments: [
        (facts(record(.create), .gone, kind: .folder), [ResolutionStep.create(idempotencyKey: "temp-1"), .swapID, .settle(.rebaseOnResult)]),
        // renamed here, deleted elsewhere: made again under the new name, and the user is told
        (facts(record(.update), .gone, kind: .folder), [.create(idempotencyKey: "temp-1"), .swapID, .tell(.folderRecreated), .settle(.rebaseOnResult)]),
        (facts(record(.update), moved, kind: .folder), [.push(.local), .settle(.rebaseOnResult)]),
        (facts(record(.update), moved, merge: .clean, kind: .folder), [.settle(.keepBaseline)]),
        (facts(record(.update), moved, localTime: newer, merge: .conflicting, kind: .folder),
         [.push(.local), .tell(.merged), .settle(.rebaseOnResult)]),
        (facts(record(.update), moved, localTime: original, merge: .conflicting, kind: .folder), [.tell(.merged), .settle(.keepBaseline)]),
        (facts(record(.hardDelete), unchanged, local: false, kind: .folder), [.deleteForGood, .removeLocally]),
        // renamed elsewhere after the delete was queued: the rename wins, the user is told
        (facts(record(.hardDelete), moved, local: false, kind: .folder), [.tell(.deleteDropped), .settle(.keepBaseline)]),
        (facts(record(.hardDelete), .gone, local: false, kind: .folder), [.deleteForGood, .removeLocally]),
        (facts(record(.create), .gone, local: false, kind: .folder), [.removeLocally]),
    ] as [(ResolutionFacts, [ResolutionStep])])
    func folders(facts: ResolutionFacts, expected: [ResolutionStep]) {
        #expect(ResolutionPlanner.plan(facts) == expected)
    }

    @Test("a create answered with an earlier attempt's copy: untouched, the local version goes on top; edited, a conflict; under the copy's id")
    func adoption() {
        let copy = ServerFacts.present(revision: Self.later, holdsLocal: false)
        let created = Self.facts(Self.record(.create), copy, localTime: Self.newer)
        #expect(ResolutionPlanner.planAfterAdoption(created, untouched: true, adoptedHasRecord: false)
                == [.push(.local), .replayState, .swapID, .settle(.rebaseOnResult)])
        #expect(ResolutionPlanner.planAfterAdoption(created, untouched: false, adoptedHasRecord: false)
                == [.backUp(.server), .push(.local), .replayState, .swapID, .settle(.rebaseOnResult)])
        let older = Self.facts(Self.record(.create), copy, localTime: Self.original)
        #expect(ResolutionPlanner.planAfterAdoption(older, untouched: false, adoptedHasRecord: false)
                == [.backUp(.local), .replayState, .swapID, .settle(.keepBaseline)])
        // The copy was pulled and changed here (a record of its own): it stays; this version becomes its backup, once.
        #expect(ResolutionPlanner.planAfterAdoption(created, untouched: false, adoptedHasRecord: true) == [.backUp(.local), .removeLocally])
        let kept = ResolutionProgress(backups: [BackedUpVersion(version: .local, date: Self.original, backupID: "b")])
        #expect(ResolutionPlanner.planAfterAdoption(created, untouched: false, adoptedHasRecord: true, progress: kept) == [.removeLocally])
        // A folder's copy renamed elsewhere meets the folder policy (the engine's merge facts).
        var folder = Self.facts(Self.record(.create), copy, localTime: Self.original, merge: .conflicting, kind: .folder)
        #expect(ResolutionPlanner.planAfterAdoption(folder, untouched: false, adoptedHasRecord: false) == [.tell(.merged), .swapID, .settle(.keepBaseline)])
        folder.merge = .notApplicable
        #expect(ResolutionPlanner.planAfterAdoption(folder, untouched: true, adoptedHasRecord: false) == [.push(.local), .swapID, .settle(.rebaseOnResult)])
    }

    @Test("the saved-meanwhile rule: rebased on a result that carries the local version, else the baseline stays")
    func savedMeanwhile() {
        let settled = SettledVersion(revision: Self.newer, creationDate: Self.later, body: "{}", state: nil, created: false)
        var record = Self.record(.update)
        record.attempts = 3
        record.progress.inFlight = BackupInFlight(version: .server, date: Self.later, originalID: "i", idempotencyKey: "k", body: "{}")
        var rebased = record
        rebased.keep(afterSettling: settled, baseline: .rebaseOnResult)
        #expect(rebased.originalRevisionDate == Self.newer && rebased.baseVersion == "{}" && rebased.attempts == 0 && rebased.progress.inFlight == nil)
        var kept = record
        kept.keep(afterSettling: settled, baseline: .keepBaseline)
        #expect(kept.originalRevisionDate == Self.original && kept.baseVersion == nil && kept.kind == .update)
        // Created by this resolution: a create becomes an update of the created item; a copy adopted with
        // later edits keeps the version first created as its baseline (those edits meet it as a conflict).
        var create = Self.record(.create)
        create.keep(afterSettling: SettledVersion(revision: Self.newer, creationDate: Self.later, body: "{}", state: nil, created: true),
                    baseline: .keepBaseline)
        #expect(create.kind == .update && create.contentChanged && create.originalRevisionDate == Self.later)
        // A merge push notes how new its content is.
        var merged = record
        merged.keep(afterSettling: SettledVersion(revision: Self.newer, creationDate: nil, body: "{}", state: nil, created: false,
                                                  mergedContentDate: Self.later), baseline: .keepBaseline)
        #expect(merged.mergedPushRevision == Self.newer && merged.mergedContentDate == Self.later)
    }

    @Test("the soft conflict is told apart: only an unmoved server version before a push of four or more password changes")
    func passwordHistoryBackup() {
        #expect(ResolutionPlanner.keepsPasswordHistory(Self.facts(Self.record(.update, passwordChanges: 4), Self.unchanged)))
        #expect(!ResolutionPlanner.keepsPasswordHistory(Self.facts(Self.record(.update, passwordChanges: 3), Self.unchanged)))
        // A moved server version backed up is a conflict, however often the password changed here.
        #expect(!ResolutionPlanner.keepsPasswordHistory(Self.facts(Self.record(.update, passwordChanges: 4), Self.moved, localTime: Self.newer)))
        #expect(!ResolutionPlanner.keepsPasswordHistory(Self.facts(Self.record(.update, passwordChanges: 4), .gone)))
        #expect(!ResolutionPlanner.keepsPasswordHistory(Self.facts(Self.record(.softDelete, passwordChanges: 4), Self.unchanged)))
    }

    @Test("whatever the facts, a backup comes before the push or take it protects, the plan ends by settling or removing, and an edit made here is never just removed")
    func invariants() {
        let kinds: [PendingChangeKind] = [.create, .update, .softDelete, .hardDelete]
        let servers: [ServerFacts] = [.gone, Self.unchanged, Self.moved, .present(revision: Self.later, holdsLocal: true)]
        let merges: [MergeFacts] = [.notApplicable, .clean, .conflicting]
        var plans = 0
        for itemKind in [PendingItemKind.cipher, .folder] {
            for kind in kinds {
                for server in servers {
                    for merge in merges {
                        for local in [true, false] {
                            for content in [true, false] {
                                for time in [Self.original, Self.newer] {
                                    let facts = Self.facts(Self.record(kind, content: content, passwordChanges: content ? 5 : 0), server,
                                                           local: local, localTime: time, merge: merge, kind: itemKind)
                                    let steps = ResolutionPlanner.plan(facts)
                                    plans += 1
                                    if ResolutionPlanner.keepsPasswordHistory(facts) {
                                        #expect(steps.first == .backUp(.server), "told as a soft conflict: \(facts) → \(steps)")
                                    }
                                    #expect(!steps.isEmpty)
                                    let last = steps.last
                                    #expect(last == .removeLocally || last == .settle(.rebaseOnResult) || last == .settle(.keepBaseline),
                                            "\(facts) → \(steps)")
                                    if let backup = steps.firstIndex(where: { if case .backUp = $0 { return true }; return false }) {
                                        let writes = steps.indices.filter { index in
                                            switch steps[index] {
                                            case .push, .create, .trash, .deleteForGood: return true
                                            default: return false
                                            }
                                        }
                                        #expect(writes.allSatisfy { $0 > backup }, "the backup first: \(steps)")
                                    }
                                    if itemKind == .cipher, local, content, kind != .hardDelete {
                                        #expect(last != .removeLocally, "an edit made here is never just removed: \(facts) → \(steps)")
                                    }
                                    if !local {
                                        #expect(!steps.contains(.push(.local)) && !steps.contains(.backUp(.local)),
                                                "nothing of a local version that is not there: \(steps)")
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        #expect(plans == 2 * 4 * 4 * 3 * 2 * 2 * 2)
    }
}
