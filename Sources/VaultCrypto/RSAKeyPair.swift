#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Crypto
import _CryptoExtras

/// An RSA public key used to wrap keys for sharing (organization keys, spec §1.9).
///
/// Stored as its DER bytes (swift-crypto's RSA encryption keys are not `Sendable`); the BoringSSL key is
/// rebuilt for each use, which costs far less than the RSA operation itself.
public struct RSAPublicKey: Sendable {
    /// DER SubjectPublicKeyInfo.
    public let spkiDER: Data

    var key: _RSA.Encryption.PublicKey {
        // Validated at init.
        try! _RSA.Encryption.PublicKey(unsafeDERRepresentation: spkiDER)
    }

    /// Reads a DER SubjectPublicKeyInfo (as sent in `keys.publicKey`, base64-decoded).
    public init<Bytes: DataProtocol>(spkiDER: Bytes) throws {
        do {
            let parsed = try _RSA.Encryption.PublicKey(unsafeDERRepresentation: spkiDER)
            self.spkiDER = parsed.derRepresentation
        } catch {
            throw CryptoError.invalidRSAKey("the public key is not a DER SubjectPublicKeyInfo")
        }
    }

    /// Reads the base64 of a DER SubjectPublicKeyInfo.
    public init(spkiBase64: String) throws {
        guard let der = Data(base64Encoded: spkiBase64) else {
            throw CryptoError.invalidRSAKey("the public key is not valid base64")
        }
        try self.init(spkiDER: der)
    }

    init(_ key: _RSA.Encryption.PublicKey) { spkiDER = key.derRepresentation }

    /// base64 of the DER SubjectPublicKeyInfo (the wire `publicKey`).
    public var spkiBase64: String { spkiDER.base64EncodedString() }

    /// Wraps a 64-byte key for the owner of this public key: RSA-OAEP-SHA1, EncString type 4.
    public func wrap(_ keyToWrap: SymmetricCryptoKey) throws -> EncString {
        let ciphertext: Data
        do {
            ciphertext = try keyToWrap.withUnsafeBytes { try key.encrypt($0, padding: .PKCS1_OAEP) }
        } catch {
            throw CryptoError.invalidRSAKey("RSA-OAEP encryption failed")
        }
        return try EncString(type: .rsa2048OaepSha1B64, iv: nil, ciphertext: ciphertext, mac: nil)
    }
}

/// An RSA private key (the account's key pair, spec §1.9). Never printed.
///
/// Stored as PKCS#8 DER bytes for the same reason as ``RSAPublicKey``.
public struct RSAPrivateKey: Sendable {
    /// PKCS#8 DER of the private key (what gets encrypted with the user key at registration).
    public let pkcs8DER: Data

    var key: _RSA.Encryption.PrivateKey {
        // Validated at init.
        try! _RSA.Encryption.PrivateKey(unsafeDERRepresentation: pkcs8DER)
    }

    /// A new RSA-2048 key pair with e = 65537.
    public static func generate() throws -> RSAPrivateKey {
        do {
            return try RSAPrivateKey(key: _RSA.Encryption.PrivateKey(keySize: .bits2048))
        } catch {
            throw CryptoError.invalidRSAKey("key generation failed")
        }
    }

    /// Reads a PKCS#8 DER private key (the decrypted `privateKey` of an account).
    public init<Bytes: DataProtocol>(pkcs8DER: Bytes) throws {
        let parsed: _RSA.Encryption.PrivateKey
        do {
            parsed = try _RSA.Encryption.PrivateKey(unsafeDERRepresentation: pkcs8DER)
        } catch {
            throw CryptoError.invalidRSAKey("the private key is not PKCS#8 DER")
        }
        try self.init(key: parsed)
    }

    /// Reads a PEM private key.
    public init(pem: String) throws {
        let parsed: _RSA.Encryption.PrivateKey
        do {
            parsed = try _RSA.Encryption.PrivateKey(unsafePEMRepresentation: pem)
        } catch {
            throw CryptoError.invalidRSAKey("the private key is not a PEM RSA key")
        }
        try self.init(key: parsed)
    }

    private init(key: _RSA.Encryption.PrivateKey) throws {
        // swift-crypto exposes PKCS#8 only as PEM for encryption keys; its body is the DER.
        let body = key.pkcs8PEMRepresentation
            .split(separator: "\n")
            .filter { !$0.hasPrefix("-----") }
            .joined()
        guard let der = Data(base64Encoded: body) else { throw CryptoError.invalidRSAKey("could not export PKCS#8") }
        pkcs8DER = der
    }

    /// The matching public key.
    public var publicKey: RSAPublicKey { RSAPublicKey(key.publicKey) }

    /// Unwraps a key wrapped for this key pair: EncString types 3 and 4 (OAEP with SHA-256 or SHA-1),
    /// and the deprecated 5 and 6 (whose MAC part is ignored). Only a 64-byte key is accepted (an
    /// organization key always has 64 bytes; a 32-byte one would open unauthenticated strings).
    public func unwrapKey(_ encString: EncString) throws -> SymmetricCryptoKey {
        try SymmetricCryptoKey(wrappedKeyBytes: decrypt(encString))
    }

    /// Decrypts an RSA EncString.
    public func decrypt(_ encString: EncString) throws -> Data {
        let padding: _RSA.Encryption.Padding
        switch encString.type {
        case .rsa2048OaepSha256B64, .rsa2048OaepSha256HmacSha256B64: padding = .PKCS1_OAEP_SHA256
        case .rsa2048OaepSha1B64, .rsa2048OaepSha1HmacSha256B64: padding = .PKCS1_OAEP
        default: throw CryptoError.unsupportedEncryptionType(encString.type.rawValue)
        }
        do {
            return try key.decrypt(encString.ciphertext, padding: padding)
        } catch {
            throw CryptoError.decryptionFailed("RSA-OAEP decryption failed (wrong key or damaged data)")
        }
    }

    /// The private key encrypted with the user key, as sent in `keys.encryptedPrivateKey`.
    public func encrypted(with userKey: SymmetricCryptoKey, random: any RandomSource = SystemRandomSource()) throws -> EncString {
        try EncString.encrypt(pkcs8DER, key: userKey, random: random)
    }

    /// Decrypts an account's `privateKey` EncString with the user key.
    public static func decrypt(_ encrypted: EncString, userKey: SymmetricCryptoKey) throws -> RSAPrivateKey {
        try RSAPrivateKey(pkcs8DER: encrypted.decrypt(key: userKey))
    }
}

extension RSAPrivateKey: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String { "RSAPrivateKey(\(key.keySizeInBits) bits, redacted)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
