import Foundation
import VaultCrypto
import VaultModels

/// Bitwarden's JSON export, plain and password-protected (docs/PROTOCOL.md "Vault exports"), both
/// ways. Written the way Bitwarden's own clients write it (key order, two-space indent, dates with
/// milliseconds, trash and organization items left out by the caller), read the way they read it
/// (by key name, either order), and never losing a value: a key we do not model becomes a custom field.
public enum BitwardenJSON {
    // MARK: Writing

    /// The plain export of `items` (already filtered: no trash, no organization items unless wanted)
    /// and `folders`.
    public static func export(items: [CipherView], folders: [FolderView]) -> String {
        document(items: items, folders: folders).prettyText
    }

    /// The password-protected export: the plain export encrypted with a key derived from `password`
    /// (a fresh 16-byte salt; `kdf` is the account's), with Bitwarden's check value.
    public static func exportEncrypted(
        items: [CipherView], folders: [FolderView], password: String, kdf: KdfConfiguration,
        random: any RandomSource = SystemRandomSource()
    ) throws -> String {
        guard !password.isEmpty else { throw ExchangeError.cannotExport("an encrypted export needs a password") }
        let salt = Data(random.bytes(count: 16)).base64EncodedString()
        let key = try MasterKey.passwordProtectedExportKey(password: password, salt: salt, kdf: kdf)
        let check = try EncString.encrypt(UUID().uuidString.lowercased(), key: key, random: random)
        let data = try EncString.encrypt(export(items: items, folders: folders), key: key, random: random)
        var entries: [JSONObject.Entry] = [
            .init(key: "encrypted", value: .bool(true)),
            .init(key: "passwordProtected", value: .bool(true)),
            .init(key: "salt", value: .string(salt)),
            .init(key: "kdfType", value: .int(kdf.typeCode)),
            .init(key: "kdfIterations", value: .int(kdf.iterations)),
        ]
        if let memory = kdf.memoryMiB, let parallelism = kdf.parallelism {
            entries.append(.init(key: "kdfMemory", value: .int(memory)))
            entries.append(.init(key: "kdfParallelism", value: .int(parallelism)))
        }
        entries.append(.init(key: "encKeyValidation_DO_NOT_EDIT", value: .string(check.serialized)))
        entries.append(.init(key: "data", value: .string(data.serialized)))
        return JSONValue.object(JSONObject(entries: entries)).prettyText
    }

    static func document(items: [CipherView], folders: [FolderView]) -> JSONValue {
        let folderValues = folders.compactMap { folder -> JSONValue? in
            guard let id = folder.id else { return nil }
            return object(["id": .string(id), "name": .string(folder.name)], order: ["id", "name"])
        }
        return .object(JSONObject(entries: [
            .init(key: "encrypted", value: .bool(false)),
            .init(key: "folders", value: .array(folderValues)),
            .init(key: "items", value: .array(items.filter { CipherType.supported.contains($0.type) }.map(item))),
        ]))
    }

    static func object(_ values: [String: JSONValue], order: [String]) -> JSONValue {
        .object(JSONObject(entries: order.compactMap { key in values[key].map { JSONObject.Entry(key: key, value: $0) } }))
    }

    static func string(_ value: String?) -> JSONValue { value.map(JSONValue.string) ?? .null }

    /// `2024-01-30T14:09:33.753Z`: milliseconds, as JavaScript's `Date.toISOString` writes them.
    public static func date(_ value: WireDate?) -> JSONValue {
        guard let value else { return .null }
        let text = value.iso8601
        // iso8601 has six fractional digits: keep three.
        guard text.count == 27, text.hasSuffix("Z") else { return .string(text) }
        return .string(String(text.prefix(23)) + "Z")
    }

    /// Which of Bitwarden's two item shapes: its JSON export's, or its CLI's (`bw get item`, docs/BW-COMPATIBILITY.md):
    /// the export's with `"object":"item"` after the dates, `login.passwordRevisionDate`, `collectionIds`
    /// always an array, and `attachments` when the item has any.
    public enum ItemShape: Sendable {
        case export
        case command
    }

    /// An item in Bitwarden's JSON, keys in Bitwarden's order.
    public static func item(_ view: CipherView, shape: ItemShape) -> JSONValue {
        shape == .export ? item(view) : commandItem(view)
    }

