import Foundation
import GRDB
import VaultAPI
import VaultModels
import VaultStore
import VaultSyncCore

/// The conflict backups of one resolution's server snapshot, to find a version that is kept already
/// before backing it up again (README, "Reconnect: sync and conflict resolution").
///
/// Built on first use: the resolver reads only the ids and names' ciphertexts of a snapshot, so only a
/// resolution that meets a conflict pays for decrypting every item's name (once, shared by the
/// resolution's concurrent tasks).
final class SnapshotBackups: @unchecked Sendable {
    private let lock = NSLock()
    private let ciphers: [JSONObject]
    /// Original item name → the backups of it (id, full backup name, wire form).
    private var byOriginalName: [String: [(id: String, name: String, wire: CipherWire)]]?

    init(ciphers: [JSONObject]) {
        self.ciphers = ciphers
    }

    /// A backup in the snapshot that holds exactly `version`'s content (see ``holdsSameVersion(_:as:)``).
    func backup(holding version: CipherView, keys: VaultKeys) -> (id: String, name: String)? {
        let candidates = lock.withLock {
            if byOriginalName == nil { byOriginalName = index(keys: keys) }
            return byOriginalName?[version.name] ?? []
        }
        for candidate in candidates {
            guard let view = try? candidate.wire.decrypted(with: keys) else { continue }
            if Self.holdsSameVersion(view, as: version) { return (candidate.id, candidate.name) }
        }
        return nil
    }

    /// Every backup in the snapshot that holds the same version as the backup `id` (itself included),
    /// with its wire form; empty when `id` is not a backup in the snapshot.
    func copies(ofBackup id: String, keys: VaultKeys) -> [(id: String, wire: CipherWire)] {
        let all = lock.withLock {
            if byOriginalName == nil { byOriginalName = index(keys: keys) }
            return byOriginalName ?? [:]
        }
        guard let entry = all.values.lazy.flatMap({ $0 }).first(where: { $0.id == id }),
              let kept = try? entry.wire.decrypted(with: keys) else { return [] }
        let original = BackupName.originalName(of: entry.name)
        return (all[original] ?? []).compactMap { candidate in
            guard let view = try? candidate.wire.decrypted(with: keys) else { return nil }
            var version = kept
            version.name = original
            return Self.holdsSameVersion(view, as: version) ? (candidate.id, candidate.wire) : nil
        }
    }

    private func index(keys: VaultKeys) -> [String: [(id: String, name: String, wire: CipherWire)]] {
        var index: [String: [(id: String, name: String, wire: CipherWire)]] = [:]
        for object in ciphers {
            guard let wire = try? CipherWire(json: object, path: "cipher"), let id = wire.id,
                  let name = try? wire.decryptedName(with: keys), BackupName.isBackup(name) else { continue }
            index[BackupName.originalName(of: name), default: []].append((id, name, wire))
        }
        return index
    }

    /// Whether `backup` (a conflict backup item) holds the same version as `version`: every field a
    /// backup copies is equal, and its name is a backup name of `version`'s. Ids, dates, keys, folder,
    /// favorite and per-user state are the backup's own and not compared.
    static func holdsSameVersion(_ backup: CipherView, as version: CipherView) -> Bool {
        guard BackupName.originalName(of: backup.name) == version.name else { return false }
        return content(of: backup) == content(of: version)
    }

    private static func content(of view: CipherView) -> CipherView {
        var content = CipherView(type: view.type, name: "")
        content.organizationId = view.organizationId
        content.notes = view.notes
        content.reprompt = view.reprompt
        content.login = view.login
        content.card = view.card
        content.identity = view.identity
        content.secureNote = view.secureNote
        content.sshKey = view.sshKey
        content.fields = view.fields
        content.passwordHistory = view.passwordHistory
        return content
    }
}

extension VaultEngine {
    /// After a resolution that wrote backups: one version backed up by two devices at once is kept once.
    ///
    /// Two devices that resolve one item against the same server version at the same time each back it
    /// up before pushing (backup first, so that nothing is lost if a device dies in between); neither
    /// can see the other's backup beforehand. Every resolution that wrote a backup therefore reads a
    /// fresh snapshot afterwards, and of identical, untouched backups of one version keeps the one with
    /// the lowest id and deletes the others. Of two devices that raced, at least one reads its snapshot
    /// after both backups exist (each posts its backup before its push or settle, and reads after), and
    /// the copy with the lowest id is never deleted by anyone, so exactly one copy stays. Best effort: a
    /// failure here leaves a duplicate (never a loss) for a later run to merge.
    func mergeTwinBackups(_ made: [ConflictBackup]) async -> [ConflictBackup] {
        guard let current = session else { return made }
        let snapshot: SyncResponse
        do {
            snapshot = try await fetchSnapshot()
        } catch {
            logger.info("twin backup check skipped", metadata: ["error": "\(error)"])
            return made
        }
        let backups = SnapshotBackups(ciphers: snapshot.ciphers)
        var merged = made
        for (position, backup) in made.enumerated() {
            let copies = backups.copies(ofBackup: backup.backupID, keys: current.keys)
            guard copies.count > 1, let keeper = copies.map(\.id).min() else { continue }
            for copy in copies where copy.id != keeper && Self.isUntouched(copy.wire) {
                do {
                    try await authorized { api, token in try await api.hardDeleteCipher(id: copy.id, token: token) }
                } catch let error as ServerCallError where error.isGone {
                } catch {
                    logger.info("twin backup not deleted", metadata: ["backup": "\(copy.id)", "error": "\(error)"])
                    continue
                }
                let userID = current.userID
                let removed = copy.id
                try? await write { db in
                    if try !Self.hasQueueRecord(itemID: removed, userID: userID, db) {
                        _ = try CipherRow.deleteOne(db, key: ["userID": userID, "id": removed])
                    }
                    try db.execute(sql: "UPDATE OR REPLACE conflictBackup SET backupID = ? WHERE userID = ? AND backupID = ?",
                                   arguments: [keeper, userID, removed])
                }
                logger.info("twin backup merged", metadata: ["backup": "\(removed)", "kept": "\(keeper)"])
                if removed == backup.backupID { merged[position].backupID = keeper }
            }
        }
        return merged
    }
}
