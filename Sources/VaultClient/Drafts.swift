import Foundation
import VaultCrypto
import VaultModels
import VaultStore

/// An autosaved edit in progress (seed 004 §2, adapted): encrypted like an item, then sealed.
public struct Draft: Sendable, Equatable {
    public var id: String
    /// The item being edited; `nil` for a new item.
    public var itemID: String?
    public var item: CipherView
    public var updatedDate: WireDate
}

struct SealedDraft: Codable {
    var itemID: String?
    var cipher: String
    var updatedDate: WireDate
}

extension VaultEngine {
    /// Autosaves an edit in progress (one draft per existing item; new items get a new draft id unless
    /// `draftID` is given). Returns the draft id.
    @discardableResult
    public func saveDraft(_ item: CipherView, draftID: String? = nil) async throws -> String {
        let current = try requireSession()
        var view = item
        if view.itemKey == nil, view.id == nil {
            view.itemKey = try modelCall { try current.keys.wrapNewItemKey(organizationId: view.organizationId, random: random) }
        }
        let wire = try modelCall { try view.encrypted(with: current.keys, random: random) }
        let payload = SealedDraft(itemID: item.id, cipher: String(decoding: wire.jsonBytes(), as: UTF8.self), updatedDate: clock.now())
        let sealed = try Sealed.seal(payload, key: current.keys.userKey)
        let userID = current.userID
        return try await write { tx in
            let drafts = tx.drafts(of: userID)
            var id = draftID ?? UUID().uuidString.lowercased()
            if draftID == nil, let itemID = item.id, let existing = try drafts.draftID(ofItem: itemID) {
                id = existing
            }
            try drafts.store(DraftRow(id: id, userID: userID, itemID: item.id, sealed: sealed))
            return id
        }
    }

    /// The drafts of the unlocked account, newest first.
    public func drafts() async throws -> [Draft] {
        let current = try requireSession()
        let userID = current.userID
        let rows = try readNow { tx in try tx.drafts(of: userID).all() }
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
        let rows = try await read { tx in try tx.drafts(of: userID).all() }
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
            return Draft(id: row.id, itemID: payload.itemID, item: view, updatedDate: payload.updatedDate)
        } catch {
            throw VaultError.storage("draft \(row.id) could not be opened")
        }
    }
}
