import VaultCrypto
import VaultModels

/// The file formats `vaultsync import` reads (docs/IMPORT-FORMATS.md has each one's mapping).
public enum ImportFormat: String, Sendable, CaseIterable {
    /// Bitwarden's JSON export, plain or password-protected.
    case bitwardenJSON = "bitwarden-json"
    /// Bitwarden's CSV export (logins and secure notes).
    case bitwardenCSV = "bitwarden-csv"
    /// KeePassXC's CSV export; groups become folders (`A/B` for nested groups).
    case keepassxcCSV = "keepassxc-csv"
    /// Chrome's and Chromium's password CSV.
    case chromeCSV = "chrome-csv"
    /// Firefox's password CSV.
    case firefoxCSV = "firefox-csv"
    /// 1Password's CSV export (1Password 8's and 7's column names).
    case onePasswordCSV = "1password-csv"
}

/// One item read from a file, not yet in any vault: its decrypted form and the name of its folder.
public struct ImportedItem: Sendable, Equatable {
    public var view: CipherView
    /// The folder's full name (`Work/Servers`), or nil for no folder.
    public var folderName: String?
    /// Where it came from, for messages: "line 12", "item 3".
    public var entry: String

    public init(view: CipherView, folderName: String?, entry: String) {
        self.view = view
        self.folderName = folderName
        self.entry = entry
    }
}

extension ImportedItem {
    /// What makes two items "the same" for the duplicate check of an import: type, name, notes and the
    /// content of the type's fields and custom fields; not the folder, favorite flag or dates (an item
    /// moved or starred since the last import is still the same item).
    public static func contentKey(of view: CipherView) -> String {
        var parts: [String] = [String(view.type.rawValue), view.name, view.notes ?? ""]
        if let login = view.login {
            parts += [login.username ?? "", login.password ?? "", login.totp ?? ""]
            parts += login.uris.map { $0.uri ?? "" }
        }
        for values in [view.card?.values.map { ($0.key.rawValue, $0.value) }, view.identity?.values.map { ($0.key.rawValue, $0.value) },
                       view.sshKey?.values.map { ($0.key.rawValue, $0.value) }].compactMap({ $0 }) {
            parts += values.sorted { $0.0 < $1.0 }.map { "\($0.0)=\($0.1)" }
        }
        parts += view.fields.map { "\($0.type.rawValue):\($0.name ?? "")=\($0.value ?? "")" }
        // A separator no field holds, so that ("ab", "c") and ("a", "bc") differ.
        return parts.joined(separator: "\u{1F}")
    }
}

/// An entry of the file that was not imported, and why.
public struct SkippedEntry: Sendable, Equatable {
    public var entry: String
    public var reason: String

    public init(entry: String, reason: String) {
        self.entry = entry
        self.reason = reason
    }
}

/// Everything read from one file. Folders are named, not numbered: the importer creates the ones the
/// vault lacks and matches the others by name.
public struct ImportedVault: Sendable, Equatable {
    public var items: [ImportedItem]
    /// Every folder the file names, in the file's order, without repeats (also empty folders).
    public var folderNames: [String]
    public var skipped: [SkippedEntry]

    public init(items: [ImportedItem] = [], folderNames: [String] = [], skipped: [SkippedEntry] = []) {
        self.items = items
        self.folderNames = folderNames
        self.skipped = skipped
    }

    /// Adds `name` (and nothing if nil or empty) to `folderNames` once.
    mutating func noteFolder(_ name: String?) {
        guard let name, !name.isEmpty, !folderNames.contains(name) else { return }
        folderNames.append(name)
    }
}

/// Why a file could not be read. Nothing is imported when any of these is thrown.
public enum ExchangeError: Error, Equatable, CustomStringConvertible {
    /// The file is not in the format: names the line or entry and what is wrong there.
    case malformed(entry: String, reason: String)
    /// The file needs a password (a password-protected Bitwarden export) and none was given.
    case passwordRequired
    /// The password does not open the file.
    case wrongPassword
    /// The file is encrypted with an account's key (Bitwarden's "account restricted" export), which only
    /// that account's own client can read.
    case accountEncrypted
    /// An export that cannot be written, e.g. because items cannot be decrypted.
    case cannotExport(String)

    public var description: String {
        switch self {
        case .malformed(let entry, let reason): return "\(entry): \(reason)"
        case .passwordRequired: return "this export is password-protected; give its password (--file-password-stdin, VAULTSYNC_FILE_PASSWORD, or at the prompt)"
        case .wrongPassword: return "the password does not open this export (its check value does not decrypt)"
        case .accountEncrypted:
            return "this is an account-restricted encrypted export, readable only by the account that made it; export it again as plain JSON or with a password"
        case .cannotExport(let reason): return reason
        }
    }
}
