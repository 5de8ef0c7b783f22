import VaultModels

/// The conflict matrix's constants and its one comparison (the matrix itself is
/// ``ResolutionPlanner``'s: seed 000 §6 with 001/002's decisions and this project's refinements).
public enum ConflictMatrix {
    /// Offline password changes at or above this count back up the server version even without a
    /// conflict (seed 000 §6 soft conflict): its password history is the only copy of older passwords.
    public static let softConflictPasswordChanges = 4

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
