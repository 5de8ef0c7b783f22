import Foundation
import VaultCrypto
import VaultModels
import VaultStore
import VaultSyncCore

/// An autosaved edit in progress (seed 004 §2, adapted): encrypted like an item, then sealed.
public struct Draft: Sendable, Equatable {
    public var id: String
    /// The item being edited; `nil` for a new item.
    public var itemID: String?
    public var item: CipherView
    public var updatedDate: WireDate
    /// The version of the item the edit started from: `nil` for a new item, a draft made before drafts kept it,
    /// or one begun on a version this device no longer held when it was first saved. Recovering the draft saves
    /// it based on this version (``VaultEngine/updateItem(_:basedOn:)``), so what another device changed since
    /// is merged with the draft's own changes instead of written over by the fields the draft did not touch.
    public var base: CipherView? = nil
}

struct SealedDraft: Codable {
    var itemID: String?
    var cipher: String
    var updatedDate: WireDate
    /// The base version's encrypted wire text (absent in drafts sealed before it was kept).
    var base: String?
}

extension VaultEngine {
    /// Autosaves an edit in progress (one draft per existing item; new items get a new draft id unless
    /// `draftID` is given). Returns the draft id.
    ///
    /// The draft keeps the version the edit started from (``Draft/base``): `base`, the item as the caller read
    /// it before editing; else the one an earlier autosave of this item's draft kept; else the stored version,
    /// when it is still the revision the edited item was read at (a sync since may have stored a newer one,
    /// which is no base of this edit).
    @discardableResult
    public func saveDraft(_ item: CipherView, basedOn base: CipherView? = nil, draftID: String? = nil) async throws -> String {
        let current = try requireSession()
        var view = item
        if view.itemKey == nil, view.id == nil {
            view.itemKey = try modelCall { try current.keys.wrapNewItemKey(organizationId: view.organizationId, random: random) }
        }
        let wire = try modelCall { try view.encrypted(with: current.keys, random: random) }
        let given = try base.map { base in try modelCall { try base.encrypted(with: current.keys, random: random) } }
        let (userID, keys, now) = (current.userID, current.keys, clock.now())
        return try await write { tx in
            let drafts = tx.drafts(of: userID)
            var id = draftID ?? UUID().uuidString.lowercased()
            var kept: String?
            if draftID == nil, let itemID = item.id, let existing = try drafts.draftID(ofItem: itemID) {
                id = existing
                kept = try drafts.find(id: existing).flatMap { try? Sealed.open(SealedDraft.self, from: $0.sealed, key: keys.userKey).base }
            }
            var base = given.map { String(decoding: $0.jsonBytes(), as: UTF8.self) } ?? kept
            if base == nil, let itemID = item.id {
                base = try Self.storedVersion(of: itemID, readAt: item.revisionDate, userID: userID, tx)
            }
            let payload = SealedDraft(itemID: item.id, cipher: String(decoding: wire.jsonBytes(), as: UTF8.self), updatedDate: now, base: base)
            try drafts.store(DraftRow(id: id, userID: userID, itemID: item.id, sealed: try Sealed.seal(payload, key: keys.userKey)))
            return id
        }
    }

    /// The stored item's wire text, when it is the revision `revision` (the one an edited copy was read at).
    static func storedVersion(of itemID: String, readAt revision: WireDate?, userID: String, _ tx: StoreTransaction) throws -> String? {
        guard let revision, let row = try tx.ciphers(of: userID).find(id: itemID), let stored = row.revisionDate,
              ConflictMatrix.isSameRevision(WireDate(microsecondsSinceEpoch: stored), revision) else { return nil }
        return row.json
    }

    /// The drafts of the unlocked account, newest first.
    public func drafts() async throws -> [Draft] {
        let current = try requireSession()
        let userID = current.userID
        let rows = try await read { tx in try tx.drafts(of: userID).all() }
        return rows.compactMap { row in try? open(row, keys: current.keys) }.sorted { $0.updatedDate > $1.updatedDate }
    }

    /// One draft, decrypted (to recover it after a crash).
    public func draft(id: String) async throws -> Draft {
        let current = try requireSession()
        let userID = current.userID
        guard let row = try await read({ tx in try tx.drafts(of: userID).find(id: id) }) else {
            throw VaultError.draftNotFound(id)
        }
        return try open(row, keys: current.keys)
    }

    public func discardDraft(id: String) async throws {
        let userID = try requireSession().userID
        let deleted = try await write { tx in try tx.drafts(of: userID).remove(id: id) }
        if !deleted { throw VaultError.draftNotFound(id) }
    }

    /// Purges drafts older than the configured age whose item has no pending change (its last save
    /// reached the server).
    func purgeDrafts() async throws {
        guard let current = session else { return }
        let cutoff = clock.now().adding(microseconds: -Int64(configuration.draftMaximumAge * 1_000_000))
        let userID = current.userID
        // On this thread, as the unlock's other reads (every command of the CLI unlocks).
        let rows = try readNow { tx in try tx.drafts(of: userID).all() }
        // Old drafts, then those whose item has no queued change (a few lookups: every unlock runs this,
        // and the queue may hold 100,000 changes).
        let old = rows.compactMap { row in (try? open(row, keys: current.keys)).flatMap { $0.updatedDate < cutoff ? (row.id, $0.itemID) : nil } }
        guard !old.isEmpty else { return }
        let stale = try await read { tx in
            try old.filter { _, itemID in try !(itemID.map { try tx.queue(of: userID).hasRecord(forItem: $0) } ?? false) }.map(\.0)
        }
        guard !stale.isEmpty else { return }
        try await write { tx in try tx.drafts(of: userID).remove(ids: stale) }
    }

    func open(_ row: DraftRow, keys: VaultKeys) throws -> Draft {
        do {
            let payload = try Sealed.open(SealedDraft.self, from: row.sealed, key: keys.userKey)
            let view = try CipherWire(jsonBytes: Array(payload.cipher.utf8)).decrypted(with: keys)
            // A base that does not open costs the merge, never the draft: it is recovered as drafts were before.
            let base = payload.base.flatMap { try? CipherWire(jsonBytes: Array($0.utf8)).decrypted(with: keys) }
            return Draft(id: row.id, itemID: payload.itemID, item: view, updatedDate: payload.updatedDate, base: base)
        } catch {
            throw VaultError.storage("draft \(row.id) could not be opened")
        }
    }
}
