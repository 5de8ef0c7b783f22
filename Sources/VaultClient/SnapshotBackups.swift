import Foundation
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

    /// Whether two versions have the same name and the same content a backup keeps.
    static func sameKeptContent(_ a: CipherView, _ b: CipherView) -> Bool {
        a.name == b.name && content(of: a) == content(of: b)
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
    /// Merges the twins of the backups this device wrote and has not checked yet (`twinCheckPending`),
    /// then clears their mark; `made` (a report's backups) comes back with merged ids replaced by the
    /// copy kept.
    ///
    /// Two devices that resolve one item against the same server version at the same time each back it
    /// up before pushing (backup first, so that nothing is lost if a device dies in between); neither
    /// can see the other's backup beforehand. Every backup this device writes is therefore checked
    /// against a snapshot read after it: of identical, untouched backups of one version the one with
    /// the lowest id stays and the others are deleted. Of two devices that raced, at least one reads its
    /// snapshot after both backups exist (each posts its backup before its push or settle, and checks
    /// after), and the copy with the lowest id is never deleted by anyone, so exactly one copy stays.
    /// The mark is stored with the backup, so a check that cannot reach the server (or an app that
    /// stops first) runs again at the next sync; nothing here ever fails the sync.
    func mergeTwinBackups(_ made: [ConflictBackup]) async -> [ConflictBackup] {
        guard let current = session else { return made }
        let userID = current.userID
        let waiting: [String]
        do {
            waiting = try await read { tx in try tx.backups(of: userID).waitingForTwinCheck() }
        } catch {
            return made
        }
        guard !waiting.isEmpty else { return made }
        let snapshot: SyncResponse
        do {
            snapshot = try await fetchSnapshot()
        } catch {
            logger.info("twin backup check postponed", metadata: ["error": "\(error)"])
            return made
        }
        let backups = SnapshotBackups(ciphers: snapshot.ciphers)
        var keptFor: [String: String] = [:]
        for backupID in waiting {
            var checked = true
            let copies = backups.copies(ofBackup: backupID, keys: current.keys)
            if copies.count > 1, let keeper = copies.map(\.id).min(), let kept = copies.first(where: { $0.id == keeper }) {
                for copy in copies where copy.id != keeper && Self.isTwin(copy.wire, of: kept.wire) {
                    do {
                        // Checked again at the server first: the copy is written back as the snapshot showed it, under
                        // that revision. Someone who renamed or edited it since makes that "out of date", and it
                        // stays; a device writing after this sees the revision moved and re-reads.
                        guard try await stillUntouched(copy.wire) else { continue }
                        try await authorized { api, token in try await api.hardDeleteCipher(id: copy.id, token: token) }
                    } catch let error as ServerCallError where error.isGone {
                    } catch {
                        logger.info("twin backup not deleted yet", metadata: ["backup": "\(copy.id)", "error": "\(error)"])
                        checked = false
                        continue
                    }
                    let removed = copy.id
                    try? await write { tx in
                        if try !tx.queue(of: userID).hasRecord(forItem: removed) { try tx.ciphers(of: userID).remove(id: removed) }
                        try tx.backups(of: userID).merge(removed, into: keeper)
                    }
                    logger.info("twin backup merged", metadata: ["backup": "\(removed)", "kept": "\(keeper)"])
                    keptFor[removed] = keeper
                }
            }
            if checked {
                let done = keptFor[backupID] ?? backupID
                try? await write { tx in try tx.backups(of: userID).twinCheckDone(done) }
            }
        }
        return made.map { backup in
            var backup = backup
            if let keeper = keptFor[backup.backupID] { backup.backupID = keeper }
            return backup
        }
    }

    /// Whether `copy` (same version as `keeper`, under the same backup name) can go without taking anything
    /// with it: untouched since it was made, or in the same trash/archive/folder/favorite state as the copy
    /// kept. The second covers a check's own write-back (below), which moves the copy's revision: when the
    /// delete after it failed, the next check met a copy "touched" by nothing but itself and kept both
    /// copies for good (docs/RELIABILITY.md, bug 26).
    static func isTwin(_ copy: CipherWire, of keeper: CipherWire) -> Bool {
        isUntouched(copy) || state(of: copy) == state(of: keeper)
    }

    /// Writes a twin back unchanged with `lastKnownRevisionDate` = the revision the snapshot showed: `false`
    /// when the server answers "out of date" (someone wrote to it since the snapshot: it is not a twin to merge).
    func stillUntouched(_ wire: CipherWire) async throws -> Bool {
        guard let id = wire.id else { return false }
        do {
            _ = try await authorized { api, token in try await api.updateCipher(wire, id: id, lastKnownRevisionDate: wire.revisionDate, token: token) }
            return true
        } catch let error as ServerCallError where error.isOutOfDate {
            logger.info("twin backup changed since the snapshot; kept", metadata: ["backup": "\(id)"])
            return false
        }
    }
}
