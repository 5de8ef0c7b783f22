import VaultModels

/// The server's side of a queued change, from one `/api/sync` snapshot.
public enum ServerSide: Sendable, Equatable {
    /// The item as the server has it, with its revision date.
    case present(revisionDate: WireDate)
    /// The server has no such item (hard-deleted, or never created).
    case gone
}

/// What to do with one queued change (seed 000 §6, with 001/002's later decisions and this project's
/// refinements). Every path keeps both versions when they conflict; none loses data.
public enum ResolutionPlan: Sendable, Equatable {
    /// Create on the server (adopting an identical item already there), then swap ids locally.
    case create
    /// Push the local version; no backup.
    case pushLocal
    /// Back up the server version first, then push the local version.
    case backupServerThenPushLocal
    /// Back up the local version first, then take the server version (plus the local state intents).
    case backupLocalThenTakeServer
    /// Take the server version and replay the local state intents (trash, archive, folder, favorite):
    /// nothing of the content changed here, so there is nothing to back up.
    case takeServerWithLocalState
    /// The server lost the item; create it again from the local version (offline edits survive).
    case recreateFromLocal
    /// Soft-delete (move to trash) on the server.
    case pushSoftDelete
    /// Delete on the server for good.
    case pushHardDelete
    /// The item changed on the server after the delete was queued: the edit wins, the delete is
    /// dropped and the user is told.
    case dropDeleteKeepServer
    /// As ``dropDeleteKeepServer``, but the item was also edited here before it went to the trash:
    /// the local version is backed up first, so those edits survive the dropped delete.
    case backupLocalThenDropDelete
    /// Nothing left to do on the server; remove the local item and record.
    case removeLocally
    /// An item created here and deleted for good before any answer to its create arrived: find the
    /// copy that create may have left on the server by the item's names, and delete it too (unless
    /// edited elsewhere since: then, as for any delete, the edit wins).
    case hardDeleteLostCreate
}

public enum ConflictMatrix {
    /// Offline password changes at or above this count back up the server version even without a
    /// conflict (seed 000 §6 soft conflict): its password history is the only copy of older passwords.
    public static let softConflictPasswordChanges = 4

    /// Decides one queued item change.
    ///
    /// - Parameters:
    ///   - localUpdatedOnServerClock: the record's `updatedDate` converted to the server's clock with the
    ///     measured offset (seed 001 AP-R2); "newer" compares this with the server's revision date.
    public static func decide(_ metadata: PendingChangeMetadata, server: ServerSide, localUpdatedOnServerClock: WireDate) -> ResolutionPlan {
        switch (metadata.kind, server) {
        case (.create, _):
            return .create
        case (.update, .gone):
            return .recreateFromLocal
        case (.update, .present(let revision)):
            let unchanged = metadata.originalRevisionDate.map { isSameRevision($0, revision) } ?? false
            if unchanged {
                if metadata.contentChanged && metadata.passwordChangeCount >= softConflictPasswordChanges {
                    return .backupServerThenPushLocal
                }
                return .pushLocal
            }
            guard metadata.contentChanged else { return .takeServerWithLocalState }
            // This device's own merge push is as new as the edits it merged, not as the push.
            let serverEdited = metadata.mergedPushRevision.flatMap { isSameRevision($0, revision) ? metadata.mergedContentDate : nil } ?? revision
            return localUpdatedOnServerClock > serverEdited ? .backupServerThenPushLocal : .backupLocalThenTakeServer
        case (.hardDelete, .gone) where metadata.createSent == true && metadata.originalRevisionDate == nil:
            return .hardDeleteLostCreate
        case (.softDelete, .gone), (.hardDelete, .gone):
            return .removeLocally
        case (.softDelete, .present(let revision)), (.hardDelete, .present(let revision)):
            let unchanged = metadata.originalRevisionDate.map { isSameRevision($0, revision) } ?? false
            guard unchanged else {
                // Edits made here before the trash move are not dropped with the delete: they are backed up.
                return metadata.kind == .softDelete && metadata.contentChanged ? .backupLocalThenDropDelete : .dropDeleteKeepServer
            }
            if metadata.kind == .hardDelete { return .pushHardDelete }
            // Edits made before the trash move are pushed first so the trash holds them.
            return metadata.contentChanged ? .pushLocal : .pushSoftDelete
        }
    }

    /// Revision dates match at the precision clients send (milliseconds, spec §3.2).
    public static func isSameRevision(_ lhs: WireDate, _ rhs: WireDate) -> Bool {
        abs(lhs.microsecondsSinceEpoch - rhs.microsecondsSinceEpoch) < 1000
    }
}

/// Names of conflict backups: `{original name} - offline conflict {yyyy-MM-dd HHmmss.SSS}` with the
/// losing version's time in UTC, to the millisecond (README, "Reconnect: sync and conflict resolution").
///
/// The seeds name backups to the second; two different versions of one item that lose within one
/// second (an edit here and another device's, a few milliseconds apart) then had the same name, and a
/// person could not tell them apart. Milliseconds are the precision at which revision dates are
/// compared, so two versions with different dates always get different names. Names made to the
/// second by earlier versions are still recognised.
public enum BackupName {
    static let marker = " - offline conflict "

    public static func make(originalName: String, losingVersionDate: WireDate) -> String {
        let iso = losingVersionDate.iso8601  // yyyy-MM-ddTHH:mm:ss.ffffffZ, UTC
        let date = iso.prefix(10)
        let time = String(iso.dropFirst(11).prefix(8).filter { $0 != ":" })
        let milliseconds = iso.dropFirst(20).prefix(3)
        return "\(originalName)\(marker)\(date) \(time).\(milliseconds)"
    }

    /// The original name of a backup's name (the name itself when it is not one).
    public static func originalName(of name: String) -> String {
        // "yyyy-MM-dd HHmmss.SSS" (21 characters), or "yyyy-MM-dd HHmmss" (17) as named before.
        let characters = Array(name)
        for stampLength in [21, 17] {
            let prefixLength = characters.count - stampLength - marker.count
            guard prefixLength >= 0, String(characters[prefixLength..<(prefixLength + marker.count)]) == marker else { continue }
            let stamp = characters[(characters.count - stampLength)...]
            guard stamp.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == "-" || $0 == " " || $0 == ".") }) else { continue }
            return String(characters[..<prefixLength])
        }
        return name
    }

    /// Whether `name` is a conflict backup's name.
    public static func isBackup(_ name: String) -> Bool {
        originalName(of: name) != name
    }
}
