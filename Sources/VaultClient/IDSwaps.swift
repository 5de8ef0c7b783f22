import VaultModels
import VaultStore
import VaultSyncCore

// Ids that change (docs/ARCHITECTURE.md): an item or folder created on this device has a temporary id until a
// sync gives it the server's. A caller may still hold the temporary id then: a window opened before that
// sync, a command that looked a name up while a sync ran beside it. The engine follows the id to where the
// item went instead of answering "not found".

extension VaultEngine {
    /// The id that the item or folder `id` was given by a sync since (``IDSwapTable``), with the item's
    /// revision at that moment; `nil` when `id` was never swapped.
    func swappedID(of id: String, kind: PendingItemKind) throws -> (id: String, revision: Int64?)? {
        let userID = try requireSession().userID
        return try readNow { tx in try tx.idSwaps(of: userID).swap(kind: kind, from: id) }.map { ($0.newID, $0.revision) }
    }

    /// `id`, or the id a sync gave the item (or folder) since, when nothing has `id` any more. One more read:
    /// the save path follows an id only once it was not found (``savingThroughRaces(of:_:)``).
    func currentID(of id: String, kind: PendingItemKind = .cipher) throws -> String {
        let userID = try requireSession().userID
        return try readNow { tx in try Self.located(id, kind: kind, userID: userID, tx).id }
    }

    /// Where `id` is now: itself when something has it, else the id a sync swapped it for (`exists`: whether
    /// something has that one); `id` itself, not existing, when it was never swapped.
    static func located(_ id: String, kind: PendingItemKind, userID: String, _ tx: StoreTransaction) throws -> (id: String, exists: Bool) {
        func exists(_ id: String) throws -> Bool {
            switch kind {
            case .cipher: try tx.ciphers(of: userID).find(id: id) != nil
            case .folder: try tx.folders(of: userID).find(id: id) != nil
            }
        }
        if try exists(id) { return (id, true) }
        guard let swap = try tx.idSwaps(of: userID).swap(kind: kind, from: id) else { return (id, false) }
        return (swap.newID, try exists(swap.newID))
    }

    /// ``currentFolderID(_:)`` inside a transaction.
    static func currentFolderID(_ id: String, userID: String, _ tx: StoreTransaction) throws -> String? {
        let found = try located(id, kind: .folder, userID: userID, tx)
        return found.exists ? found.id : nil
    }

    /// An edit made on a view read under `edited.id`, which a sync has swapped for `id` since: the edit, and the
    /// version it was made on, under the new id. When the stored item is still the version the swap stored,
    /// the view was read from that content and the edit is based on it; when a sync has brought another
    /// device's version since, the edit keeps the revision it was read at, and the resolver keeps both
    /// versions, as for any view read before a sync.
    func followed(_ edited: CipherView, basedOn original: CipherView?, to id: String) throws -> (CipherView, CipherView?) {
        guard let oldID = edited.id, oldID != id else { return (edited, original) }
        let userID = try requireSession().userID
        let (swap, stored) = try readNow { tx in
            (try tx.idSwaps(of: userID).swap(kind: .cipher, from: oldID), try tx.ciphers(of: userID).find(id: id)?.revisionDate)
        }
        let unchanged = swap?.newID == id && swap?.revision != nil && swap?.revision == stored
        func moved(_ view: CipherView) -> CipherView {
            var view = view
            view.id = id
            if unchanged, let stored { view.revisionDate = WireDate(microsecondsSinceEpoch: stored) }
            return view
        }
        return (moved(edited), original.map(moved))
    }
}

extension VaultError {
    /// The id that was not found, for a missing item or folder.
    var missingID: String? {
        switch self {
        case .itemNotFound(let id), .folderNotFound(let id): id
        default: nil
        }
    }
}
