import Foundation
import VaultAPI
import VaultCrypto
import VaultModels
import VaultStore
import VaultSyncCore

extension VaultEngine {
    /// Resolves one queued item change with the conflict matrix. Backups are written to the server
    /// before the winner is pushed, so a failure between the two leaves both versions safe and the
    /// record in place for the next run.
    func resolveCipher(_ change: PendingChange, context: ResolutionContext, report: inout SyncReport) async throws {
        let current = try requireSession()
        let userID = current.userID
        let itemID = change.itemID
        var change = change
        let local = try await read { tx in try tx.ciphers(of: userID).find(id: itemID) }.flatMap { try? $0.wire() }
        var server = context.serverCiphers[change.itemID]
        // seed 001 AP-R2: compare on the server's clock.
        let localUpdated = clockOffsetBox.current?.serverTime(forDeviceTime: change.metadata.updatedDate) ?? change.metadata.updatedDate

        // A backup left half-done by an earlier run is finished first: posted again with its idempotency key
        // (unless the snapshot has it, found by its wrapped item key or exact encrypted name).
        if let pending = change.metadata.pendingBackup, let backup = try? CipherWire(jsonBytes: Array(pending.utf8)) {
            let key = change.metadata.backupDoneFor.map { Self.backupKey(change, marker: $0) }
            do {
                let created = try await createIdempotently(backup, idempotencyKey: key, context: context)
                try await storeBackup(created, originalID: change.itemID, change: &change, report: &report)
            } catch let error as ServerCallError where error.isCreatedSinceDeleted {
                // The earlier attempt made the backup and it was deleted for good since (the conflict was
                // settled on another device): the version was kept until someone chose; nothing to redo.
                try await forgetPendingBackup(&change)
            }
        }

        for _ in 0..<3 {
            // Our own earlier push whose answer was lost: the server holds the local ciphertext byte for byte
            // (a content edit re-encrypts every field with fresh IVs, so nobody else can have it).
            if let local, let current = server, Self.isOwnPush(change, local: local, server: current) {
                return try await settle(change, with: try await applyState(of: local, to: current), pushedLocal: true)
            }
            let side: ServerSide = server.flatMap(\.revisionDate).map { .present(revisionDate: $0) } ?? .gone
            let plan = ConflictMatrix.decide(change.metadata, server: side, localUpdatedOnServerClock: localUpdated)
            logger.debug("resolving", metadata: ["item": "\(change.itemID)", "plan": "\(plan)"])
            do {
                try await execute(plan, change: &change, local: local, server: server, context: context, report: &report)
                return
            } catch let error as ServerCallError where error.isOutOfDate {
                // Someone wrote in between: read the item again and decide again (never overwrite blindly).
                server = try? await authorized { api, token in try await api.getCipher(id: itemID, token: token) }
            }
        }
        throw ServerCallError.http(status: 400, message: "The item kept changing on the server; try again later.")
    }

    static func isOwnPush(_ change: PendingChange, local: CipherWire, server: CipherWire) -> Bool {
        guard change.metadata.kind == .update, change.metadata.contentChanged, let revision = server.revisionDate else { return false }
        let moved = !(change.metadata.originalRevisionDate.map { ConflictMatrix.isSameRevision($0, revision) } ?? false)
        return moved && sameContent(local, server)
    }

    /// Whether two versions carry the same encrypted content, byte for byte (every EncString is
    /// IV-unique, so equal ciphertexts mean the same save, never two edits that happen to agree).
    static func sameContent(_ lhs: CipherWire, _ rhs: CipherWire) -> Bool {
        let left = lhs.jsonObject()
        let right = rhs.jsonObject()
        for key in ["name", "notes", "key", "login", "card", "identity", "secureNote", "sshKey", "fields", "passwordHistory"] {
            let a = left[key].flatMap { $0.isNull ? nil : $0 }
            let b = right[key].flatMap { $0.isNull ? nil : $0 }
            if a?.serialized() != b?.serialized() { return false }
        }
        return true
    }

