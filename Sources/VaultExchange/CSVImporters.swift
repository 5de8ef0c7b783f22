import Foundation
import VaultModels

/// Reads the CSV exports of Bitwarden, KeePassXC, Chrome, Firefox and 1Password into items
/// (docs/IMPORT-FORMATS.md has each format's column mapping).
///
/// Nothing a file carries is dropped: columns a format does not map become custom fields (hidden when
/// the column's name suggests a secret), and values too long or multi-line for a field are appended to
/// the item's notes as `Column: value` lines. Entirely empty rows are ignored; a row that has content but
/// no name is named after its URI's host, else its username, else "Untitled". Only entries that cannot be
/// used at all land in ``ImportedVault/skipped``, with the reason.
public enum CSVImporter {
    /// Reads `text` in `format` (one of the CSV formats). Throws ``ExchangeError/malformed(entry:reason:)``
    /// naming the line on a bad file (a header that is not the format's, an unclosed quote).
    public static func read(_ text: String, format: ImportFormat) throws -> ImportedVault {
        switch format {
        case .bitwardenJSON:
            throw ExchangeError.malformed(entry: "file", reason: "bitwarden-json is not a CSV format (the JSON importer reads it)")
        case .bitwardenCSV: return try readBitwarden(text)
        case .keepassxcCSV: return try readKeePassXC(text)
        case .chromeCSV: return try readChrome(text)
        case .firefoxCSV: return try readFirefox(text)
        case .onePasswordCSV: return try readOnePassword(text)
        }
    }

    /// The CSV format a header plainly is, by columns that only that format writes; nil when it is no one
    /// format's plainly (a file edited by hand, another program's export, a header two formats could write).
    /// A Chrome and a KeePassXC file both have the columns `chrome-csv` requires, so the required columns
    /// alone let a file of one format import under another's mapping, its titles and groups becoming custom
    /// fields (RELIABILITY bug 76).
    public static func recognizedFormat(header: [String]) -> ImportFormat? {
        let names = Set(header.map { $0.trimmingSpaces.lowercased() })
        func hasAll(_ columns: [String]) -> Bool { columns.allSatisfy(names.contains) }
        func hasAny(_ columns: [String]) -> Bool { columns.contains(where: names.contains) }
        let firefoxOnly = ["httprealm", "formactionorigin", "timecreated", "timelastused", "timepasswordchanged"]
        var matches: [ImportFormat] = []
        if hasAll(["name", "type"]), hasAny(["login_uri", "login_username", "login_password", "login_totp"]) { matches.append(.bitwardenCSV) }
        if hasAll(["group", "title"]) { matches.append(.keepassxcCSV) }
        if hasAll(["url", "username", "password"]), hasAny(firefoxOnly) { matches.append(.firefoxCSV) }
        if hasAll(["name", "url", "username", "password"]), !hasAny(["type", "title", "group"] + firefoxOnly) { matches.append(.chromeCSV) }
        if names.contains("title"), !names.contains("group"), hasAny(["otpauth", "one-time password", "tags", "archived", "urls"]) {
            matches.append(.onePasswordCSV)
        }
        return matches.count == 1 ? matches[0] : nil
    }

    /// The file's table in `format`: refused (nothing read) when its header is plainly another format's
    /// (``recognizedFormat(header:)``), naming that one, before the required columns are checked.
    private static func readTable(_ text: String, _ format: ImportFormat, required: [String]) throws -> CSV.Table {
        try CSV.table(text, required: required, format: format.rawValue) { header, line in
            guard let recognized = recognizedFormat(header: header), recognized != format else { return }
            throw ExchangeError.malformed(
                entry: "line \(line)",
                reason: "this is the header of a \(recognized.rawValue) file, not of a \(format.rawValue) file (found: \(header.joined(separator: ","))); "
                    + "read as \(format.rawValue) its columns would land in the wrong fields, so nothing was imported. Import it with --format \(recognized.rawValue)")
        }
    }

    // MARK: Bitwarden

