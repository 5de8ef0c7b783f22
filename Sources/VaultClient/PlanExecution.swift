import Foundation
import VaultAPI
import VaultCrypto
import VaultModels
import VaultStore
import VaultSyncCore

/// One queued change being resolved: the versions its plan works with, and what its steps made so far.
/// Items (`CipherWire`) and folders (`FolderWire`) share it and the driver below.
struct PlanRun<Wire: Sendable>: Sendable {
    var change: PendingChange
    var local: Wire?
    /// The server's version the plan is made against (`nil`: the server has no such item).
    var server: Wire? {
        didSet { serverContentDate = nil }
    }
    /// An earlier revision under which this resolution saw `server`'s content unchanged
    /// (``ResolutionFacts/serverContentDate``); set after a re-read.
    var serverContentDate: WireDate?
    /// The item's id on the server: its own, or the one a create was answered with.
    var serverID: String
    /// The idempotency keys a create tries, in order: the device-made id (a create), then the
    /// re-creation's keys (`VaultEngine.recreationKeys`). A key answered `410` (what it made was
    /// deleted for good since) gives way to the next.
    var createKeys: [String]
    var createKey: String { createKeys[0] }
    /// The create re-makes an item the server lost (never overwrites a copy it finds unseen).
    var recreated: Bool { createKeys[0] != change.itemID }
    /// What the steps made so far: the version settling stores (`nil`: the server's version as it is).
    var result: Wire?
    /// `result` carries the local version (posted, pushed, or found pushed already).
    var carriesLocal = false
    /// The server's id replaces the temporary one when the change settles (in the same transaction).
    var swapping = false
    /// The merge the plan was made with (merge policy, both sides changed an item's content).
    var merge: PlannedMerge?
    /// What `.tell(.merged)` says.
    var notice: String?
    /// The attachment step failed (refused, or the connection): what reached the server settles, the record
    /// stays with the attachment work, and this error is recorded on it.
    var attachmentFailure: ServerCallError?

    init(change: PendingChange, local: Wire?, server: Wire?) {
        self.change = change
        self.local = local
        self.server = server
        serverID = change.itemID
        createKeys = (change.metadata.kind == .create ? [change.itemID] : []) + VaultEngine.recreationKeys(change)
    }

    /// The next create key after a `410`; `false`: none is left. A create's own key answered with the id
    /// of what it made (our server names it) goes on under that id's re-creation keys, the ones every other
    /// device of the account uses for the item, so that all re-create one item between them.
    mutating func nextCreateKey(after error: ServerCallError) -> Bool {
        guard createKeys.count > 1 else { return false }
        if !recreated, let made = error.createdSinceDeletedID {
            createKeys = VaultEngine.recreationKeys(change, of: made)
        } else {
            createKeys.removeFirst()
        }
        return true
    }
}

/// The server answered "out of date" at each of a resolution's re-plans: others are writing the item right
/// now. Nothing is wrong with the change; it waits for a later sync (backoff), not for the user.
struct KeptChanging: Error {
    static let message = "The item kept changing on the server while this change was being resolved; it is tried again at the next sync."
}

/// A three-way merge a plan pushes: the result, which side wins a field both changed, and whether the
/// merged version differs from the server's (else nothing is pushed).
struct PlannedMerge: Sendable {
    var result: ItemMerge.Result
    var winner: ItemMerge.Side
    var changesServer: Bool
}

/// The executor of resolution plans (docs/ARCHITECTURE.md, "The path of a change"): it gathers the
/// facts, asks `ResolutionPlanner` for the steps, and runs them in order. It decides nothing itself: a
/// step that meets new facts (a create answered with an earlier attempt's copy, a key deleted since)
/// hands back the planner's steps for the rest, and the server answering "out of date" (someone wrote in
/// between) makes it read the item again and plan again, never overwrite blindly.
extension VaultEngine {
    func drive<Wire: Sendable>(_ run: inout PlanRun<Wire>, report: inout SyncReport,
                               plan: (inout PlanRun<Wire>) throws -> [ResolutionStep],
                               perform: (ResolutionStep, inout PlanRun<Wire>, inout SyncReport) async throws -> [ResolutionStep]?,
                               reread: (inout PlanRun<Wire>) async throws -> Void) async throws {
        for _ in 0..<3 {
            run.result = nil
            run.carriesLocal = false
            var steps = try plan(&run)
            logger.debug("resolving", metadata: ["item": "\(run.change.itemID)", "steps": "\(steps)"])
            do {
                while !steps.isEmpty {
                    let step = steps.removeFirst()
                    if let rest = try await perform(step, &run, &report) { steps = rest }
                }
                return
            } catch let error as ServerCallError where error.isOutOfDate {
                try await reread(&run)
            }
        }
        throw KeptChanging()
    }

    /// The record as stored now, with the local version, read together: the pass read its queue at its
    /// start, and the user may have saved the item since (a save during an earlier item's push). Planning
    /// from that save with the record as it was would later take the save for one made during this
    /// resolution, and keep a record whose content was pushed already (seed 91926: its merge was backed up
    /// a second time). `nil`: the record was settled or discarded meanwhile.
    func current<Wire: Sendable>(_ change: PendingChange,
                                 local: @escaping @Sendable (StoreTransaction, String, String) throws -> Wire?) async throws -> (PendingChange, Wire?)? {
        let session = try requireSession()
        let (userID, key) = (session.userID, session.keys.userKey)
        return try await read { tx in
            guard let stored = try tx.queue(of: userID).change(id: change.id, key: key) else { return nil }
            return (stored, try local(tx, userID, stored.itemID))
        }
    }

