#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Crypto
import _CryptoExtras

/// A binary EncString (type 2: one type byte, the 16-byte IV, the 32-byte MAC, then the ciphertext;
/// docs/PROTOCOL.md, "Attachments (client)") made or opened piece by piece, for files too large to hold
/// in memory. The bytes are exactly those of ``EncString/encrypt(_:key:iv:)`` and ``EncString/binary()``
/// (AES-256-CBC chained across pieces: each piece is encrypted with the previous piece's last ciphertext
/// block as its IV; PKCS #7 padding on the last piece only; HMAC-SHA256 over IV ‖ ciphertext), checked
/// against the one-shot functions in `StreamingEncryptionTests`. The MAC comes before the ciphertext in
/// the layout, so a writer leaves room for the header and fills it in once the last piece is done.
public struct StreamingEncryptor: Sendable {
    /// The length of the header: type byte, IV, MAC.
    public static let headerLength = 1 + 16 + 32

    private let encryptionKey: SymmetricKey
    private var hmac: HMAC<SHA256>
    private var chain: [UInt8]
    private var pending: [UInt8] = []
    public let iv: [UInt8]
    /// Ciphertext bytes produced so far.
    public private(set) var ciphertextLength = 0

    public init(key: SymmetricCryptoKey, random: any RandomSource = SystemRandomSource()) throws {
        try self.init(key: key, iv: random.bytes(count: 16))
    }

    /// With a caller-chosen IV: for known-answer tests only.
    public init(key: SymmetricCryptoKey, iv: [UInt8]) throws {
        guard let macKey = key.macKey else { throw CryptoError.wrongKeySize(expected: [64], actual: key.byteCount) }
        guard iv.count == 16 else { throw CryptoError.malformedEncString(part: "iv", reason: "must be 16 bytes, got \(iv.count)") }
        encryptionKey = key.encryptionKey
        hmac = HMAC<SHA256>(key: macKey)
        hmac.update(data: iv)
        self.iv = iv
        chain = iv
    }

    /// Encrypts the next piece of plaintext; returns the ciphertext of every whole block so far.
    public mutating func update<Plaintext: DataProtocol>(_ plaintext: Plaintext) throws -> [UInt8] {
        pending.append(contentsOf: plaintext)
        let whole = pending.count / 16 * 16
        guard whole > 0 else { return [] }
        let out = try encrypt(pending[..<whole], padding: false)
        pending.removeFirst(whole)
        return out
    }

    /// Encrypts what is left with its padding; returns the last ciphertext and the MAC.
    public mutating func finish() throws -> (ciphertext: [UInt8], mac: [UInt8]) {
        let out = try encrypt(pending[...], padding: true)
        pending = []
        return (out, Array(hmac.finalize()))
    }

    /// The header of the finished file: type 2, the IV, the MAC.
    public func header(mac: [UInt8]) -> [UInt8] {
        [UInt8(EncryptionType.aesCbc256HmacSha256B64.rawValue)] + iv + mac
    }

    private mutating func encrypt(_ bytes: ArraySlice<UInt8>, padding: Bool) throws -> [UInt8] {
        let out: [UInt8]
        do {
            out = Array(try AES._CBC.encrypt(bytes, using: encryptionKey, iv: AES._CBC.IV(ivBytes: chain), noPadding: !padding))
        } catch {
            throw CryptoError.decryptionFailed("AES-CBC encryption failed: \(error)")
        }
        hmac.update(data: out)
        ciphertextLength += out.count
        if out.count >= 16 { chain = Array(out.suffix(16)) }
        return out
    }
}

/// Checks a binary EncString's MAC piece by piece (before anything of it is decrypted: encrypt-then-MAC).
public struct StreamingVerifier: Sendable {
    private var hmac: HMAC<SHA256>
    private let expected: [UInt8]

    /// `header`: the file's first ``StreamingEncryptor/headerLength`` bytes.
    public init(key: SymmetricCryptoKey, header: [UInt8]) throws {
        guard let macKey = key.macKey else { throw CryptoError.wrongKeySize(expected: [64], actual: key.byteCount) }
        try Self.checkHeader(header)
        hmac = HMAC<SHA256>(key: macKey)
        hmac.update(data: header[1..<17])
        expected = Array(header[17..<49])
    }

    public mutating func update<Ciphertext: DataProtocol>(_ ciphertext: Ciphertext) {
        hmac.update(data: ciphertext)
    }

