import Foundation
import VaultCrypto
import VaultClient
import VaultModels
import VaultSyncCore

/// The CLI's JSON forms (documented in docs/CLI.md) and the labelled fields plain output shows.
enum Presentation {
    static func string(_ value: String?) -> JSONValue { value.map(JSONValue.string) ?? .null }
    static func date(_ value: WireDate?) -> JSONValue { value.map { .string($0.iso8601) } ?? .null }

    static let fieldTypeNames: [(FieldType, String)] = [(.text, "text"), (.hidden, "hidden"), (.boolean, "boolean"), (.linked, "linked")]

    static func fieldTypeName(_ type: FieldType) -> String {
        fieldTypeNames.first { $0.0 == type }?.1 ?? "type-\(type.rawValue)"
    }

    static func secretGroup<Field: SecretFieldName>(_ fields: PlainFields<Field>?) -> JSONValue {
        guard let fields else { return .null }
        var object = JSONObject()
        for field in Field.allCases { object[field.rawValue] = string(fields[field]) }
        return .object(object)
    }

    /// An item as `get --json` / `list --json` print it.
    static func itemJSON(_ view: CipherView, folderNames: [String: String], pending: PendingChange?) -> JSONValue {
        var object = JSONObject()
        object["id"] = string(view.id)
        object["type"] = .string(view.type.name)
        object["name"] = .string(view.name)
        object["folderId"] = string(view.folderId)
        object["folder"] = string(view.folderId.flatMap { folderNames[$0] })
        object["favorite"] = .bool(view.favorite)
        object["reprompt"] = .bool(view.reprompt == .password)
        object["notes"] = string(view.notes)
        object["organizationId"] = string(view.organizationId)
        if view.organizationId != nil {
            object["collectionIds"] = .array((view.collectionIds ?? []).map(JSONValue.string))
            // false: the organization hides the passwords from this account (the server does not send them).
            object["viewPassword"] = .bool(view.viewPassword ?? true)
        }
        object["login"] = .null
        if let login = view.login {
            object["login"] = .object([
                "username": string(login.username),
                "password": string(login.password),
                "totp": string(login.totp),
                "uris": .array(login.uris.map { .object(["uri": string($0.uri), "match": $0.match.map { .int($0.rawValue) } ?? .null]) }),
                "passwordRevisionDate": date(login.passwordRevisionDate),
                "passkeys": .int(login.fido2Credentials?.count ?? 0),
            ])
        }
        object["card"] = secretGroup(view.card)
        object["identity"] = secretGroup(view.identity)
        object["sshKey"] = secretGroup(view.sshKey)
        object["fields"] = .array(view.fields.map {
            .object(["name": string($0.name), "value": string($0.value), "type": .string(fieldTypeName($0.type)),
                     "linkedId": $0.linkedId.map { .int($0) } ?? .null])
        })
        object["passwordHistory"] = .array(view.passwordHistory.map {
            .object(["password": .string($0.password), "lastUsedDate": .string($0.lastUsedDate.iso8601)])
        })
        object["attachments"] = .int(view.attachments.count)
        object["creationDate"] = date(view.creationDate)
        object["revisionDate"] = date(view.revisionDate)
        object["deletedDate"] = date(view.deletedDate)
        object["archivedDate"] = date(view.archivedDate)
        object["pending"] = pending.map(pendingJSON) ?? .null
        return .object(object)
    }

    static func pendingJSON(_ change: PendingChange) -> JSONValue {
        .object([
            "kind": .string(change.metadata.kind.rawValue),
            "state": .string(change.metadata.state == .needsAttention ? "needs-attention" : "pending"),
            "since": .string(change.metadata.createdDate.iso8601),
            "attempts": .int(change.metadata.attempts),
            "lastError": string(change.metadata.lastError),
        ])
    }