    /// A version on the server's clock (seed 001 AP-R2: "newer" compares on the server's clock).
    func onServerClock(_ date: WireDate) -> WireDate {
        clockOffsetBox.current?.serverTime(forDeviceTime: date) ?? date
    }

    // MARK: Items

    /// Resolves one queued item change. A backup left half-done by an earlier attempt is finished first
    /// (posted again with its key), so every plan starts from what is on the server.
    func resolveCipher(_ change: PendingChange, context: ResolutionContext, report: inout SyncReport) async throws {
        guard let (change, local) = try await current(change, local: { tx, userID, id in
            try tx.ciphers(of: userID).find(id: id).flatMap { try? $0.wire() }
        }) else { return }
        try context.requireReadable(change)
        var run = PlanRun<CipherWire>(change: change, local: local, server: context.serverCiphers[change.itemID])
        if let flight = change.metadata.progress.inFlight {
            try await postBackup(flight, change: &run.change, report: &report, context: context)
        }
        try await drive(&run, report: &report, plan: { try self.planCipher(&$0) },
                        perform: { step, run, report in try await self.perform(step, &run, &report, context: context) },
                        reread: reread)
        if let failure = run.attachmentFailure {
            // The item reached the server; only the upload waits (for the user, when refused): said, with the item's name.
            if FailureClassification.classify(failure.failure) == .refused {
                let name = decryptedName(run.local) ?? run.serverID
                report.messages.append("\"\(name)\" reached the server, but an attachment added here was refused (\(failure.description)); "
                                       + "it waits on this device, marked pending (`vaultsync attachment list`).")
            }
            throw failure
        }
    }

    /// The item as the server has it now, after "out of date". Its content unchanged (someone archived,
    /// trashed, moved or favorited it in between), its content date stays the one seen before: a state
    /// change made elsewhere does not make older content win, nor the same content a new version to back up.
    func reread(_ run: inout PlanRun<CipherWire>) async throws {
        let (before, since) = (run.server, run.serverContentDate)
        run.server = try await reread(run.serverID)
        if let before, let now = run.server, Self.sameContent(before, now) {
            run.serverContentDate = since ?? before.revisionDate
        }
    }

    /// The item as the server has it now, after "out of date"; `nil` only when the server says it has no
    /// such item. Any other failure is thrown: the change waits for its next attempt (a read lost on the wire
    /// is not a delete for good: fault scenario seed 936547 dropped a trashed item's edits that way).
    func reread(_ id: String) async throws -> CipherWire? {
        do {
            return try await authorized { api, token in try await api.getCipher(id: id, token: token) }
        } catch let error as ServerCallError where error.isGone {
            return nil
        }
    }

    func cipherFacts(_ run: PlanRun<CipherWire>) -> ResolutionFacts {
        let record = run.change.metadata
        let server: ServerFacts = run.server.flatMap { server in
            server.revisionDate.map { revision in
                // Only a moved revision can be our own push (the planner's rule); the byte comparison serializes
                // both versions, so the plain pushes of a bulk pass (revision unchanged) skip it.
                let moved = !(record.originalRevisionDate.map { ConflictMatrix.isSameRevision($0, revision) } ?? false)
                let ownPush = record.kind == .update && record.contentChanged && moved && run.local.map { Self.sameContent($0, server) } == true
                return .present(revision: revision, holdsLocal: ownPush)
            }
        } ?? .gone
        var facts = ResolutionFacts(itemKind: .cipher, record: record, localPresent: run.local != nil, server: server,
                                    localEditedOnServerClock: onServerClock(record.contentEditDate), serverContentDate: run.serverContentDate,
                                    createKey: run.createKey)
        if record.kind == .softDelete || record.kind == .hardDelete, ResolutionPlanner.serverMoved(facts), let server = run.server,
           let base = record.baseVersion.flatMap({ try? CipherWire(jsonBytes: Array($0.utf8)) }) {
            // A restore from the trash is no state change to ignore: someone wants the item back.
            facts.serverContentIsBase = Self.sameContent(base, server) && !(base.deletedDate != nil && server.deletedDate == nil)
        }
        return facts
    }

    /// The facts, the merge when the plan calls for one (both sides changed the content since the version the
    /// change started from, which can be opened: merge policy; under the backup policy too when the server's
    /// content is still that version's byte for byte, only its trash, archive, folder or favorite state moved,
    /// which is no conflict: the merge is the edit made here, with the other device's state), and the plan.
    func planCipher(_ run: inout PlanRun<CipherWire>) throws -> [ResolutionStep] {
        var facts = cipherFacts(run)
        if case .present(_, holdsLocal: true) = facts.server { run.carriesLocal = true }
        run.merge = nil
        if let winner = ResolutionPlanner.mergeWinner(facts),
           let baseText = run.change.metadata.baseVersion, let baseWire = try? CipherWire(jsonBytes: Array(baseText.utf8)),
           configuration.conflictPolicy == .merge || run.server.map({ Self.sameContent(baseWire, $0) }) == true,
           let keys = session?.keys, let base = try? baseWire.decrypted(with: keys), let mine = try? run.local?.decrypted(with: keys),
           let theirs = try? run.server?.decrypted(with: keys) {
            let result = ItemMerge.merge(base: base, mine: mine, theirs: theirs, winner: winner)
            run.merge = PlannedMerge(result: result, winner: winner, changesServer: !ItemMerge.sameContent(result.merged, theirs))
            run.notice = result.summary(itemName: result.merged.name, winner: winner)
            facts.merge = result.isClean ? .clean : .conflicting
        }
        return ResolutionPlanner.plan(facts, progress: run.change.metadata.progress)
    }

