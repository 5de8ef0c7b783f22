import Foundation
import VaultAPI
import VaultCrypto
import VaultModels
import VaultStore
import VaultSyncCore

/// The `.backUp` step (seed 000 §7; README, "Reconnect: sync and conflict resolution"): a version about
/// to be overwritten or dropped is written to the server as a copy of its own first — every field and the
/// full password history, renamed "… - offline conflict DATE", with a new item key, in the original's
/// folder (or "Offline Sync Conflicts"). The copy's exact body is kept in the record before it is posted
/// (`ResolutionProgress.inFlight`) and every post carries one key, so a lost answer, a failure or a crash
/// never makes a second copy; a version is backed up once (`ResolutionProgress.backups`).
extension VaultEngine {
    func backUp(_ side: PlanVersion, of run: inout PlanRun<CipherWire>, report: inout SyncReport, context: ResolutionContext) async throws {
        guard let version = side == .local ? run.local : run.server else { return }
        let date = side == .local ? run.change.metadata.contentEditDate : (run.serverContentDate ?? version.revisionDate ?? clock.now())
        let madeBefore = report.backups.count
        try await backUp(version, side: side, date: date, originalID: run.serverID, change: &run.change, report: &report, context: context)
        if side == .server, ResolutionPlanner.keepsPasswordHistory(cipherFacts(run)) {
            for index in report.backups.indices.dropFirst(madeBefore) { report.backups[index].reason = .passwordHistory }
        }
        if let merge = run.merge {
            var kept = merge.result.difference
            kept.baseVersion = run.change.metadata.baseVersion
            keepDifference(kept, for: report.backups[madeBefore...].map(\.backupID))
        }
    }

    func backUp(_ version: CipherWire, side: PlanVersion, date: WireDate, originalID: String, change: inout PendingChange,
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
        if let kept = context.backups.backup(holding: view, keys: current.keys) ?? mergeKeptElsewhere(of: view, side: side, change: change, keys: current.keys, context: context) {
            return try await recordBackupMadeElsewhere(kept, of: view.name, side: side, date: date, originalID: originalID,
                                                       change: &change, report: &report)
        }
        let sourceKey = try modelCall { try current.keys.fieldKey(itemKey: version.key, organizationId: version.organizationId, itemID: version.id) }
        let kept = view.attachments
        view.id = nil
        view.name = BackupName.make(originalName: view.name, losingVersionDate: date)
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
        let backupKey = try modelCall { try current.keys.fieldKey(itemKey: backup.key, organizationId: backup.organizationId, itemID: nil) }
        let copies = try kept.compactMap { try attachmentCopy($0, of: version.id ?? originalID, from: sourceKey, to: backupKey) }
        let flight = BackupInFlight(version: side, date: date, originalID: originalID,
                                    idempotencyKey: Self.backupKey(change, side: side, date: date, originalID: originalID, version: version),
                                    body: String(decoding: backup.jsonBytes(), as: UTF8.self), attachments: copies.isEmpty ? nil : copies)
        try await noteInRecord(&change) { $0.progress.inFlight = flight }
        logger.debug("conflict backup", metadata: ["item": "\(originalID)", "losing": "\(side.rawValue)"])
        try await postBackup(flight, change: &change, report: &report, context: context)
    }

    /// The local version's merge, pushed by this device with its answer lost, kept by another device that
    /// backed it up before writing over it (fault scenario seeds 897975, 673031, 444724, 153223): the merge
    /// holds every field changed here, so this version is kept already. Only while the local content is the
    /// one the merge was made from (a later edit here is not in it).
    func mergeKeptElsewhere(of local: CipherView, side: PlanVersion, change: PendingChange, keys: VaultKeys,
                            context: ResolutionContext) -> (id: String, name: String)? {
        guard side == .local, let pushed = change.metadata.progress.pushedMerge,
              let mergedFrom = try? CipherWire(jsonBytes: Array(pushed.local.utf8)).decrypted(with: keys),
              SnapshotBackups.sameKeptContent(mergedFrom, local),
              let merged = try? CipherWire(jsonBytes: Array(pushed.body.utf8)).decrypted(with: keys) else { return nil }
        return context.backups.backup(holding: merged, keys: keys)
    }

