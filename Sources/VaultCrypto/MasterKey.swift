#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Crypto

/// The 32-byte key derived from the master password (spec §1.2–§1.4, §1.8).
///
/// It never leaves the device and is never stored: the server gets the ``serverAuthorizationHash(password:)``,
/// the local profile keeps the ``localAuthorizationHash(password:)`` for offline unlock, and the key
/// itself only unwraps the user key.
public struct MasterKey: Sendable {
    let key: SymmetricKey

    /// Wraps 32 raw bytes (for tests and known-answer vectors).
    public init<Bytes: DataProtocol>(bytes: Bytes) throws {
        guard bytes.count == 32 else { throw CryptoError.wrongKeySize(expected: [32], actual: bytes.count) }
        key = SymmetricKey(data: Array(bytes))
    }

    /// Derives the master key. The salt (normally the account email) is trimmed and lowercased first,
    /// as the Bitwarden SDK does.
    public static func derive(password: String, salt: String, kdf: KdfConfiguration) throws -> MasterKey {
        let normalised = normaliseSalt(salt)
        let derived = try kdf.derive(password: Array(password.utf8), salt: Array(normalised.utf8))
        return MasterKey(key: derived)
    }

    private init(key: SymmetricKey) { self.key = key }

    /// The key of a password-protected export (docs/PROTOCOL.md "Password-protected export"): the KDF
    /// over `password` with the export's `salt` *text* (its base64 characters, neither decoded nor
    /// normalised) as salt, stretched like a master key (HKDF-Expand "enc" and "mac").
    public static func passwordProtectedExportKey(password: String, salt: String, kdf: KdfConfiguration) throws -> SymmetricCryptoKey {
        let derived = try kdf.derive(password: Array(password.utf8), salt: Array(salt.utf8))
        return MasterKey(key: derived).stretched()
    }

    /// `email.trim().lowercased()`.
    public static func normaliseSalt(_ salt: String) -> String {
        let trimmed = salt.drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed()
        return String(trimmed).lowercased()
    }

    /// The purposes of a master-password hash.
    public enum HashPurpose: Int, Sendable {
        /// 1 iteration: sent to the server as the login password and at registration.
        case serverAuthorization = 1
        /// 2 iterations: stored locally to check the password while offline.
        case localAuthorization = 2
    }

    /// `base64(PBKDF2-SHA256(masterKey, salt: password, iterations: purpose))`.
    public func passwordHash(password: String, purpose: HashPurpose) -> String {
        let derived = key.withUnsafeBytes { raw in
            // 1 or 2 iterations over 32 key bytes cannot fail.
            try! PBKDF2SHA256.derive(password: Array(raw), salt: Array(password.utf8), iterations: purpose.rawValue)
        }
        return derived.withUnsafeBytes { Data($0).base64EncodedString() }
    }

    /// The hash sent to the server (1 iteration).
    public func serverAuthorizationHash(password: String) -> String {
        passwordHash(password: password, purpose: .serverAuthorization)
    }

    /// The hash kept on the device for offline unlock (2 iterations).
    public func localAuthorizationHash(password: String) -> String {
        passwordHash(password: password, purpose: .localAuthorization)
    }

    /// The stretched master key: HKDF-Expand-SHA256 (no extract) with info "enc" and "mac" (spec §1.4).
    public func stretched() -> SymmetricCryptoKey {
        let enc = HKDF<SHA256>.expand(pseudoRandomKey: key, info: Array("enc".utf8), outputByteCount: 32)
        let mac = HKDF<SHA256>.expand(pseudoRandomKey: key, info: Array("mac".utf8), outputByteCount: 32)
        var bytes = enc.withUnsafeBytes { Array($0) } + mac.withUnsafeBytes { Array($0) }
        defer { bytes.withUnsafeMutableBytes { zero($0) } }
        return try! SymmetricCryptoKey(bytes: bytes)
    }

    /// A key of this device's own, derived from the master key for one `purpose` (HKDF-Expand-SHA256
    /// with info "vaultsync:" + purpose + ":enc" and ":mac"): something kept across logouts that only
    /// whoever knows the master password can open, such as the "remember this device" token of
    /// two-step login (docs/SECURITY.md). Different purposes give unrelated keys, and none equals
    /// the stretched key that protects the user key.
    public func purposeKey(_ purpose: String) -> SymmetricCryptoKey {
        let enc = HKDF<SHA256>.expand(pseudoRandomKey: key, info: Array("vaultsync:\(purpose):enc".utf8), outputByteCount: 32)
        let mac = HKDF<SHA256>.expand(pseudoRandomKey: key, info: Array("vaultsync:\(purpose):mac".utf8), outputByteCount: 32)
        var bytes = enc.withUnsafeBytes { Array($0) } + mac.withUnsafeBytes { Array($0) }
        defer { bytes.withUnsafeMutableBytes { zero($0) } }
        return try! SymmetricCryptoKey(bytes: bytes)
    }

    /// Unwraps the protected user key (spec §1.8): type 2 with the stretched key, legacy type 0 with the
    /// raw master key.
    /// - Throws: ``CryptoError/wrongPassword`` when the MAC fails (the usual sign of a wrong password),
    ///   ``CryptoError/unsupportedAccountEncryptionVersion`` for a V2 key.
    public func decryptUserKey(_ protectedKey: EncString) throws -> SymmetricCryptoKey {
        do {
            switch protectedKey.type {
            case .aesCbc256HmacSha256B64:
                return try protectedKey.decryptKey(key: stretched())
            case .aesCbc256B64:
                let raw = try SymmetricCryptoKey(bytes: key.withUnsafeBytes { Array($0) })
                return try protectedKey.decryptKey(key: raw)
            default:
                throw CryptoError.unsupportedEncryptionType(protectedKey.type.rawValue)
            }
        } catch CryptoError.macMismatch {
            throw CryptoError.wrongPassword
        } catch CryptoError.decryptionFailed {
            // A type 0 key has no MAC: a wrong password shows up as bad padding or a wrong length.
            throw CryptoError.wrongPassword
        } catch CryptoError.wrongKeySize where protectedKey.type == .aesCbc256B64 {
            throw CryptoError.wrongPassword
        }
    }

    /// Wraps a user key with the stretched master key (type 2), as sent at registration.
    public func encryptUserKey(_ userKey: SymmetricCryptoKey, random: any RandomSource = SystemRandomSource()) throws -> EncString {
        try EncString.wrap(userKey, with: stretched(), random: random)
    }
}

extension MasterKey: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String { "MasterKey(redacted)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