    func execute(_ plan: ResolutionPlan, change: inout PendingChange, local: CipherWire?, server: CipherWire?,
                 context: ResolutionContext, report: inout SyncReport) async throws {
        let current = try requireSession()
        let userID = current.userID
        let itemID = change.itemID
        let recordID = change.id
        switch plan {
        case .create, .recreateFromLocal:
            guard let local else { return try await dropRecord(change) }
            if plan == .create { try await noteCreateSent(&change) }
            // A create is one create through every attempt: its temporary id is the idempotency key (a server that
            // honours it answers a retry, or a post delayed past the client's timeout, with the first item). A
            // re-creation has a key of its own, derived from its record.
            var recreated = plan == .recreateFromLocal
            var created: CipherWire
            do {
                created = try await createIdempotently(local, earlierNames: change.metadata.earlierNames ?? [],
                                                       idempotencyKey: recreated ? Self.recreationKey(change) : itemID, context: context)
            } catch let error as ServerCallError where !recreated && error.isCreatedSinceDeleted {
                // An earlier attempt made the item and another device deleted it for good since. As for any item
                // kept here and deleted for good elsewhere, this version comes back as a new item (nothing lost).
                recreated = true
                let name = (try? local.decrypted(with: current.keys).name) ?? itemID
                report.messages.append("\"\(name)\" was deleted for good on another device after it was created here: your version was kept.")
                created = try await createIdempotently(local, idempotencyKey: Self.recreationKey(change), context: context)
            }
            if let adoptedID = created.id, adoptedID != itemID, try await hasQueueRecord(itemID: adoptedID) {
                // The earlier attempt reached the server, a pull brought it here as a second item, and it was
                // changed here too (its own record): two local copies of one item. Neither may overwrite the
                // other. The server's id stays the live item (its record resolves on its own); this copy's
                // version becomes a conflict backup of it, written before the temporary item goes.
                let marker = "local:\(change.metadata.updatedDate.microsecondsSinceEpoch)"
                if change.metadata.backupDoneFor != marker {
                    try await backUp(local, losingDate: change.metadata.updatedDate, originalID: adoptedID, marker: marker,
                                     change: &change, report: &report, context: context)
                }
                try await write { tx in
                    try tx.ciphers(of: userID).remove(id: itemID)
                    try tx.queue(of: userID).remove(recordID: recordID)
                    try tx.drafts(of: userID).moveDrafts(ofItem: itemID, to: adoptedID)
                }
                return
            }
            // Whether `created` ends up carrying this local version (posted or pushed over an adopted
            // copy), or an adopted copy edited elsewhere won.
            var pushedLocal = true
            if !Self.sameContent(local, created), let adoptedID = created.id, let revision = created.revisionDate {
                // Adopted an earlier attempt that reached the server, and the two differ. Untouched since it was
                // created, it holds an older version of this device's own item: the later edits go on top.
                // Edited since (another device pulled it), it is a conflict like any other: the newer one wins
                // and the other is backed up first. A recreation (the server lost the item) adopts by a name
                // every device that had the item shares: the copy found may be another device's recreation,
                // never to be overwritten unseen, so it is always a conflict.
                let untouched = !recreated && Self.isUntouched(created)
                let localUpdated = clockOffsetBox.current?.serverTime(forDeviceTime: change.metadata.updatedDate) ?? change.metadata.updatedDate
                if untouched || localUpdated > revision {
                    if !untouched {
                        let marker = "server:\(revision.microsecondsSinceEpoch)"
                        if change.metadata.backupDoneFor != marker {
                            try await backUp(created, losingDate: revision, originalID: adoptedID, marker: marker, change: &change, report: &report, context: context)
                        }
                    }
                    var body = local
                    body.id = adoptedID
                    let update = body
                    created = try await authorized { api, token in
                        try await api.updateCipher(update, id: adoptedID, lastKnownRevisionDate: revision, token: token)
                    }
                } else {
                    pushedLocal = false
                    let marker = "local:\(change.metadata.updatedDate.microsecondsSinceEpoch)"
                    if change.metadata.backupDoneFor != marker {
                        try await backUp(local, losingDate: change.metadata.updatedDate, originalID: adoptedID, marker: marker,
                                         change: &change, report: &report, context: context)
                    }
                }
            }
            created = try await applyState(of: local, to: created)
            try await swapCipherID(from: change.itemID, to: created, change: change, pushedLocal: pushedLocal)
        case .pushLocal:
            guard let local, let server else { return try await dropRecord(change) }
            try await pushLocal(local, over: server, change: change)
        case .backupServerThenPushLocal:
            guard let local, let server else { return try await dropRecord(change) }
            if try await resolveByMerge(change: &change, local: local, server: server, winner: .mine, context: context, report: &report) {
                return
            }
            let marker = "server:\(server.revisionDate?.microsecondsSinceEpoch ?? 0)"
            if change.metadata.backupDoneFor != marker {
                try await backUp(server, losingDate: server.revisionDate ?? clock.now(), originalID: change.itemID, marker: marker,
                                 change: &change, report: &report, context: context)
            }
            // Over the version just backed up, never a fresher read: if someone wrote since, the server
            // answers "out of date" and the loop decides again (and backs that version up as well).
            try await pushLocal(local, over: server, change: change)
        case .backupLocalThenTakeServer:
            guard let local, let server else { return try await dropRecord(change) }
            if try await resolveByMerge(change: &change, local: local, server: server, winner: .theirs, context: context, report: &report) {
                return
            }
            let marker = "local:\(change.metadata.updatedDate.microsecondsSinceEpoch)"
            if change.metadata.backupDoneFor != marker {
                try await backUp(local, losingDate: change.metadata.updatedDate, originalID: change.itemID, marker: marker,
                                 change: &change, report: &report, context: context)
            }
            try await takeServer(server, replaying: local, change: change)
        case .takeServerWithLocalState:
            guard let server else { return try await dropRecord(change) }
            try await takeServer(server, replaying: local, change: change)
        case .pushSoftDelete:
            try await authorized { api, token in try await api.softDeleteCipher(id: itemID, token: token) }
            let trashed = try await authorized { api, token in try await api.getCipher(id: itemID, token: token) }
            try await settle(change, with: trashed, pushedLocal: true)
        case .pushHardDelete:
            do {
                try await authorized { api, token in try await api.hardDeleteCipher(id: itemID, token: token) }
            } catch let error as ServerCallError where error.isGone {}
            try await write { tx in
                try tx.ciphers(of: userID).remove(id: itemID)
                try tx.queue(of: userID).remove(recordID: recordID)
            }
        case .dropDeleteKeepServer, .backupLocalThenDropDelete:
            guard let server else { return try await dropRecord(change) }
            if plan == .backupLocalThenDropDelete, let local {
                let marker = "local:\(change.metadata.updatedDate.microsecondsSinceEpoch)"
                if change.metadata.backupDoneFor != marker {
                    try await backUp(local, losingDate: change.metadata.updatedDate, originalID: change.itemID, marker: marker,
                                     change: &change, report: &report, context: context)
                }
            }
            let name = (try? server.decrypted(with: current.keys).name) ?? change.itemID
            report.messages.append("\"\(name)\" was edited on another device after you deleted it here: the edit was kept and the delete dropped.")
            try await settle(change, with: server, pushedLocal: false)
        case .removeLocally:
            try await write { tx in
                try tx.ciphers(of: userID).remove(id: itemID)
                try tx.queue(of: userID).remove(recordID: recordID)
            }
        case .hardDeleteLostCreate:
            if let foundID = context.copy(ofKey: change.metadata.itemKey, names: (change.metadata.earlierNames ?? []).reversed()) {
                do {
                    let found = try await authorized { api, token in try await api.getCipher(id: foundID, token: token) }
                    if Self.isUntouched(found) {
                        try await authorized { api, token in try await api.hardDeleteCipher(id: foundID, token: token) }
                    } else {
                        let name = (try? found.decrypted(with: current.keys).name) ?? foundID
                        report.messages.append("\"\(name)\" was edited on another device after you deleted it here: the edit was kept and the delete dropped.")
                    }
                } catch let error as ServerCallError where error.isGone {}
            }
            try await write { tx in
                try tx.ciphers(of: userID).remove(id: itemID)
                try tx.queue(of: userID).remove(recordID: recordID)
            }
        }
    }

