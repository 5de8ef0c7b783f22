import Foundation
import Testing
import VaultModels
@testable import VaultSyncCore

@Suite("Queue rules (seed 000 §3, seed 001 Phase 2)")
struct QueueRulesTests {
    let t0 = WireDate(microsecondsSinceEpoch: 1_700_000_000_000_000)
    let revision = WireDate(microsecondsSinceEpoch: 1_690_000_000_000_000)

    func fold(_ operations: [OfflineOperation]) -> QueueDecision? {
        var existing: PendingChangeMetadata?
        var last: QueueDecision?
        for (index, operation) in operations.enumerated() {
            let decision = QueueRules.apply(operation, to: existing, itemRevisionDate: revision.adding(microseconds: Int64(index) * 1000),
                                            now: t0.adding(microseconds: Int64(index) * 1_000_000))
            last = decision
            if case .upsert(let metadata) = decision { existing = metadata } else { existing = nil }
        }
        return last
    }

    @Test("the resulting kind of a sequence of offline operations", arguments: [
        ([OfflineOperation.create], PendingChangeKind.create),
        ([.create, .edit(passwordChanged: true), .move, .favorite], .create),
        ([.create, .softDelete, .restore], .create),
        ([.edit(passwordChanged: false)], .update),
        ([.edit(passwordChanged: false), .softDelete], .softDelete),
        ([.softDelete, .restore], .update),
        ([.edit(passwordChanged: true), .hardDelete], .hardDelete),
        ([.softDelete, .hardDelete], .hardDelete),
        ([.archive, .unarchive, .move], .update),
        ([.restore], .update),
    ] as [([OfflineOperation], PendingChangeKind)])
    func kinds(operations: [OfflineOperation], expected: PendingChangeKind) {
        guard case .upsert(let metadata) = fold(operations) else {
            Issue.record("expected a record")
            return
        }
        #expect(metadata.kind == expected)
    }

    @Test("an item created offline and then deleted for good is forgotten")
    func forget() {
        #expect(fold([.create, .edit(passwordChanged: true), .hardDelete]) == .forget)
    }

    @Test("the first change captures originalRevisionDate and later ones never overwrite it")
    func originalRevision() {
        guard case .upsert(let metadata) = fold([.edit(passwordChanged: false), .edit(passwordChanged: false), .softDelete, .restore]) else {
            Issue.record("expected a record")
            return
        }
        #expect(metadata.originalRevisionDate == revision)
        #expect(metadata.createdDate == t0)
        #expect(metadata.updatedDate == t0.adding(microseconds: 3_000_000))
        guard case .upsert(let created) = fold([.create, .edit(passwordChanged: true)]) else { return }
        #expect(created.originalRevisionDate == nil)
    }

    @Test("password changes are counted only when the password changed")
    func passwordCount() {
        guard case .upsert(let metadata) = fold([.edit(passwordChanged: true), .edit(passwordChanged: false), .move,
                                                  .edit(passwordChanged: true), .edit(passwordChanged: true)]) else { return }
        #expect(metadata.passwordChangeCount == 3)
        #expect(metadata.contentChanged)
        guard case .upsert(let moved) = fold([.move, .favorite]) else { return }
        #expect(moved.passwordChangeCount == 0)
        #expect(!moved.contentChanged)
    }

    @Test("\"newer\" compares the last content change: a trash, archive, folder or favorite change after it moves the save's date only")
    func contentEditDate() {
        let second = Int64(1_000_000)
        guard case .upsert(let edited) = fold([.edit(passwordChanged: true), .favorite, .move, .archive]) else { return }
        #expect(edited.contentUpdatedDate == t0)
        #expect(edited.contentEditDate == t0)
        #expect(edited.updatedDate == t0.adding(microseconds: 3 * second), "the version's identity still moves with every save")
        guard case .upsert(let again) = fold([.favorite, .edit(passwordChanged: false), .softDelete, .restore]) else { return }
        #expect(again.contentEditDate == t0.adding(microseconds: second))
        guard case .upsert(let created) = fold([.create, .favorite]) else { return }
        #expect(created.contentEditDate == t0)
        guard case .upsert(let stateOnly) = fold([.favorite, .move]) else { return }
        #expect(stateOnly.contentUpdatedDate == nil)
        let legacy = PendingChangeMetadata(kind: .update, originalRevisionDate: revision, contentChanged: true, createdDate: t0,
                                           updatedDate: t0.adding(microseconds: 7 * second))
        #expect(legacy.contentEditDate == legacy.updatedDate, "a record queued before the content date was kept uses its last save")
    }