    private static func readBitwarden(_ text: String) throws -> ImportedVault {
        let table = try readTable(text, .bitwardenCSV, required: ["name", "type"])
        let loginColumns: [(column: String, fallback: String)] = [
            ("login_uri", "uri"), ("login_username", "username"), ("login_password", "password"), ("login_totp", "totp"),
        ]
        let known: Set<String> = [
            "folder", "favorite", "type", "name", "notes", "fields", "reprompt", "collections",
            "login_uri", "login_username", "login_password", "login_totp", "uri", "username", "password", "totp",
        ]
        var vault = ImportedVault()
        for row in table.rows where !isEmpty(row) {
            let type = table.value(row, anyCase: "type")?.trimmingSpaces.lowercased() ?? ""
            var item = ItemBuilder(type: type == "note" ? .secureNote : .login)
            item.view.name = table.value(row, anyCase: "name")?.trimmingSpaces ?? ""
            if !["", "login", "note"].contains(type) { item.keep("type", table.value(row, anyCase: "type") ?? type) }
            item.view.notes = nonEmpty(table.value(row, anyCase: "notes"))
            item.view.favorite = flag(table.value(row, anyCase: "favorite"))
            switch table.value(row, anyCase: "reprompt")?.trimmingSpaces ?? "" {
            case "1": item.view.reprompt = .password
            case "", "0": break
            case let other: item.keep("reprompt", other)
            }
            item.folder = folderName(table.value(row, anyCase: "folder"))
            if let collections = nonEmpty(table.value(row, anyCase: "collections")) {
                item.keep("Collections", collections, type: .text)
            }
            // One field per line, "name: value", split at the last ": " (Bitwarden's export writes them so).
            for line in lines(table.value(row, anyCase: "fields")) where !line.trimmingSpaces.isEmpty {
                if let separator = line.range(of: ": ", options: .backwards) {
                    let value = String(line[separator.upperBound...])
                    item.view.fields.append(FieldView(type: .text, name: String(line[..<separator.lowerBound]), value: value.isEmpty ? nil : value))
                } else {
                    item.extraNotes.append("fields: \(line)")
                }
            }
            for (column, fallback) in loginColumns {
                let name = table.value(row, anyCase: column) != nil ? column : fallback
                guard let value = nonEmpty(table.value(row, anyCase: name)) else { continue }
                guard item.view.login != nil else {
                    item.keep(name, value) // a note's login cells are kept, not dropped
                    continue
                }
                switch column {
                case "login_uri": item.view.login?.uris = uriList(value, separators: newlines.union([","]))
                case "login_username": item.view.login?.username = value
                case "login_password": item.view.login?.password = value
                default: item.view.login?.totp = value
                }
            }
            item.keepOthers(table, row, known: known)
            vault.add(item, entry: "line \(row.line)")
        }
        return vault
    }

    // MARK: KeePassXC

    private static func readKeePassXC(_ text: String) throws -> ImportedVault {
        let table = try readTable(text, .keepassxcCSV, required: ["title", "group"])
        let known: Set<String> = ["group", "title", "username", "password", "url", "notes", "totp", "icon", "last modified", "created"]
        var vault = ImportedVault()
        for row in table.rows where !isEmpty(row) {
            var item = ItemBuilder(type: .login)
            item.view.name = table.value(row, anyCase: "title")?.trimmingSpaces ?? ""
            // The group is the full path from the root group: "Root/Work/Servers" is the folder "Work/Servers".
            // Separated by "/" or "\\" (as folder names are everywhere: ``folderName(_:)``), the root group dropped either way.
            var group = (table.value(row, anyCase: "group")?.trimmingSpaces ?? "").replacingOccurrences(of: "\\", with: "/")
            if group == "Root" { group = "" } else if group.hasPrefix("Root/") { group.removeFirst(5) }
            item.folder = folderName(group)
            item.view.login?.username = nonEmpty(table.value(row, anyCase: "username"))
            item.view.login?.password = nonEmpty(table.value(row, anyCase: "password"))
            item.view.login?.uris = uriList(table.value(row, anyCase: "url"), separators: newlines)
            item.view.login?.totp = nonEmpty(table.value(row, anyCase: "totp"))
            item.view.notes = nonEmpty(table.value(row, anyCase: "notes"))
            // Icon 0 is KeePassXC's default (the key); only a chosen icon is kept.
            if let icon = nonEmpty(table.value(row, anyCase: "icon")), icon.trimmingSpaces != "0" {
                item.keep("KeePassXC icon", icon, type: .text)
            }
            for (column, keyPath) in [("Last Modified", \CipherView.revisionDate), ("Created", \CipherView.creationDate)] {
                guard let value = nonEmpty(table.value(row, anyCase: column)) else { continue }
                if let date = WireDate(iso8601: value.trimmingSpaces) {
                    item.view[keyPath: keyPath] = date
                } else {
                    item.keep(column, value)
                }
            }
            item.keepOthers(table, row, known: known)
            vault.add(item, entry: "line \(row.line)")
        }
        return vault
    }