    /// Posts the backup in flight and notes it done. Made by an earlier attempt and deleted for good since
    /// (`410`: the conflict was settled on another device), the version was kept until someone chose:
    /// nothing to redo, it counts as done.
    func postBackup(_ flight: BackupInFlight, change: inout PendingChange, report: inout SyncReport, context: ResolutionContext) async throws {
        let backup = try CipherWire(jsonBytes: Array(flight.body.utf8))
        var created: CipherWire
        do {
            created = try await applyState(of: backup, to: try await createIdempotently(backup, idempotencyKey: flight.idempotencyKey, context: context))
            if flight.attachments?.isEmpty == false, let id = created.id {
                try await copyAttachments(flight.attachments ?? [], keyPrefix: flight.idempotencyKey ?? id, to: created, report: &report)
                created = try await authorized { api, token in try await api.getCipher(id: id, token: token) }
            }
        } catch let error as ServerCallError where error.isCreatedSinceDeleted {
            return try await noteInRecord(&change) { $0.progress.finish(backupID: "") }
        }
        let current = try requireSession()
        let (backupID, noted, key, userID, stored) = (created.id ?? "", change, current.keys.userKey, current.userID, created)
        let (originalID, now) = (flight.originalID.isEmpty ? change.itemID : flight.originalID, clock.now().microsecondsSinceEpoch)
        change.metadata.progress.finish(backupID: backupID)
        try await write { tx in
            // A backup finished by adoption (its first answer was lost) may have been pulled and edited here
            // meanwhile: that edit's record resolves it later, and this copy must not replace it (as a pull would not).
            if try !tx.queue(of: userID).hasRecord(forItem: backupID) { try tx.ciphers(of: userID).store(stored) }
            try Self.updateStoredRecord(noted, tx, key: key) { $0.progress.finish(backupID: backupID) }
            try tx.backups(of: userID).note(backupID, of: originalID, createdAt: now, losingSide: flight.version.rawValue, twinCheckPending: true)
        }
        report.backups.append(ConflictBackup(backupID: backupID, originalID: originalID, name: decryptedName(created) ?? ""))
        logger.info("conflict backup created", metadata: ["item": "\(originalID)", "backup": "\(backupID)"])
    }

    /// An attachment of the version a backup keeps, wrapped anew for the backup's item key.
    func attachmentCopy(_ attachment: AttachmentView, of itemID: String, from source: SymmetricCryptoKey,
                        to backup: SymmetricCryptoKey) throws -> AttachmentCopy? {
        guard let id = attachment.id else { return nil }
        let fileKey = try attachment.key.map { wrapped in try cryptoCall { try wrapped.decryptKey(key: source) } } ?? source
        let key = try cryptoCall { try EncString.encrypt(fileKey.rawBytes, key: backup, random: random) }
        let name = try cryptoCall { try EncString.encrypt(attachment.fileName ?? id, key: backup, random: random) }
        return AttachmentCopy(sourceItemID: itemID, sourceAttachmentID: id, fileName: name.serialized, key: key.serialized)
    }

