#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Crypto

/// A symmetric key as Bitwarden uses it (spec §1.5).
///
/// * 64 bytes: AES-256-CBC-HMAC-SHA256 key, `enc = bytes[0..<32]`, `mac = bytes[32..<64]`. The user key,
///   item keys, attachment keys and organization keys have this form.
/// * 32 bytes: a legacy key without MAC half; only the raw master key (type 0 protected user key) and
///   legacy type 1 data use it.
///
/// The bytes live in swift-crypto's `SymmetricKey`, whose storage is zeroed when freed. The key never
/// prints its bytes: `description`, `debugDescription` and the mirror are redacted.
public struct SymmetricCryptoKey: Sendable {
    /// The whole key (32 or 64 bytes).
    let full: SymmetricKey
    /// The AES key: the first 32 bytes of a 64-byte key, or the whole 32-byte legacy key.
    let encryptionKey: SymmetricKey
    /// The HMAC key: the last 32 bytes of a 64-byte key; `nil` for a 32-byte legacy key.
    let macKey: SymmetricKey?
    /// HMAC-SHA256 keyed with ``macKey`` and fed nothing yet: each MAC with this key starts from a copy
    /// (swift-crypto's hash states copy themselves on first write), instead of deriving the two padded key
    /// states again for every field (a list of a large vault computes three MACs per item: docs/BENCHMARKS.md,
    /// measured 2026-11-27). `nil` for a 32-byte key.
    let macTemplate: HMAC<SHA256>?

    /// Creates a key from its raw bytes (32 or 64).
    /// - Throws: ``CryptoError/wrongKeySize(expected:actual:)`` for any other length.
    public init<Bytes: DataProtocol>(bytes: Bytes) throws {
        let raw = [UInt8](bytes)
        switch raw.count {
        case 64:
            full = SymmetricKey(data: raw)
            encryptionKey = SymmetricKey(data: raw[0..<32])
            let mac = SymmetricKey(data: raw[32..<64])
            macKey = mac
            macTemplate = HMAC<SHA256>(key: mac)
        case 32:
            full = SymmetricKey(data: raw)
            encryptionKey = full
            macKey = nil
            macTemplate = nil
        case 65...:
            // Padded COSE keys of V2 accounts are longer than 64 bytes.
            throw CryptoError.unsupportedAccountEncryptionVersion
        default:
            throw CryptoError.wrongKeySize(expected: [32, 64], actual: raw.count)
        }
    }

    /// Creates a key that was unwrapped from an EncString: 64 bytes only (a 32-byte key is refused,
    /// see ``EncString/decryptKey(key:)``; a longer one is a V2 account's key).
    public init<Bytes: DataProtocol>(wrappedKeyBytes bytes: Bytes) throws {
        guard bytes.count >= 64 else { throw CryptoError.wrongKeySize(expected: [64], actual: bytes.count) }
        try self.init(bytes: bytes)
    }

    /// Creates a key from its standard base64 form.
    public init(base64: String) throws {
        guard let data = Data(base64Encoded: base64) else {
            throw CryptoError.malformedEncString(part: "key", reason: "not valid base64")
        }
        try self.init(bytes: data)
    }

    /// A new random 64-byte key (user key, item key, attachment key, organization key).
    public static func generate(using random: any RandomSource = SystemRandomSource()) -> SymmetricCryptoKey {
        // A 64-byte input cannot fail the size check.
        try! SymmetricCryptoKey(bytes: random.bytes(count: 64))
    }

    /// Number of bytes in the key (32 or 64).
    public var byteCount: Int { full.bitCount / 8 }

    /// The raw key bytes, for wrapping the key inside an EncString. Handle with care.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try full.withUnsafeBytes(body)
    }

    /// The raw bytes as `Data` (a copy; callers should not keep it around).
    public var rawBytes: Data { full.withUnsafeBytes { Data($0) } }

    /// Standard base64 of the raw bytes (how Bitwarden exports keys).
    public var base64: String { rawBytes.base64EncodedString() }
}

extension SymmetricCryptoKey: Equatable {
    /// Constant-time comparison of the key bytes.
    public static func == (lhs: SymmetricCryptoKey, rhs: SymmetricCryptoKey) -> Bool {
        lhs.full == rhs.full
    }
}

extension SymmetricCryptoKey: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String { "SymmetricCryptoKey(\(byteCount) bytes, redacted)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
