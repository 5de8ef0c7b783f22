import Foundation
import Testing
@testable import VaultCrypto

@Suite("Typed crypto errors: never a crash, never a silent empty string")
struct CryptoErrorTests {
    let key = SymmetricCryptoKey.generate()

    @Test("a wrong master password is reported as wrongPassword")
    func wrongPassword() throws {
        let kdf = KdfConfiguration.pbkdf2(iterations: 5_000)
        let right = try MasterKey.derive(password: "correct horse", salt: "a@b.c", kdf: kdf)
        let protected = try right.encryptUserKey(key)
        #expect(try right.decryptUserKey(protected) == key)
        let wrong = try MasterKey.derive(password: "battery staple", salt: "a@b.c", kdf: kdf)
        #expect(throws: CryptoError.wrongPassword) { try wrong.decryptUserKey(protected) }
    }

    @Test("a tampered MAC, IV or ciphertext fails the MAC check before decryption", arguments: [0, 1, 2])
    func tampered(part: Int) throws {
        let good = try EncString.encrypt("secret", key: key)
        var parts = [good.iv!, good.ciphertext, good.mac!]
        var bytes = [UInt8](parts[part])
        bytes[bytes.count - 1] ^= 0x01
        parts[part] = Data(bytes)
        let bad = try EncString(type: .aesCbc256HmacSha256B64, iv: parts[0], ciphertext: parts[1], mac: parts[2])
        #expect(throws: CryptoError.macMismatch) { try bad.decryptString(key: key) }
    }

    @Test("malformed EncStrings name the bad part", arguments: [
        ("2.AAAA", "body"),                                    // wrong part count
        ("2.a|b|c|d", "body"),                                 // too many parts
        ("2.AAECAwQFBgcICQoLDA0ODw==|AAEC|", "mac"),           // empty part
        ("2.AAECAwQFBgcICQoLDA0ODw=|AAEC|AAEC", "iv"),         // truncated base64
        ("2.AAECAw==|AAECAwQFBgcICQoLDA0ODw==|AAECAwQFBgcICQoLDA0ODwABAgMEBQYHCAkKCwwNDg8=", "iv"), // IV length
        ("2.AAECAwQFBgcICQoLDA0ODw==|AAECAwQFBgcICQoLDA0ODw==|AAEC", "mac"), // MAC length
        ("2.AAECAwQFBgcICQoLDA0ODw==|AAEC|AAECAwQFBgcICQoLDA0ODwABAgMEBQYHCAkKCwwNDg8=", "ciphertext"), // not blocks
        ("x.AAAA", "header"),
        ("", "body"),
        ("3.", "ciphertext"),
    ])
    func malformed(text: String, part: String) {
        #expect {
            try EncString(text)
        } throws: { error in
            guard case CryptoError.malformedEncString(let badPart, _) = error else { return false }
            return badPart == part
        }
    }

    @Test("type 7 (COSE, V2 accounts) is detected and refused")
    func type7() {
        #expect(throws: CryptoError.unsupportedAccountEncryptionVersion) { try EncString("7.AAECAw==") }
        let message = CryptoError.unsupportedAccountEncryptionVersion.localizedDescription
        #expect(message.contains("nsupported account encryption version"))
    }

    @Test("legacy header-less strings parse as type 0 (two parts) or type 1 (three parts)")
    func headerless() throws {
        let iv = Data(repeating: 1, count: 16).base64EncodedString()
        let ct = Data(repeating: 2, count: 16).base64EncodedString()
        let mac = Data(repeating: 3, count: 32).base64EncodedString()
        #expect(try EncString("\(iv)|\(ct)").type == .aesCbc256B64)
        #expect(try EncString("\(iv)|\(ct)|\(mac)").type == .aesCbc128HmacSha256B64)
    }

    @Test("keys of the wrong size are refused", arguments: [0, 16, 31, 33, 63])
    func wrongKeySize(count: Int) {
        #expect(throws: CryptoError.wrongKeySize(expected: [32, 64], actual: count)) {
            try SymmetricCryptoKey(bytes: [UInt8](repeating: 0, count: count))
        }
    }

    @Test("encrypting needs a 64-byte key")
    func encryptNeedsMacKey() throws {
        let legacy = try SymmetricCryptoKey(bytes: [UInt8](repeating: 7, count: 32))
        #expect(throws: CryptoError.wrongKeySize(expected: [64], actual: 32)) { try EncString.encrypt("x", key: legacy) }
    }

    @Test("KDF parameters outside the limits are refused with a clear reason", arguments: [
        KdfConfiguration.pbkdf2(iterations: 4_999),
        .pbkdf2(iterations: 2_000_001),
        .argon2id(iterations: 1, memoryMiB: 64, parallelism: 4),
        .argon2id(iterations: 3, memoryMiB: 15, parallelism: 4),
        .argon2id(iterations: 3, memoryMiB: 64, parallelism: 0),
        .argon2id(iterations: 3, memoryMiB: 2048, parallelism: 4),
    ])
    func kdfLimits(kdf: KdfConfiguration) {
        #expect {
            try MasterKey.derive(password: "p", salt: "s", kdf: kdf)
        } throws: { error in
            guard case CryptoError.invalidKdfParameters(let reason) = error else { return false }
            return reason.contains("minimum") || reason.contains("maximum")
        }
    }

    @Test("wire KDF fields are validated", arguments: [(0, 600_000, nil, nil, true), (1, 3, 64, 4, true), (1, 3, nil, 4, false), (2, 1, nil, nil, false)] as [(Int, Int, Int?, Int?, Bool)])
    func wireKdf(type: Int, iterations: Int, memory: Int?, parallelism: Int?, valid: Bool) {
        let result = Result { try KdfConfiguration(type: type, iterations: iterations, memoryMiB: memory, parallelism: parallelism) }
        let succeeded = (try? result.get()) != nil
        #expect(succeeded == valid)
    }

    @Test("keys never print their bytes")
    func redaction() throws {
        let master = try MasterKey(bytes: [UInt8](repeating: 0x41, count: 32))
        let privateKey = try RSAPrivateKey(pem: TestAccount.tv10PrivateKeyPEM)
        for text in [String(describing: key), String(reflecting: key), "\(master)", String(reflecting: master), "\(privateKey)"] {
            #expect(text.contains("redacted"))
            #expect(!text.contains(key.base64))
            #expect(!text.contains("QUFB"))
        }
        var dumped = ""
        dump(key, to: &dumped)
        #expect(!dumped.contains(key.base64))
    }

    @Test("empty strings and unicode round-trip; an empty string is one block")
    func roundTrip() throws {
        for text in ["", "päss wörd 🔐", String(repeating: "x", count: 10_000)] {
            let encrypted = try EncString.encrypt(text, key: key)
            #expect(try EncString(encrypted.serialized).decryptString(key: key) == text)
        }
        #expect(try EncString.encrypt("", key: key).ciphertext.count == 16)
    }

    @Test("two encryptions of the same text differ (random IV)")
    func randomIV() throws {
        #expect(try EncString.encrypt("same", key: key) != EncString.encrypt("same", key: key))
    }

    @Test("RSA key pairs wrap and unwrap keys; SPKI and PKCS#8 round-trip through the user key")
    func rsaRoundTrip() throws {
        let pair = try RSAPrivateKey.generate()
        let spki = pair.publicKey.spkiBase64
        #expect(spki.hasPrefix("MIIBIjANBgkqhkiG9w0BAQEF"))
        let userKey = SymmetricCryptoKey.generate()
        let encryptedPrivate = try pair.encrypted(with: userKey)
        let restored = try RSAPrivateKey.decrypt(encryptedPrivate, userKey: userKey)
        #expect(restored.publicKey.spkiBase64 == spki)
        let orgKey = SymmetricCryptoKey.generate()
        let wrapped = try RSAPublicKey(spkiBase64: spki).wrap(orgKey)
        #expect(wrapped.type == .rsa2048OaepSha1B64)
        #expect(try restored.unwrapKey(EncString(wrapped.serialized)) == orgKey)
        let other = try RSAPrivateKey.generate()
        #expect(throws: CryptoError.self) { try other.unwrapKey(wrapped) }
    }

    @Test("binary EncStrings refuse truncated input")
    func binaryTruncated() {
        #expect(throws: CryptoError.self) { try EncString(binary: Data()) }
        #expect(throws: CryptoError.self) { try EncString(binary: Data([2] + [UInt8](repeating: 0, count: 40))) }
        #expect(throws: CryptoError.self) { try EncString(binary: Data([9, 1, 2])) }
    }
}