    /// Uploads the attachments a backup keeps (issue 23: a backup copy keeps every attachment of the
    /// version it preserves), or a re-created item carries over from the version deleted elsewhere, each
    /// under a key of its own (`keyPrefix` and the attachment's id) so a retry makes no second copy; one that
    /// is on the item already ("already uploaded") is done. The file comes from this device's cache or from
    /// the item it belongs to; one deleted everywhere meanwhile cannot be copied and the user is told.
    func copyAttachments(_ copies: [AttachmentCopy], keyPrefix: String, to backup: CipherWire, report: inout SyncReport) async throws {
        guard let backupID = backup.id, !copies.isEmpty else { return }
        for copy in copies {
            let file: (path: String, temporary: Bool)
            do {
                file = try await encryptedFile(itemID: copy.sourceItemID, attachmentID: copy.sourceAttachmentID, size: 0, progress: nil)
            } catch let error as ServerCallError where error.isGone {
                report.messages.append("An attachment of \"\(decryptedName(backup) ?? backupID)\" was deleted on the server before it could be copied to it.")
                continue
            }
            defer { if file.temporary { unlink(file.path) } }
            let size = AttachmentFile.size(file.path) ?? 0
            let (name, key) = (try EncString(copy.fileName), try EncString(copy.key))
            let idempotencyKey = "\(keyPrefix)-attachment-\(copy.sourceAttachmentID)"
            let upload = try await authorized { api, token in
                try await api.createAttachment(cipherID: backupID, fileName: name, key: key, encryptedSize: size,
                                               lastKnownRevisionDate: nil, idempotencyKey: idempotencyKey, token: token)
            }
            do {
                try await authorized { api, token in
                    try await api.uploadAttachment(upload, cipherID: backupID, fileName: name, filePath: file.path, fileSize: size, token: token)
                }
            } catch let error as ServerCallError where error.isAlreadyUploaded {}
        }
    }

    /// Records a backup another device made of the version this resolution would back up: the record
    /// notes it as done, the backup is listed among this device's conflicts, and the user is told.
    func recordBackupMadeElsewhere(_ backup: (id: String, name: String), of name: String, side: PlanVersion, date: WireDate,
                                   originalID: String, change: inout PendingChange, report: inout SyncReport) async throws {
        let current = try requireSession()
        let done = BackedUpVersion(version: side, date: date, backupID: backup.id)
        change.metadata.progress.backups.append(done)
        let (noted, key, userID, now) = (change, current.keys.userKey, current.userID, clock.now().microsecondsSinceEpoch)
        try await write { tx in
            try Self.updateStoredRecord(noted, tx, key: key) { $0.progress.backups.append(done) }
            try tx.backups(of: userID).note(backup.id, of: originalID, createdAt: now, losingSide: side.rawValue, twinCheckPending: false)
        }
        report.messages.append("\"\(name)\": the version that lost is already kept in \"\(backup.name)\" (backed up on another device).")
        logger.info("conflict backup made elsewhere", metadata: ["item": "\(originalID)", "backup": "\(backup.id)"])
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

    /// The idempotency key of a conflict backup, the same for every attempt. A backup of the server's
    /// version is keyed by the item and that version's content (a digest of its encrypted fields, which only
    /// the save that wrote them has): the same for every device of the account and for every revision that
    /// moved only its trash, archive, folder or favorite state, so devices backing it up at once make one
    /// backup on a server that honours keys (bug 20's twins; fault scenario seed 436496). A backup of this
    /// device's version is keyed by the queue record, which only this device has.
    static func backupKey(_ change: PendingChange, side: PlanVersion, date: WireDate, originalID: String, version: CipherWire) -> String {
        guard side == .server else { return "backup-\(change.id)-local:\(date.microsecondsSinceEpoch)" }
        let content = contentBytes(version).withUnsafeBytes { ContentDigest(of: $0) }
        return "backup-\(originalID)-server-\(content.hex(prefix: 16))"
    }

    /// The "Offline Sync Conflicts" folder's id, created on the server on first use (seed 000 §7).
    func conflictFolderID() async throws -> String {
        if let lookup = conflictFolderLookup, let id = try? await lookup.value { return id }
        let lookup = Task { try await self.findOrCreateConflictFolder() }
        conflictFolderLookup = lookup
        return try await lookup.value
    }

    /// The name of the folder backups are filed in (`config conflict-folder on`).
    static let conflictFolderName = "Offline Sync Conflicts"

    func findOrCreateConflictFolder() async throws -> String {
        let current = try requireSession()
        let name = Self.conflictFolderName
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
