import ArgumentParser
import Foundation
import VaultClient
import VaultCrypto
import VaultModels

/// The flags `add` and `edit` share. Only the flags that are given change the item.
struct ItemOptions: ParsableArguments {
    @Option(help: "The item's name.") var name: String?
    @Option(help: "Notes (use \\n-free text; `--json` for anything richer).") var notes: String?
    @Option(help: ArgumentHelp("Folder (name or id; \"none\" for no folder).", valueName: "FOLDER")) var folder: String?
    @Flag(inversion: .prefixedNo, help: "Mark (or unmark) as favorite.") var favorite: Bool?

    @Option(help: "Login: username.") var username: String?
    @Option(help: "Login: password (visible in the process list; prefer --generate or --password-stdin).") var password: String?
    @Flag(name: .customLong("password-stdin"), help: "Login: read the password from standard input.") var passwordFromStdin = false
    @Flag(help: "Login: generate a random password (see --length).") var generate = false
    @Option(help: "Length of a generated password (5–128).") var length = 24
    @Option(help: ArgumentHelp("Login: a URI (repeat for several; replaces the item's URIs).", valueName: "URI")) var uri: [String] = []
    @Option(help: ArgumentHelp("Login: TOTP secret (base32) or otpauth:// URI.", valueName: "SECRET")) var totp: String?

    @Option(name: .customLong("cardholder"), help: "Card: cardholder name.") var cardholderName: String?
    @Option(help: "Card: number.") var number: String?
    @Option(help: "Card: brand.") var brand: String?
    @Option(name: .customLong("exp-month"), help: "Card: expiry month.") var expMonth: String?
    @Option(name: .customLong("exp-year"), help: "Card: expiry year.") var expYear: String?
    @Option(help: "Card: security code.") var code: String?

    @Option(name: .customLong("first-name"), help: "Identity: first name.") var firstName: String?
    @Option(name: .customLong("last-name"), help: "Identity: last name.") var lastName: String?
    @Option(help: "Identity: email.") var email: String?
    @Option(help: "Identity: phone.") var phone: String?
    @Option(help: "Identity: company.") var company: String?

    @Option(name: .customLong("private-key-file"), help: ArgumentHelp("SSH key: read the private key from FILE.", valueName: "FILE"))
    var privateKeyFile: String?
    @Option(name: .customLong("public-key"), help: "SSH key: public key.") var publicKey: String?
    @Option(help: "SSH key: fingerprint.") var fingerprint: String?

    @Option(name: .customLong("field"), help: ArgumentHelp("A custom text field NAME=VALUE (repeatable).", valueName: "NAME=VALUE"))
    var textFields: [String] = []
    @Option(name: .customLong("hidden-field"), help: ArgumentHelp("A custom hidden field NAME=VALUE (repeatable).", valueName: "NAME=VALUE"))
    var hiddenFields: [String] = []

    var givesLoginFields: Bool { username != nil || password != nil || passwordFromStdin || generate || !uri.isEmpty || totp != nil }
    var givesCardFields: Bool { [cardholderName, number, brand, expMonth, expYear, code].contains { $0 != nil } }
    var givesIdentityFields: Bool { [firstName, lastName, email, phone, company].contains { $0 != nil } }
    var givesSSHFields: Bool { privateKeyFile != nil || publicKey != nil || fingerprint != nil }

    var isEmpty: Bool {
        name == nil && notes == nil && folder == nil && favorite == nil && !givesLoginFields && !givesCardFields
            && !givesIdentityFields && !givesSSHFields && textFields.isEmpty && hiddenFields.isEmpty
    }

    /// `--generate`: the library generator with every class (at least one of each) and no
    /// look-alike characters (I, O, l, 0, 1), as the CLI's generator always made them.
    static func generatedPassword(length: Int) throws -> String {
        do {
            return try PasswordGenerator.password(PasswordOptions(length: length, avoidAmbiguous: true)).value
        } catch let error as GeneratorError {
            throw CLIError.usage("--length: \(error)")
        }
    }