    func perform(_ step: ResolutionStep, _ run: inout PlanRun<CipherWire>, _ report: inout SyncReport,
                 context: ResolutionContext) async throws -> [ResolutionStep]? {
        let id = run.serverID
        switch step {
        case .backUp(let version):
            try await backUp(version, of: &run, report: &report, context: context)
        case .create(let key):
            return try await create(&run, key: key, report: &report, context: context)
        case .push(let version):
            try await push(version, &run)
        case .replayState:
            let wanted = try await replayState(&run)
            if let message = await folderDropped(wanted: wanted, result: run.result, name: run.local) { report.messages.append(message) }
        case .trash:
            try await authorized { api, token in try await api.softDeleteCipher(id: id, token: token) }
            run.result = try await authorized { api, token in try await api.getCipher(id: id, token: token) }
        case .deleteForGood:
            do {
                try await authorized { api, token in try await api.hardDeleteCipher(id: id, token: token) }
            } catch let error as ServerCallError where error.isGone {}
        case .deleteLostCopy:
            try await deleteLostCopy(run, report: &report, context: context)
        case .swapID:
            run.swapping = true
        case .settle(let baseline):
            try await settle(run, baseline: baseline)
        case .removeLocally:
            try await removeLocally(run)
        case .tell(.deleteDropped):
            report.messages.append(Self.deleteDroppedMessage(name: decryptedName(run.server) ?? run.change.itemID))
        case .tell(.folderRecreated):
            break  // planned for folders only
        case .tell(.itemRecreated):
            let name = decryptedName(run.local) ?? run.serverID
            report.messages.append("\"\(name)\" had been deleted for good on another device; it was made again from this device's version, "
                                   + "so the changes made here are kept (under a new id).")
        case .tell(.stateDropped):
            let name = decryptedName(run.local) ?? run.change.itemID
            report.messages.append("\"\(name)\" was deleted for good on another device: the trash, archive, folder or favorite change made here went with it.")
        case .tell(.merged):
            if let notice = run.notice { report.messages.append(notice) }
            logger.info("conflict merged", metadata: ["item": "\(run.change.itemID)", "clean": "\(run.merge?.result.isClean ?? true)"])
        case .syncAttachments:
            do {
                try await syncAttachments(&run, report: &report)
            } catch let error as ServerCallError {
                // The item itself reached the server (created, pushed): it settles under its server id, so it is
                // never shown twice, and the record keeps the attachment work for a later attempt.
                run.attachmentFailure = error
                run.result = (try? await authorized { api, token in try await api.getCipher(id: id, token: token) }) ?? run.result
            }
        }
        return nil
    }

    static func deleteDroppedMessage(name: String) -> String {
        // Not "after you deleted it": the edit may have been made first and reached the server first (RELIABILITY bug 73).
        "\"\(name)\" was edited on another device since this one last synced, and deleted here: the edit was kept and the delete dropped."
    }

    func decryptedName(_ wire: CipherWire?) -> String? {
        guard let keys = session?.keys else { return nil }
        return try? wire?.decrypted(with: keys).name
    }

    /// Posts the local version once through every attempt (its key; adoption of a copy in the snapshot by
    /// its wrapped item key for servers that ignore keys). Answered with the local version: the plan goes
    /// on. Answered with an earlier attempt's copy that differs: the planner says what follows. The key
    /// used and the item deleted for good since (`410`): the local version comes back as a new item.
    func create(_ run: inout PlanRun<CipherWire>, key: String, report: inout SyncReport,
                context: ResolutionContext) async throws -> [ResolutionStep]? {
        guard let local = run.local else { return [.removeLocally] }
        if run.change.metadata.kind == .create { try await noteCreateSent(&run.change) }
        let answer: CipherWire
        do {
            answer = try await createIdempotently(local, idempotencyKey: key, context: context)
        } catch let error as ServerCallError where error.isCreatedSinceDeleted {
            let wasCreate = !run.recreated
            guard run.nextCreateKey(after: error) else { throw error }
            if wasCreate {
                let name = decryptedName(local) ?? run.change.itemID
                report.messages.append("\"\(name)\" was deleted for good on another device after it was created here: your version was kept.")
            }
            return try planCipher(&run)
        }
        guard let answerID = answer.id else { throw ServerCallError.invalidResponse("created item has no id") }
        run.serverID = answerID
        if Self.sameContent(local, answer) {
            run.result = run.recreated ? try await carryAttachments(of: local, to: answer, run: run, report: &report) : answer
            run.carriesLocal = true
            return nil
        }
        run.server = answer
        let hasRecord = answerID == run.change.itemID ? false : try await hasQueueRecord(itemID: answerID)
        return ResolutionPlanner.planAfterAdoption(cipherFacts(run), untouched: !run.recreated && Self.isUntouched(answer),
                                                   adoptedHasRecord: hasRecord, progress: run.change.metadata.progress)
    }

