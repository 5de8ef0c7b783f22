import Foundation
import PropertyBased
import VaultCrypto
import VaultModels

/// SplitMix64: a small deterministic generator for building test data from one seed.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Random decrypted items of every type, with random unknown fields at every level.
struct RandomViews {
    var rng: SplitMix64
    let keys: VaultKeys

    /// Characters that stress encoders: quotes, backslashes, control characters, non-BMP emoji.
    static let alphabet: [Character] = Array("aZ09 -_.@:/\\\"'\n\t{}[]éßüø漢字🔐🙂\u{0}\u{7f}")

    mutating func bool() -> Bool { rng.next() & 1 == 1 }
    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &rng) }

    mutating func string(maxLength: Int = 24) -> String {
        String((0..<int(0...maxLength)).map { _ in Self.alphabet.randomElement(using: &rng)! })
    }

    mutating func optionalString() -> String? { bool() ? string() : nil }

    mutating func date() -> WireDate {
        WireDate(microsecondsSinceEpoch: Int64(int(0...2_000_000_000)) * 1_000_000 + Int64(int(0...999_999)))
    }

    mutating func id() -> String { UUID(uuid: (UInt8(int(0...255)), 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, UInt8(int(0...255)))).uuidString.lowercased() }

    /// Unknown keys that no model reads (prefixed so they never collide with modelled ones).
    mutating func unknown() -> JSONObject {
        var object = JSONObject()
        for index in 0..<int(0...2) {
            let value: JSONValue
            switch int(0...4) {
            case 0: value = .string(string())
            case 1: value = .number(String(int(-1000...1_000_000)))
            case 2: value = .bool(bool())
            case 3: value = .array([.string(string()), .null, .number("1.5e3")])
            default: value = .object(["nested": .string(string()), "Flag": .bool(true)])
            }
            object["zzFuture\(index)\(int(0...99))"] = value
        }
        return object
    }

    mutating func plainFields<F: SecretFieldName>(_ type: F.Type) -> PlainFields<F> {
        var fields = PlainFields<F>(unknown: unknown())
        for field in F.allCases where bool() { fields[field] = string() }
        return fields
    }

    mutating func login() -> LoginView {
        var login = LoginView(username: optionalString(), password: optionalString(), totp: optionalString())
        login.uris = (0..<int(0...3)).map { _ in
            LoginURIView(uri: optionalString(), match: bool() ? URIMatchType(rawValue: int(0...5)) : nil, unknown: unknown())
        }
        login.passwordRevisionDate = bool() ? date() : nil
        login.autofillOnPageLoad = bool() ? bool() : nil
        if bool() {
            login.fido2Credentials = (0..<int(0...2)).map { _ in Fido2CredentialView(fields: plainFields(Fido2Field.self), creationDate: date()) }
        }
        login.unknown = unknown()
        return login
    }

    mutating func cipher(type: CipherType) throws -> CipherView {
        let organizationId = keys.organizationKeys.keys.sorted().first.flatMap { bool() ? $0 : nil }
        var view = try bool()
            ? keys.newItem(type: type, name: string(), organizationId: organizationId)
            : CipherView(type: type, name: string()).with { $0.organizationId = organizationId }
        view.id = bool() ? id() : nil
        view.folderId = bool() ? id() : nil
        view.notes = optionalString()
        view.favorite = bool()
        view.reprompt = RepromptType(rawValue: int(0...1))
        switch type {
        case .login: view.login = login()
        case .card: view.card = plainFields(CardField.self)
        case .identity: view.identity = plainFields(IdentityField.self)
        case .sshKey: view.sshKey = plainFields(SSHKeyField.self)
        case .secureNote: view.secureNote = SecureNoteWire(type: .generic, unknown: unknown())
        default: break
        }
        view.fields = (0..<int(0...3)).map { _ in
            FieldView(type: FieldType(rawValue: int(0...3)), name: optionalString(), value: optionalString(),
                      linkedId: bool() ? int(100...420) : nil, unknown: unknown())
        }
        view.passwordHistory = (0..<int(0...3)).map { _ in PasswordHistoryView(password: string(), lastUsedDate: date(), unknown: unknown()) }
        view.attachments = (0..<int(0...2)).map { _ in
            var attachment = AttachmentView(id: id(), fileName: optionalString(), key: nil, size: String(int(1...99_999)))
            attachment.url = bool() ? "https://example.invalid/\(id())" : nil
            attachment.unknown = unknown()
            return attachment
        }
        view.collectionIds = bool() ? [id()] : nil
        view.creationDate = bool() ? date() : nil
        view.revisionDate = bool() ? date() : nil
        view.deletedDate = bool() ? date() : nil
        view.archivedDate = bool() ? date() : nil
        view.edit = bool() ? bool() : nil
        view.permissions = bool() ? CipherPermissionsWire(delete: bool(), restore: bool()) : nil
        view.object = bool() ? "cipherDetails" : nil
        view.unknown = unknown()
        return view
    }
}

/// A property-based generator of random items of one type.
func cipherGenerator(type: CipherType, keys: VaultKeys) -> Generator<CipherView, Shrink.None<CipherView>> {
    Generator(run: { rng in
        var views = RandomViews(rng: SplitMix64(seed: rng.next()), keys: keys)
        return try! views.cipher(type: type)
    })
}
