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
    @Option(help: ArgumentHelp("Login: the password, read from SOURCE: - (standard input) or @FILE (its first line).", valueName: "SOURCE"))
    var password: String?
    @Flag(name: .customLong("password-stdin"), help: "Login: read the password from standard input (as --password -).") var passwordFromStdin = false
    @Flag(help: "Login: generate a random password (see --length).") var generate = false
    @Option(help: "Length of a generated password (5–128; default 24).") var length: Int?
    @Option(help: ArgumentHelp("Login: a URI (repeat for several; replaces the item's URIs).", valueName: "URI")) var uri: [String] = []
    @Option(help: ArgumentHelp("Login: the TOTP secret (base32) or otpauth:// URI, read from SOURCE (- or @FILE).", valueName: "SOURCE"))
    var totp: String?

    @Option(name: .customLong("cardholder"), help: "Card: cardholder name.") var cardholderName: String?
    @Option(help: ArgumentHelp("Card: the number, read from SOURCE (- or @FILE).", valueName: "SOURCE")) var number: String?
    @Option(help: "Card: brand.") var brand: String?
    @Option(name: .customLong("exp-month"), help: "Card: expiry month.") var expMonth: String?
    @Option(name: .customLong("exp-year"), help: "Card: expiry year.") var expYear: String?
    @Option(help: ArgumentHelp("Card: the security code, read from SOURCE (- or @FILE).", valueName: "SOURCE")) var code: String?

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
    @Option(name: .customLong("hidden-field"), help: ArgumentHelp(
        "A custom hidden field NAME=SOURCE; its value is read from SOURCE: - or @FILE (the whole file) (repeatable).", valueName: "NAME=SOURCE"))
    var hiddenFields: [String] = []

    var givesLoginFields: Bool { username != nil || password != nil || passwordFromStdin || generate || !uri.isEmpty || totp != nil }
    var givesCardFields: Bool { [cardholderName, number, brand, expMonth, expYear, code].contains { $0 != nil } }
    var givesIdentityFields: Bool { [firstName, lastName, email, phone, company].contains { $0 != nil } }
    var givesSSHFields: Bool { privateKeyFile != nil || publicKey != nil || fingerprint != nil }

    var isEmpty: Bool {
        name == nil && notes == nil && folder == nil && favorite == nil && !givesLoginFields && !givesCardFields
            && !givesIdentityFields && !givesSSHFields && textFields.isEmpty && hiddenFields.isEmpty
    }

    /// The secret-valued flags as given: (flag, the source text).
    var secretFlags: [(flag: String, text: String)] {
        var flags = [("--password", password), ("--totp", totp), ("--number", number), ("--code", code)]
            .compactMap { flag, text in text.map { (flag: flag, text: $0) } }
        for entry in hiddenFields {
            flags.append(("--hidden-field", entry.firstIndex(of: "=").map { String(entry[entry.index(after: $0)...]) } ?? ""))
        }
        return flags
    }

    /// Checks every secret flag's source before any work: a literal secret is refused (it would be
    /// readable by every user of the machine and kept in the shell history), a file must be readable,
    /// and at most one flag may read standard input (`--json -` counts) unless it is a terminal, where
    /// each `-` is a prompt of its own.
    func checkSecretSources(jsonFromStandardInput: Bool) throws {
        if [password != nil, passwordFromStdin, generate].filter({ $0 }).count > 1 {
            throw ValidationError("give only one of --password, --password-stdin and --generate")
        }
        if length != nil, !generate {
            throw ValidationError("--length is the length of a generated password: give it with --generate")
        }
        for entry in hiddenFields {
            guard let equals = entry.firstIndex(of: "="), equals != entry.startIndex else {
                throw ValidationError("--hidden-field takes NAME=SOURCE (SOURCE: - or @FILE)")
            }
        }
        var readers = [jsonFromStandardInput ? "--json -" : nil, passwordFromStdin ? "--password-stdin" : nil].compactMap { $0 }
        var prompts: [String] = []
        for flag in secretFlags {
            switch try SecretSource(flag.text, flag: flag.flag) {
            case .standardInput: prompts.append(flag.flag)
            case .file(let path):
                do { try InputFile.check(path, what: "the file") } catch let error as CLIError { throw ValidationError("\(flag.flag): \(error)") }
            case .clear: break
            }
        }
        if Console.stdinIsTTY {
            if !prompts.isEmpty { readers.append(prompts[0]) }
        } else {
            readers += prompts
        }
        if readers.count > 1 {
            throw ValidationError("""
                only one flag can read standard input, not \(readers.joined(separator: " and ")); \
                give the others as @FILE
                """)
        }
    }

    /// A `--uri` must say something: `--uri ""` (or spaces) added an empty URI, saved and synced (RELIABILITY bug 97).
    func checkURIs() throws {
        if uri.contains(where: \.isBlankURI) {
            throw ValidationError("--uri needs a URI (e.g. https://example.com); an empty one is not added. --uri replaces the item's URIs: give each one to keep")
        }
    }

    /// A TOTP value must give codes: a base32 secret, an otpauth://totp URI or a Steam `steam://` secret
    /// (`TOTP(secretOrURI:)` reads all three, as Bitwarden's clients do). Never echoed: it is a secret.
    static func checkTOTP(_ value: String?, name: String = "--totp") throws {
        guard let value, !value.isEmpty else { return }
        do {
            _ = try TOTP(secretOrURI: value)
        } catch {
            throw CLIError.usage("\(name): not a TOTP secret (base32, as sites show it), an otpauth://totp URI or a steam:// secret: \(error)")
        }
    }

    /// A card's expiry as people write it: a month 1–12 (`7` or `07`), a year of two or four digits.
    static func checkExpiry(month: String?, year: String?, names: (month: String, year: String) = ("--exp-month", "--exp-year")) throws {
        if let month, !month.isEmpty, !(month.count <= 2 && month.allSatisfy(\.isASCII) && Int(month).map { (1...12).contains($0) } == true) {
            throw CLIError.usage("\(names.month): \"\(month)\" is not a month (1 to 12)")
        }
        if let year, !year.isEmpty, !((year.count == 2 || year.count == 4) && year.allSatisfy(\.isASCII) && Int(year) != nil) {
            throw CLIError.usage("\(names.year): \"\(year)\" is not a year (e.g. 2029, or 29)")
        }
    }

    /// The secret values read from their sources (`nil` inside: clear the value).
    struct Secrets {
        var password: String??
        var totp: String??
        var number: String??
        var code: String??
        var hiddenFields: [(name: String, value: String?)] = []
    }

    func readSecrets() throws -> Secrets {
        func read(_ text: String?, _ flag: String, _ label: String) throws -> String?? {
            guard let text else { return .none }
            return .some(try SecretSource(text, flag: flag).read(flag: flag, label: label, wholeText: false))
        }
        var secrets = Secrets()
        secrets.password = try read(password, "--password", "Password")
        if passwordFromStdin {
            guard let line = readLine(strippingNewline: true), !line.isEmpty else {
                throw CLIError.usage("--password-stdin: no password on standard input")
            }
            secrets.password = .some(line)
        }
        secrets.totp = try read(totp, "--totp", "TOTP secret")
        secrets.number = try read(number, "--number", "Card number")
        secrets.code = try read(code, "--code", "Security code")
        for entry in hiddenFields {
            guard let equals = entry.firstIndex(of: "="), equals != entry.startIndex else {
                throw CLIError.usage("--hidden-field takes NAME=SOURCE")
            }
            let name = String(entry[..<equals])
            let source = try SecretSource(String(entry[entry.index(after: equals)...]), flag: "--hidden-field")
            secrets.hiddenFields.append((name, try source.read(flag: "--hidden-field \(name)", label: "Hidden field \(name)", wholeText: true)))
        }
        return secrets
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
    func apply(to view: inout CipherView, secrets: Secrets, context: CLIContext) async throws {
        func refuse(_ what: String) -> CLIError { CLIError.usage("\(what) flags do not apply to a \(view.type.name) item") }
        if givesLoginFields && view.type != .login { throw refuse("login") }
        if givesCardFields && view.type != .card { throw refuse("card") }
        if givesIdentityFields && view.type != .identity { throw refuse("identity") }
        if givesSSHFields && view.type != .sshKey { throw refuse("ssh-key") }
        if let name { view.name = name }
        if let notes { view.notes = notes.isEmpty ? nil : notes }
        if let folder { view.folderId = try await context.folderID(folder) }
        if let favorite { view.favorite = favorite }
        // Each type's group is touched only when its flags are given: an edit of the name alone leaves an item's
        // missing group missing (an empty one in its place was a change to save).
        if view.type == .login, givesLoginFields {
            var login = view.login ?? LoginView()
            if let username { login.username = username.isEmpty ? nil : username }
            if let password = secrets.password { login.password = password }
            if generate { login.password = try Self.generatedPassword(length: length ?? 24) }
            // A URI the item has already keeps its match setting (and what the server sent with it), as with `--json`:
            // the same URIs given again are no change.
            if !uri.isEmpty { login.uris = uri.map { given in login.uris.first { $0.uri == given } ?? LoginURIView(uri: given) } }
            if let totp = secrets.totp {
                try Self.checkTOTP(totp)
                login.totp = totp
            }
            view.login = login
        }
        if view.type == .card, givesCardFields {
            var card = view.card ?? CardView()
            try Self.checkExpiry(month: expMonth, year: expYear)
            let values: [(CardField, String?)] = [(.cardholderName, cardholderName), (.brand, brand), (.expMonth, expMonth), (.expYear, expYear)]
            for (field, value) in values { if let value { card[field] = value.isEmpty ? nil : value } }
            for (field, value) in [(CardField.number, secrets.number), (.code, secrets.code)] { if let value { card[field] = value } }
            view.card = card
        }
        if view.type == .identity, givesIdentityFields {
            var identity = view.identity ?? IdentityView()
            let values: [(IdentityField, String?)] = [(.firstName, firstName), (.lastName, lastName), (.email, email), (.phone, phone),
                                                      (.company, company)]
            for (field, value) in values { if let value { identity[field] = value.isEmpty ? nil : value } }
            view.identity = identity
        }
        if view.type == .sshKey, givesSSHFields {
            var key = view.sshKey ?? SSHKeyView()
            if let privateKeyFile {
                key[.privateKey] = try InputFile.text(privateKeyFile, what: "the private key file")
            }
            if let publicKey {
                key[.publicKey] = publicKey
                // The fingerprint is the key's own (SHA256, as ssh-keygen -l prints it) unless one is given.
                if fingerprint == nil { key[.keyFingerprint] = SSHKeyFingerprint.sha256(publicKey: publicKey) }
            }
            if let fingerprint { key[.keyFingerprint] = fingerprint }
            view.sshKey = key
        }
        var fields: [(name: String, value: String?, type: FieldType)] = []
        for entry in textFields {
            guard let equals = entry.firstIndex(of: "="), equals != entry.startIndex else {
                throw CLIError.usage("custom fields are NAME=VALUE, got \"\(entry)\"")
            }
            fields.append((String(entry[..<equals]), String(entry[entry.index(after: equals)...]), .text))
        }
        fields += secrets.hiddenFields.map { ($0.name, $0.value, .hidden) }
        for (name, value, type) in fields { try Self.setField(name, value: value, flagType: type, in: &view) }
    }

    /// `--field NAME=VALUE` / `--hidden-field NAME=SOURCE` on an item. A field of that name keeps its type
    /// under `--field` (a hidden field stays hidden, a boolean stays a boolean); `--hidden-field` makes it
    /// hidden. A linked field has no value of its own, and a name several fields share is ambiguous: both
    /// are refused rather than guessed.
    static func setField(_ name: String, value: String?, flagType: FieldType, in view: inout CipherView) throws {
        let flag = flagType == .hidden ? "--hidden-field" : "--field"
        let matches = view.fields.indices.filter { view.fields[$0].name == name }
        guard let index = matches.first else {
            view.fields.append(FieldView(type: flagType, name: name, value: value))
            return
        }
        guard matches.count == 1 else {
            throw CLIError.usage("\(flag) \(name): the item has \(matches.count) fields named \"\(name)\"; edit them with --json (or the editor)")
        }
        switch view.fields[index].type {
        case .linked:
            throw CLIError.usage("\(flag) \(name): a linked field shows another of the item's values and has none of its own; edit it with --json (or the editor)")
        case .boolean where flagType == .text && !(value == nil || value == "true" || value == "false"):
            throw CLIError.usage("--field \(name): a boolean field is true or false")
        default:
            break
        }
        view.fields[index].value = value
        if flagType == .hidden { view.fields[index].type = .hidden }
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
        return try InputFile.bytes(path, what: "the file")
    }

    static func parse(_ bytes: [UInt8]) throws -> JSONObject {
        do {
            return try JSONParser.parseObject(bytes)
        } catch {
            throw CLIError.usage("the item JSON is not valid: \(error)")
        }
    }

    static func type(of object: JSONObject) throws -> CipherType {
        guard let name = object["type"]?.stringValue else { throw CLIError.usage("the item JSON needs \"type\" (\(CipherType.supportedNames))") }
        return try CipherType.named(name)
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

    /// `folderId` and `folder` both name the item's folder, and `get --json` (like the editor's template) prints
    /// both: the one changed from what the item has is applied. `folderId` won whenever it was there, so a
    /// changed `"folder"` in that output was saved without the change, silently (RELIABILITY bug 92). Both changed,
    /// to two folders, is refused.
    static func applyFolder(_ object: JSONObject, to view: inout CipherView, context: CLIContext) async throws {
        let givenID = try text(object["folderId"], "folderId"), givenName = try text(object["folder"], "folder")
        guard givenID != nil || givenName != nil else { return }
        let current = view.folderId
        let currentName = try await current.asyncMap { try await context.folderNames()[$0] } ?? nil
        func none(_ reference: String?) -> Bool { reference.map { $0.isEmpty || $0.lowercased() == "none" } ?? true }
        let idChanged = givenID.map { id in none(id) ? current != nil : id?.lowercased() != current } ?? false
        let nameChanged = givenName.map { name in none(name) ? current != nil : name != currentName } ?? false
        func resolved(_ reference: String??) async throws -> String? {
            guard let reference, let reference else { return nil }
            return try await context.folderID(reference)
        }
        switch (idChanged, nameChanged) {
        case (true, true):
            let (byID, byName) = (try await resolved(givenID), try await resolved(givenName))
            guard byID == byName else {
                throw CLIError.usage("folderId and folder name two different folders; change one of them (or give only one)")
            }
            view.folderId = byID
        case (true, false): view.folderId = try await resolved(givenID)
        case (false, true): view.folderId = try await resolved(givenName)
        case (false, false): break
        }
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
        try await applyFolder(object, to: &view, context: context)
        // `get --json` prints every type's group, `null` where the item is of another type.
        func given(_ key: String, for type: CipherType) throws -> JSONValue? {
            guard let value = object[key], !(value.isNull && view.type != type) else { return nil }
            guard view.type == type else { throw CLIError.usage("\(key) data on a \(view.type.name) item") }
            return value
        }
        if let value = try given("login", for: .login) {
            guard let login = value.objectValue else { throw CLIError.usage("login must be an object") }
            try checkKeys(login, allowed: ["username", "password", "totp", "uris", "passwordRevisionDate", "passkeys"], path: "login")
            var result = view.login ?? LoginView()
            if let username = try text(login["username"], "login.username") { result.username = username }
            if let password = try text(login["password"], "login.password") { result.password = password }
            if let totp = try text(login["totp"], "login.totp") {
                if totp != result.totp { try ItemOptions.checkTOTP(totp, name: "login.totp") }
                result.totp = totp
            }
            func emptyURI(_ index: Int) -> CLIError { CLIError.usage("login.uris[\(index)] is empty: give a URI (e.g. https://example.com) or leave the entry out") }
            if let uris = login["uris"] {
                guard let array = uris.arrayValue else { throw CLIError.usage("login.uris must be an array") }
                let before = result.uris
                result.uris = try array.enumerated().map { index, entry in
                    if let text = entry.stringValue {
                        // A URI the item has keeps its match setting (and what the server sent with it), as with `--uri`.
                        if let earlier = before.first(where: { $0.uri == text }) { return earlier }
                        if text.isBlankURI { throw emptyURI(index) }
                        return LoginURIView(uri: text)
                    }
                    guard let uri = entry.objectValue else { throw CLIError.usage("login.uris[\(index)] must be a string or an object") }
                    try checkKeys(uri, allowed: ["uri", "match"], path: "login.uris[\(index)]")
                    let earlier = before.first { $0.uri == uri["uri"]?.stringValue }
                    let match = try uri["match"].flatMap { value -> URIMatchType? in
                        if value.isNull { return nil }
                        // A value another client stored is kept as it is; a new one is one this client knows.
                        guard let number = value.intValue, (0...5).contains(number) || earlier?.match?.rawValue == number else {
                            throw CLIError.usage("login.uris[\(index)].match must be null or 0–5 (domain, host, starts with, exact, regular expression, never)")
                        }
                        return URIMatchType(rawValue: number)
                    }
                    var entry = LoginURIView(uri: try text(uri["uri"], "login.uris[\(index)].uri") ?? nil, match: match)
                    // An empty URI is refused as `--uri ""` is, where the JSON adds it: one another client stored can be fed back.
                    if (entry.uri ?? "").isBlankURI, earlier == nil { throw emptyURI(index) }
                    // What the CLI form does not show (an unknown key the server sent) stays with the same URI.
                    entry.unknown = earlier?.unknown ?? JSONObject()
                    return entry
                }
            }
            view.login = result
        }
        if let card = try given("card", for: .card) {
            let before = view.card
            try group(card, into: &view.card, path: "card")
            // Checked where the JSON changes them: a value another client stored stays editable around.
            func changed(_ field: CardField) -> String? { view.card?[field] == before?[field] ? nil : view.card?[field] }
            try ItemOptions.checkExpiry(month: changed(.expMonth), year: changed(.expYear), names: ("card.expMonth", "card.expYear"))
        }
        if let identity = try given("identity", for: .identity) { try group(identity, into: &view.identity, path: "identity") }
        if let sshKey = try given("sshKey", for: .sshKey) { try group(sshKey, into: &view.sshKey, path: "sshKey") }
        if let fields = object["fields"] {
            guard let array = fields.arrayValue else { throw CLIError.usage("fields must be an array") }
            let before = view.fields
            view.fields = try array.enumerated().map { index, entry in try customField(entry, index: index, before: before) }
        }
    }

    /// A custom field of the JSON form. What the form leaves out is kept from the item's field of the same
    /// name and type: a linked field's `linkedId` when the entry has none (an older script's JSON), and keys the
    /// server sent that this client does not model.
    static func customField(_ entry: JSONValue, index: Int, before: [FieldView]) throws -> FieldView {
        guard let field = entry.objectValue else { throw CLIError.usage("fields[\(index)] must be an object") }
        try checkKeys(field, allowed: ["name", "value", "type", "linkedId"], path: "fields[\(index)]")
        let typeName = field["type"]?.stringValue ?? "text"
        guard let type = Presentation.fieldTypeNames.first(where: { $0.1 == typeName })?.0 else {
            throw CLIError.usage("fields[\(index)].type must be text, hidden, boolean or linked")
        }
        var result = FieldView(type: type, name: try text(field["name"], "fields[\(index)].name") ?? nil,
                               value: try text(field["value"], "fields[\(index)].value") ?? nil)
        let earlier = before.first { $0.name == result.name && $0.type == type }
        result.unknown = earlier?.unknown ?? JSONObject()
        switch field["linkedId"] {
        case .none:
            result.linkedId = earlier?.linkedId
        case .some(let value) where value.isNull:
            result.linkedId = nil
        case .some(let value):
            guard let linked = value.intValue else { throw CLIError.usage("fields[\(index)].linkedId must be a number or null") }
            result.linkedId = linked
        }
        if type != .linked, result.linkedId != nil {
            throw CLIError.usage("fields[\(index)].linkedId is only for a linked field")
        }
        // The checks the flags make (`setField`), where the JSON changes the field: what another client stored
        // (a boolean's odd value, a linked field without a linkedId) can be fed back as it is.
        if type == .boolean, let value = result.value, value != "true", value != "false", earlier?.value != value {
            throw CLIError.usage("fields[\(index)]: a boolean field is true or false, not \"\(value)\"")
        }
        if type == .linked, result.linkedId == nil, earlier.map({ $0.linkedId != nil }) ?? true {
            throw CLIError.usage("fields[\(index)]: a linked field needs a linkedId (the value it shows, e.g. 100 for a login's username)")
        }
        return result
    }
}

extension String {
    /// Nothing but white space: not a URI.
    var isBlankURI: Bool { trimmingCharacters(in: .whitespacesAndNewlines).isEmpty }
}

extension CipherType {
    /// The types a TYPE names, as `list` and `get` print them.
    static let supportedNames = supported.map(\.name).joined(separator: ", ")

    /// The type a TYPE argument (`add TYPE`, `list --type`, the item JSON's `"type"`) names, in any case:
    /// `list --type LOGIN` was refused (RELIABILITY bug 96), while item names and ids are found in any case.
    static func named(_ text: String) throws -> CipherType {
        guard let type = supported.first(where: { $0.name.caseInsensitiveCompare(text) == .orderedSame }) else {
            throw CLIError.usage("unknown item type \"\(text)\" (\(supportedNames))")
        }
        return type
    }
}

extension Optional {
    func asyncMap<T>(_ transform: (Wrapped) async throws -> T) async rethrows -> T? {
        guard let value = self else { return nil }
        return try await transform(value)
    }
}

/// Where a secret flag's value comes from. The command line only names the source, never the secret:
/// a command line is readable by every user of the machine (`ps`, /proc/PID/cmdline) and stays in the
/// shell history.
enum SecretSource: Equatable {
    /// `-`: standard input (its first line; a hidden field takes all of it), or a no-echo prompt when
    /// standard input is a terminal.
    case standardInput
    /// `@PATH`: the file's first line (a hidden field: the whole file without its final newline).
    case file(String)
    /// An empty value clears the field (it gives nothing away).
    case clear

    init(_ text: String, flag: String) throws {
        if text == "-" {
            self = .standardInput
        } else if text.isEmpty {
            self = .clear
        } else if text.hasPrefix("@"), text.count > 1 {
            self = .file((String(text.dropFirst()) as NSString).expandingTildeInPath)
        } else {
            // The value itself is never repeated: it is a secret.
            let ways = flag == "--hidden-field"
                ? "NAME=- (standard input; a no-echo prompt on a terminal) or NAME=@FILE (the whole file)"
                : "- (standard input; a no-echo prompt on a terminal) or @FILE (the file's first line)"
            throw ValidationError("""
                \(flag) takes where to read the secret from, not the secret: a command line is readable by every user \
                of this machine and stays in the shell history. Give \(flag) \(ways)\(flag == "--password" ? ", or use --generate" : "").
                """)
        }
    }

    /// Reads the value (`nil`: clear the field). `wholeText`: multi-line values (hidden fields).
    func read(flag: String, label: String, wholeText: Bool) throws -> String? {
        // Any line end ends the line: "\r\n" is one Character in Swift, which neither a split on "\n" nor
        // `hasSuffix("\n")` sees, so a file with Windows line ends gave its secret with the line end in it (a
        // password that matches nothing, a TOTP secret refused: RELIABILITY bug 90; `--password-file` had it fixed
        // in commit 1786a9e).
        func trimmed(_ text: String) -> String {
            guard !wholeText else {
                var text = text
                if text.last?.isNewline == true { text.removeLast() }
                return text
            }
            return text.split(maxSplits: 1, omittingEmptySubsequences: false, whereSeparator: \.isNewline).first.map(String.init) ?? ""
        }
        switch self {
        case .clear:
            return nil
        case .standardInput:
            let value: String
            if Console.stdinIsTTY {
                value = Console.readSecret(prompt: "\(label) (\(flag)): ") ?? ""
            } else if wholeText {
                value = trimmed(String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self))
            } else {
                value = readLine(strippingNewline: true).map(trimmed) ?? ""
            }
            guard !value.isEmpty else { throw CLIError.usage("\(flag): nothing on standard input") }
            return value
        case .file(let path):
            let text: String
            do { text = try InputFile.text(path, what: "the file") } catch let error as CLIError { throw CLIError.usage("\(flag): \(error)") }
            let value = trimmed(text)
            guard !value.isEmpty else { throw CLIError.usage("\(flag): \(path) is empty\(wholeText ? "" : " (its first line is the value)")") }
            return value
        }
    }
}
