import VaultModels

/// An operation done while the server could not be reached.
public enum OfflineOperation: Sendable, Equatable {
    case create
    /// A content edit; `passwordChanged` from the decrypt-compare of seed 000 §3.
    case edit(passwordChanged: Bool)
    case softDelete
    case hardDelete
    case restore
    case archive
    case unarchive
    case move
    case favorite
    /// An attachment added while the server could not be reached (encrypted and staged in the profile):
    /// it goes with the item's record and is uploaded once the item exists on the server.
    case attachmentAdded(StagedAttachment)
    /// An attachment removed while the server could not be reached: its server id (an attachment still
    /// staged is simply dropped from the record instead).
    case attachmentDeleted(id: String)
}

/// What an offline operation does to the queue.
public enum QueueDecision: Sendable, Equatable {
    /// Write this metadata for the item (insert or replace its one record).
    case upsert(PendingChangeMetadata)
    /// The item only ever existed here and is now deleted for good: remove it and its record; the
    /// server never hears of it.
    case forget
}

/// The queue semantics (seed 000 §3, seed 001 Phase 2 fixes), as pure functions.
public enum QueueRules {
    /// Folds `operation` into the item's existing record (if any).
    ///
    /// - The first offline change captures `originalRevisionDate`; later ones never overwrite it.
    /// - An item created offline stays a `create` through later edits, trash and restore.
    /// - Permanently deleting an item that exists only offline forgets it, unless a create was sent
    ///   without an answer (`createSent`): then the delete is queued, to find that copy by its names.
    /// - A permanent delete wins over everything; a trash move over edits (which are kept and pushed).
    /// - A create remembers every encrypted name the item leaves behind (`leavingName`: renamed from, or
    ///   deleted under): an earlier attempt may have reached the server under it, and the resolver must
    ///   find that one, not post twice or leave it behind.
    ///
    /// `createSent`: the operation is a create whose first attempt may have reached the server.
    /// `itemKey`: the item's wrapped key, which a create's record keeps for the same search.
    /// `baseVersion`: the version the change starts from (the cached, last synced version); kept by the
    /// first change like `originalRevisionDate`, never by a create, never overwritten.
    public static func apply(
        _ operation: OfflineOperation, to existing: PendingChangeMetadata?, itemRevisionDate: WireDate?, now: WireDate,
        itemState: ItemState? = nil, leavingName: String? = nil, createSent: Bool = false, itemKey: String? = nil,
        baseVersion: String? = nil
    ) -> QueueDecision {
        var metadata = existing ?? PendingChangeMetadata(
            kind: operation == .create ? .create : .update,
            originalRevisionDate: operation == .create ? nil : itemRevisionDate,
            createdDate: now, updatedDate: now)
        if operation == .create, createSent { metadata.createSent = true }
        if existing == nil, operation != .create {
            metadata.originalState = itemState
            metadata.baseVersion = baseVersion
        }
        metadata.updatedDate = now
        // A change made by the user is a fresh intent: whatever went wrong before is retried.
        if existing != nil {
            metadata.state = .pending
            metadata.nextAttemptDate = nil
        }
        switch operation {
        case .create:
            metadata.contentUpdatedDate = now
        case .edit(let passwordChanged):
            metadata.contentChanged = true
            metadata.contentUpdatedDate = now
            if passwordChanged { metadata.passwordChangeCount += 1 }
        default:
            break
        }
        if metadata.kind == .create, let leavingName, !(metadata.earlierNames ?? []).contains(leavingName) {
            metadata.earlierNames = (metadata.earlierNames ?? []) + [leavingName]
        }
        if metadata.kind == .create, let itemKey { metadata.itemKey = itemKey }
        switch operation {
        case .attachmentAdded(let staged):
            metadata.attachmentAdds = (metadata.attachmentAdds ?? []) + [staged]
        case .attachmentDeleted(let id):
            if metadata.attachmentAdds?.contains(where: { $0.id == id }) == true {
                metadata.attachmentAdds = metadata.attachmentAdds?.filter { $0.id != id }
            } else if !(metadata.attachmentDeletes ?? []).contains(id) {
                metadata.attachmentDeletes = (metadata.attachmentDeletes ?? []) + [id]
            }
        default:
            break
        }
        switch (metadata.kind, operation) {
        case (.create, .hardDelete):
            guard metadata.createSent == true else { return .forget }
            metadata.kind = .hardDelete
        case (.create, _):
            break
        case (_, .hardDelete):
            metadata.kind = .hardDelete
        case (.hardDelete, _):
            // Nothing can follow a permanent delete (the item is gone locally).
            break
        case (_, .softDelete):
            metadata.kind = .softDelete
        case (.softDelete, .restore):
            metadata.kind = .update
        case (.softDelete, _), (.update, _):
            break
        }
        return .upsert(metadata)
    }
}
