import VaultModels

/// Bitwarden's CSV export (docs/PROTOCOL.md "Vault exports"): logins and secure notes only, one row
/// each, CRLF line ends, a cell quoted only when it must be.
public enum BitwardenCSVExport {
    public static let header = ["folder", "favorite", "type", "name", "notes", "fields", "reprompt",
                                "login_uri", "login_username", "login_password", "login_totp"]

    /// The file, and the items the format cannot carry (cards, identities, SSH keys, and anything a
    /// CSV cell would lose: passkeys, password history, field types), for the caller to name.
    public static func export(items: [CipherView], folders: [FolderView]) -> (text: String, notCarried: [CipherView]) {
        let folderNames = Dictionary(folders.compactMap { folder in folder.id.map { ($0, folder.name) } }, uniquingKeysWith: { a, _ in a })
        var lines = [CSV.line(header)]
        var notCarried: [CipherView] = []
        for view in items {
            guard view.type == .login || view.type == .secureNote else {
                notCarried.append(view)
                continue
            }
            let login = view.login
            let fields = view.fields.map { "\($0.name ?? ""): \($0.value ?? "")" }.joined(separator: "\n")
            lines.append(CSV.line([
                view.folderId.flatMap { folderNames[$0] } ?? "",
                view.favorite ? "1" : "",
                view.type == .secureNote ? "note" : "login",
                view.name,
                view.notes ?? "",
                fields,
                String(view.reprompt.rawValue),
                (login?.uris ?? []).compactMap(\.uri).joined(separator: ","),
                login?.username ?? "",
                login?.password ?? "",
                login?.totp ?? "",
            ]))
        }
        return (lines.joined(separator: "\r\n") + "\r\n", notCarried)
    }
}