    /// An item re-created from the local version after another device deleted it for good: the attachments that
    /// version had on the server went with the deleted item, and are uploaded to the new one from this device's
    /// copies (the ones staged here go by the `.syncAttachments` step). Returns the item as it is then.
    func carryAttachments(of local: CipherWire, to created: CipherWire, run: PlanRun<CipherWire>,
                          report: inout SyncReport) async throws -> CipherWire {
        let staged = Set((run.change.metadata.attachmentAdds ?? []).map(\.id) + (run.change.metadata.attachmentDeletes ?? []))
        guard let createdID = created.id, local.attachments?.contains(where: { !staged.contains($0.id ?? "") }) == true else { return created }
        let keys = try requireSession().keys
        let view = try modelCall { try local.decrypted(with: keys) }
        let itemKey = try modelCall { try keys.fieldKey(itemKey: local.key, organizationId: local.organizationId, itemID: local.id) }
        let copies = try view.attachments.filter { !staged.contains($0.id ?? "") }.compactMap { attachment in
            try attachmentCopy(attachment, of: run.change.itemID, from: itemKey, to: itemKey)
        }
        try await copyAttachments(copies, keyPrefix: run.createKey, to: created, report: &report)
        return try await authorized { api, token in try await api.getCipher(id: createdID, token: token) }
    }

    /// PUT the local or merged version over the server's with `lastKnownRevisionDate` = the revision the
    /// plan was made against (never a fresher read: a write in between is answered "out of date").
    func push(_ version: PlanVersion, _ run: inout PlanRun<CipherWire>) async throws {
        var body: CipherWire
        switch version {
        case .local:
            guard let local = run.local else { return }
            body = local
            run.carriesLocal = true
        case .merged:
            guard let merge = run.merge, merge.changesServer else { return }
            let keys = try requireSession().keys
            body = try modelCall { try merge.result.merged.encrypted(with: keys, random: random) }
            // Noted before it is sent: if the answer is lost and another device backs the merge up, the next
            // attempt finds this device's version kept there (`backUp`).
            let pushed = PushedMerge(body: String(decoding: body.jsonBytes(), as: UTF8.self),
                                     local: String(decoding: (run.local?.jsonBytes() ?? []), as: UTF8.self))
            try await noteInRecord(&run.change) { $0.progress.pushedMerge = pushed }
        case .server:
            return
        }
        let (id, revision) = (run.serverID, run.server?.revisionDate)
        body.id = id
        let update = body
        run.result = try await authorized { api, token in try await api.updateCipher(update, id: id, lastKnownRevisionDate: revision, token: token) }
    }

    /// Makes the server's trash/archive/folder/favorite state of the result what this device wants: the
    /// local version's state where the result carries it (a push or a create), else only what changed here
    /// since the change began (the intents), over the server's state.
    /// Returns the folder this device filed the item in, where the result should carry it (`nil`: none asked for).
    @discardableResult
    func replayState(_ run: inout PlanRun<CipherWire>) async throws -> String? {
        guard let local = run.local, let base = run.result ?? run.server else { return nil }
        if run.carriesLocal || run.change.metadata.kind == .create {
            run.result = try await applyState(of: local, to: base)
            return local.folderId
        } else if let original = run.change.metadata.originalState {
            var target = base
            let mine = Self.state(of: local)
            if mine.deleted != original.deleted { target.deletedDate = mine.deleted ? (base.deletedDate ?? clock.now()) : nil }
            if mine.archived != original.archived { target.archivedDate = mine.archived ? (base.archivedDate ?? clock.now()) : nil }
            if mine.folderID != original.folderID { target.folderId = mine.folderID }
            if mine.favorite != original.favorite { target.favorite = mine.favorite }
            run.result = try await applyState(of: target, to: base)
            return mine.folderID != original.folderID ? mine.folderID : nil
        }
        return nil
    }