@Suite("Legacy encryption: 32-byte keys and type 0 strings only where the protocol needs them")
struct LegacyEncryptionTests {
    @Test("a wrapped 32-byte key is refused, so nothing can open unauthenticated type 0 strings with it")
    func shortWrappedKey() throws {
        let userKey = SymmetricCryptoKey.generate()
        let short = try SymmetricCryptoKey(bytes: [UInt8](repeating: 9, count: 32))
        let wrapped = try short.withUnsafeBytes { try EncString.encrypt($0, key: userKey) }
        #expect(throws: CryptoError.wrongKeySize(expected: [64], actual: 32)) { try wrapped.decryptKey(key: userKey) }
        // A 64-byte key unwraps as before.
        let item = SymmetricCryptoKey.generate()
        #expect(try EncString.wrap(item, with: userKey).decryptKey(key: userKey) == item)
    }

    @Test("an organization key of 32 bytes wrapped with RSA is refused")
    func shortOrganizationKey() throws {
        let pair = try RSAPrivateKey.generate()
        let short = try SymmetricCryptoKey(bytes: [UInt8](repeating: 3, count: 32))
        let wrapped = try pair.publicKey.wrap(short)
        #expect(throws: CryptoError.wrongKeySize(expected: [64], actual: 32)) { try pair.unwrapKey(wrapped) }
        let full = SymmetricCryptoKey.generate()
        #expect(try pair.unwrapKey(try pair.publicKey.wrap(full)) == full)
    }

    @Test("type 0 never decrypts with a 64-byte key; the legacy master-key path still opens a type 0 user key")
    func typeZero() throws {
        let key = SymmetricCryptoKey.generate()
        let legacy = try EncString("0.AAECAwQFBgcICQoLDA0ODw==|AAECAwQFBgcICQoLDA0ODw==")
        #expect(throws: CryptoError.wrongKeyType(encryptionType: 0, keyBytes: 64)) { try legacy.decrypt(key: key) }
    }
}