    /// A conflict (both sides changed the item since the version this device's change started from)
    /// merged field by field against that version (docs/ARCHITECTURE.md, "Merging"): fields changed on
    /// one side are taken from it; only a field both changed differently needs the backup copy of the
    /// losing version (written first, as always), and the merged fields still go into the winner. The
    /// merged item is pushed over the server's version (the revision check applies); if the server
    /// holds it already (the answer to an earlier push was lost), nothing is pushed twice. Returns false
    /// when the merge does not apply: the backup policy, no base (a record older than the merge, or a
    /// create), a server that did not move (the password-count rule backs up an unchanged version), or
    /// a version that cannot be opened.
    func resolveByMerge(change: inout PendingChange, local: CipherWire, server: CipherWire, winner: ItemMerge.Side,
                        context: ResolutionContext, report: inout SyncReport) async throws -> Bool {
        guard configuration.conflictPolicy == .merge, let baseText = change.metadata.baseVersion,
              let original = change.metadata.originalRevisionDate, let revision = server.revisionDate,
              !ConflictMatrix.isSameRevision(original, revision),
              let baseWire = try? CipherWire(jsonBytes: Array(baseText.utf8)) else { return false }
        let keys = try requireSession().keys
        guard let base = try? baseWire.decrypted(with: keys), let mine = try? local.decrypted(with: keys),
              let theirs = try? server.decrypted(with: keys) else { return false }
        let result = ItemMerge.merge(base: base, mine: mine, theirs: theirs, winner: winner)
        if !result.isClean {
            let madeBefore = report.backups.count
            let (loser, losingDate, marker) = winner == .mine
                ? (server, revision, "server:\(revision.microsecondsSinceEpoch)")
                : (local, change.metadata.updatedDate, "local:\(change.metadata.updatedDate.microsecondsSinceEpoch)")
            if change.metadata.backupDoneFor != marker {
                try await backUp(loser, losingDate: losingDate, originalID: change.itemID, marker: marker, change: &change,
                                 report: &report, context: context)
            }
            keepDifference(result.difference, for: report.backups[madeBefore...].map(\.backupID))
        }
        var settled = server
        if !ItemMerge.sameContent(result.merged, theirs) {
            var body = try modelCall { try result.merged.encrypted(with: keys, random: random) }
            body.id = change.itemID
            let update = body
            let itemID = change.itemID
            settled = try await authorized { api, token in
                try await api.updateCipher(update, id: itemID, lastKnownRevisionDate: revision, token: token)
            }
        }
        // Settled as the server's content (not a push of the local version as it is): a save made here
        // meanwhile meets this merged version at the next run and merges again, so nothing from the
        // other device is overwritten by it. The local trash/archive/folder/favorite intents are replayed.
        let contentDate = max(revision, clockOffsetBox.current?.serverTime(forDeviceTime: change.metadata.updatedDate) ?? change.metadata.updatedDate)
        try await takeServer(settled, replaying: local, change: change, mergedContentDate: contentDate)
        let summary = result.summary(itemName: result.merged.name, winner: winner)
        report.messages.append(summary)
        logger.info("conflict merged", metadata: ["item": "\(change.itemID)", "clean": "\(result.isClean)",
                                                  "fields": "\(result.difference.fields.count)"])
        return true
    }

