#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Every way a cryptographic operation of VaultCrypto can fail.
///
/// Each case carries the context a user (or a log line) needs, and never a secret.
public enum CryptoError: Error, Sendable, Equatable {
    /// The master password did not unlock the account key.
    case wrongPassword
    /// The MAC of an EncString did not verify: the data was tampered with or belongs to another key.
    case macMismatch
    /// An EncString could not be parsed; `part` names the piece (header, iv, ciphertext, mac) and `reason` says why.
    case malformedEncString(part: String, reason: String)
    /// An EncString type this client cannot decrypt with the key it was given, or does not know at all.
    case unsupportedEncryptionType(Int)
    /// The account uses the newer (V2, COSE) key format.
    case unsupportedAccountEncryptionVersion
    /// A key had the wrong number of bytes.
    case wrongKeySize(expected: [Int], actual: Int)
    /// The key does not fit the EncString's type (for example a 64-byte key offered for a type 0 EncString).
    case wrongKeyType(encryptionType: Int, keyBytes: Int)
    /// KDF parameters below the client's minimums or above its maximums.
    case invalidKdfParameters(String)
    /// An RSA key could not be read or used.
    case invalidRSAKey(String)
    /// Decryption passed the MAC check but the plaintext could not be recovered.
    case decryptionFailed(String)
    /// A decrypted value was expected to be UTF-8 text and was not.
    case invalidUTF8
    /// A binary EncString (attachment body) was malformed.
    case malformedBinaryEncString(String)
}

extension CryptoError: LocalizedError {
    public var errorDescription: String? {
        switch self {
        case .wrongPassword:
            return "Invalid master password."
        case .macMismatch:
            return "The encrypted data failed its integrity check (MAC): it was damaged, tampered with, or encrypted with another key."
        case .malformedEncString(let part, let reason):
            return "Malformed encrypted string (\(part)): \(reason)."
        case .unsupportedEncryptionType(let type):
            return "Unsupported encryption type \(type)."
        case .unsupportedAccountEncryptionVersion:
            return "Unsupported account encryption version: this account uses the newer key format, which VaultSync does not support yet."
        case .wrongKeySize(let expected, let actual):
            let list = expected.map(String.init).joined(separator: " or ")
            return "Wrong key size: expected \(list) bytes, got \(actual)."
        case .wrongKeyType(let type, let bytes):
            return "A \(bytes)-byte key cannot decrypt an encryption type \(type) string."
        case .invalidKdfParameters(let reason):
            return "Invalid key derivation settings: \(reason)."
        case .invalidRSAKey(let reason):
            return "Invalid RSA key: \(reason)."
        case .decryptionFailed(let reason):
            return "Decryption failed: \(reason)."
        case .invalidUTF8:
            return "The decrypted value is not valid UTF-8 text."
        case .malformedBinaryEncString(let reason):
            return "Malformed encrypted file: \(reason)."
        }
    }
}

extension CryptoError: CustomStringConvertible {
    public var description: String { errorDescription ?? "CryptoError" }
}