    /// "81 bytes", "1.5 KiB", "2.9 MiB", "1.2 GiB" (binary units, one decimal below 10).
    static func readableSize(_ bytes: Int) -> String {
        guard bytes >= 1024 else { return "\(bytes) byte\(bytes == 1 ? "" : "s")" }
        var value = Double(bytes)
        var unit = "bytes"
        for next in ["KiB", "MiB", "GiB", "TiB"] where value >= 1024 {
            value /= 1024
            unit = next
        }
        return (value < 10 ? String(format: "%.1f", value) : "\(Int(value.rounded()))") + " " + unit
    }

    /// An attachment's own size (before encryption) in our units, whatever the server's size name says
    /// ("81 Bytes", "2.86 MB" mix them): exact when its file is on this device, else "about" the
    /// largest it can be (below 1 KiB, the 16 sizes its encrypted size allows).
    static func attachmentSize(_ attachment: AttachmentSummary) -> String {
        switch attachment.fileSize {
        case .exact(let size): return readableSize(size)
        case .within(let range) where range.upperBound < 1024: return "\(range.lowerBound)–\(range.upperBound) bytes"
        case .within(let range): return "about " + readableSize(range.upperBound)
        case nil: return attachment.size.map { readableSize($0) + " encrypted" } ?? attachment.sizeName ?? "size unknown"
        }
    }

    /// `size` stays the encrypted size the server reports (as Bitwarden's JSON has it); `fileSize` is the
    /// file's own, `fileSizeExact` false when it is the largest its encrypted size allows.
    static func attachmentJSON(_ attachment: AttachmentSummary) -> JSONValue {
        .object(["id": .string(attachment.id), "fileName": .string(attachment.fileName),
                 "size": attachment.size.map { .int($0) } ?? .null, "sizeName": string(attachment.sizeName),
                 "fileSize": attachment.fileSize.map { .int($0.atMost) } ?? .null,
                 "fileSizeExact": attachment.fileSize.map { if case .exact = $0 { .bool(true) } else { .bool(false) } } ?? .null,
                 "pending": .bool(attachment.pending)])
    }

    static func folderJSON(_ folder: FolderView, itemCount: Int) -> JSONValue {
        .object(["id": string(folder.id), "name": .string(folder.name), "items": .int(itemCount), "revisionDate": date(folder.revisionDate)])
    }