    /// Applies the given flags to `view` (flags of another item type are a usage error).
    func apply(to view: inout CipherView, context: CLIContext) async throws {
        func refuse(_ what: String) -> CLIError { CLIError.usage("\(what) flags do not apply to a \(view.type.name) item") }
        if givesLoginFields && view.type != .login { throw refuse("login") }
        if givesCardFields && view.type != .card { throw refuse("card") }
        if givesIdentityFields && view.type != .identity { throw refuse("identity") }
        if givesSSHFields && view.type != .sshKey { throw refuse("ssh-key") }
        if [password != nil, passwordFromStdin, generate].filter({ $0 }).count > 1 {
            throw CLIError.usage("give only one of --password, --password-stdin and --generate")
        }
        if let name { view.name = name }
        if let notes { view.notes = notes.isEmpty ? nil : notes }
        if let folder { view.folderId = try await context.folderID(folder) }
        if let favorite { view.favorite = favorite }
        if view.type == .login {
            var login = view.login ?? LoginView()
            if let username { login.username = username.isEmpty ? nil : username }
            if let password { login.password = password }
            if passwordFromStdin {
                guard let line = readLine(strippingNewline: true), !line.isEmpty else {
                    throw CLIError.usage("--password-stdin: no password on standard input")
                }
                login.password = line
            }
            if generate { login.password = try Self.generatedPassword(length: length) }
            if !uri.isEmpty { login.uris = uri.map { LoginURIView(uri: $0) } }
            if let totp { login.totp = totp.isEmpty ? nil : totp }
            view.login = login
        }
        if view.type == .card {
            var card = view.card ?? CardView()
            let values: [(CardField, String?)] = [(.cardholderName, cardholderName), (.number, number), (.brand, brand),
                                                  (.expMonth, expMonth), (.expYear, expYear), (.code, code)]
            for (field, value) in values { if let value { card[field] = value.isEmpty ? nil : value } }
            view.card = card
        }
        if view.type == .identity {
            var identity = view.identity ?? IdentityView()
            let values: [(IdentityField, String?)] = [(.firstName, firstName), (.lastName, lastName), (.email, email), (.phone, phone),
                                                      (.company, company)]
            for (field, value) in values { if let value { identity[field] = value.isEmpty ? nil : value } }
            view.identity = identity
        }
        if view.type == .sshKey {
            var key = view.sshKey ?? SSHKeyView()
            if let privateKeyFile {
                guard let text = try? String(contentsOfFile: privateKeyFile, encoding: .utf8) else {
                    throw CLIError.usage("cannot read the private key file \(privateKeyFile)")
                }
                key[.privateKey] = text
            }
            if let publicKey { key[.publicKey] = publicKey }
            if let fingerprint { key[.keyFingerprint] = fingerprint }
            view.sshKey = key
        }
        for (entries, type) in [(textFields, FieldType.text), (hiddenFields, FieldType.hidden)] {
            for entry in entries {
                guard let equals = entry.firstIndex(of: "="), equals != entry.startIndex else {
                    throw CLIError.usage("custom fields are NAME=VALUE, got \"\(entry)\"")
                }
                let name = String(entry[..<equals])
                let value = String(entry[entry.index(after: equals)...])
                if let index = view.fields.firstIndex(where: { $0.name == name }) {
                    view.fields[index].value = value
                    view.fields[index].type = type
                } else {
                    view.fields.append(FieldView(type: type, name: name, value: value))
                }
            }
        }
    }
}

/// Reading an item from the CLI's JSON form (the form `get --json` prints; read-only keys such as
/// `id`, dates, `passwordHistory` and `pending` are accepted and ignored).
enum ItemJSONInput {
    static let readOnlyKeys: Set<String> = ["id", "object", "organizationId", "creationDate", "revisionDate", "deletedDate",
                                            "archivedDate", "passwordHistory", "pending", "attachments", "reprompt"]
    static let writableKeys: Set<String> = ["type", "name", "notes", "favorite", "folder", "folderId", "login", "card", "identity",
                                            "sshKey", "fields"]

    static func readSource(_ path: String) throws -> [UInt8] {
        if path == "-" {
            return Array(FileHandle.standardInput.readDataToEndOfFile())
        }
        guard let data = FileManager.default.contents(atPath: path) else { throw CLIError.usage("cannot read \(path)") }
        return Array(data)
    }

    static func parse(_ bytes: [UInt8]) throws -> JSONObject {
        do {
            return try JSONParser.parseObject(bytes)
        } catch {
            throw CLIError.usage("the item JSON is not valid: \(error)")
        }
    }

    static func type(of object: JSONObject) throws -> CipherType {
        guard let name = object["type"]?.stringValue else { throw CLIError.usage("the item JSON needs \"type\" (login, note, card, identity, ssh-key)") }
        guard let type = CipherType.supported.first(where: { $0.name == name }) else {
            throw CLIError.usage("unknown item type \"\(name)\" (login, note, card, identity, ssh-key)")
        }
        return type
    }

    static func text(_ value: JSONValue?, _ path: String) throws -> String?? {
        guard let value else { return .none }
        if value.isNull { return .some(nil) }
        guard let text = value.stringValue else { throw CLIError.usage("\(path) must be a string or null") }
        return .some(text)
    }

    static func checkKeys(_ object: JSONObject, allowed: Set<String>, path: String) throws {
        for entry in object where !allowed.contains(entry.key) {
            throw CLIError.usage("unknown key \(path.isEmpty ? "" : path + ".")\(entry.key) in the item JSON")
        }
    }

