import Foundation
import GRDB
import VaultAPI
import VaultCrypto
import VaultModels
import VaultStore
import VaultSyncCore

extension VaultEngine {
    /// Fetches the server's full snapshot and applies it to the cache, except to items that still have
    /// a queue record: those keep their local version until resolved, and are never removed (go beyond
    /// seed 001 A1's early abort: one stuck item blocks nothing else).
    public func pull() async throws {
        let current = try requireSession()
        var snapshot = try await fetchSnapshot()
        let userID = current.userID
        let now = clock.now().microsecondsSinceEpoch
        let organizations = (snapshot.profile["organizations"]?.arrayValue ?? []).compactMap(\.objectValue)
        // Parse what can be parsed; a damaged item from the server is skipped and reported, never stored.
        // Each parsed object is dropped as soon as its row exists: a large vault is never held twice.
        var objects = snapshot.ciphers
        snapshot.ciphers = []
        var cipherRows: [CipherRow] = []
        cipherRows.reserveCapacity(objects.count)
        objects.reverse()
        while let object = objects.popLast() {
            do {
                let wire = try CipherWire(json: object, path: "cipher")
                if wire.id != nil { cipherRows.append(CipherRow(userID: userID, wire: wire)) }
            } catch {
                logger.warning("server item skipped", metadata: ["id": "\(object["id"]?.stringValue ?? "?")", "reason": "\(error)"])
            }
        }
        var folders: [FolderWire] = []
        for object in snapshot.folders {
            if let wire = try? FolderWire(json: object, path: "folder"), wire.id != nil { folders.append(wire) }
        }
        let collections = snapshot.collections
        let privateKey = snapshot.profile["privateKey"]?.stringValue
        let finalCiphers = cipherRows
        cipherRows = []
        let finalFolders = folders
        try await write { db in
            let pending = try Self.pendingItemIDs(userID: userID, db)
            // Ciphers (one statement per row: upsert, not save's update-then-insert).
            let serverIDs = Set(finalCiphers.map(\.id))
            for row in finalCiphers where !pending.contains(PendingKey(kind: .cipher, id: row.id)) {
                try row.upsert(db)
            }
            let localIDs = try String.fetchAll(db, sql: "SELECT id FROM cipher WHERE userID = ?", arguments: [userID])
            for id in localIDs where !serverIDs.contains(id) && !pending.contains(PendingKey(kind: .cipher, id: id)) {
                _ = try CipherRow.deleteOne(db, key: ["userID": userID, "id": id])
            }
            // Folders.
            let serverFolderIDs = Set(finalFolders.compactMap(\.id))
            for wire in finalFolders where !pending.contains(PendingKey(kind: .folder, id: wire.id!)) {
                try FolderRow(userID: userID, wire: wire).save(db)
            }
            let localFolders = try String.fetchAll(db, sql: "SELECT id FROM folder WHERE userID = ?", arguments: [userID])
            for id in localFolders where !serverFolderIDs.contains(id) && !pending.contains(PendingKey(kind: .folder, id: id)) {
                _ = try FolderRow.deleteOne(db, key: ["userID": userID, "id": id])
            }
            // Organizations and collections: replaced wholesale (read-only offline).
            try db.execute(sql: "DELETE FROM organization WHERE userID = ?", arguments: [userID])
            for object in organizations {
                guard let id = object["id"]?.stringValue?.lowercased() else { continue }
                try OrganizationRow(userID: userID, id: id, json: String(decoding: object.serialized(), as: UTF8.self)).insert(db)
            }
            try db.execute(sql: "DELETE FROM collection WHERE userID = ?", arguments: [userID])
            for object in collections {
                guard let id = object["id"]?.stringValue?.lowercased() else { continue }
                try CollectionRow(userID: userID, id: id, json: String(decoding: object.serialized(), as: UTF8.self)).insert(db)
            }
            if let privateKey {
                try db.execute(sql: "UPDATE account SET encryptedPrivateKey = ? WHERE userID = ?", arguments: [privateKey, userID])
            }
            var state = try SyncStateRow.fetchOne(db, key: userID) ?? SyncStateRow(userID: userID)
            state.lastSyncDate = now
            try state.save(db)
        }
        // Organization keys may have changed (new membership, confirmation).
        if let account = try await read({ db in try AccountRecord.fetchOne(db, key: userID) }) {
            let orgKeys = try await organizationKeys(userID: userID, account: account, userKey: current.keys.userKey)
            session?.keys.organizationKeys = orgKeys
        }
        try await purgeDrafts()
    }

    /// One `/api/sync`, noting whether the server answered.
    func fetchSnapshot() async throws -> SyncResponse {
        do {
            let snapshot = try await authorized { api, token in try await api.sync(token: token) }
            await recordContact(success: true)
            return snapshot
        } catch let error as ServerCallError {
            await recordContact(success: false)
            throw Self.onlineOnly(error)
        }
    }

    struct PendingKey: Hashable {
        var kind: PendingItemKind
        var id: String
    }

    static func pendingItemIDs(userID: String, _ db: Database) throws -> Set<PendingKey> {
        let rows = try Row.fetchAll(db, sql: "SELECT itemKind, itemID FROM pendingChange WHERE userID = ?", arguments: [userID])
        return Set(rows.map { PendingKey(kind: PendingItemKind(rawValue: $0["itemKind"]) ?? .cipher, id: $0["itemID"]) })
    }
}
