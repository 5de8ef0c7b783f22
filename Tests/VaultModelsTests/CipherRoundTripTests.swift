import Foundation
import PropertyBased
import Testing
import VaultCrypto
@testable import VaultModels

@Suite("Items round-trip through encrypt → JSON → decode → decrypt")
struct CipherRoundTripTests {
    static let organizationId = "1bc9ac1e-f5aa-45f2-94bf-b181009709b8"
    let keys = VaultKeys(userKey: .generate(), organizationKeys: [Self.organizationId: .generate()])

    @Test("random items of every type survive the round trip unchanged", arguments: CipherType.supported)
    func roundTrip(type: CipherType) async throws {
        let keys = self.keys
        await propertyCheck(count: 60, input: cipherGenerator(type: type, keys: keys)) { view in
            let wire = try view.encrypted(with: keys)
            let bytes = wire.jsonBytes()
            let decoded = try CipherWire(jsonBytes: bytes)
            #expect(decoded == wire)
            let back = try decoded.decrypted(with: keys)
            #expect(back == view)
        }
    }

    @Test("the encrypted JSON contains no plaintext of the item")
    func noPlaintext() throws {
        var view = try keys.newItem(type: .login, name: "Bank of Plaintext")
        view.login = LoginView(uris: [LoginURIView(uri: "https://plaintext.example")], username: "alice-plain", password: "hunter2-plain")
        view.notes = "my secret note"
        view.fields = [FieldView(type: .hidden, name: "pin-name", value: "9876-plain")]
        let text = String(decoding: try view.encrypted(with: keys).jsonBytes(), as: UTF8.self)
        for secret in ["Bank of Plaintext", "plaintext.example", "alice-plain", "hunter2-plain", "my secret note", "pin-name", "9876-plain"] {
            #expect(!text.contains(secret))
        }
    }

    @Test("new items get their own item key; items without one stay readable and writable")
    func itemKeys() throws {
        let withKey = try keys.newItem(type: .secureNote, name: "with key")
        #expect(withKey.itemKey != nil)
        let wire = try withKey.encrypted(with: keys)
        // The fields are not readable with the user key directly: they use the item key.
        #expect(throws: CryptoError.macMismatch) { try wire.name.decryptString(key: keys.userKey) }
        #expect(try wire.decrypted(with: keys).name == "with key")

        let legacy = CipherView(type: .secureNote, name: "legacy")
        let legacyWire = try legacy.encrypted(with: keys)
        #expect(legacyWire.key == nil)
        #expect(try legacyWire.name.decryptString(key: keys.userKey) == "legacy")
    }

    @Test("a name decrypted from the stored text alone (a search by name) is the item's name, or the same errors")
    func nameFromStoredText() throws {
        let withKey = try keys.newItem(type: .login, name: "with key ✓").encrypted(with: keys)
        let legacy = try CipherView(type: .secureNote, name: "legacy").encrypted(with: keys)
        let shared = try keys.newItem(type: .login, name: "shared", organizationId: Self.organizationId).encrypted(with: keys)
        for wire in [withKey, legacy, shared] {
            #expect(try CipherWire.decryptedName(jsonBytes: wire.jsonBytes(), keys: keys) == wire.decrypted(with: keys).name)
        }
        #expect(throws: ModelError.missingOrganizationKey(organizationID: Self.organizationId)) {
            try CipherWire.decryptedName(jsonBytes: shared.jsonBytes(), keys: VaultKeys(userKey: keys.userKey))
        }
        var swapped = withKey
        swapped.name = legacy.name  // another key's ciphertext: the MAC refuses it
        #expect(throws: ModelError.self) { try CipherWire.decryptedName(jsonBytes: swapped.jsonBytes(), keys: keys) }
    }

    @Test("organization items use the organization key; a missing key is a clear error")
    func organizationItems() throws {
        let view = try keys.newItem(type: .login, name: "shared", organizationId: Self.organizationId)
        let wire = try view.encrypted(with: keys)
        #expect(try wire.decrypted(with: keys).name == "shared")
        let personalOnly = VaultKeys(userKey: keys.userKey)
        #expect(throws: ModelError.missingOrganizationKey(organizationID: Self.organizationId)) {
            try wire.decrypted(with: personalOnly)
        }
    }

    @Test("a URI whose checksum does not verify is dropped (spec §1.10)")
    func uriChecksum() throws {
        var view = try keys.newItem(type: .login, name: "site")
        view.login?.uris = [LoginURIView(uri: "https://good.example"), LoginURIView(uri: "https://swapped.example")]
        var wire = try view.encrypted(with: keys)
        // A hostile server swaps the second URI's checksum for the first one's.
        let firstChecksum = wire.login?.uris?[0].uriChecksum
        wire.login?.uris?[1].uriChecksum = firstChecksum
        let back = try wire.decrypted(with: keys)
        #expect(back.login?.uris.map(\.uri) == ["https://good.example"])
    }

    @Test("a list's summary read from the stored text equals the summary of the item decrypted whole, for every type")
    func summaryMatchesDecrypted() throws {
        var random = RandomViews(rng: SplitMix64(seed: 2026_11_26), keys: keys)
        for index in 0..<400 {
            let type = CipherType.supported[index % CipherType.supported.count]
            let wire = try random.cipher(type: type).encrypted(with: keys)
            let whole = try wire.decrypted(with: keys)
            #expect(try CipherWire.summary(jsonBytes: wire.jsonBytes(), keys: keys) == whole.summary, "item \(index), \(type)")
        }
    }

    @Test("a summary is refused when its name or username cannot be decrypted, as the whole item is")
    func summaryOfDamagedItem() throws {
        var random = RandomViews(rng: SplitMix64(seed: 7), keys: keys)
        var wire = try random.cipher(type: .login).with { $0.login?.username = "someone" }.encrypted(with: keys)
        let other = VaultKeys(userKey: SymmetricCryptoKey.generate())
        wire.login?.username = try EncString.encrypt("someone", key: other.userKey)
        #expect(throws: ModelError.self) { try CipherWire.summary(jsonBytes: wire.jsonBytes(), keys: keys) }
        #expect(throws: ModelError.self) { try wire.decrypted(with: keys) }
    }

    @Test("copying an item with one change keeps every other field")
    func copyWithOneChange() throws {
        var random = RandomViews(rng: SplitMix64(seed: 42), keys: keys)
        let original = try random.cipher(type: .login)
        let changed = original.with { $0.login?.password = "new password" }
        #expect(changed.login?.password == "new password")
        #expect(changed.with { $0.login?.password = original.login?.password } == original)
    }
}