    static func commandItem(_ view: CipherView) -> JSONValue {
        guard case .object(let exported) = item(view) else { return .null }
        var entries: [JSONObject.Entry] = []
        for entry in exported.entries {
            switch entry.key {
            case "archivedDate":
                continue
            case "id":
                entries.append(.init(key: "object", value: .string("item")))
                entries.append(entry)
            case "login":
                guard case .object(var login) = entry.value else { entries.append(entry); continue }
                login["passwordRevisionDate"] = date(view.login?.passwordRevisionDate)
                entries.append(.init(key: "login", value: .object(login)))
            case "collectionIds":
                entries.append(.init(key: "collectionIds", value: .array((view.collectionIds ?? []).map(JSONValue.string))))
            default:
                entries.append(entry)
            }
        }
        if !view.attachments.isEmpty {
            entries.append(.init(key: "attachments", value: .array(view.attachments.map { attachment in
                .object(JSONObject(entries: [
                    .init(key: "id", value: string(attachment.id)),
                    .init(key: "fileName", value: string(attachment.fileName)),
                    .init(key: "size", value: string(attachment.size)),
                    .init(key: "sizeName", value: string(attachment.sizeName)),
                    .init(key: "url", value: string(attachment.url)),
                ]))
            })))
        }
        return .object(JSONObject(entries: entries))
    }

    static func item(_ view: CipherView) -> JSONValue {
        var entries: [JSONObject.Entry] = []
        func put(_ key: String, _ value: JSONValue) { entries.append(.init(key: key, value: value)) }
        put("passwordHistory", view.passwordHistory.isEmpty ? .null : .array(view.passwordHistory.map { entry in
            .object(JSONObject(entries: [
                .init(key: "lastUsedDate", value: date(entry.lastUsedDate)),
                .init(key: "password", value: .string(entry.password)),
            ]))
        }))
        put("revisionDate", date(view.revisionDate))
        put("creationDate", date(view.creationDate))
        put("deletedDate", date(view.deletedDate))
        if view.archivedDate != nil { put("archivedDate", date(view.archivedDate)) }
        put("id", string(view.id))
        put("organizationId", string(view.organizationId))
        put("folderId", string(view.folderId))
        put("type", .int(view.type.rawValue))
        put("reprompt", .int(view.reprompt.rawValue))
        put("name", .string(view.name))
        put("notes", string(view.notes))
        put("favorite", .bool(view.favorite))
        if !view.fields.isEmpty {
            put("fields", .array(view.fields.map { field in
                .object(JSONObject(entries: [
                    .init(key: "name", value: string(field.name)),
                    .init(key: "value", value: string(field.value)),
                    .init(key: "type", value: .int(field.type.rawValue)),
                    .init(key: "linkedId", value: field.linkedId.map(JSONValue.int) ?? .null),
                ]))
            }))
        }
        switch view.type {
        case .login:
            let login = view.login ?? LoginView()
            put("login", .object(JSONObject(entries: [
                .init(key: "fido2Credentials", value: .array((login.fido2Credentials ?? []).map(passkey))),
                .init(key: "uris", value: .array(login.uris.map { uri in
                    .object(JSONObject(entries: [
                        .init(key: "match", value: uri.match.map { .int($0.rawValue) } ?? .null),
                        .init(key: "uri", value: string(uri.uri)),
                    ]))
                })),
                .init(key: "username", value: string(login.username)),
                .init(key: "password", value: string(login.password)),
                .init(key: "totp", value: string(login.totp)),
            ])))
        case .secureNote:
            put("secureNote", .object(["type": .int(view.secureNote?.type?.rawValue ?? 0)]))
        case .card:
            put("card", fields(view.card ?? CardView()))
        case .identity:
            put("identity", fields(view.identity ?? IdentityView()))
        case .sshKey:
            put("sshKey", fields(view.sshKey ?? SSHKeyView()))
        default:
            break
        }
        put("collectionIds", view.organizationId == nil ? .null : .array((view.collectionIds ?? []).map(JSONValue.string)))
        return .object(JSONObject(entries: entries))
    }

    static func fields<Field>(_ values: PlainFields<Field>) -> JSONValue {
        .object(JSONObject(entries: Field.allCases.map { JSONObject.Entry(key: $0.rawValue, value: string(values.values[$0])) }))
    }

    static func passkey(_ credential: Fido2CredentialView) -> JSONValue {
        var entries = Fido2Field.allCases.map { JSONObject.Entry(key: $0.rawValue, value: string(credential.fields.values[$0])) }
        entries.append(.init(key: "creationDate", value: date(credential.creationDate)))
        return .object(JSONObject(entries: entries))
    }

    // MARK: Reading

    /// Whether `text` is a password-protected export (so the caller can ask for the password first).
    public static func isPasswordProtected(_ text: String) -> Bool {
        guard let object = try? JSONParser.parse(text).objectValue else { return false }
        return object["encrypted"]?.boolValue == true && object["passwordProtected"]?.boolValue == true
    }

