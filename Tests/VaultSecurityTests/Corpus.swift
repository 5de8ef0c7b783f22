import Foundation
import VaultCrypto
import VaultModels

/// Valid inputs the fuzzers start from: real EncStrings of every type, real items of every type, real
/// server answers. Built once (RSA key generation is slow).
enum Corpus {
    static let organizationID = "1bc9ac1e-f5aa-45f2-94bf-b181009709b8"
    static let userKey = SymmetricCryptoKey.generate()
    static let organizationKey = SymmetricCryptoKey.generate()
    static let privateKey = try! RSAPrivateKey.generate()
    static var keys: VaultKeys { VaultKeys(userKey: userKey, organizationKeys: [organizationID: organizationKey]) }

    /// EncStrings of types 0–6 plus the header-less legacy forms.
    static let encStrings: [String] = {
        let key = userKey
        let symmetric = try! EncString.encrypt("correct horse battery staple", key: key)
        let wrapped = try! privateKey.publicKey.wrap(organizationKey)
        let iv = symmetric.iv!.base64EncodedString()
        let ciphertext = symmetric.ciphertext.base64EncodedString()
        let mac = symmetric.mac!.base64EncodedString()
        let rsa = wrapped.ciphertext.base64EncodedString()
        return [
            symmetric.serialized,
            try! EncString.encrypt("", key: key).serialized,
            "0.\(iv)|\(ciphertext)", "1.\(iv)|\(ciphertext)|\(mac)", "\(iv)|\(ciphertext)|\(mac)", "\(iv)|\(ciphertext)",
            wrapped.serialized, "3.\(rsa)", "5.\(rsa)|\(mac)", "6.\(rsa)|\(mac)",
        ]
    }()

    /// Items of every type with every kind of field filled.
    static let items: [CipherView] = {
        let keys = Corpus.keys
        var login = try! keys.newItem(type: .login, name: "Bank")
        login.login = LoginView(uris: [LoginURIView(uri: "https://bank.example", match: .domain), LoginURIView(uri: "ssh://host")],
                                username: "alice", password: "hunter2", totp: "otpauth://totp/x?secret=JBSWY3DPEHPK3PXP")
        login.notes = "notes"
        login.fields = [FieldView(type: .hidden, name: "pin", value: "1234"), FieldView(type: .linked, name: "l", value: nil, linkedId: 100)]
        login.passwordHistory = [PasswordHistoryView(password: "old", lastUsedDate: WireDate(microsecondsSinceEpoch: 1_700_000_000_000_000))]
        var card = try! keys.newItem(type: .card, name: "Visa")
        card.card = CardView(values: [.cardholderName: "Alice", .number: "4111111111111111", .code: "123", .expMonth: "12"])
        var identity = try! keys.newItem(type: .identity, name: "Me", organizationId: organizationID)
        identity.identity = IdentityView(values: [.firstName: "Alice", .ssn: "078-05-1120", .email: "a@example.com"])
        identity.collectionIds = ["2bc9ac1e-f5aa-45f2-94bf-b181009709b8"]
        var note = CipherView(type: .secureNote, name: "legacy note without item key")
        note.notes = "secret note"
        var ssh = try! keys.newItem(type: .sshKey, name: "server")
        ssh.sshKey = SSHKeyView(values: [.privateKey: "-----BEGIN OPENSSH PRIVATE KEY-----", .publicKey: "ssh-ed25519 AAAA", .keyFingerprint: "SHA256:x"])
        return [login, card, identity, note, ssh].map { view in
            var copy = view
            copy.id = UUID().uuidString.lowercased()
            copy.revisionDate = WireDate(microsecondsSinceEpoch: 1_700_000_000_123_456)
            copy.creationDate = copy.revisionDate
            copy.object = "cipherDetails"
            return copy
        }
    }()

    static let cipherObjects: [JSONObject] = items.map { try! $0.encrypted(with: keys).jsonObject() }

    static let folderObjects: [JSONObject] = [
        FolderWire(id: UUID().uuidString.lowercased(), name: try! EncString.encrypt("Work", key: userKey),
                   revisionDate: WireDate(microsecondsSinceEpoch: 1_700_000_000_000_000)).jsonObject(),
    ]

    static let dates = ["2024-02-29T23:59:59.1234567Z", "2024-01-01T00:00:00Z", "2024-01-01T00:00:00.000+02:00", "1970-01-01T00:00:00.5Z"]
}