    // MARK: Chrome

    private static func readChrome(_ text: String) throws -> ImportedVault {
        let table = try readTable(text, .chromeCSV, required: ["url", "username", "password"])
        let known: Set<String> = ["name", "url", "username", "password", "note"]
        var vault = ImportedVault()
        for row in table.rows where !isEmpty(row) {
            var item = ItemBuilder(type: .login)
            item.view.name = table.value(row, anyCase: "name")?.trimmingSpaces ?? ""
            if let url = nonEmpty(table.value(row, anyCase: "url")?.trimmingSpaces) {
                // An Android app's entry: android://<certificate hash>@<package>/
                if url.hasPrefix("android://"), let at = url.lastIndex(of: "@") {
                    var package = url[url.index(after: at)...]
                    while package.last == "/" { package.removeLast() }
                    item.view.login?.uris = [LoginURIView(uri: "androidapp://\(package)")]
                    if item.view.name.isEmpty { item.view.name = String(package) }
                } else {
                    item.view.login?.uris = uriList(url, separators: [])
                }
            }
            item.view.login?.username = nonEmpty(table.value(row, anyCase: "username"))
            item.view.login?.password = nonEmpty(table.value(row, anyCase: "password"))
            item.view.notes = nonEmpty(table.value(row, anyCase: "note"))
            item.keepOthers(table, row, known: known)
            vault.add(item, entry: "line \(row.line)")
        }
        return vault
    }

    // MARK: Firefox

    private static func readFirefox(_ text: String) throws -> ImportedVault {
        let table = try readTable(text, .firefoxCSV, required: ["url", "username", "password"])
        let known: Set<String> = [
            "url", "username", "password", "httprealm", "formactionorigin", "guid", "timecreated", "timelastused", "timepasswordchanged",
        ]
        var vault = ImportedVault()
        for row in table.rows where !isEmpty(row) {
            let entry = "line \(row.line)"
            let url = table.value(row, anyCase: "url")?.trimmingSpaces ?? ""
            if url.lowercased().hasPrefix("chrome://firefoxaccounts") {
                vault.skipped.append(SkippedEntry(entry: entry, reason: "Firefox Sync's internal entry"))
                continue
            }
            var item = ItemBuilder(type: .login)
            item.view.login?.uris = uriList(url, separators: [])
            item.view.login?.username = nonEmpty(table.value(row, anyCase: "username"))
            item.view.login?.password = nonEmpty(table.value(row, anyCase: "password"))
            for column in ["httpRealm", "formActionOrigin"] {
                if let value = nonEmpty(table.value(row, anyCase: column)) { item.keep(column, value) }
            }
            if let guid = nonEmpty(table.value(row, anyCase: "guid")) { item.keep("Firefox guid", guid, type: .text) }
            // Times are milliseconds since 1970.
            func time(_ column: String) -> WireDate? {
                guard let value = nonEmpty(table.value(row, anyCase: column)) else { return nil }
                if let milliseconds = Int64(value.trimmingSpaces) { return WireDate(millisecondsSinceEpoch: milliseconds) }
                item.keep(column, value)
                return nil
            }
            // Each read first, then stored: `time` may keep an unreadable value on `item` itself.
            let created = time("timeCreated")
            item.view.creationDate = created
            if let lastUsed = time("timeLastUsed") { item.keep("Last used", lastUsed.iso8601, type: .text) }
            let passwordChanged = time("timePasswordChanged")
            item.view.login?.passwordRevisionDate = passwordChanged
            item.keepOthers(table, row, known: known)
            vault.add(item, entry: entry)
        }
        return vault
    }