    /// Reads a Bitwarden JSON export. A password-protected one needs `password`.
    public static func read(_ text: String, password: String? = nil) throws -> ImportedVault {
        let root: JSONObject
        do {
            guard let object = try JSONParser.parse(text).objectValue else {
                throw ExchangeError.malformed(entry: "the file", reason: "not a JSON object (a Bitwarden JSON export starts with {)")
            }
            root = object
        } catch let error as ExchangeError {
            throw error
        } catch {
            throw ExchangeError.malformed(entry: "the file", reason: "not valid JSON: \(error)")
        }
        if root["encrypted"]?.boolValue == true {
            guard root["passwordProtected"]?.boolValue == true else { throw ExchangeError.accountEncrypted }
            guard let password else { throw ExchangeError.passwordRequired }
            return try read(try decrypt(root, password: password), password: nil)
        }
        return try readPlain(root)
    }

    /// The plaintext of a password-protected export, after its check value proved the password.
    static func decrypt(_ root: JSONObject, password: String) throws -> String {
        func text(_ key: String) throws -> String {
            guard let value = root[key]?.stringValue, !value.isEmpty else {
                throw ExchangeError.malformed(entry: "the file", reason: "a password-protected export needs \"\(key)\"")
            }
            return value
        }
        guard let kdfType = root["kdfType"]?.intValue, let iterations = root["kdfIterations"]?.intValue else {
            throw ExchangeError.malformed(entry: "the file", reason: "a password-protected export needs numeric \"kdfType\" and \"kdfIterations\"")
        }
        let kdf: KdfConfiguration
        do {
            // The client's limits apply: a file cannot make the importer spin or exhaust memory.
            kdf = try KdfConfiguration(type: kdfType, iterations: iterations, memoryMiB: root["kdfMemory"]?.intValue,
                                       parallelism: root["kdfParallelism"]?.intValue)
        } catch {
            throw ExchangeError.malformed(entry: "the file", reason: "its key-derivation settings are refused: \(error)")
        }
        let key = try MasterKey.passwordProtectedExportKey(password: password, salt: try text("salt"), kdf: kdf)
        let check: EncString, data: EncString
        do {
            check = try EncString(try text("encKeyValidation_DO_NOT_EDIT"))
            data = try EncString(try text("data"))
        } catch let error as ExchangeError {
            throw error
        } catch {
            throw ExchangeError.malformed(entry: "the file", reason: "its encrypted values are not EncStrings: \(error)")
        }
        do { _ = try check.decrypt(key: key) } catch { throw ExchangeError.wrongPassword }
        do {
            return try data.decryptString(key: key)
        } catch {
            throw ExchangeError.malformed(entry: "the file", reason: "the check value opened but the data did not decrypt: \(error)")
        }
    }

    /// One item in Bitwarden's JSON (`bw create item`'s input, `bw get template item`'s shape): its content.
    /// Where it goes (`folderId`, `organizationId`, `collectionIds`) and its history on a server (`id`, dates)
    /// are the caller's to read.
    public static func readItem(_ object: JSONObject) throws -> CipherView {
        let entry = object["name"]?.stringValue.map { "the item (\($0))" } ?? "the item"
        guard let typeCode = object["type"]?.intValue else {
            throw ExchangeError.malformed(entry: entry, reason: "\"type\" must be a number (1 login, 2 note, 3 card, 4 identity, 5 SSH key)")
        }
        let type = CipherType(rawValue: typeCode)
        guard CipherType.supported.contains(type) else {
            throw ExchangeError.malformed(entry: entry, reason: "item type \(typeCode) is not one VaultSync stores")
        }
        var reader = ItemReader(object: object, entry: entry)
        return try reader.view(type: type)
    }

