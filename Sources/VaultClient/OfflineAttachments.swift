import Foundation
import VaultAPI
import VaultCrypto
import VaultModels
import VaultStore
import VaultSyncCore

/// The `.syncAttachments` step (issue 23): attachment work recorded offline goes to the item where it
/// lives now (the winner of a conflict, a re-created item). Each staged attachment is announced once
/// (its device-made id is the idempotency key; the id the server hands out is kept in the record before
/// the file is sent, for servers that ignore keys), its file uploaded to that id ("already uploaded"
/// means an earlier attempt arrived), then moved from staging to the encrypted read cache and taken off
/// the record. A restart or a SIGKILL anywhere resumes from the record: never a second attachment. A
/// server without the v2 flow gets the legacy one-step upload, a retry first looking for the file on the
/// item (``uploadLegacy(_:file:to:mayHaveArrived:progress:)``).
extension VaultEngine {
    func syncAttachments(_ run: inout PlanRun<CipherWire>, report: inout SyncReport) async throws {
        let (userID, itemID) = (try requireSession().userID, run.serverID)
        let staging = attachmentStaging(userID: userID)
        // A file the server refuses (too large, say) waits for the user without holding back the others: they are
        // uploaded, and the refusal is reported once the rest is done. A connection that fails stops them all.
        var refused: ServerCallError?
        for staged in run.change.metadata.attachmentAdds ?? [] {
            guard let path = staging.existing(staged.id), let size = AttachmentFile.size(path) else {
                report.messages.append("An attachment added here to \"\(decryptedName(run.local) ?? itemID)\" was no longer in the profile and could not be uploaded.")
                try await noteInRecord(&run.change) { $0.attachmentAdds = $0.attachmentAdds?.filter { $0.id != staged.id } }
                continue
            }
            let attachmentID: String
            do {
                attachmentID = try await upload(staged, file: path, size: size, to: itemID, change: &run.change)
            } catch let error as ServerCallError where FailureClassification.classify(error.failure) == .refused {
                refused = refused ?? error
                continue
            }
            try await noteInRecord(&run.change) { $0.attachmentAdds = $0.attachmentAdds?.filter { $0.id != staged.id } }
            // Moved to the read cache (when it fits), else removed: the staged file goes either way.
            attachmentCache(userID: userID).adopt(attachmentID, movingFrom: path)
        }
        for attachmentID in run.change.metadata.attachmentDeletes ?? [] {
            do {
                _ = try await authorized { api, token in try await api.deleteAttachment(cipherID: itemID, attachmentID: attachmentID, token: token) }
            } catch let error as ServerCallError where error.isGone {}
            attachmentCache(userID: userID).remove(attachmentID)
            try await noteInRecord(&run.change) { $0.attachmentDeletes = $0.attachmentDeletes?.filter { $0 != attachmentID } }
        }
        run.result = try await authorized { api, token in try await api.getCipher(id: itemID, token: token) }
        if let refused { throw refused }
    }

    /// Announces (unless an earlier attempt did, on this item) and uploads one staged attachment; returns
    /// its server id. An announced attachment that is gone (deleted meanwhile, or announced on an item the
    /// server has lost since) is announced again on `itemID`, once.
    func upload(_ staged: StagedAttachment, file: String, size: Int, to itemID: String, change: inout PendingChange) async throws -> String {
        let (name, key) = (try EncString(staged.fileName), try EncString(staged.key))
        var staged = staged
        for attempt in 0..<2 {
            let target: AttachmentUpload
            if let attachmentID = staged.serverID, attempt == 0 {
                target = try await resumedTarget(attachmentID: attachmentID, itemID: itemID)
            } else {
                let announceKey = attempt == 0 ? Self.announceKey(staged) : Self.announceKey(staged) + "-" + itemID
                guard let upload = try await announce(staged, on: itemID, name: name, key: key, lastKnownRevisionDate: nil,
                                                      idempotencyKey: announceKey) else {
                    return try await uploadLegacy(staged, file: file, to: itemID, mayHaveArrived: true, progress: nil)
                }
                target = upload
                staged.serverID = upload.attachmentID
                let noted = staged
                try await noteInRecord(&change) { metadata in
                    metadata.attachmentAdds = metadata.attachmentAdds?.map { $0.id == noted.id ? noted : $0 }
                }
            }
            do {
                try await authorized { api, token in
                    try await api.uploadAttachment(target, cipherID: itemID, fileName: name, filePath: file, fileSize: size, token: token)
                }
                return target.attachmentID
            } catch let error as ServerCallError where error.isAlreadyUploaded {
                return target.attachmentID
            } catch let error as ServerCallError where error.isGone && attempt == 0 {
                continue
            }
        }
        throw ServerCallError.http(status: 404, message: "The attachment could not be uploaded: the server lost it twice.")
    }

    /// Where the file of an attachment announced by an earlier attempt goes now: asked for again (a blob
    /// storage link expires); a server without that route, or whose answer is 404 (the file arrived, or the
    /// attachment is gone), gets the direct route, whose answer tells those apart ("already uploaded", 404).
    func resumedTarget(attachmentID: String, itemID: String) async throws -> AttachmentUpload {
        do {
            return try await authorized { api, token in try await api.renewAttachmentUpload(cipherID: itemID, attachmentID: attachmentID, token: token) }
        } catch let error as ServerCallError where error.isMissingRoute {
            return AttachmentUpload(attachmentID: attachmentID, url: "/ciphers/\(itemID)/attachment/\(attachmentID)", fileUploadType: 0)
        }
    }

    func attachmentStaging(userID: String) -> AttachmentStaging {
        AttachmentStaging(profileDatabase: store.path, userID: userID)
    }

    /// Removes the staged files of a queued change that went without reaching the server: settled by removing
    /// the item (``removeLocally(_:)``), discarded (``discardPending(itemID:)``), or forgotten with an item made
    /// here and deleted for good before its first sync (``permanentlyDeleteItem(id:)``). Nothing else names
    /// them once their record is gone, so they would stay in the profile for good (RELIABILITY bug 75). Called
    /// after the transaction that removed the record: a failed one leaves the files its record still names.
    func removeStaged(_ staged: [StagedAttachment], userID: String) {
        let staging = attachmentStaging(userID: userID)
        for attachment in staged { staging.remove(attachment.id) }
    }
}