    /// Prints a JSON value on one line.
    /// JSON for scripts: exact, never shown in caret notation; the control characters JSON may carry raw
    /// (DEL and the C1 codes) are written as `\u` escapes, so the text is safe on a terminal too.
    static func printJSON(_ value: JSONValue) {
        let text = value.jsonText
        guard text.unicodeScalars.contains(where: { (0x7F...0x9F).contains($0.value) }) else { return Swift.print(text) }
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if (0x7F...0x9F).contains(scalar.value) {
                out.append(contentsOf: "\\u00\(String(scalar.value, radix: 16))".unicodeScalars)
            } else {
                out.append(scalar)
            }
        }
        Swift.print(String(out))
    }

    // MARK: Labelled fields

    /// One displayable field of an item.
    struct Field: Equatable {
        var label: String
        var value: String
        var secret: Bool
    }

    static let secretCardFields: Set<CardField> = [.number, .code]
    static let secretIdentityFields: Set<IdentityField> = [.ssn, .passportNumber, .licenseNumber]

    static func group<Key: SecretFieldName>(_ prefix: String, _ fields: PlainFields<Key>?, secret: (Key) -> Bool) -> [Field] {
        guard let fields else { return [] }
        return Key.allCases.compactMap { key in
            fields[key].map { Field(label: "\(prefix).\(key.rawValue)", value: $0, secret: secret(key)) }
        }
    }

    /// Every field of an item in a fixed order, secrets flagged.
    static func fields(of view: CipherView, folderNames: [String: String]) -> [Field] {
        var result: [Field] = [
            Field(label: "name", value: view.name, secret: false),
            Field(label: "type", value: view.type.name, secret: false),
            Field(label: "folder", value: view.folderId.map { folderNames[$0] ?? $0 } ?? "(none)", secret: false),
            Field(label: "favorite", value: view.favorite ? "yes" : "no", secret: false),
        ]
        if let login = view.login {
            if let username = login.username { result.append(Field(label: "username", value: username, secret: false)) }
            if let password = login.password { result.append(Field(label: "password", value: password, secret: true)) }
            if let totp = login.totp { result.append(Field(label: "totp", value: totp, secret: true)) }
            for (index, uri) in login.uris.enumerated() {
                result.append(Field(label: login.uris.count == 1 ? "uri" : "uri[\(index + 1)]", value: uri.uri ?? "", secret: false))
            }
            if let passkeys = login.fido2Credentials, !passkeys.isEmpty {
                result.append(Field(label: "passkeys", value: "\(passkeys.count)", secret: false))
            }
        }
        result += group("card", view.card) { secretCardFields.contains($0) }
        result += group("identity", view.identity) { secretIdentityFields.contains($0) }
        result += group("sshKey", view.sshKey) { $0 == .privateKey }
        // A key stored without its fingerprint (another client, an import) shows the one its public key has.
        if let key = view.sshKey, key[.keyFingerprint] == nil, let computed = key[.publicKey].flatMap(SSHKeyFingerprint.sha256(publicKey:)) {
            result.append(Field(label: "sshKey.keyFingerprint", value: computed, secret: false))
        }
        if let notes = view.notes { result.append(Field(label: "notes", value: notes, secret: false)) }
        for field in view.fields {
            result.append(Field(label: "field.\(field.name ?? "")", value: field.value ?? "", secret: field.type == .hidden))
        }
        for (index, entry) in view.passwordHistory.sorted(by: { $0.lastUsedDate > $1.lastUsedDate }).enumerated() {
            result.append(Field(label: "history[\(index + 1)] \(entry.lastUsedDate.iso8601.prefix(19))Z", value: entry.password, secret: true))
        }
        if view.isDeleted { result.append(Field(label: "trash", value: "since \(view.deletedDate!.iso8601)", secret: false)) }
        if view.isArchived { result.append(Field(label: "archived", value: "since \(view.archivedDate!.iso8601)", secret: false)) }
        return result
    }

    static func masked(_ field: Field, reveal: Bool) -> String {
        guard field.secret, !reveal else { return field.value }
        return field.value.isEmpty ? "" : "••••••••"
    }

    /// Multi-line values are shown on one line.
    static func oneLine(_ text: String) -> String {
        text.replacingOccurrences(of: "\n", with: "⏎")
    }

    // MARK: Finding items and folders

    /// Where an ITEM (or FOLDER, pending change, backup) argument is looked up: each source is asked only
    /// when ``find(_:in:what:)`` reaches it, so a large vault's names are not all read to match an id.
    struct Candidates {
        var hasID: (String) async throws -> Bool
        var named: (String) async throws -> [(id: String, name: String)]
        var withIDPrefix: (String) async throws -> [(id: String, name: String)]
    }

    /// The one rule for such arguments: an exact id, else exactly one of that name (case-insensitively),
    /// else (6 characters or more) exactly one id starting with it; several are an ambiguity listing them.
    /// `preferred`, tried in order, settles several of one name when only one of them satisfies one of its tests
    /// (the one `list` shows, for most commands: see ``ItemChoice``).
    static func find(_ reference: String, in candidates: Candidates, what: String,
                     preferred: [(String) async throws -> Bool] = []) async throws -> String {
        let id = reference.lowercased()
        if try await candidates.hasID(id) { return id }
        func chosen(_ found: [(id: String, name: String)]) async throws -> String? {
            guard found.count <= 1 else {
                for test in preferred {
                    var kept: [String] = []
                    for candidate in found where try await test(candidate.id) { kept.append(candidate.id) }
                    if kept.count == 1 { return kept[0] }
                }
                throw CLIError.ambiguous(what: what, reference: reference, candidates: found.map { "\($0.id)  \($0.name)" })
            }
            return found.first?.id
        }
        if let found = try await chosen(try await candidates.named(reference)) { return found }
        if reference.count >= 6, let found = try await chosen(try await candidates.withIDPrefix(id)) { return found }
        throw CLIError.notFound(what: what, reference: reference)
    }

    /// ``find(_:in:what:)`` over a list in hand.
    static func find(_ reference: String, in items: [(id: String, name: String)], what: String) async throws -> String {
        try await find(reference, in: Candidates(hasID: { id in items.contains { $0.id == id } },
                                                 named: { name in items.filter { CaseInsensitive.equal($0.name, name) } },
                                                 withIDPrefix: { prefix in items.filter { $0.id.hasPrefix(prefix) } }), what: what)
    }
}