    @Test("a new offline change revives a record that needed attention")
    func revive() {
        var stuck = PendingChangeMetadata(kind: .update, originalRevisionDate: revision, createdDate: t0, updatedDate: t0,
                                          attempts: 12, lastError: "refused", nextAttemptDate: t0, state: .needsAttention)
        stuck.contentChanged = true
        guard case .upsert(let revived) = QueueRules.apply(.edit(passwordChanged: false), to: stuck, itemRevisionDate: revision, now: t0) else { return }
        #expect(revived.state == .pending)
        #expect(revived.nextAttemptDate == nil)
        #expect(revived.attempts == 12)
        #expect(revived.originalRevisionDate == revision)
    }

    @Test("a create remembers each name it is renamed from, once; an update does not")
    func earlierNamesOfACreate() throws {
        var metadata: PendingChangeMetadata?
        for (operation, leavingName) in [(OfflineOperation.create, nil), (.edit(passwordChanged: false), "2.NameOne+A=="), (.favorite, nil),
                                         (.edit(passwordChanged: true), "2.NameTwo/B=="), (.edit(passwordChanged: false), "2.NameOne+A==")] {
            guard case .upsert(let next) = QueueRules.apply(operation, to: metadata, itemRevisionDate: nil, now: t0, leavingName: leavingName) else {
                Issue.record("\(operation) forgot the create")
                return
            }
            metadata = next
        }
        #expect(metadata?.kind == .create)
        #expect(metadata?.earlierNames == ["2.NameOne+A==", "2.NameTwo/B=="])
        let decoded = try PendingChangeMetadata(json: try #require(metadata).jsonObject(), path: "metadata")
        #expect(decoded == metadata, "the names survive the record's JSON, case and all")
        guard case .upsert(let update) = QueueRules.apply(.edit(passwordChanged: false), to: nil, itemRevisionDate: revision, now: t0,
                                                          leavingName: "2.Name-Three") else {
            Issue.record("an edit made no record")
            return
        }
        #expect(update.earlierNames == nil, "an item already on the server is found by its id")
    }

    @Test("deleting for good an item whose create was sent without an answer queues the delete, with the item's names")
    func deleteAfterLostCreate() {
        guard case .upsert(let sent) = QueueRules.apply(.create, to: nil, itemRevisionDate: nil, now: t0, createSent: true, itemKey: "2.Key+Q=="),
              case .upsert(let renamed) = QueueRules.apply(.edit(passwordChanged: false), to: sent, itemRevisionDate: nil, now: t0,
                                                           leavingName: "2.First+A=="),
              case .upsert(let deleted) = QueueRules.apply(.hardDelete, to: renamed, itemRevisionDate: nil, now: t0, leavingName: "2.Second/B==")
        else {
            Issue.record("a step forgot the item")
            return
        }
        #expect(sent.createSent == true)
        #expect(deleted.kind == .hardDelete)
        #expect(deleted.originalRevisionDate == nil)
        #expect(deleted.earlierNames == ["2.First+A==", "2.Second/B=="])
        #expect(deleted.itemKey == "2.Key+Q==", "the key that finds the copy even renamed elsewhere")
        guard case .upsert(let unsent) = QueueRules.apply(.create, to: nil, itemRevisionDate: nil, now: t0) else {
            Issue.record("a create made no record")
            return
        }
        #expect(unsent.createSent == nil)
        #expect(QueueRules.apply(.hardDelete, to: unsent, itemRevisionDate: nil, now: t0, leavingName: "2.First+A==") == .forget,
                "never sent: the server never hears of it")
        guard case .upsert(let edit) = QueueRules.apply(.edit(passwordChanged: false), to: nil, itemRevisionDate: revision, now: t0,
                                                        createSent: true) else {
            Issue.record("an edit made no record")
            return
        }
        #expect(edit.createSent == nil, "only a create can have been sent as one")
    }