    static func readPlain(_ root: JSONObject) throws -> ImportedVault {
        guard let items = root["items"]?.arrayValue else {
            throw ExchangeError.malformed(entry: "the file", reason: "no \"items\" array: not a Bitwarden JSON export")
        }
        var vault = ImportedVault()
        var folderNames: [String: String] = [:]
        for (position, value) in (root["folders"]?.arrayValue ?? []).enumerated() {
            let entry = "folder \(position + 1)"
            guard let folder = value.objectValue, let name = folder["name"]?.stringValue else {
                throw ExchangeError.malformed(entry: entry, reason: "a folder needs a \"name\" string")
            }
            if let id = folder["id"]?.stringValue { folderNames[id] = name }
            vault.noteFolder(name)
        }
        for (position, value) in items.enumerated() {
            var entry = "item \(position + 1)"
            guard let object = value.objectValue else { throw ExchangeError.malformed(entry: entry, reason: "not an object") }
            if let name = object["name"]?.stringValue { entry += " (\(name))" }
            guard let typeCode = object["type"]?.intValue else {
                throw ExchangeError.malformed(entry: entry, reason: "\"type\" must be a number (1 login, 2 note, 3 card, 4 identity, 5 SSH key)")
            }
            let type = CipherType(rawValue: typeCode)
            guard CipherType.supported.contains(type) else {
                vault.skipped.append(SkippedEntry(entry: entry, reason: "item type \(typeCode) is not one VaultSync stores"))
                continue
            }
            var reader = ItemReader(object: object, entry: entry)
            let view = try reader.view(type: type)
            let folderName = object["folderId"]?.stringValue.flatMap { folderNames[$0] }
            vault.items.append(ImportedItem(view: view, folderName: folderName, entry: entry))
        }
        return vault
    }
}

/// Reads one exported item, remembering which keys it used so that the rest become custom fields.
struct ItemReader {
    let object: JSONObject
    let entry: String

    /// Keys that describe the item's place or history on the exporting server, not its content.
    static let metadata: Set<String> = [
        "id", "organizationId", "folderId", "collectionIds", "type", "name", "notes", "favorite", "reprompt",
        "fields", "login", "secureNote", "card", "identity", "sshKey", "passwordHistory", "revisionDate",
        "creationDate", "deletedDate", "archivedDate", "object", "edit", "viewPassword", "permissions", "key",
        "attachments", "organizationUseTotp", "localData",
    ]

    mutating func view(type: CipherType) throws -> CipherView {
        let name = try string("name", in: object) ?? ""
        var view = CipherView(type: type, name: name.isEmpty ? "--" : name)
        view.notes = try string("notes", in: object).flatMap { $0.isEmpty ? nil : $0 }
        view.favorite = try bool("favorite", in: object) ?? false
        view.reprompt = RepromptType(rawValue: try int("reprompt", in: object) ?? 0)
        view.creationDate = try date("creationDate", in: object)
        view.revisionDate = try date("revisionDate", in: object)
        view.archivedDate = try date("archivedDate", in: object)
        view.fields = try array("fields", in: object).enumerated().map { position, value in
            let field = try requireObject(value, "fields[\(position)]")
            return FieldView(type: FieldType(rawValue: try int("type", in: field) ?? 0), name: try string("name", in: field),
                             value: try string("value", in: field), linkedId: try int("linkedId", in: field))
        }
        view.passwordHistory = try array("passwordHistory", in: object).enumerated().compactMap { position, value in
            let entry = try requireObject(value, "passwordHistory[\(position)]")
            guard let password = try string("password", in: entry) else { return nil }
            return PasswordHistoryView(password: password, lastUsedDate: try date("lastUsedDate", in: entry) ?? WireDate(millisecondsSinceEpoch: 0))
        }
        switch type {
        case .login:
            let loginObject = try requireObject(Self.present(object["login"]) ?? .object([:]), "login")
            var login = LoginView(username: try string("username", in: loginObject), password: try string("password", in: loginObject),
                                  totp: try string("totp", in: loginObject))
            login.passwordRevisionDate = try date("passwordRevisionDate", in: loginObject)
            login.autofillOnPageLoad = try bool("autofillOnPageLoad", in: loginObject)
            keepUnread(of: loginObject, at: "login", known: Self.loginKeys, in: &view)
            login.uris = try array("uris", in: loginObject).enumerated().map { position, value in
                let uri = try requireObject(value, "login.uris[\(position)]")
                keepUnread(of: uri, at: "login.uris[\(position)]", known: ["uri", "match", "uriChecksum"], in: &view)
                return LoginURIView(uri: try string("uri", in: uri), match: try int("match", in: uri).map(URIMatchType.init(rawValue:)))
            }
            let passkeys = try array("fido2Credentials", in: loginObject).enumerated().map { position, value in
                let credential = try requireObject(value, "login.fido2Credentials[\(position)]")
                var values: [Fido2Field: String] = [:]
                for field in Fido2Field.allCases {
                    // counter and discoverable are strings in Bitwarden's files; accept numbers and booleans too.
                    switch credential[field.rawValue] {
                    case .string(let text): values[field] = text
                    case .number(let text): values[field] = text
                    case .bool(let flag): values[field] = flag ? "true" : "false"
                    default: break
                    }
                }
                return Fido2CredentialView(fields: PlainFields(values: values), creationDate: try date("creationDate", in: credential))
            }
            login.fido2Credentials = passkeys.isEmpty ? nil : passkeys
            view.login = login
        case .secureNote:
            view.secureNote = SecureNoteWire(type: SecureNoteType(rawValue: 0))
        case .card:
            view.card = try fields("card", into: &view)
        case .identity:
            view.identity = try fields("identity", into: &view)
        case .sshKey:
            view.sshKey = try fields("sshKey", into: &view)
        default:
            break
        }
        // An item the export lists in the trash is imported into the trash.
        view.deletedDate = try date("deletedDate", in: object)
        // Keys we do not model keep their values as custom fields: nothing the file carries is dropped.
        keepUnread(of: object, at: "", known: Self.metadata, in: &view)
        return view
    }