/// Which of several items of one name an ITEM argument means when only one of them is where the command
/// works. An item moved to the trash or the archive and made again under its name (a new login for a site)
/// left every `get NAME` ambiguous, exit 5, until the trash was emptied (RELIABILITY bug 84), while `list` showed
/// one item of that name: now the one `list` shows is meant (else the one outside the trash), `restore` means
/// the one in the trash and `unarchive` the one in the archive. A delete for good (`.any`) still lists them
/// all: it cannot be undone once synced.
enum ItemChoice {
    case listed
    case inTrash
    case inArchive
    case any
}

extension CLIContext {
    /// The decrypted items (a damaged item is reported on standard error and skipped).
    func loadItems() async throws -> [VaultItem] {
        try await engine.items()
    }

    /// Resolves ITEM (id, id prefix or name) to an id by `Presentation.find`'s rule. Names are matched
    /// through the name index's names part (`VaultEngine.items(named:)`, docs/BENCHMARKS.md P7); an item
    /// whose name cannot be decrypted is found by its id only. Several of one name, of which only one is
    /// where `choice` looks (what `list` shows, by default), are that one.
    ///
    /// When that finds nothing (or several, or none with `username`), items are found as people type them
    /// (``findItem(_:username:choice:)``).
    func itemID(_ reference: String, username: String? = nil, choice: ItemChoice = .listed) async throws -> String {
        var ambiguity: CLIError?
        do {
            let id = try await exactItemID(reference, choice: choice)
            guard let username else { return id }
            if try await engine.readableItem(id: id).map({ Self.has($0, username: username) }) == true { return id }
        } catch let error as CLIError {
            switch error {
            // Settled below, with each candidate's username, folder and URI (or by `username`).
            case .ambiguous: ambiguity = error
            case .notFound: break
            default: throw error
            }
        }
        do {
            return try await findItem(reference, username: username, choice: choice)
        } catch CLIError.notFound where ambiguity != nil {
            // Several of that name, none where the command looks (`restore` of a name none in the trash has).
            throw ambiguity!
        }
    }