    // MARK: 1Password

    private static func readOnePassword(_ text: String) throws -> ImportedVault {
        let table = try readTable(text, .onePasswordCSV, required: ["title"])
        // 1Password 8's names, and 1Password 7's (upper case, URLS a list of lines, TYPE).
        let known: Set<String> = [
            "title", "url", "urls", "username", "password", "otpauth", "one-time password", "favorite", "archived", "tags", "notes", "type",
        ]
        var vault = ImportedVault()
        for row in table.rows where !isEmpty(row) {
            let type = table.value(row, anyCase: "type")?.trimmingSpaces ?? ""
            var item = ItemBuilder(type: type.lowercased() == "secure note" ? .secureNote : .login)
            item.view.name = table.value(row, anyCase: "title")?.trimmingSpaces ?? ""
            if !["", "login", "secure note"].contains(type.lowercased()) { item.keep("Type", type, type: .text) }
            item.view.notes = nonEmpty(table.value(row, anyCase: "notes"))
            var login: [(column: String, value: String)] = []
            for column in ["url", "urls", "username", "password", "otpauth", "one-time password"] {
                if let value = nonEmpty(table.value(row, anyCase: column)) { login.append((column, value)) }
            }
            for (column, value) in login {
                guard item.view.login != nil else {
                    item.keep(table.header.first { $0.trimmingSpaces.lowercased() == column } ?? column, value)
                    continue
                }
                switch column {
                case "url", "urls": item.view.login?.uris += uriList(value, separators: newlines)
                case "username": item.view.login?.username = value
                case "password": item.view.login?.password = value
                default: item.view.login?.totp = value
                }
            }
            if let favorite = nonEmpty(table.value(row, anyCase: "favorite")) {
                switch favorite.trimmingSpaces.lowercased() {
                case "true", "1": item.view.favorite = true
                case "false", "0": break
                default: item.keep("Favorite", favorite)
                }
            }
            if let archived = nonEmpty(table.value(row, anyCase: "archived")) {
                switch archived.trimmingSpaces.lowercased() {
                case "false", "0": break
                case "1": item.keep("Archived in 1Password", "true", type: .text)
                default: item.keep("Archived in 1Password", archived, type: .text)
                }
            }
            let tags = (table.value(row, anyCase: "tags") ?? "").split(separator: ",").map { String($0).trimmingSpaces }.filter { !$0.isEmpty }
            item.folder = folderName(tags.first)
            if tags.count > 1 { item.keep("Tags", tags.joined(separator: ", "), type: .text) }
            item.keepOthers(table, row, known: known)
            vault.add(item, entry: "line \(row.line)")
        }
        return vault
    }

    // MARK: Shared rules

    /// Whether every cell of `row` is empty (such rows are ignored).
    private static func isEmpty(_ row: CSV.Row) -> Bool {
        row.cells.allSatisfy(\.isEmpty)
    }

    /// The value, or nil when it is missing or empty. Not trimmed, and spaces are content: a password
    /// may start with a space, or be nothing but spaces.
    private static func nonEmpty(_ value: String?) -> String? {
        guard let value, !value.isEmpty else { return nil }
        return value
    }

    /// A yes/no cell: empty, "0" and "false" are no; anything else is yes.
    private static func flag(_ value: String?) -> Bool {
        let value = value?.trimmingSpaces.lowercased() ?? ""
        return !["", "0", "false"].contains(value)
    }

    /// The lines of a cell (LF, CRLF or CR), without the line ends.
    private static func lines(_ value: String?) -> [String] {
        guard let value, !value.isEmpty else { return [] }
        return value.replacingOccurrences(of: "\r\n", with: "\n").replacingOccurrences(of: "\r", with: "\n")
            .split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }

    /// A folder's full name: backslashes become "/", surrounding spaces and slashes go; nil when empty.
    static func folderName(_ value: String?) -> String? {
        var name = Substring((value ?? "").replacingOccurrences(of: "\\", with: "/").trimmingSpaces)
        while name.first == "/" { name.removeFirst() }
        while name.last == "/" { name.removeLast() }
        return name.isEmpty ? nil : String(name)
    }

    /// Line ends as `Character`s ("\r\n" is one).
    private static let newlines: Set<Character> = ["\n", "\r", "\r\n"]