    static func group<Field: SecretFieldName>(_ value: JSONValue?, into fields: inout PlainFields<Field>?, path: String) throws {
        guard let value else { return }
        if value.isNull { fields = PlainFields(); return }
        guard let object = value.objectValue else { throw CLIError.usage("\(path) must be an object") }
        try checkKeys(object, allowed: Set(Field.allCases.map(\.rawValue)), path: path)
        var result = fields ?? PlainFields()
        for field in Field.allCases {
            if let change = try text(object[field.rawValue], "\(path).\(field.rawValue)") { result[field] = change }
        }
        fields = result
    }

    /// Applies the keys present in `object` to `view`; absent keys leave the item as it is.
    static func apply(_ object: JSONObject, to view: inout CipherView, context: CLIContext) async throws {
        try checkKeys(object, allowed: readOnlyKeys.union(writableKeys), path: "")
        if object["type"] != nil, try type(of: object) != view.type {
            throw CLIError.usage("the item JSON's type does not match the item (\(view.type.name)); an item's type cannot change")
        }
        if let name = try text(object["name"], "name") {
            guard let name, !name.isEmpty else { throw CLIError.usage("name must not be empty") }
            view.name = name
        }
        if let notes = try text(object["notes"], "notes") { view.notes = notes }
        if let favorite = object["favorite"] {
            guard let flag = favorite.boolValue else { throw CLIError.usage("favorite must be true or false") }
            view.favorite = flag
        }
        if let folderID = try text(object["folderId"], "folderId") {
            view.folderId = try await folderID.asyncMap { try await context.folderID($0) } ?? nil
        } else if let folder = try text(object["folder"], "folder") {
            view.folderId = try await folder.asyncMap { try await context.folderID($0) } ?? nil
        }
        if let value = object["login"] {
            guard view.type == .login else { throw CLIError.usage("login data on a \(view.type.name) item") }
            guard let login = value.objectValue else { throw CLIError.usage("login must be an object") }
            try checkKeys(login, allowed: ["username", "password", "totp", "uris", "passwordRevisionDate", "passkeys"], path: "login")
            var result = view.login ?? LoginView()
            if let username = try text(login["username"], "login.username") { result.username = username }
            if let password = try text(login["password"], "login.password") { result.password = password }
            if let totp = try text(login["totp"], "login.totp") { result.totp = totp }
            if let uris = login["uris"] {
                guard let array = uris.arrayValue else { throw CLIError.usage("login.uris must be an array") }
                result.uris = try array.enumerated().map { index, entry in
                    if let text = entry.stringValue { return LoginURIView(uri: text) }
                    guard let uri = entry.objectValue else { throw CLIError.usage("login.uris[\(index)] must be a string or an object") }
                    try checkKeys(uri, allowed: ["uri", "match"], path: "login.uris[\(index)]")
                    let match = uri["match"].flatMap { $0.isNull ? nil : $0.intValue }.map(URIMatchType.init(rawValue:))
                    return LoginURIView(uri: try text(uri["uri"], "login.uris[\(index)].uri") ?? nil, match: match)
                }
            }
            view.login = result
        }
        if object["card"] != nil {
            guard view.type == .card else { throw CLIError.usage("card data on a \(view.type.name) item") }
            try group(object["card"], into: &view.card, path: "card")
        }
        if object["identity"] != nil {
            guard view.type == .identity else { throw CLIError.usage("identity data on a \(view.type.name) item") }
            try group(object["identity"], into: &view.identity, path: "identity")
        }
        if object["sshKey"] != nil {
            guard view.type == .sshKey else { throw CLIError.usage("sshKey data on a \(view.type.name) item") }
            try group(object["sshKey"], into: &view.sshKey, path: "sshKey")
        }
        if let fields = object["fields"] {
            guard let array = fields.arrayValue else { throw CLIError.usage("fields must be an array") }
            view.fields = try array.enumerated().map { index, entry in
                guard let field = entry.objectValue else { throw CLIError.usage("fields[\(index)] must be an object") }
                try checkKeys(field, allowed: ["name", "value", "type"], path: "fields[\(index)]")
                let typeName = field["type"]?.stringValue ?? "text"
                guard let type = Presentation.fieldTypeNames.first(where: { $0.1 == typeName })?.0 else {
                    throw CLIError.usage("fields[\(index)].type must be text, hidden, boolean or linked")
                }
                return FieldView(type: type, name: try text(field["name"], "fields[\(index)].name") ?? nil,
                                 value: try text(field["value"], "fields[\(index)].value") ?? nil)
            }
        }
    }
}

extension Optional {
    func asyncMap<T>(_ transform: (Wrapped) async throws -> T) async rethrows -> T? {
        guard let value = self else { return nil }
        return try await transform(value)
    }
}