    /// Finding an item as people type it, when no exact id, name or id prefix settles it: by its name
    /// exactly, then a case-insensitive prefix of the name, then a part of the name, then (for an
    /// address: `github.com`, a full URL) a login URI that matches it by the URI's own match setting.
    /// The first of these that finds anything decides: one item is it; several are listed with their
    /// username, folder and URI, and `username` (`get NAME USERNAME`) chooses among them.
    func findItem(_ reference: String, username: String?, choice: ItemChoice) async throws -> String {
        let wanted = reference.trimmingCharacters(in: .whitespaces)
        let lowered = wanted.lowercased()
        let pool = try await engine.items().compactMap { item -> (id: String, view: CipherView)? in
            guard case .success(let view) = item.result else { return nil }
            switch choice {
            case .listed: return view.isDeleted ? nil : (item.id, view)
            case .inTrash: return view.isDeleted ? (item.id, view) : nil
            case .inArchive: return view.isArchived && !view.isDeleted ? (item.id, view) : nil
            case .any: return (item.id, view)
            }
        }
        let looksLikeAddress = !wanted.contains(" ") && (wanted.contains("://") || wanted.contains("."))
        let stages: [((id: String, view: CipherView)) -> Bool] = [
            { $0.view.name.lowercased() == lowered },
            { $0.view.name.lowercased().hasPrefix(lowered) },
            { $0.view.name.lowercased().contains(lowered) },
            { candidate in
                looksLikeAddress && (candidate.view.login?.uris ?? []).contains { uri in
                    uri.uri.map { URIMatching.matches($0, match: uri.match, address: wanted) } ?? false
                }
            },
        ]
        let folderNames = try await folderNames()
        for stage in stages {
            var found = pool.filter(stage)
            if found.isEmpty { continue }
            if let username {
                found = found.filter { Self.has($0.view, username: username) }
                if found.isEmpty { continue }
            }
            if found.count == 1 { return found[0].id }
            let sorted = found.sorted { $0.view.name.localizedCaseInsensitiveCompare($1.view.name) == .orderedAscending }
            throw CLIError.ambiguous(what: "item", reference: reference,
                                     candidates: Table.lines(sorted.map { Self.candidateColumns($0.id, $0.view, folderNames: folderNames) }))
        }
        if let username { throw CLIError.missing("No item matches \"\(reference)\" with the username \"\(username)\".") }
        throw CLIError.notFound(what: "item", reference: reference)
    }

    /// A candidate as an ambiguity lists it: id, name, username, folder, first URI.
    static func candidateColumns(_ id: String, _ view: CipherView, folderNames: [String: String]) -> [String] {
        [id, view.name, view.login?.username ?? "", view.folderId.flatMap { folderNames[$0] } ?? "", view.login?.uris.first?.uri ?? ""]
            .map(Presentation.oneLine)
    }

    /// Whether the item's username is `username` (any case), or starts with it.
    static func has(_ view: CipherView, username: String) -> Bool {
        guard let own = view.login?.username?.lowercased() else { return false }
        return own == username.lowercased() || own.hasPrefix(username.lowercased())
    }

    /// The exact rule alone (``Presentation/find(_:in:what:preferred:)``).
    func exactItemID(_ reference: String, choice: ItemChoice) async throws -> String {
        func listed(_ items: [VaultItemName]) -> [(id: String, name: String)] { items.map { ($0.id, (try? $0.name.get()) ?? "") } }
        let engine = engine
        func state(_ test: @escaping @Sendable (CipherView) -> Bool) -> (String) async throws -> Bool {
            { id in try await engine.readableItem(id: id).map(test) ?? false }
        }
        let preferred: [(String) async throws -> Bool]
        switch choice {
        case .listed: preferred = [state { !$0.isDeleted && !$0.isArchived }, state { !$0.isDeleted }]
        case .inTrash: preferred = [state(\.isDeleted)]
        case .inArchive: preferred = [state { $0.isArchived && !$0.isDeleted }, state(\.isArchived)]
        case .any: preferred = []
        }
        return try await Presentation.find(reference, in: Presentation.Candidates(
            hasID: { try await engine.hasItem(id: $0) },
            named: { listed(try await engine.items(named: $0)) },
            withIDPrefix: { listed(try await engine.items(idPrefix: $0)) }), what: "item", preferred: preferred)
    }

    func folderNames() async throws -> [String: String] {
        Dictionary(try await engine.folders().compactMap { folder in folder.id.map { ($0, folder.name) } }, uniquingKeysWith: { first, _ in first })
    }

    /// Resolves FOLDER (id or name) to an id; "none" means no folder.
    func folderID(_ reference: String) async throws -> String? {
        if reference.lowercased() == "none" || reference.isEmpty { return nil }
        // An exact id first, as for items: one a sync has swapped for the server's since it was shown (a folder
        // created offline) is the folder under its server id now.
        if let current = try await engine.currentFolderID(reference.lowercased()) { return current }
        let folders = try await engine.folders()
        let candidates = folders.compactMap { folder in folder.id.map { (id: $0, name: folder.name) } }
        return try await Presentation.find(reference, in: candidates, what: "folder")
    }
}