    /// The URIs of a cell split at any of `separators`, each trimmed and fixed by ``fixURI(_:)``.
    private static func uriList(_ value: String?, separators: Set<Character>) -> [LoginURIView] {
        guard let value else { return [] }
        return value.split(whereSeparator: { separators.contains($0) })
            .compactMap { fixURI(String($0)) }
            .map { LoginURIView(uri: $0) }
    }

    /// A URI as written, trimmed; one without a scheme that looks like a host name (has a dot) gets
    /// "http://", as Bitwarden's importers do. Nil when empty.
    static func fixURI(_ value: String) -> String? {
        let uri = value.trimmingSpaces
        if uri.isEmpty { return nil }
        if !uri.contains("://") && uri.contains(".") { return "http://" + uri }
        return uri
    }

    /// The host of `uri` (lower case, without userinfo, port and a leading "www."), or nil.
    static func host(of uri: String) -> String? {
        guard let schemeEnd = uri.range(of: "://") else { return nil }
        var host = uri[schemeEnd.upperBound...]
        if let end = host.firstIndex(where: { "/?#".contains($0) }) { host = host[..<end] }
        if let at = host.lastIndex(of: "@") { host = host[host.index(after: at)...] }
        if !host.hasPrefix("["), let colon = host.lastIndex(of: ":") { host = host[..<colon] }
        var name = host.lowercased()
        if name.hasPrefix("www.") { name.removeFirst(4) }
        return name.isEmpty ? nil : name
    }

    /// An item being read from one row.
    fileprivate struct ItemBuilder {
        var view: CipherView
        var folder: String?
        /// "Column: value" lines for the notes, after the notes the file gives.
        var extraNotes: [String] = []

        init(type: CipherType) {
            view = CipherView(type: type, name: "")
        }

        /// Keeps a cell the format does not map: a custom field named `column` of `type` (by default
        /// hidden when the column's name suggests a secret, else text), or a "Column: value" line in the
        /// notes when the value is multi-line or longer than 200 characters.
        mutating func keep(_ column: String, _ value: String, type: FieldType? = nil) {
            if value.count > 200 || value.unicodeScalars.contains(where: { $0 == "\n" || $0 == "\r" }) {
                extraNotes.append("\(column): \(value)")
                return
            }
            let lower = column.lowercased()
            let secret = Self.secretColumnWords.contains { lower.contains($0) }
            view.fields.append(FieldView(type: type ?? (secret ? .hidden : .text), name: column, value: value))
        }

        /// A column whose name contains one of these is taken for a secret (a hidden field, masked when shown):
        /// one-time-password seeds, card numbers and their verification codes as other managers name them.
        static let secretColumnWords = ["password", "secret", "key", "pin", "cvv", "cvc", "code", "otp", "token", "verification",
                                        "card number", "account number", "ssn"]

        /// Keeps every non-empty cell of `row` whose column is not in `known` (lower-case names).
        mutating func keepOthers(_ table: CSV.Table, _ row: CSV.Row, known: Set<String>) {
            for (column, value) in table.otherCells(row, known: known) { keep(column.trimmingSpaces, value) }
        }

        /// The item, named after its URI's host, else its username, else "Untitled" when the file gives no name.
        func finished(entry: String) -> ImportedItem {
            var view = view
            if !extraNotes.isEmpty {
                let extra = extraNotes.joined(separator: "\n")
                view.notes = view.notes.map { $0 + "\n\n" + extra } ?? extra
            }
            if view.name.isEmpty {
                view.name = view.login?.uris.lazy.compactMap { $0.uri.flatMap(CSVImporter.host(of:)) }.first
                    ?? view.login?.username.flatMap { $0.trimmingSpaces.isEmpty ? nil : $0.trimmingSpaces }
                    ?? "Untitled"
            }
            return ImportedItem(view: view, folderName: folder, entry: entry)
        }
    }
}

extension ImportedVault {
    /// Adds the item read from `builder` and notes its folder.
    fileprivate mutating func add(_ builder: CSVImporter.ItemBuilder, entry: String) {
        noteFolder(builder.folder)
        items.append(builder.finished(entry: entry))
    }
}