    /// The login keys Bitwarden's exports carry that the login is read from (or that are the server's own).
    static let loginKeys: Set<String> = ["username", "password", "totp", "uris", "fido2Credentials", "passwordRevisionDate",
                                          "autofillOnPageLoad"]

    /// Keys of `group` (at `path` in the item) that are not `known` become text custom fields named by their
    /// path (`login.loginExtra`, `card.cardExtra`), encrypted with the item like every field: nothing the file
    /// carries is dropped, and nothing reaches the server in the clear.
    func keepUnread(of group: JSONObject, at path: String, known: Set<String>, in view: inout CipherView) {
        for entry in group where !known.contains(entry.key) {
            let name = path.isEmpty ? entry.key : path + "." + entry.key
            if let text = Self.scalarText(entry.value) {
                view.fields.append(FieldView(type: .text, name: name, value: text))
            } else if !entry.value.isNull {
                view.fields.append(FieldView(type: .text, name: name, value: entry.value.jsonText))
            }
        }
    }

    /// A value that is there and not `null` (other exporters write `"login": null` for an empty group).
    static func present(_ value: JSONValue?) -> JSONValue? {
        value.flatMap { $0.isNull ? nil : $0 }
    }

    static func scalarText(_ value: JSONValue) -> String? {
        switch value {
        case .string(let text): return text.isEmpty ? nil : text
        case .number(let text): return text
        case .bool(let flag): return flag ? "true" : "false"
        default: return nil
        }
    }

    func fields<Field>(_ key: String, into view: inout CipherView) throws -> PlainFields<Field> {
        let group = try requireObject(Self.present(object[key]) ?? .object([:]), key)
        keepUnread(of: group, at: key, known: Set(Field.allCases.map(\.rawValue)), in: &view)
        var values: [Field: String] = [:]
        for field in Field.allCases {
            if let value = try string(field.rawValue, in: group), !value.isEmpty { values[field] = value }
        }
        return PlainFields(values: values)
    }

    func fail(_ reason: String) -> ExchangeError { .malformed(entry: entry, reason: reason) }

    func requireObject(_ value: JSONValue, _ path: String) throws -> JSONObject {
        guard let object = value.objectValue else { throw fail("\"\(path)\" must be an object, not \(value.kindName)") }
        return object
    }

    func array(_ key: String, in object: JSONObject) throws -> [JSONValue] {
        switch object[key] {
        case nil, .null?: return []
        case .array(let values)?: return values
        case let value?: throw fail("\"\(key)\" must be an array, not \(value.kindName)")
        }
    }

    func string(_ key: String, in object: JSONObject) throws -> String? {
        switch object[key] {
        case nil, .null?: return nil
        case .string(let text)?: return text
        case .number(let text)?: return text
        case let value?: throw fail("\"\(key)\" must be a string, not \(value.kindName)")
        }
    }

    func int(_ key: String, in object: JSONObject) throws -> Int? {
        switch object[key] {
        case nil, .null?: return nil
        case .number(let text)?:
            guard let value = Int(text) else { throw fail("\"\(key)\" must be a whole number, not \(text)") }
            return value
        case .string(let text)? where Int(text) != nil: return Int(text)
        case let value?: throw fail("\"\(key)\" must be a number, not \(value.kindName)")
        }
    }

    func bool(_ key: String, in object: JSONObject) throws -> Bool? {
        switch object[key] {
        case nil, .null?: return nil
        case .bool(let flag)?: return flag
        case let value?: throw fail("\"\(key)\" must be true or false, not \(value.kindName)")
        }
    }

    func date(_ key: String, in object: JSONObject) throws -> WireDate? {
        guard let text = try string(key, in: object), !text.isEmpty else { return nil }
        guard let date = WireDate(iso8601: text) else { throw fail("\"\(key)\" is not an ISO 8601 date: \(text.prefix(40))") }
        return date
    }
}