    /// Throws ``CryptoError/macMismatch`` unless the MAC matches (compared in constant time).
    public func verify() throws {
        guard hmac.finalize() == Data(expected) else { throw CryptoError.macMismatch }
    }

    static func checkHeader(_ header: [UInt8]) throws {
        guard header.count == StreamingEncryptor.headerLength, header[0] == UInt8(EncryptionType.aesCbc256HmacSha256B64.rawValue) else {
            throw CryptoError.malformedEncString(part: "header", reason: "not a type 2 binary EncString")
        }
    }
}

/// Decrypts a binary EncString piece by piece, once its MAC was verified (``StreamingVerifier``).
public struct StreamingDecryptor: Sendable {
    private let encryptionKey: SymmetricKey
    private var chain: [UInt8]
    private var pending: [UInt8] = []

    public init(key: SymmetricCryptoKey, header: [UInt8]) throws {
        guard key.macKey != nil else { throw CryptoError.wrongKeySize(expected: [64], actual: key.byteCount) }
        try StreamingVerifier.checkHeader(header)
        encryptionKey = key.encryptionKey
        chain = Array(header[1..<17])
    }

    /// Decrypts the next piece of ciphertext; the last block is held back for its padding.
    public mutating func update<Ciphertext: DataProtocol>(_ ciphertext: Ciphertext) throws -> [UInt8] {
        pending.append(contentsOf: ciphertext)
        let ready = (pending.count - 1) / 16 * 16
        guard ready > 0 else { return [] }
        let out = try decrypt(pending[..<ready], padding: false)
        pending.removeFirst(ready)
        return out
    }

    /// The last block, its padding removed.
    public mutating func finish() throws -> [UInt8] {
        guard pending.count == 16 else { throw CryptoError.decryptionFailed("the ciphertext is not a whole number of blocks") }
        return try decrypt(pending[...], padding: true)
    }

    private mutating func decrypt(_ bytes: ArraySlice<UInt8>, padding: Bool) throws -> [UInt8] {
        let next = Array(bytes.suffix(16))
        do {
            let out = Array(try AES._CBC.decrypt(bytes, using: encryptionKey, iv: AES._CBC.IV(ivBytes: chain), noPadding: !padding))
            chain = next
            return out
        } catch {
            throw CryptoError.decryptionFailed("the ciphertext did not decrypt to valid padded data")
        }
    }
}

/// The plaintext length of a binary EncString, which its encrypted length tells only to within one
/// block: PKCS #7 adds 1 to 16 bytes, and which it was is known once the last block is decrypted.
public enum EncryptedFileLength {
    /// The lengths a plaintext encrypted to `encryptedLength` bytes can have; `nil` when no binary
    /// EncString has that length (shorter than a header and one block, or not whole blocks).
    public static func plaintextLengths(encryptedLength: Int) -> ClosedRange<Int>? {
        let ciphertext = encryptedLength - StreamingEncryptor.headerLength
        guard ciphertext >= 16, ciphertext % 16 == 0 else { return nil }
        return (ciphertext - 16)...(ciphertext - 1)
    }

    /// The exact plaintext length, from the file's header, its last 32 bytes (its last 16 when the
    /// ciphertext is one block) and its length: only the last block is decrypted, for its padding.
    /// The MAC is not checked here, so the answer is for showing a size only; the contents are
    /// verified whenever they are read.
    public static func plaintextLength(key: SymmetricCryptoKey, header: [UInt8], tail: [UInt8], encryptedLength: Int) throws -> Int {
        guard let range = plaintextLengths(encryptedLength: encryptedLength) else {
            throw CryptoError.malformedEncString(part: "length", reason: "\(encryptedLength) bytes is not a header and whole blocks")
        }
        try StreamingVerifier.checkHeader(header)
        let oneBlock = range.lowerBound == 0
        guard tail.count == (oneBlock ? 16 : 32) else {
            throw CryptoError.malformedEncString(part: "tail", reason: "expected \(oneBlock ? 16 : 32) bytes, got \(tail.count)")
        }
        let chain = oneBlock ? Array(header[1..<17]) : Array(tail.prefix(16))
        let last: [UInt8]
        do {
            last = Array(try AES._CBC.decrypt(tail.suffix(16), using: key.encryptionKey, iv: AES._CBC.IV(ivBytes: chain)))
        } catch {
            throw CryptoError.decryptionFailed("the last block did not decrypt to valid padding")
        }
        return range.lowerBound + last.count
    }
}
