#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Crypto
import _CryptoExtras

// AES-CBC + HMAC-SHA256 EncStrings (spec §1.7). Primitives come from swift-crypto (BoringSSL);
// this file only composes them in Bitwarden's encrypt-then-MAC layout.

extension EncString {
    /// Encrypts bytes into a type 2 EncString with a random IV.
    /// - Throws: ``CryptoError/wrongKeySize(expected:actual:)`` unless the key has 64 bytes (enc ‖ mac).
    public static func encrypt<Plaintext: DataProtocol>(
        _ plaintext: Plaintext, key: SymmetricCryptoKey, random: any RandomSource = SystemRandomSource()
    ) throws -> EncString {
        try encrypt(plaintext, key: key, iv: random.bytes(count: 16))
    }

    /// Encrypts UTF-8 text into a type 2 EncString with a random IV.
    public static func encrypt(
        _ text: String, key: SymmetricCryptoKey, random: any RandomSource = SystemRandomSource()
    ) throws -> EncString {
        try encrypt(Array(text.utf8), key: key, iv: random.bytes(count: 16))
    }

    /// Encrypts with a caller-chosen IV. Only known-answer tests should choose the IV; reusing an IV
    /// with the same key leaks information.
    public static func encrypt<Plaintext: DataProtocol>(
        _ plaintext: Plaintext, key: SymmetricCryptoKey, iv: [UInt8]
    ) throws -> EncString {
        guard var hmac = key.macTemplate else {
            throw CryptoError.wrongKeySize(expected: [64], actual: key.byteCount)
        }
        guard iv.count == 16 else {
            throw CryptoError.malformedEncString(part: "iv", reason: "must be 16 bytes, got \(iv.count)")
        }
        let ciphertext: Data
        do {
            ciphertext = try AES._CBC.encrypt(plaintext, using: key.encryptionKey, iv: AES._CBC.IV(ivBytes: iv))
        } catch {
            throw CryptoError.decryptionFailed("AES-CBC encryption failed: \(error)")
        }
        hmac.update(data: iv)
        hmac.update(data: ciphertext)
        let mac = Data(hmac.finalize())
        return try EncString(type: .aesCbc256HmacSha256B64, iv: Data(iv), ciphertext: ciphertext, mac: mac)
    }

    /// Decrypts a symmetric EncString (types 0, 1, 2).
    ///
    /// For types 1 and 2 the MAC over `iv ‖ ciphertext` is verified in constant time before any
    /// decryption. Type 0 (no MAC) is accepted only with a 32-byte key: offering a 64-byte key is the
    /// downgrade the SDK refuses (``CryptoError/wrongKeyType(encryptionType:keyBytes:)``).
    public func decrypt(key: SymmetricCryptoKey) throws -> Data {
        let parts = decoded()
        guard let iv = parts.iv else { throw CryptoError.unsupportedEncryptionType(type.rawValue) }
        let (ciphertext, mac, covered) = (parts.ciphertext, parts.mac, parts.ivAndCiphertext)
        let aesKey: SymmetricKey
        switch type {
        case .aesCbc256B64:
            guard key.macKey == nil else {
                throw CryptoError.wrongKeyType(encryptionType: 0, keyBytes: key.byteCount)
            }
            aesKey = key.encryptionKey
        case .aesCbc128HmacSha256B64:
            guard key.byteCount == 32, let mac else {
                throw CryptoError.wrongKeyType(encryptionType: 1, keyBytes: key.byteCount)
            }
            let raw = key.rawBytes
            aesKey = SymmetricKey(data: raw[0..<16])
            try Self.verifyMAC(mac, iv: iv, ciphertext: ciphertext, covered: covered, hmac: HMAC<SHA256>(key: SymmetricKey(data: raw[16..<32])))
        case .aesCbc256HmacSha256B64:
            guard let hmac = key.macTemplate, let mac else {
                throw CryptoError.wrongKeyType(encryptionType: 2, keyBytes: key.byteCount)
            }
            try Self.verifyMAC(mac, iv: iv, ciphertext: ciphertext, covered: covered, hmac: hmac)
            aesKey = key.encryptionKey
        default:
            throw CryptoError.unsupportedEncryptionType(type.rawValue)
        }
        do {
            return try AES._CBC.decrypt(ciphertext, using: aesKey, iv: AES._CBC.IV(ivBytes: iv))
        } catch {
            // Only reachable after a valid MAC (or for unauthenticated type 0): wrong key or bad padding.
            throw CryptoError.decryptionFailed("the ciphertext did not decrypt to valid padded data")
        }
    }

    /// Decrypts a symmetric EncString holding UTF-8 text.
    public func decryptString(key: SymmetricCryptoKey) throws -> String {
        let data = try decrypt(key: key)
        guard let text = String(validating: data, as: UTF8.self) else { throw CryptoError.invalidUTF8 }
        return text
    }

    /// Decrypts an EncString that wraps another 64-byte key (user, item, attachment or organization key).
    /// - Throws: ``CryptoError/wrongKeySize(expected:actual:)`` for a wrapped 32-byte key: such a key
    ///   has no MAC half and would open unauthenticated type 0 strings, so it is never accepted from
    ///   the server (only the raw master key is 32 bytes; docs/SECURITY.md, legacy encryption).
    public func decryptKey(key: SymmetricCryptoKey) throws -> SymmetricCryptoKey {
        try SymmetricCryptoKey(wrappedKeyBytes: decrypt(key: key))
    }

    /// Wraps a key (its raw bytes) in a type 2 EncString.
    public static func wrap(
        _ keyToWrap: SymmetricCryptoKey, with key: SymmetricCryptoKey, random: any RandomSource = SystemRandomSource()
    ) throws -> EncString {
        try keyToWrap.withUnsafeBytes { try encrypt($0, key: key, random: random) }
    }

    /// `hmac`: keyed, fed nothing yet (a copy of the key's template); `covered`: the IV and the ciphertext
    /// as one piece, when they are at hand that way.
    private static func verifyMAC(_ mac: Data, iv: Data, ciphertext: Data, covered: Data?, hmac: HMAC<SHA256>) throws {
        var hmac = hmac
        if let covered {
            hmac.update(data: covered)
        } else {
            hmac.update(data: iv)
            hmac.update(data: ciphertext)
        }
        // HashedAuthenticationCode's == is swift-crypto's constant-time comparison.
        guard hmac.finalize() == mac else { throw CryptoError.macMismatch }
    }
}