    /// Keeps the merge's comparison with the backups it made (sealed: it holds field values), for
    /// ``conflictDifference(backupID:)``. Best effort: a backup without it is shown without it.
    func keepDifference(_ difference: ItemMerge.ItemDifference, for backupIDs: [String]) {
        guard !backupIDs.isEmpty, let current = session, let sealed = try? Sealed.seal(difference, key: current.keys.userKey) else { return }
        let userID = current.userID
        _ = try? writeNow { tx in
            for backupID in backupIDs { try tx.backups(of: userID).setSealedDifference(sealed, of: backupID) }
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
        let key = try requireSession().keys.userKey
        let noted = change
        try await write { tx in _ = try Self.updateStoredRecord(noted, tx, key: key) { $0.createSent = true } }
        change.metadata.createSent = true
    }

    /// PUT the local version with `lastKnownRevisionDate` = the server revision decided on, then replay
    /// trash/archive intents (which a PUT does not carry).
    func pushLocal(_ local: CipherWire, over server: CipherWire, change: PendingChange) async throws {
        let revision = server.revisionDate
        let itemID = change.itemID
        var draftBody = local
        draftBody.id = itemID
        let body = draftBody
        let pushed = try await authorized { api, token in
            try await api.updateCipher(body, id: itemID, lastKnownRevisionDate: revision, token: token)
        }
        let final = try await applyState(of: local, to: pushed)
        try await settle(change, with: final, pushedLocal: true)
    }

    /// Takes the server version, replaying the local state intents (what changed here relative to the
    /// item's original state: trash, archive, folder, favorite).
    /// `mergedContentDate`: `server` is this device's merge push, whose newest edit is from then.
    func takeServer(_ server: CipherWire, replaying local: CipherWire?, change: PendingChange, mergedContentDate: WireDate? = nil) async throws {
        guard let local, let original = change.metadata.originalState else {
            return try await settle(change, with: server, pushedLocal: false, mergedContentDate: mergedContentDate)
        }
        var wanted = Self.state(of: server)
        let mine = Self.state(of: local)
        if mine.deleted != original.deleted { wanted.deleted = mine.deleted }
        if mine.archived != original.archived { wanted.archived = mine.archived }
        if mine.folderID != original.folderID { wanted.folderID = mine.folderID }
        if mine.favorite != original.favorite { wanted.favorite = mine.favorite }
        var target = server
        target.deletedDate = wanted.deleted ? (server.deletedDate ?? clock.now()) : nil
        target.archivedDate = wanted.archived ? (server.archivedDate ?? clock.now()) : nil
        target.folderId = wanted.folderID
        target.favorite = wanted.favorite
        let final = try await applyState(of: target, to: server)
        try await settle(change, with: final, pushedLocal: false, mergedContentDate: mergedContentDate)
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

    /// Writes the server's version to the cache and removes the record, in one transaction; unless the
    /// item was saved again on this device while it was being resolved (see ``keepIfSavedMeanwhile``).
    /// `pushedLocal`: whether `server` carries the local version this resolution started from (pushed,
    /// or found already pushed), or the server's own content won.
    /// `mergedContentDate`: `server` is this device's merge push (see ``keepIfSavedMeanwhile``).
    func settle(_ change: PendingChange, with server: CipherWire, pushedLocal: Bool, mergedContentDate: WireDate? = nil) async throws {
        let current = try requireSession()
        let userID = current.userID
        let key = current.keys.userKey
        try await write { tx in
            if try Self.keepIfSavedMeanwhile(change, settled: server, pushedLocal: pushedLocal, mergedContentDate: mergedContentDate,
                                             key: key, tx) { return }
            try tx.ciphers(of: userID).store(server)
            try tx.queue(of: userID).remove(recordID: change.id)
        }
    }

    /// Inside a settling transaction: whether the user saved the item again on this device while its
    /// record was being resolved (the engine serves other calls while the sync waits for the server;
    /// every save moves the record's `updatedDate`). Then the local copy holds that newer save and
    /// stays, and so does the record:
    /// - if the settled version carries the local version the save was made on (`pushedLocal`), the
    ///   record is rebased on it: the next run pushes the newer save on top, no conflict, no backup of
    ///   our own push;
    /// - if the server's content won, the record keeps its old baseline: the next run meets the
    ///   server's version as a conflict again, and the newer save wins with that version backed up.
    /// - if the settled version is this device's merge push (`mergedContentDate`), the record keeps its
    ///   baseline and notes that this revision is only as new as the edits merged into it: the next run
    ///   merges the newer save with it, and the newer save counts as the newer edit.
    static func keepIfSavedMeanwhile(_ change: PendingChange, settled server: CipherWire, pushedLocal: Bool,
                                     mergedContentDate: WireDate? = nil, key: SymmetricCryptoKey, _ tx: StoreTransaction) throws -> Bool {
        guard var stored = try savedMeanwhile(change, key: key, tx) else { return false }
        if let mergedContentDate {
            stored.metadata.mergedPushRevision = server.revisionDate
            stored.metadata.mergedContentDate = mergedContentDate
        }
        if pushedLocal {
            stored.metadata.originalRevisionDate = server.revisionDate
            stored.metadata.baseVersion = String(decoding: server.jsonBytes(), as: UTF8.self)
            stored.metadata.originalState = state(of: server)
        }
        stored.metadata.pendingBackup = nil
        stored.metadata.attempts = 0
        stored.metadata.lastError = nil
        stored.metadata.nextAttemptDate = nil
        stored.metadata.state = .pending
        try tx.queue(of: change.userID).store(stored, key: key)
        return true
    }

    /// The stored record of `change` if the user saved the item again since the resolution read it
    /// (every save moves `updatedDate`; the resolution's own writes never do).
    static func savedMeanwhile(_ change: PendingChange, key: SymmetricCryptoKey, _ tx: StoreTransaction) throws -> PendingChange? {
        guard let stored = try tx.queue(of: change.userID).change(id: change.id, key: key),
              stored.metadata.updatedDate != change.metadata.updatedDate else { return nil }
        return stored
    }

    /// Writes the resolution's own fields into the stored record (read in the same transaction), so
    /// that a save made on this device meanwhile keeps its own (its date, kind and baseline). Returns
    /// the record as written; `nil` if it is gone.
    @discardableResult
    static func updateStoredRecord(_ change: PendingChange, _ tx: StoreTransaction, key: SymmetricCryptoKey,
                                   _ modify: (inout PendingChangeMetadata) -> Void) throws -> PendingChange? {
        guard var stored = try tx.queue(of: change.userID).change(id: change.id, key: key) else { return nil }
        modify(&stored.metadata)
        try tx.queue(of: change.userID).store(stored, key: key)
        return stored
    }

    /// Creates on the server unless an item with the byte-identical wrapped item key or encrypted name is
    /// already there (an earlier attempt whose answer was lost: the random IV makes each unique, seed 001
    /// RES-1; the key survives renames made elsewhere).
    ///
    /// `earlierNames`: the names the item had before it was renamed here (its queue record's), which an
    /// earlier attempt may have carried.
    ///
    /// An item adopted from the snapshot is read again first: this run may have changed it since (a bulk
    /// push of its own record), and deciding on a stale revision would fail or overwrite.
    func createIdempotently(_ wire: CipherWire, earlierNames: [String] = [], idempotencyKey: String? = nil,
                            context: ResolutionContext) async throws -> CipherWire {
        if let adoptedID = context.copy(ofKey: wire.key?.serialized, names: [wire.name.serialized] + earlierNames.reversed()) {
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

    /// Swaps a temporary id for the server's in the cache, the queue and drafts, in one transaction.
    ///
    /// If the user saved the item again while it was being created (see ``keepIfSavedMeanwhile``),
    /// that newer local copy moves to the server's id and its record becomes an update of the item
    /// just created, pushed at the next run: on top of `created` when it carries the local version
    /// (`pushedLocal`), else based on the version first created, so that the next run meets the
    /// adopted copy's later edits as a conflict (newer wins, the other backed up).
    func swapCipherID(from temporaryID: String, to created: CipherWire, change: PendingChange, pushedLocal: Bool) async throws {
        try await swapCipherIDs([CreatedItem(temporaryID: temporaryID, created: created, change: change, pushedLocal: pushedLocal)])
    }

    /// A create the server answered: what ``swapCipherIDs(_:)`` settles.
    struct CreatedItem: Sendable {
        var temporaryID: String
        var created: CipherWire
        var change: PendingChange
        var pushedLocal: Bool
    }

    /// ``swapCipherID(from:to:change:pushedLocal:)`` for many creates (a bulk answer) in one transaction.
    func swapCipherIDs(_ items: [CreatedItem]) async throws {
        let current = try requireSession()
        let userID = current.userID
        let key = current.keys.userKey
        guard items.allSatisfy({ $0.created.id != nil }) else { throw ServerCallError.invalidResponse("created item has no id") }
        try await write { tx in
            for item in items { try Self.swapCipherID(item, userID: userID, key: key, tx) }
        }
    }

    static func swapCipherID(_ item: CreatedItem, userID: String, key: SymmetricCryptoKey, _ tx: StoreTransaction) throws {
        let (temporaryID, created, change, pushedLocal) = (item.temporaryID, item.created, item.change, item.pushedLocal)
        guard let newID = created.id else { return }
        let savedMeanwhile = try Self.savedMeanwhile(change, key: key, tx)
        let newerLocal = try tx.ciphers(of: userID).find(id: temporaryID).flatMap { try? $0.wire() }
        try tx.ciphers(of: userID).remove(id: temporaryID)
        if var record = savedMeanwhile, record.metadata.kind == .hardDelete {
            // Deleted for good here while it was being created: the delete goes to the new item.
            record.itemID = newID
            record.metadata.originalRevisionDate = created.revisionDate
            try tx.queue(of: userID).store(record, key: key)
        } else if var record = savedMeanwhile, var local = newerLocal {
            local.id = newID
            local.revisionDate = created.revisionDate
            local.creationDate = created.creationDate
            try tx.ciphers(of: userID).store(local)
            record.itemID = newID
            if record.metadata.kind == .create {
                record.metadata.kind = .update
                record.metadata.contentChanged = true
            }
            record.metadata.originalRevisionDate = pushedLocal ? created.revisionDate : (created.creationDate ?? created.revisionDate)
            record.metadata.baseVersion = pushedLocal ? String(decoding: created.jsonBytes(), as: UTF8.self) : nil
            record.metadata.originalState = Self.state(of: created)
            record.metadata.pendingBackup = nil
            try tx.queue(of: userID).store(record, key: key)
        } else {
            // The server's copy may be here already (pulled), saved by the user while this run pushed onto
            // it: that save has its own record and the newer local copy, which the next run resolves
            // against what was just pushed. Never overwritten here.
            if try !tx.queue(of: userID).hasRecord(forItem: newID) {
                try tx.ciphers(of: userID).store(created)
            }
            try tx.queue(of: userID).remove(recordID: change.id)
        }
        try tx.drafts(of: userID).moveDrafts(ofItem: temporaryID, to: newID)
    }

    /// Writes a backup copy of `version` to the server before anything else happens (seed 000 §7): every
    /// field and the full password history, renamed, with its own new item key, in the original's folder.
    func backUp(_ version: CipherWire, losingDate: WireDate, originalID: String, marker: String, change: inout PendingChange,
                report: inout SyncReport, context: ResolutionContext) async throws {
        let current = try requireSession()
        var view: CipherView
        do {
            view = try version.decrypted(with: current.keys)
        } catch {
            throw VaultError.model(error as? ModelError ?? .invalidValue(path: "cipher", reason: "\(error)"))
        }
        // Bug 20: the version may be kept already, by another device that backed it up as the server's
        // version (this device's save reached the server but its answer was lost). A second copy is a
        // duplicate a person would have to sort out; the first one is recorded here instead.
        if let kept = context.backups.backup(holding: view, keys: current.keys) {
            try await recordBackupMadeElsewhere(kept, of: view.name, originalID: originalID, marker: marker, change: &change, report: &report)
            return
        }
        view.id = nil
        view.name = BackupName.make(originalName: view.name, losingVersionDate: losingDate)
        view.deletedDate = nil
        view.archivedDate = nil
        view.creationDate = nil
        view.revisionDate = nil
        view.attachments = []
        view.itemKey = try modelCall { try current.keys.wrapNewItemKey(organizationId: view.organizationId, random: random) }
        if configuration.backupsInConflictFolder, view.organizationId == nil {
            view.folderId = try await conflictFolderID()
        }
        let backup = try modelCall { try view.encrypted(with: current.keys, random: random) }
        // Persist the exact backup before posting it, so a lost answer cannot lead to a second copy.
        let pendingBackup = String(decoding: backup.jsonBytes(), as: UTF8.self)
        change.metadata.pendingBackup = pendingBackup
        change.metadata.backupDoneFor = marker
        let noted = change
        let key = current.keys.userKey
        try await write { tx in
            _ = try Self.updateStoredRecord(noted, tx, key: key) {
                $0.pendingBackup = pendingBackup
                $0.backupDoneFor = marker
            }
        }
        logger.debug("conflict backup", metadata: ["item": "\(originalID)", "losing": "\(marker)"])
        // Every attempt at this backup carries one key (a lost answer is settled by the server, not a second copy).
        let idempotencyKey = Self.backupKey(change, marker: marker)
        var created = try await authorized { api, token in try await api.createCipher(backup, idempotencyKey: idempotencyKey, token: token) }
        created = try await applyState(of: backup, to: created)
        try await storeBackup(created, originalID: originalID, change: &change, report: &report)
    }

    /// Clears the record's half-done backup without storing one (see the `410` case in ``resolveCipher``).
    func forgetPendingBackup(_ change: inout PendingChange) async throws {
        change.metadata.pendingBackup = nil
        let noted = change
        let key = try requireSession().keys.userKey
        try await write { db in _ = try Self.updateStoredRecord(noted, db, key: key) { $0.pendingBackup = nil } }
    }

    /// Records a backup another device made of the version this resolution would back up: the record
    /// notes it as done, the backup is listed among this device's conflicts, and the user is told.
    func recordBackupMadeElsewhere(_ backup: (id: String, name: String), of name: String, originalID: String, marker: String,
                                   change: inout PendingChange, report: inout SyncReport) async throws {
        let current = try requireSession()
        change.metadata.backupDoneFor = marker
        let noted = change
        let key = current.keys.userKey
        let userID = current.userID
        let now = clock.now().microsecondsSinceEpoch
        let side = marker.split(separator: ":").first.map(String.init) ?? "unknown"
        try await write { tx in
            try Self.updateStoredRecord(noted, tx, key: key) { $0.backupDoneFor = marker }
            try tx.backups(of: userID).note(backup.id, of: originalID, createdAt: now, losingSide: side, twinCheckPending: false)
        }
        report.messages.append("\"\(name)\": the version that lost is already kept in \"\(backup.name)\" (backed up on another device).")
        logger.info("conflict backup made elsewhere", metadata: ["item": "\(originalID)", "backup": "\(backup.id)"])
    }

    func storeBackup(_ created: CipherWire, originalID: String, change: inout PendingChange, report: inout SyncReport) async throws {
        let current = try requireSession()
        change.metadata.pendingBackup = nil
        let noted = change
        let doneFor = change.metadata.backupDoneFor
        let key = current.keys.userKey
        let userID = current.userID
        let backupID = created.id ?? ""
        let now = clock.now().microsecondsSinceEpoch
        // The marker says whose version lost: "server:…" or "local:…".
        let side = change.metadata.backupDoneFor?.split(separator: ":").first.map(String.init) ?? "unknown"
        try await write { tx in
            // A backup finished by adoption (its first answer was lost) may have been pulled and
            // edited here meanwhile: that edit's record resolves it against the server later, and the
            // server's copy must not replace it in the cache (as a pull would not).
            if try !tx.queue(of: userID).hasRecord(forItem: backupID) { try tx.ciphers(of: userID).store(created) }
            try Self.updateStoredRecord(noted, tx, key: key) {
                $0.pendingBackup = nil
                $0.backupDoneFor = doneFor
            }
            try tx.backups(of: userID).note(backupID, of: originalID, createdAt: now, losingSide: side, twinCheckPending: true)
        }
        let name = (try? created.decrypted(with: current.keys).name) ?? ""
        report.backups.append(ConflictBackup(backupID: created.id ?? "", originalID: originalID, name: name))
        logger.info("conflict backup created", metadata: ["item": "\(originalID)", "backup": "\(created.id ?? "")"])
    }
}

extension VaultEngine {
    /// The "Offline Sync Conflicts" folder's id, created on the server on first use (seed 000 §7).
    func conflictFolderID() async throws -> String {
        if let lookup = conflictFolderLookup, let id = try? await lookup.value { return id }
        let lookup = Task { try await self.findOrCreateConflictFolder() }
        conflictFolderLookup = lookup
        return try await lookup.value
    }

    func findOrCreateConflictFolder() async throws -> String {
        let current = try requireSession()
        let name = "Offline Sync Conflicts"
        if let existing = try await folders().first(where: { $0.name == name }), let id = existing.id { return id }
        let encrypted = try modelCall { try EncString.encrypt(name, key: current.keys.userKey, random: random) }
        // One key for every device of the account: two devices making the folder at once make one on a
        // server that honours keys. Deleted for good since (410), a new one gets a key of its own.
        let created: FolderWire
        do {
            created = try await authorized { api, token in
                try await api.createFolder(name: encrypted, idempotencyKey: "vaultsync-conflict-folder", token: token)
            }
        } catch let error as ServerCallError where error.isCreatedSinceDeleted {
            let fresh = "vaultsync-conflict-folder-" + UUID().uuidString.lowercased()
            created = try await authorized { api, token in try await api.createFolder(name: encrypted, idempotencyKey: fresh, token: token) }
        }
        let userID = current.userID
        try await write { tx in try tx.folders(of: userID).store(created) }
        guard let id = created.id else { throw ServerCallError.invalidResponse("created folder has no id") }
        return id
    }
}
