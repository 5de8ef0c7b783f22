import Crypto
import Foundation
import Testing
import VaultCrypto
import VaultModels
import _CryptoExtras
@testable import VaultExchange

func fixture(_ name: String) throws -> String {
    let url = try #require(Bundle.module.url(forResource: name, withExtension: nil, subdirectory: "Fixtures"))
    return try String(contentsOf: url, encoding: .utf8)
}

/// Gives items folder ids for `names`, as a vault would hold them, for the exporters.
func placed(_ vault: ImportedVault) -> (items: [CipherView], folders: [FolderView]) {
    let folders = vault.folderNames.enumerated().map { FolderView(id: "folder-\($0.offset)", name: $0.element) }
    let items = vault.items.map { item in
        item.view.with { $0.folderId = item.folderName.flatMap { name in folders.first { $0.name == name }?.id } }
    }
    return (items, folders)
}

@Suite("Bitwarden JSON: reading, writing, password-protected")
struct BitwardenJSONTests {
    @Test("every field of the hand-made export is read")
    func readsEveryField() throws {
        let vault = try BitwardenJSON.read(try fixture("bitwarden.json"))
        #expect(vault.folderNames == ["Work", "Work/Servers", "Empty folder"])
        #expect(vault.items.map(\.view.type) == [.login, .secureNote, .card, .identity, .sshKey])
        #expect(vault.skipped == [SkippedEntry(entry: "item 6 (Bank account from a newer client)", reason: "item type 6 is not one VaultSync stores")])

        let router = vault.items[0]
        #expect(router.folderName == "Work/Servers")
        #expect(router.view.name == "Zürich router, \"admin\"")
        #expect(router.view.notes == "line one\nline two, with comma\n密码 🔑")
        #expect(router.view.favorite && router.view.reprompt == .password)
        #expect(router.view.login?.username == "admin")
        #expect(router.view.login?.password == "pa,ss\"wo\nrd")
        #expect(router.view.login?.totp == "otpauth://totp/Router?secret=JBSWY3DPEHPK3PXP")
        #expect(router.view.login?.uris == [LoginURIView(uri: "https://router.example"), LoginURIView(uri: "http://192.168.1.1/login", match: .exact)])
        #expect(router.view.login?.fido2Credentials?.first?.fields.values[.counter] == "7")
        #expect(router.view.login?.fido2Credentials?.first?.fields.values[.rpId] == "example.com")
        #expect(router.view.login?.fido2Credentials?.first?.creationDate == WireDate(iso8601: "2024-05-06T07:08:09Z"))
        #expect(router.view.fields == [
            FieldView(type: .hidden, name: "PIN", value: "1234"),
            FieldView(type: .text, name: "Plan", value: "gold"),
            FieldView(type: .boolean, name: "Remember", value: "true"),
            FieldView(type: .linked, name: "Login name", value: nil, linkedId: 100),
            FieldView(type: .text, name: "customKeyFromTheFuture", value: "keep me"),
        ])
        #expect(router.view.passwordHistory == [PasswordHistoryView(password: "old \"quoted\" pw", lastUsedDate: WireDate(iso8601: "2024-01-02T03:04:05.678Z")!)])
        #expect(router.view.creationDate == WireDate(iso8601: "2024-01-01T00:00:00Z"))
        #expect(router.view.revisionDate == WireDate(iso8601: "2025-03-01T10:00:00.123Z"))

        #expect(vault.items[1].view.notes == "1. abcd-efgh\n2. ijkl-mnop")
        #expect(vault.items[2].folderName == "Work")
        #expect(vault.items[2].view.card?.values == [.cardholderName: "Jane Q. Müller", .brand: "Visa", .number: "4111111111111111",
                                                     .expMonth: "7", .expYear: "2031", .code: "123"])
        let identity = try #require(vault.items[3].view.identity?.values)
        #expect(identity.count == 17 && identity[.city] == "Zürich" && identity[.company] == "ACME, Inc." && identity[.address3] == nil)
        #expect(vault.items[4].view.sshKey?.values[.keyFingerprint] == "SHA256:abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG")
    }

    /// docs/CLI.md: "a key we do not model becomes a text field … nothing a file carries is dropped silently",
    /// at every level of an item, not only its top.
    @Test("keys we do not model inside login, its URIs and a card become fields named by their path; the password's date and the trash are read")
    func nestedUnknownKeys() throws {
        let text = #"""
        {"encrypted": false, "folders": [], "items": [
          {"type": 1, "name": "Unknown keys", "topExtra": "t", "deletedDate": "2025-02-03T04:05:06.000Z",
           "login": {"username": "u", "loginExtra": "l", "passwordRevisionDate": "2024-06-07T08:09:10.000Z",
                     "uris": [{"uri": "https://a.example", "match": null, "uriExtra": 5}], "autofillOnPageLoad": true}},
          {"type": 3, "name": "Card", "card": {"number": "4111", "cardExtra": {"nested": true}}},
          {"type": 1, "name": "Empty login", "login": null}, {"type": 3, "name": "Empty card", "card": null}
        ]}
        """#
        let vault = try BitwardenJSON.read(text)
        let login = vault.items[0].view
        #expect(login.fields == [FieldView(type: .text, name: "login.loginExtra", value: "l"),
                                 FieldView(type: .text, name: "login.uris[0].uriExtra", value: "5"),
                                 FieldView(type: .text, name: "topExtra", value: "t")])
        #expect(login.login?.passwordRevisionDate == WireDate(iso8601: "2024-06-07T08:09:10Z") && login.login?.autofillOnPageLoad == true)
        #expect(login.deletedDate == WireDate(iso8601: "2025-02-03T04:05:06Z"))
        #expect(vault.items[1].view.fields == [FieldView(type: .text, name: "card.cardExtra", value: #"{"nested":true}"#)])
        #expect(vault.items[1].view.card?.values == [.number: "4111"])
        // A group given as null is an empty one, not a malformed file.
        #expect(vault.items[2].view.login == LoginView() && vault.items[3].view.card?.values == [:])
    }

    @Test("export → import gives every field back")
    func roundTrip() throws {
        let vault = try BitwardenJSON.read(try fixture("bitwarden.json"))
        let (items, folders) = placed(vault)
        let text = BitwardenJSON.export(items: items, folders: folders)
        let again = try BitwardenJSON.read(text)
        #expect(again.folderNames == vault.folderNames)
        #expect(again.items.map(\.view) == vault.items.map(\.view))
        #expect(again.items.map(\.folderName) == vault.items.map(\.folderName))
    }

    @Test("the export is written the way Bitwarden's clients write it: key order, two-space indent, milliseconds")
    func writtenLikeBitwarden() throws {
        var view = CipherView(type: .login, name: "Example")
        view.login = LoginView(uris: [LoginURIView(uri: "https://example.com")], username: "alice", password: "s3cret")
        view.creationDate = WireDate(iso8601: "2025-03-01T10:00:00.5Z")
        view.revisionDate = view.creationDate
        let text = BitwardenJSON.export(items: [view], folders: [])
        #expect(text == """
        {
          "encrypted": false,
          "folders": [],
          "items": [
            {
              "passwordHistory": null,
              "revisionDate": "2025-03-01T10:00:00.500Z",
              "creationDate": "2025-03-01T10:00:00.500Z",
              "deletedDate": null,
              "id": null,
              "organizationId": null,
              "folderId": null,
              "type": 1,
              "reprompt": 0,
              "name": "Example",
              "notes": null,
              "favorite": false,
              "login": {
                "fido2Credentials": [],
                "uris": [
                  {
                    "match": null,
                    "uri": "https://example.com"
                  }
                ],
                "username": "alice",
                "password": "s3cret",
                "totp": null
              },
              "collectionIds": null
            }
          ]
        }

        """)
    }

    @Test("malformed files are refused naming the entry", arguments: [
        ("[1, 2]", "the file"),
        ("{\"folders\": []}", "the file"),
        ("{\"items\": [{\"name\": \"A\", \"type\": \"login\"}]}", "item 1 (A)"),
        ("{\"items\": [{\"type\": 1, \"name\": \"B\", \"login\": {\"uris\": \"https://x\"}}]}", "item 1 (B)"),
        ("{\"items\": [{\"type\": 1, \"name\": \"C\", \"creationDate\": \"yesterday\"}]}", "item 1 (C)"),
        ("{\"items\": [", "the file"),
    ])
    func malformed(text: String, entry: String) {
        #expect {
            try BitwardenJSON.read(text)
        } throws: { error in
            guard case .malformed(let named, _) = error as? ExchangeError else { return false }
            return named == entry
        }
    }

    @Test("an account-restricted export is refused with its reason")
    func accountEncrypted() {
        #expect(throws: ExchangeError.accountEncrypted) {
            try BitwardenJSON.read("{\"encrypted\": true, \"encKeyValidation_DO_NOT_EDIT\": \"2.x|y|z\", \"items\": []}")
        }
    }

    @Test("password-protected export: decrypted here with swift-crypto's primitives alone, and read back", arguments: [
        KdfConfiguration.pbkdf2(iterations: 5_000),
        KdfConfiguration.argon2id(iterations: 2, memoryMiB: 16, parallelism: 2),
    ])
    func passwordProtected(kdf: KdfConfiguration) throws {
        let vault = try BitwardenJSON.read(try fixture("bitwarden.json"))
        let (items, folders) = placed(vault)
        let password = "export pässword"
        let file = try BitwardenJSON.exportEncrypted(items: items, folders: folders, password: password, kdf: kdf)
        #expect(BitwardenJSON.isPasswordProtected(file))

        let plaintext = try IndependentExportDecryption.open(file, password: password)
        #expect(plaintext == BitwardenJSON.export(items: items, folders: folders))

        let again = try BitwardenJSON.read(file, password: password)
        #expect(again.items.map(\.view) == vault.items.map(\.view))
        #expect(throws: ExchangeError.wrongPassword) { try BitwardenJSON.read(file, password: "wrong") }
        #expect(throws: ExchangeError.passwordRequired) { try BitwardenJSON.read(file) }
    }

    @Test("a password-protected export made outside VaultSync (Python's cryptography) is read")
    func independentlyMade() throws {
        // scripts/make-encrypted-export-fixture.py wrote it with its own PBKDF2, HKDF, AES-CBC and HMAC.
        let text = try fixture("bitwarden-encrypted.json")
        #expect(throws: ExchangeError.wrongPassword) { try BitwardenJSON.read(text, password: "fixture password") }
        let vault = try BitwardenJSON.read(text, password: "fixture pässword")
        #expect(vault.folderNames == ["Made in Python"])
        let item = try #require(vault.items.first)
        #expect(vault.items.count == 1 && item.folderName == "Made in Python")
        #expect(item.view.name == "Independent" && item.view.favorite)
        #expect(item.view.login?.username == "py" && item.view.login?.password == "s3cret, \"quoted\"")
        #expect(item.view.login?.uris.first?.uri == "https://independent.example")
        #expect(item.view.notes == "written by scripts/make-encrypted-export-fixture.py")
    }

    @Test("a file whose KDF settings are out of bounds is refused before deriving anything")
    func hostileKdf() {
        let file = """
        {"encrypted": true, "passwordProtected": true, "salt": "c2FsdHNhbHRzYWx0c2FsdA==", "kdfType": 1, "kdfIterations": 3,
         "kdfMemory": 1000000, "kdfParallelism": 4, "encKeyValidation_DO_NOT_EDIT": "2.AAAA|AAAA|AAAA", "data": "2.AAAA|AAAA|AAAA"}
        """
        #expect(throws: ExchangeError.self) { try BitwardenJSON.read(file, password: "x") }
    }
}

/// The password-protected export opened with swift-crypto's primitives directly, following the format
/// (docs/PROTOCOL.md "Vault exports"): KDF over the salt's base64 text, HKDF-Expand "enc"/"mac",
/// HMAC-SHA256 over IV ‖ ciphertext checked, AES-256-CBC. Nothing of VaultCrypto's EncString is used.
enum IndependentExportDecryption {
    struct Failure: Error {}

    static func open(_ file: String, password: String) throws -> String {
        let root = try #require(try JSONSerialization.jsonObject(with: Data(file.utf8)) as? [String: Any])
        let salt = try #require(root["salt"] as? String)
        let iterations = try #require(root["kdfIterations"] as? Int)
        let master: SymmetricKey
        switch try #require(root["kdfType"] as? Int) {
        case 0:
            master = try KDF.Insecure.PBKDF2.deriveKey(from: Array(password.utf8), salt: Array(salt.utf8), using: .sha256,
                                                       outputByteCount: 32, unsafeUncheckedRounds: iterations)
        default:
            // Argon2id has no swift-crypto primitive: the vendored reference implementation, on SHA-256 of the salt text.
            let memory = try #require(root["kdfMemory"] as? Int), parallelism = try #require(root["kdfParallelism"] as? Int)
            master = SymmetricKey(data: try Argon2id.derive(
                password: Array(password.utf8), salt: Array(SHA256.hash(data: Array(salt.utf8))),
                iterations: iterations, memoryKiB: memory * 1024, parallelism: parallelism, length: 32))
        }
        let encKey = HKDF<SHA256>.expand(pseudoRandomKey: master, info: Data("enc".utf8), outputByteCount: 32)
        let macKey = HKDF<SHA256>.expand(pseudoRandomKey: master, info: Data("mac".utf8), outputByteCount: 32)

        func decrypt(_ text: String) throws -> Data {
            guard text.hasPrefix("2.") else { throw Failure() }
            let parts = try text.dropFirst(2).split(separator: "|").map { try #require(Data(base64Encoded: String($0))) }
            guard parts.count == 3 else { throw Failure() }
            let mac = Data(HMAC<SHA256>.authenticationCode(for: parts[0] + parts[1], using: macKey))
            guard mac == parts[2] else { throw Failure() }
            return try AES._CBC.decrypt(parts[1], using: encKey, iv: AES._CBC.IV(ivBytes: parts[0]))
        }
        let check = String(decoding: try decrypt(try #require(root["encKeyValidation_DO_NOT_EDIT"] as? String)), as: UTF8.self)
        #expect(UUID(uuidString: check) != nil, "the check value is a random UUID")
        return String(decoding: try decrypt(try #require(root["data"] as? String)), as: UTF8.self)
    }
}