    /// What to tell when the item was filed in a folder here that the server no longer has (deleted on another
    /// device): the server keeps the item in no folder, and nothing else would say so.
    func folderDropped(wanted: String?, result: CipherWire?, name item: CipherWire?) async -> String? {
        guard let wanted, let result, result.folderId != wanted else { return nil }
        let folder = (try? await folders())?.first { $0.id == wanted }?.name
        let itemName = decryptedName(item) ?? result.id ?? ""
        return "\"\(itemName)\" was filed in folder \(folder.map { "\"\($0)\"" } ?? "(deleted)") here, but that folder was deleted on "
            + "another device: the item is in no folder now."
    }

    /// Makes the server's per-user state of an item match `wanted` (restore, trash, archive, folder, favorite).
    func applyState(of wanted: CipherWire, to actual: CipherWire) async throws -> CipherWire {
        guard let id = actual.id else { return actual }
        var result = actual
        if (wanted.folderId != result.folderId) || ((wanted.favorite ?? false) != (result.favorite ?? false)) {
            let folder = wanted.folderId
            let favorite = wanted.favorite ?? false
            result = try await authorized { api, token in try await api.updateCipherState(id: id, folderID: folder, favorite: favorite, token: token) }
        }
        if (wanted.archivedDate != nil) != (result.archivedDate != nil) {
            let archive = wanted.archivedDate != nil
            result = try await authorized { api, token in try await api.archiveCipher(id: id, archived: archive, token: token) }
        }
        if (wanted.deletedDate != nil) != (result.deletedDate != nil) {
            if wanted.deletedDate != nil {
                try await authorized { api, token in try await api.softDeleteCipher(id: id, token: token) }
                result = try await authorized { api, token in try await api.getCipher(id: id, token: token) }
            } else {
                result = try await authorized { api, token in try await api.restoreCipher(id: id, token: token) }
            }
        }
        return result
    }

    /// An item created here and deleted for good before any answer to its create arrived: the copy that
    /// create may have left (found by its wrapped item key) goes too, unless it was edited elsewhere since
    /// (then, as for any delete, the edit wins).
    func deleteLostCopy(_ run: PlanRun<CipherWire>, report: inout SyncReport, context: ResolutionContext) async throws {
        guard let key = run.change.metadata.itemKey, let foundID = context.serverKeysOfCiphers[key] else { return }
        do {
            let found = try await authorized { api, token in try await api.getCipher(id: foundID, token: token) }
            if Self.isUntouched(found) {
                try await authorized { api, token in try await api.hardDeleteCipher(id: foundID, token: token) }
            } else {
                report.messages.append(Self.deleteDroppedMessage(name: decryptedName(found) ?? foundID))
            }
        } catch let error as ServerCallError where error.isGone {}
    }

    func settle(_ run: PlanRun<CipherWire>, baseline: SettleBaseline) async throws {
        guard let settled = run.result ?? run.server else { return try await dropRecord(run.change) }
        // The server's answer does not decrypt here: the record stays, and is tried again (RELIABILITY bug 63: an
        // edit was settled on such an answer, and lost).
        if let keys = session?.keys, Self.answerUnreadable(settled, instead: run.local, keys: keys) {
            throw ServerCallError.invalidResponse("the server's copy of the item does not decrypt on this device")
        }
        // A merge push is only as new as the newest edit it merged.
        let mergedDate = run.merge.map { _ in
            max(run.serverContentDate ?? run.server?.revisionDate ?? settled.revisionDate ?? clock.now(), onServerClock(run.change.metadata.contentEditDate))
        }
        var settling = Settling(change: run.change, settled: settled, swapping: run.swapping, baseline: baseline, mergedContentDate: mergedDate)
        if run.attachmentFailure != nil {
            let adds = Set((run.change.metadata.attachmentAdds ?? []).map(\.id))
            settling.unsentAttachments = (run.local?.attachments ?? []).filter { $0.id.map(adds.contains) ?? false }
        }
        let current = try requireSession()
        let now = clock.now().microsecondsSinceEpoch
        try await write { [userID = current.userID, key = current.keys.userKey, settling] tx in
            try Self.settle(settling, userID: userID, key: key, now: now, tx)
        }
    }

    /// What settling one change writes (several are written in one transaction by the bulk paths).
    struct Settling: Sendable {
        var change: PendingChange
        var settled: CipherWire
        var swapping: Bool
        var baseline: SettleBaseline
        var mergedContentDate: WireDate?
        /// The row of `settled`, made outside the transaction by a bulk path.
        var row: CipherRow?
        /// The attachment step failed: the record stays, holding its attachment work, and the item shows these
        /// attachments added here that have not reached the server yet.
        var unsentAttachments: [AttachmentWire]?
    }

    /// The cache takes the settled version and the record goes, in one transaction; the temporary id gives
    /// way to the server's. Unless the user saved the item again meanwhile: then the saved-meanwhile rule
    /// (``keepSavedMeanwhile``) keeps the record and the newer local copy (under the server's id).
    static func settle(_ settling: Settling, userID: String, key: SymmetricCryptoKey, now: Int64, _ tx: StoreTransaction) throws {
        let (items, queue) = (tx.ciphers(of: userID), tx.queue(of: userID))
        let (change, settled) = (settling.change, settling.settled)
        let newID = settled.id ?? change.itemID
        let reads = try SettleReads(change, newID: newID, swapping: settling.swapping, key: key, tx)
        if reads.waitsBesideCopy { return }
        let (savedAgain, copyHasRecord) = (reads.savedAgain, reads.copyHasRecord)
        // Read before the swap removes it, only if the user saved it again meanwhile.
        let newerLocal = settling.swapping && savedAgain != nil ? try items.find(id: change.itemID) : nil
        if settling.swapping {
            try items.remove(id: change.itemID)
            try tx.drafts(of: userID).moveDrafts(ofItem: change.itemID, to: newID)
            try tx.idSwaps(of: userID).record(kind: .cipher, from: change.itemID, to: newID,
                                              revision: settled.revisionDate?.microsecondsSinceEpoch, at: now)
        }
        let version = { SettledVersion(revision: settled.revisionDate, creationDate: settled.creationDate,
                                       body: String(decoding: settled.jsonBytes(), as: UTF8.self), state: state(of: settled),
                                       created: settling.swapping, mergedContentDate: settling.mergedContentDate) }
        if let savedAgain {
            let kept = try keep(savedAgain, newID: newID, settled: version, baseline: settling.baseline, key: key, tx)
            if settling.swapping, kept.metadata.kind != .hardDelete, var local = newerLocal.flatMap({ try? $0.wire() }) {
                local.id = newID
                local.revisionDate = settled.revisionDate
                local.creationDate = settled.creationDate
                try items.store(local)
            }
            return
        }
        if let unsent = settling.unsentAttachments {
            // One record per item: beside a pulled copy with a record of its own, everything stays as it is.
            if copyHasRecord { return }
            var kept = change
            kept.itemID = newID
            kept.metadata.keep(afterSettling: version(), baseline: .rebaseOnResult)
            try queue.store(kept, key: key)
            var shown = settled
            let deleting = Set(kept.metadata.attachmentDeletes ?? [])
            shown.attachments = (settled.attachments ?? []).filter { !deleting.contains($0.id ?? "") } + unsent
            return try items.store(shown)
        }
        try queue.remove(recordID: change.id)
        // The server's copy may be here already (pulled), saved by the user while this run created it: that
        // save has its own record and local copy, which the next run resolves. Never overwritten here.
        if copyHasRecord { return }
        if let row = settling.row { try items.store(row) } else { try items.store(settled) }
    }

    /// What a settle reads inside its transaction, each once (a bulk settle runs it for 500 creates in one
    /// transaction): the record as stored if the user saved the item again meanwhile (``savedMeanwhile``), and,
    /// for a settle that swaps ids, whether the server's copy has a record of its own here (pulled, and saved by
    /// the user while this run created it).
    struct SettleReads {
        var savedAgain: PendingChange?
        var copyHasRecord: Bool

        init(_ change: PendingChange, newID: String, swapping: Bool, key: SymmetricCryptoKey, _ tx: StoreTransaction) throws {
            savedAgain = try VaultEngine.savedMeanwhile(change, key: key, tx)
            copyHasRecord = try swapping && newID != change.itemID && tx.queue(of: change.userID).hasRecord(forItem: newID)
        }

        /// Both were saved (bug 19's sibling): neither save moves onto the other's id (one record per item). Both
        /// stay as they are, and the next run meets the temporary item's create answered with a copy that has its
        /// own record (`planAfterAdoption`): its version is backed up, the copy's record resolves as usual.
        var waitsBesideCopy: Bool { copyHasRecord && savedAgain != nil }
    }

    /// The saved-meanwhile rule's one test: the record as stored, if the user saved the item again since
    /// the resolution read it (every save moves `updatedDate`; the resolution's own writes never do).
    static func savedMeanwhile(_ change: PendingChange, key: SymmetricCryptoKey, _ tx: StoreTransaction) throws -> PendingChange? {
        guard let stored = try tx.queue(of: change.userID).changedSince(change, key: key),
              stored.metadata.updatedDate != change.metadata.updatedDate else { return nil }
        return stored
    }

    /// The record as the user saved it again (``savedMeanwhile``) stays, under the server's id, noting the
    /// version this run settled as its new base.
    static func keep(_ savedAgain: PendingChange, newID: String, settled: () -> SettledVersion, baseline: SettleBaseline,
                     key: SymmetricCryptoKey, _ tx: StoreTransaction) throws -> PendingChange {
        var stored = savedAgain
        stored.itemID = newID
        stored.metadata.keep(afterSettling: settled(), baseline: baseline)
        try tx.queue(of: stored.userID).store(stored, key: key)
        return stored
    }

    /// The item and its record go from this device (with attachments staged for it); drafts of a
    /// temporary item follow the copy it became.
    func removeLocally<Wire>(_ run: PlanRun<Wire>) async throws {
        let (change, serverID) = (run.change, run.serverID)
        let userID = change.userID
        let key = try requireSession().keys.userKey
        let now = clock.now().microsecondsSinceEpoch
        let removed = try await write { tx in
            // A save made here since this pass read the record is never dropped with it: the next pass plans it.
            if try Self.savedMeanwhile(change, key: key, tx) != nil { return false }
            switch change.itemKind {
            case .cipher: try tx.ciphers(of: userID).remove(id: change.itemID)
            case .folder: try tx.folders(of: userID).remove(id: change.itemID)
            }
            try tx.queue(of: userID).remove(recordID: change.id)
            if serverID != change.itemID {
                try tx.drafts(of: userID).moveDrafts(ofItem: change.itemID, to: serverID)
                // No revision: what a caller holding the temporary id edits meets the server's copy as a conflict.
                try tx.idSwaps(of: userID).record(kind: change.itemKind, from: change.itemID, to: serverID, revision: nil, at: now)
            }
            return true
        }
        guard removed else { return }
        removeStaged(change.metadata.attachmentAdds ?? [], userID: userID)
    }

    /// Whether two versions carry the same encrypted content, byte for byte (every EncString is
    /// IV-unique, so equal ciphertexts mean the same save, never two edits that happen to agree).
    static func sameContent(_ lhs: CipherWire, _ rhs: CipherWire) -> Bool {
        contentBytes(lhs) == contentBytes(rhs)
    }

    /// An item's content (every field but its state: trash, archive, folder, favorite) as bytes, each
    /// encrypted field as sent.
    static func contentBytes(_ wire: CipherWire) -> [UInt8] {
        let object = wire.jsonObject()
        return ["name", "notes", "key", "login", "card", "identity", "secureNote", "sshKey", "fields", "passwordHistory"].flatMap { key in
            (object[key].flatMap { $0.isNull ? nil : $0.serialized() } ?? []) + [0]
        }
    }

    /// Whether a server item is as it was created (no one has written to it since).
    static func isUntouched(_ wire: CipherWire) -> Bool {
        guard let created = wire.creationDate, let revision = wire.revisionDate else { return false }
        return ConflictMatrix.isSameRevision(created, revision)
    }

    /// Notes in the stored record, before a create is posted, that it may reach the server: deleting the
    /// item for good before the answer is heard then queues that delete instead of forgetting the item.
    func noteCreateSent(_ change: inout PendingChange) async throws {
        guard change.metadata.createSent != true else { return }
        try await noteInRecord(&change) { $0.createSent = true }
    }

    /// Writes the resolution's own fields into the stored record and the one in hand (read in the same
    /// transaction, so that a save made on this device meanwhile keeps its date, kind and baseline).
    func noteInRecord(_ change: inout PendingChange, _ modify: @escaping @Sendable (inout PendingChangeMetadata) -> Void) async throws {
        modify(&change.metadata)
        let (noted, key) = (change, try requireSession().keys.userKey)
        try await write { tx in _ = try Self.updateStoredRecord(noted, tx, key: key, modify) }
    }

    /// Writes `modify` into the stored record (read in the same transaction). Returns the record as
    /// written; `nil` if it is gone.
    @discardableResult
    static func updateStoredRecord(_ change: PendingChange, _ tx: StoreTransaction, key: SymmetricCryptoKey,
                                   _ modify: (inout PendingChangeMetadata) -> Void) throws -> PendingChange? {
        guard var stored = try tx.queue(of: change.userID).change(id: change.id, key: key) else { return nil }
        modify(&stored.metadata)
        try tx.queue(of: change.userID).store(stored, key: key)
        return stored
    }

    /// Creates on the server, with `idempotencyKey`, unless the snapshot holds an item with the
    /// byte-identical wrapped item key (an earlier attempt whose answer was lost, on a server that ignores
    /// keys: the key is unique to the item and survives renames made elsewhere). An item adopted from the
    /// snapshot is read again first: this run may have changed it since.
    func createIdempotently(_ wire: CipherWire, idempotencyKey: String?, context: ResolutionContext) async throws -> CipherWire {
        if let itemKey = wire.key?.serialized, let adoptedID = context.serverKeysOfCiphers[itemKey] {
            do {
                return try await authorized { api, token in try await api.getCipher(id: adoptedID, token: token) }
            } catch let error as ServerCallError where error.isGone {
                // Deleted since the snapshot: this create is still wanted.
            }
        }
        var draftBody = wire
        draftBody.id = nil
        let body = draftBody
        let collections = wire.collectionIds ?? []
        return try await authorized { api, token in
            try await api.createCipher(body, collectionIDs: collections, idempotencyKey: idempotencyKey, token: token)
        }
    }

    /// Whether an item has a queue record of its own on this device.
    func hasQueueRecord(itemID: String) async throws -> Bool {
        let userID = try requireSession().userID
        return try await read { tx in try tx.queue(of: userID).hasRecord(forItem: itemID) }
    }

    // MARK: Folders

    /// Resolves one queued folder change with the same planner and driver: folders have one field, their
    /// name (created, renamed, deleted; the folder policy when both sides renamed).
    func resolveFolder(_ change: PendingChange, context: ResolutionContext, report: inout SyncReport) async throws {
        guard let (change, local) = try await current(change, local: { tx, userID, id in
            try tx.folders(of: userID).find(id: id).flatMap { try? $0.wire() }
        }) else { return }
        try context.requireReadable(change)
        var run = PlanRun<FolderWire>(change: change, local: local, server: context.serverFolders[change.itemID])
        try await drive(&run, report: &report, plan: { self.planFolder(&$0) },
                        perform: { step, run, report in try await self.perform(step, &run, &report, context: context) },
                        reread: { $0.server = nil })
    }

    func folderFacts(_ run: PlanRun<FolderWire>) -> ResolutionFacts {
        let record = run.change.metadata
        // A server that sends no revision date for folders: taken as unchanged (never as a rename made elsewhere).
        let server: ServerFacts = run.server.map {
            .present(revision: $0.revisionDate ?? record.originalRevisionDate ?? WireDate(microsecondsSinceEpoch: 0), holdsLocal: false)
        } ?? .gone
        return ResolutionFacts(itemKind: .folder, record: record, localPresent: run.local != nil, server: server,
                               localEditedOnServerClock: onServerClock(record.contentEditDate), createKey: run.createKey)
    }

    func planFolder(_ run: inout PlanRun<FolderWire>) -> [ResolutionStep] {
        var facts = folderFacts(run)
        facts.merge = facts.record.kind == .update ? folderMerge(&run, against: facts, adopted: false) : .notApplicable
        return ResolutionPlanner.plan(facts, progress: run.change.metadata.progress)
    }

    /// The folder policy (docs/ARCHITECTURE.md, "Merging"; merge policy only): the server's name is the
    /// local one already (`.clean`); both renamed it differently (`.conflicting`: the newer rename wins,
    /// and `notice` says so; `adopted`: a create's answer renamed elsewhere, its base unknown); else the
    /// local rename goes (`.notApplicable`).
    func folderMerge(_ run: inout PlanRun<FolderWire>, against facts: ResolutionFacts, adopted: Bool) -> MergeFacts {
        guard configuration.conflictPolicy == .merge, let server = run.server, let revision = server.revisionDate, let keys = session?.keys,
              let mine = try? run.local?.decrypted(with: keys).name, let theirs = try? server.decrypted(with: keys).name else { return .notApplicable }
        if theirs == mine { return .clean }
        let baseName = run.change.metadata.baseVersion.flatMap { try? FolderWire(jsonBytes: Array($0.utf8)).decrypted(with: keys).name }
        guard adopted || (baseName != nil && theirs != baseName) else { return .notApplicable }
        run.notice = revision >= facts.localEditedOnServerClock
            ? "Folder \"\(theirs)\": renamed on another device later than you renamed it \"\(mine)\" here; the newer name was kept."
            : "Folder \"\(mine)\": renamed here later than another device renamed it \"\(theirs)\"; the newer name was kept."
        return .conflicting
    }

    func perform(_ step: ResolutionStep, _ run: inout PlanRun<FolderWire>, _ report: inout SyncReport,
                 context: ResolutionContext) async throws -> [ResolutionStep]? {
        switch step {
        case .create(let key):
            return try await createFolder(&run, key: key, context: context)
        case .push:
            guard let name = run.local?.name else { return nil }
            let id = run.serverID
            run.result = try await authorized { api, token in try await api.renameFolder(id: id, name: name, token: token) }
        case .deleteForGood:
            // A folder created here and deleted before its create's answer arrived: found by its names.
            let lostCreate = run.change.metadata.createSent == true && run.change.metadata.originalRevisionDate == nil
            let names = (run.change.metadata.earlierNames ?? []).reversed()
            guard let id = run.server != nil ? run.serverID : lostCreate ? context.folderCopy(names: Array(names))?.id : nil else { return nil }
            do {
                try await authorized { api, token in try await api.deleteFolder(id: id, token: token) }
            } catch let error as ServerCallError where error.isGone {}
        case .swapID:
            run.swapping = true
        case .settle(let baseline):
            try await settleFolder(run, baseline: baseline)
        case .removeLocally:
            try await removeLocally(run)
        case .tell(.deleteDropped):
            let name = session.flatMap { try? run.server?.decrypted(with: $0.keys).name } ?? run.change.itemID
            report.messages.append("Folder \"\(name)\" was renamed on another device since this one last synced, and deleted here: the folder was kept and the delete dropped.")
        case .tell(.folderRecreated):
            let name = session.flatMap { try? run.local?.decrypted(with: $0.keys).name } ?? run.change.itemID
            report.messages.append("Folder \"\(name)\" was deleted on another device after you renamed it here: it was made again under the new "
                                   + "name, without the items the delete took out of it.")
        case .tell:
            if let notice = run.notice { report.messages.append(notice) }
        case .backUp, .replayState, .trash, .deleteLostCopy, .syncAttachments:
            break  // not planned for folders
        }
        return nil
    }

    /// Creates the folder once (its key; a copy in the snapshot under one of its names for servers that
    /// ignore keys). The key used and the folder deleted for good since (`410`): created again under the
    /// re-creation key. Answered under another name: a copy under one of this device's earlier names takes
    /// the local name; a rename made elsewhere since an earlier attempt made it meets the folder policy.
    func createFolder(_ run: inout PlanRun<FolderWire>, key: String, context: ResolutionContext) async throws -> [ResolutionStep]? {
        guard let local = run.local else { return [.removeLocally] }
        let found = context.folderCopy(names: [local.name.serialized] + (run.change.metadata.earlierNames ?? []).reversed())
        // A folder of the same name made elsewhere meanwhile (two devices that each made "Bills" offline) is this
        // folder: two folders of one name only make every later use of the name ambiguous. Its items join it.
        if found == nil, let keys = session?.keys, let name = try? local.decrypted(with: keys).name,
           let same = context.serverFolders.values.first(where: { (try? $0.decrypted(with: keys).name) == name }), let sameID = same.id {
            run.serverID = sameID
            run.result = same
            return nil
        }
        var answer: FolderWire
        if let found {
            answer = found
        } else {
            if run.change.metadata.kind == .create { try await noteCreateSent(&run.change) }
            do {
                answer = try await authorized { api, token in try await api.createFolder(name: local.name, idempotencyKey: key, token: token) }
            } catch let error as ServerCallError where error.isCreatedSinceDeleted {
                guard run.nextCreateKey(after: error) else { throw error }
                return planFolder(&run)
            }
        }
        guard let answerID = answer.id else { throw ServerCallError.invalidResponse("created folder has no id") }
        run.serverID = answerID
        run.result = answer
        guard answer.name.serialized != local.name.serialized else { return nil }
        run.server = answer
        var facts = folderFacts(run)
        facts.merge = found != nil ? .notApplicable : folderMerge(&run, against: facts, adopted: true)
        return ResolutionPlanner.planAfterAdoption(facts, untouched: found != nil, adoptedHasRecord: false)
    }

    func settleFolder(_ run: PlanRun<FolderWire>, baseline: SettleBaseline) async throws {
        guard let settled = run.result ?? run.server, let newID = settled.id else { throw ServerCallError.invalidResponse("created folder has no id") }
        let (change, swapping) = (run.change, run.swapping)
        let current = try requireSession()
        let now = clock.now().microsecondsSinceEpoch
        try await write { [userID = current.userID, key = current.keys.userKey] tx in
            let reads = try SettleReads(change, newID: newID, swapping: swapping, key: key, tx)
            if reads.waitsBesideCopy { return }
            let folders = tx.folders(of: userID)
            let newerLocal = swapping ? try folders.find(id: change.itemID).flatMap { try? $0.wire() } : nil
            if swapping {
                try folders.remove(id: change.itemID)
                try tx.ciphers(of: userID).moveItems(ofFolder: change.itemID, to: newID)
                try tx.idSwaps(of: userID).record(kind: .folder, from: change.itemID, to: newID, revision: nil, at: now)
            }
            let version = { SettledVersion(revision: settled.revisionDate, creationDate: nil, body: String(decoding: settled.jsonBytes(), as: UTF8.self),
                                           state: nil, created: swapping) }
            if let savedAgain = reads.savedAgain {
                let kept = try Self.keep(savedAgain, newID: newID, settled: version, baseline: baseline, key: key, tx)
                if swapping, kept.metadata.kind == .update, var local = newerLocal {
                    local.id = newID
                    local.revisionDate = settled.revisionDate
                    try folders.store(local)
                }
                return
            }
            try folders.store(settled)
            try tx.queue(of: userID).remove(recordID: change.id)
        }
    }
}