    @Test("the first change keeps the version it started from (the merge base); later changes never replace it; a create has none")
    func baseVersion() throws {
        guard case .upsert(let first) = QueueRules.apply(.edit(passwordChanged: false), to: nil, itemRevisionDate: revision, now: t0,
                                                         baseVersion: #"{"id":"a","name":"2.Base+A=="}"#),
              case .upsert(let second) = QueueRules.apply(.edit(passwordChanged: true), to: first, itemRevisionDate: revision, now: t0,
                                                          baseVersion: #"{"id":"a","name":"2.Later+B=="}"#),
              case .upsert(let trashed) = QueueRules.apply(.softDelete, to: second, itemRevisionDate: revision, now: t0,
                                                           baseVersion: #"{"id":"a","name":"2.Last+C=="}"#),
              case .upsert(let created) = QueueRules.apply(.create, to: nil, itemRevisionDate: nil, now: t0, baseVersion: "{}")
        else {
            Issue.record("a step made no record")
            return
        }
        #expect(first.baseVersion == #"{"id":"a","name":"2.Base+A=="}"#)
        #expect(second.baseVersion == first.baseVersion)
        #expect(trashed.baseVersion == first.baseVersion)
        #expect(created.baseVersion == nil, "a create has no version on the server to merge against")
        #expect(try PendingChangeMetadata(json: trashed.jsonObject(), path: "metadata") == trashed, "the base survives the sealed JSON")
    }
}

@Suite("Failure classification (seed 001 §16.1)")
struct FailureClassificationTests {
    @Test("the server's refusals are reported, a distrusted certificate is its own class, everything else goes offline", arguments: [
        (CallFailure.status(400), FailureClass.refused), (.status(401), .refused), (.status(403), .refused),
        (.status(404), .refused), (.status(409), .refused), (.status(413), .refused), (.status(422), .refused),
        (.status(408), .offline), (.status(429), .offline),
        (.status(500), .offline), (.status(502), .offline), (.status(503), .offline), (.status(504), .offline),
        (.timeout, .offline), (.unreachable, .offline), (.connectionLost, .offline), (.tls, .offline), (.malformedResponse, .offline),
        (.certificate, .untrusted),
    ])
    func classify(failure: CallFailure, expected: FailureClass) {
        #expect(FailureClassification.classify(failure) == expected)
    }

    @Test("a request may have done its work unless no connection was made", arguments: [
        (CallFailure.status(500), true), (.status(502), true), (.status(400), true), (.timeout, true), (.connectionLost, true),
        (.malformedResponse, true), (.unreachable, false), (.tls, false), (.certificate, false),
    ])
    func mayHaveReachedServer(failure: CallFailure, expected: Bool) {
        #expect(FailureClassification.mayHaveReachedServer(failure) == expected)
    }
}

@Suite("Backoff (seed 004 §1.3, with jitter)")
struct BackoffTests {
    @Test("doubles from the base, stays within [half, full] of the ceiling, and is capped")
    func schedule() {
        let backoff = Backoff(base: 2, cap: 60, maximumAttempts: 5)
        #expect(backoff.delay(afterAttempts: 0, unit: 0.7) == 0)
        #expect(backoff.delay(afterAttempts: 1, unit: 0) == 1)
        #expect(backoff.delay(afterAttempts: 1, unit: 1) == 2)
        #expect(backoff.delay(afterAttempts: 3, unit: 0.5) == 6)
        #expect(backoff.delay(afterAttempts: 10, unit: 1) == 60)
        #expect(backoff.delay(afterAttempts: 1000, unit: 0) == 30)
        #expect(!backoff.isExhausted(afterAttempts: 4))
        #expect(backoff.isExhausted(afterAttempts: 5))
    }
}

@Suite("Server clock offset (seed 001 AP-R2)")
struct ServerClockOffsetTests {
    @Test("a device 3 hours fast measures a −3 h offset within the round trip")
    func threeHoursFast() {
        let server = WireDate(microsecondsSinceEpoch: 1_700_000_000_000_000)
        let skew: Int64 = 3 * 3600 * 1_000_000
        let sent = server.adding(microseconds: skew - 40_000)
        let received = server.adding(microseconds: skew + 40_000)
        let sample = ServerClockOffset.sample(serverDate: server, sentAt: sent, receivedAt: received)
        #expect(abs(sample.offsetMicroseconds + skew) <= sample.uncertaintyMicroseconds)
        #expect(sample.uncertaintyMicroseconds == 1_040_000)
        let deviceEdit = server.adding(microseconds: skew)
        let onServerClock = sample.serverTime(forDeviceTime: deviceEdit)
        #expect(abs(onServerClock.microsecondsSinceEpoch - server.microsecondsSinceEpoch) <= 2 * sample.uncertaintyMicroseconds)
    }

    @Test("the correction ignores offsets within the measurement error")
    func correction() {
        let t = WireDate(microsecondsSinceEpoch: 1_700_000_000_000_000)
        #expect(ServerClockOffset(offsetMicroseconds: 300_000, uncertaintyMicroseconds: 510_000, measuredAt: t).correctionMicroseconds == 0)
        #expect(ServerClockOffset(offsetMicroseconds: -10_800_000_000, uncertaintyMicroseconds: 510_000, measuredAt: t).correctionMicroseconds
            == -10_800_000_000)
        #expect(ServerClockOffset(offsetMicroseconds: 2_000_000, uncertaintyMicroseconds: 500_000, measuredAt: t).serverTime(forDeviceTime: t)
            == t.adding(microseconds: 2_000_000))
    }

    @Test("the more precise sample wins until it is too old")
    func merge() {
        let t = WireDate(microsecondsSinceEpoch: 1_700_000_000_000_000)
        let precise = ServerClockOffset(offsetMicroseconds: 100, uncertaintyMicroseconds: 600_000, measuredAt: t)
        let rough = ServerClockOffset(offsetMicroseconds: 900, uncertaintyMicroseconds: 2_000_000, measuredAt: t.adding(microseconds: 1_000_000))
        // The precise sample is kept, with the loosest upper bound of the two (the rough one's: 900 + 2,000,000).
        var kept = precise
        kept.loosestUpperMicroseconds = 2_000_900
        #expect(precise.merged(with: rough) == kept)
        #expect(rough.merged(with: precise) == kept)
        let later = ServerClockOffset(offsetMicroseconds: 900, uncertaintyMicroseconds: 2_000_000, measuredAt: t.adding(microseconds: 7_200_000_000))
        #expect(precise.merged(with: later) == later)
    }

    /// Bug 80's cause: a header a loaded server's cache left 3 s stale, answered quickly, is the most precise sample
    /// and says this device is a second or more fast. The fresh samples around it allow the clocks to agree, so the
    /// correction stays 0; a device that really is fast is still corrected, and a server really ahead too.
    @Test("a stale Date header never moves this device's times back while a recent sample allows the clocks to agree")
    func staleHeader() throws {
        let t = WireDate(microsecondsSinceEpoch: 1_700_000_000_400_000)
        func sample(skew: Int64, stale: Int64 = 0, at offsetFromT: Int64, roundTrip: Int64) -> ServerClockOffset {
            // The device's clock is the server's plus `skew`; the header is the server's second, `stale` seconds old.
            let serverNow = t.adding(microseconds: offsetFromT)
            let second = serverNow.microsecondsSinceEpoch / 1_000_000 * 1_000_000 - stale * 1_000_000
            return ServerClockOffset.sample(serverDate: WireDate(microsecondsSinceEpoch: second),
                                            sentAt: serverNow.adding(microseconds: skew - roundTrip / 2),
                                            receivedAt: serverNow.adding(microseconds: skew + roundTrip / 2))
        }
        let fresh = sample(skew: 0, at: 0, roundTrip: 60_000)
        let stale = sample(skew: 0, stale: 3, at: 500_000, roundTrip: 2_000)
        #expect(stale.correctionMicroseconds < 0, "alone, the stale sample claims this device is fast")
        let merged = fresh.merged(with: stale)
        #expect(merged.uncertaintyMicroseconds == stale.uncertaintyMicroseconds, "it is kept: the more precise")
        #expect(merged.correctionMicroseconds == 0)
        #expect(merged.merged(with: sample(skew: 0, at: 900_000, roundTrip: 40_000)).correctionMicroseconds == 0)
        // A device 5 s fast: every sample says so, and the correction is applied.
        let fast = sample(skew: 5_000_000, at: 0, roundTrip: 60_000).merged(with: sample(skew: 5_000_000, at: 700_000, roundTrip: 10_000))
        #expect(abs(fast.correctionMicroseconds + 5_000_000) <= 1_000_000)
        // A server 5 s ahead (this device slow): a stale header can only understate it.
        let slow = sample(skew: -5_000_000, at: 0, roundTrip: 60_000).merged(with: sample(skew: -5_000_000, stale: 3, at: 300_000, roundTrip: 2_000))
        #expect(slow.correctionMicroseconds > 0)
        // An estimate stored before the loosest bound was kept reads as before.
        let old = try JSONDecoder().decode(ServerClockOffset.self, from: Data(#"{"offsetMicroseconds":-3000000,"uncertaintyMicroseconds":1000000,"measuredAt":"2023-11-14T22:13:20.000Z"}"#.utf8))
        #expect(old.loosestUpperMicroseconds == nil && old.correctionMicroseconds == -3_000_000)
    }
}

@Suite("The conflict matrix (seed 000 §6 with 001/002's decisions)")
struct ConflictMatrixTests {
    static let original = WireDate(microsecondsSinceEpoch: 1_700_000_000_000_000)
    static let later = original.adding(microseconds: 60_000_000)

    static func record(_ kind: PendingChangeKind, passwordChanges: Int = 0, content: Bool = true) -> PendingChangeMetadata {
        PendingChangeMetadata(kind: kind, originalRevisionDate: kind == .create ? nil : original, passwordChangeCount: passwordChanges,
                              contentChanged: content, createdDate: original, updatedDate: original)
    }

    static func facts(_ record: PendingChangeMetadata, _ server: WireDate?, _ localUpdated: WireDate) -> ResolutionFacts {
        ResolutionFacts(itemKind: .cipher, record: record, localPresent: record.kind != .hardDelete,
                        server: server.map { .present(revision: $0, holdsLocal: false) } ?? .gone, localEditedOnServerClock: localUpdated,
                        createKey: "temp-1")
    }

    static let create: [ResolutionStep] = [.create(idempotencyKey: "temp-1"), .replayState, .swapID, .settle(.rebaseOnResult)]
    static let recreate: [ResolutionStep] = [.create(idempotencyKey: "temp-1"), .replayState, .swapID, .tell(.itemRecreated), .settle(.rebaseOnResult)]
    static let push: [ResolutionStep] = [.push(.local), .replayState, .settle(.rebaseOnResult)]
    static let takeTheirs: [ResolutionStep] = [.backUp(.local), .replayState, .settle(.keepBaseline)]
    static let dropDelete: [ResolutionStep] = [.tell(.deleteDropped), .settle(.keepBaseline)]

    @Test("this device's own merge push counts as new as the edits it merged: a save made here before it arrived is newer")
    func ownMergePush() {
        var metadata = Self.record(.update)
        metadata.mergedPushRevision = Self.later.adding(microseconds: 5_000_000)
        metadata.mergedContentDate = Self.later
        let saved = Self.later.adding(microseconds: 2_000_000)  // after the merged edits, before the push arrived
        #expect(ResolutionPlanner.plan(Self.facts(metadata, Self.later.adding(microseconds: 5_000_000), saved)) == [.backUp(.server)] + Self.push)
        #expect(ResolutionPlanner.plan(Self.facts(metadata, Self.later.adding(microseconds: 9_000_000), saved)) == Self.takeTheirs,
                "someone wrote after the merge push: that write is newer")
        metadata.mergedPushRevision = nil
        #expect(ResolutionPlanner.plan(Self.facts(metadata, Self.later.adding(microseconds: 5_000_000), saved)) == Self.takeTheirs)
    }

    /// A create sent without an answer, then deleted for good here (no server revision ever known).
    static func deletedLostCreate(baseline: WireDate? = nil) -> PendingChangeMetadata {
        var metadata = PendingChangeMetadata(kind: .hardDelete, originalRevisionDate: baseline, createdDate: original, updatedDate: original)
        metadata.createSent = true
        metadata.earlierNames = ["2.Name+A=="]
        return metadata
    }

    @Test("one row per case", arguments: [
        (record(.create), nil, original, create),
        (record(.update), original, original, push),
        (record(.update), original.adding(microseconds: 400), original, push),
        (record(.update, passwordChanges: 3), original, original, push),
        (record(.update, passwordChanges: 4), original, original, [.backUp(.server)] + push),
        (record(.update), later, later.adding(microseconds: 1), [.backUp(.server)] + push),
        (record(.update), later, later, takeTheirs),
        (record(.update), later, original, takeTheirs),
        (record(.update, content: false), later, later.adding(microseconds: 5_000_000), [.replayState, .settle(.keepBaseline)]),
        (record(.update), nil, original, recreate),
        (record(.softDelete, content: false), original, original, [.trash, .settle(.rebaseOnResult)]),
        (record(.softDelete, content: true), original, original, push),
        (record(.hardDelete), original, original, [.deleteForGood, .removeLocally]),
        (record(.softDelete, content: false), later, later.adding(microseconds: 9_000_000), dropDelete),
        (record(.softDelete), later, later.adding(microseconds: 9_000_000), [.backUp(.local)] + dropDelete),
        (record(.hardDelete), later, later.adding(microseconds: 9_000_000), dropDelete),
        (record(.softDelete, content: false), nil, original, [.removeLocally]),
        (record(.softDelete), nil, original, recreate),
        (record(.hardDelete), nil, original, [.removeLocally]),
        (deletedLostCreate(), nil, original, [.deleteLostCopy, .removeLocally]),
        (deletedLostCreate(baseline: original), nil, original, [.removeLocally]),
        (deletedLostCreate(baseline: original), original, original, [.deleteForGood, .removeLocally]),
    ] as [(PendingChangeMetadata, WireDate?, WireDate, [ResolutionStep])])
    func row(metadata: PendingChangeMetadata, server: WireDate?, localUpdated: WireDate, expected: [ResolutionStep]) {
        #expect(ResolutionPlanner.plan(Self.facts(metadata, server, localUpdated)) == expected)
    }

    @Test("backup names carry the losing version's UTC time, to the millisecond")
    func backupName() {
        let date = WireDate(iso8601: "2026-03-04T05:06:07.891Z")!
        #expect(BackupName.make(originalName: "Bank", losingVersionDate: date) == "Bank - offline conflict 2026-03-04 050607.891")
        let midnight = WireDate(iso8601: "2026-03-04T00:00:00Z")!
        #expect(BackupName.make(originalName: "Bank", losingVersionDate: midnight) == "Bank - offline conflict 2026-03-04 000000.000")
    }

    @Test("two versions that lose within one second get names a person can tell apart (bug 20)")
    func backupNamesWithinOneSecond() {
        // Bug 20's pair: the server's version and a device's own edit, 8 ms apart.
        let server = WireDate(iso8601: "2026-11-25T02:21:12.052654Z")!
        let local = WireDate(iso8601: "2026-11-25T02:21:12.060619Z")!
        let names = [server, local].map { BackupName.make(originalName: "GitHub", losingVersionDate: $0) }
        #expect(names == ["GitHub - offline conflict 2026-11-25 022112.052", "GitHub - offline conflict 2026-11-25 022112.060"])
        #expect(names.map(BackupName.originalName(of:)) == ["GitHub", "GitHub"])
    }

    @Test("a backup's original name is recovered; other names stay as they are")
    func backupOriginalName() {
        let date = WireDate(iso8601: "2026-03-04T05:06:07Z")!
        for name in ["Bank", "Bank - offline conflict", "Ünïcødé 🔑", ""] {
            #expect(BackupName.originalName(of: BackupName.make(originalName: name, losingVersionDate: date)) == name)
        }
        // A backup of a backup loses one suffix at a time.
        let twice = BackupName.make(originalName: BackupName.make(originalName: "Bank", losingVersionDate: date), losingVersionDate: date)
        #expect(BackupName.originalName(of: twice) == BackupName.make(originalName: "Bank", losingVersionDate: date))
        for name in ["Bank", "Bank - offline conflict 2026-03-04", "Bank - offline conflict abcd-ef-gh ijklmn", "x - offline conflict 2026-03-04 0506077",
                     "x - offline conflict 2026-03-04 050607.８９１"] {
            #expect(BackupName.originalName(of: name) == name)
            #expect(!BackupName.isBackup(name))
        }
        // Named to the second, as before milliseconds were added.
        #expect(BackupName.originalName(of: "Bank - offline conflict 2026-03-04 050607") == "Bank")
        #expect(BackupName.isBackup("Bank - offline conflict 2026-03-04 050607.891"))
    }
}
