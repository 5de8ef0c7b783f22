#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The encryption types of an EncString (spec §1.6).
public enum EncryptionType: Int, Sendable, CaseIterable {
    /// AES-256-CBC without MAC (legacy; only for a master-key-protected user key).
    case aesCbc256B64 = 0
    /// AES-128-CBC with HMAC-SHA256 (legacy).
    case aesCbc128HmacSha256B64 = 1
    /// AES-256-CBC with HMAC-SHA256: the one VaultSync writes.
    case aesCbc256HmacSha256B64 = 2
    /// RSA-2048 OAEP with SHA-256.
    case rsa2048OaepSha256B64 = 3
    /// RSA-2048 OAEP with SHA-1: organization keys and sharing.
    case rsa2048OaepSha1B64 = 4
    /// RSA-2048 OAEP SHA-256 with an (ignored) MAC part; deprecated.
    case rsa2048OaepSha256HmacSha256B64 = 5
    /// RSA-2048 OAEP SHA-1 with an (ignored) MAC part; deprecated.
    case rsa2048OaepSha1HmacSha256B64 = 6

    /// Whether this type is decrypted with a symmetric key.
    public var isSymmetric: Bool { rawValue <= 2 }

    var header: StaticString {
        switch self {
        case .aesCbc256B64: return "0."
        case .aesCbc128HmacSha256B64: return "1."
        case .aesCbc256HmacSha256B64: return "2."
        case .rsa2048OaepSha256B64: return "3."
        case .rsa2048OaepSha1B64: return "4."
        case .rsa2048OaepSha256HmacSha256B64: return "5."
        case .rsa2048OaepSha1HmacSha256B64: return "6."
        }
    }

    var partNames: [String] {
        switch self {
        case .aesCbc256B64: return ["iv", "ciphertext"]
        case .aesCbc128HmacSha256B64, .aesCbc256HmacSha256B64: return ["iv", "ciphertext", "mac"]
        case .rsa2048OaepSha256B64, .rsa2048OaepSha1B64: return ["ciphertext"]
        case .rsa2048OaepSha256HmacSha256B64, .rsa2048OaepSha1HmacSha256B64: return ["ciphertext", "mac"]
        }
    }
}

/// An encrypted value in Bitwarden's string form, `<type>.<b64>[|<b64>…]` (spec §1.6).
///
/// An `EncString` is always well formed: ``init(_:)`` validates the header, the part count, the base64 of
/// every part and the IV and MAC lengths, and throws ``CryptoError`` naming the bad part otherwise.
/// ``serialized`` is the exact text it was parsed from, so a value read from the server is sent back
/// byte for byte. A parsed value keeps only its text (and its type): the parts are found and decoded
/// when read (validation is far more frequent than decryption: every cipher the server accepts, every
/// cached item read).
public struct EncString: Sendable, Hashable {
    /// The encryption type.
    public let type: EncryptionType
    /// The exact string form.
    public let serialized: String
    /// The decoded parts when they were at hand (an EncString assembled from bytes), else `nil`. A
    /// reference keeps the value small: cipher models hold dozens of EncStrings.
    private let assembled: Decoded?

    /// Where the base64 parts are in the UTF-8 text, in the type's part order.
    private struct PartRanges {
        var first: Range<Int> = 0..<0
        var second: Range<Int> = 0..<0
        var third: Range<Int> = 0..<0

        subscript(index: Int) -> Range<Int> { index == 0 ? first : index == 1 ? second : third }
    }

    /// Decoded byte counts of up to three parts (no array: this runs for every EncString parsed).
    private struct PartLengths {
        var values: (Int, Int, Int) = (0, 0, 0)

        subscript(index: Int) -> Int {
            get { index == 0 ? values.0 : index == 1 ? values.1 : values.2 }
            set {
                switch index {
                case 0: values.0 = newValue
                case 1: values.1 = newValue
                default: values.2 = newValue
                }
            }
        }
    }

    /// The parts, decoded: `iv` for symmetric types, `mac` for types 1, 2, 5 and 6. They may be slices of one
    /// buffer (indices not from 0): the public accessors hand out copies.
    final class Decoded: Sendable {
        let iv: Data?
        let ciphertext: Data
        let mac: Data?
        /// The IV and the ciphertext as one slice, what the MAC covers, when they were decoded into one
        /// buffer (`nil`: two pieces). Updating a MAC with one piece instead of two saves a generic call
        /// that cost more than the hashing of a short field.
        let ivAndCiphertext: Data?

        init(iv: Data?, ciphertext: Data, mac: Data?, ivAndCiphertext: Data? = nil) {
            self.iv = iv
            self.ciphertext = ciphertext
            self.mac = mac
            self.ivAndCiphertext = ivAndCiphertext
        }
    }

    /// The IV (16 bytes) for symmetric types, else `nil`.
    public var iv: Data? { decoded().iv.map { Data($0) } }
    /// The ciphertext.
    public var ciphertext: Data { Data(decoded().ciphertext) }
    /// The MAC (32 bytes for types 1 and 2; whatever was given for the ignored MAC of types 5 and 6).
    public var mac: Data? { decoded().mac.map { Data($0) } }

    /// All parts, decoded once (what decryption reads).
    func decoded() -> Decoded {
        if let assembled { return assembled }
        var text = serialized
        return text.withUTF8 { bytes in
            // Validated at parse time, so splitting and decoding cannot fail.
            let parts = EncString.split(bytes).parts
            func part(_ index: Int) -> UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(rebasing: bytes[parts[index]]) }
            func symmetric(mac: Bool) -> Decoded {
                // One buffer: IV ‖ ciphertext ‖ MAC, the parts slices of it.
                let (joined, ivEnd, ciphertextEnd) = Base64.decodeJoined(part(0), part(1), mac ? part(2) : nil)!
                let start = joined.startIndex
                return Decoded(iv: joined[start..<(start + ivEnd)], ciphertext: joined[(start + ivEnd)..<(start + ciphertextEnd)],
                               mac: mac ? joined[(start + ciphertextEnd)...] : nil, ivAndCiphertext: joined[start..<(start + ciphertextEnd)])
            }
            func part(_ index: Int) -> Data { Base64.decode(part(index))! }
            switch type {
            case .aesCbc256B64: return symmetric(mac: false)
            case .aesCbc128HmacSha256B64, .aesCbc256HmacSha256B64: return symmetric(mac: true)
            case .rsa2048OaepSha256B64, .rsa2048OaepSha1B64: return Decoded(iv: nil, ciphertext: part(0), mac: nil)
            case .rsa2048OaepSha256HmacSha256B64, .rsa2048OaepSha1HmacSha256B64: return Decoded(iv: nil, ciphertext: part(0), mac: part(1))
            }
        }
    }

    /// The header's dot (if any), the parts' ranges and how many parts there are (may exceed three).
    private static func split(_ bytes: UnsafeBufferPointer<UInt8>) -> (dot: Int?, parts: PartRanges, count: Int) {
        let dot = bytes.firstIndex(of: UInt8(ascii: "."))
        let bodyStart = dot.map { $0 + 1 } ?? 0
        var ranges = PartRanges()
        var partCount = 0
        var partStart = bodyStart
        guard let base = bytes.baseAddress else { return (dot, ranges, 1) }
        while true {
            // memchr: a sealed record can be megabytes long (the name index), and is split at every open.
            let found = partStart < bytes.count ? memchr(base + partStart, Int32(UInt8(ascii: "|")), bytes.count - partStart) : nil
            let index = found.map { base.distance(to: $0.assumingMemoryBound(to: UInt8.self)) } ?? bytes.count
            switch partCount {
            case 0: ranges.first = partStart..<index
            case 1: ranges.second = partStart..<index
            case 2: ranges.third = partStart..<index
            default: break
            }
            partCount += 1
            partStart = index + 1
            if found == nil { break }
        }
        return (dot, ranges, partCount)
    }

    public static func == (lhs: EncString, rhs: EncString) -> Bool { lhs.serialized == rhs.serialized }

    public func hash(into hasher: inout Hasher) { hasher.combine(serialized) }

    /// Parses an EncString.
    ///
    /// Accepts the legacy header-less form (3 parts ⇒ type 1, otherwise type 0).
    /// - Throws: ``CryptoError/unsupportedAccountEncryptionVersion`` for type 7 (COSE),
    ///   ``CryptoError/malformedEncString(part:reason:)`` for anything else that is not a valid EncString.
    public init(_ string: String) throws {
        var text = string
        let parsed = try text.withUTF8 { try EncString.parse($0) }
        self.type = parsed.type
        self.assembled = nil
        self.serialized = string
        try EncString.validateLengths(type: parsed.type, lengths: parsed.lengths)
    }

    /// Parses the UTF-8 bytes of an EncString (byte-level: no grapheme or `String` work on the hot path)
    /// into its type and its parts' decoded lengths, validating every part's base64.
    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>) throws -> (type: EncryptionType, lengths: PartLengths) {
        let (dot, ranges, partCount) = split(bytes)
        let type: EncryptionType
        if let dot {
            let header = String(decoding: UnsafeBufferPointer(rebasing: bytes[0..<dot]), as: UTF8.self)
            guard let number = Int(header) else {
                throw CryptoError.malformedEncString(part: "header", reason: "'\(header.prefix(8))' is not an encryption type number")
            }
            if number == 7 { throw CryptoError.unsupportedAccountEncryptionVersion }
            guard let known = EncryptionType(rawValue: number) else {
                throw CryptoError.malformedEncString(part: "header", reason: "invalid encryption type, got type \(number) with \(partCount) parts")
            }
            type = known
        } else {
            type = partCount == 3 ? .aesCbc128HmacSha256B64 : .aesCbc256B64
        }
        let names = type.partNames
        guard partCount == names.count else {
            throw CryptoError.malformedEncString(
                part: "body",
                reason: "type \(type.rawValue) needs \(names.count) parts (\(names.joined(separator: ", "))), got \(partCount)")
        }
        var lengths = PartLengths()
        for index in 0..<partCount {
            let range = ranges[index]
            guard !range.isEmpty else {
                throw CryptoError.malformedEncString(part: names[index], reason: "empty")
            }
            guard let length = Base64.validatedLength(UnsafeBufferPointer(rebasing: bytes[range])) else {
                throw CryptoError.malformedEncString(part: names[index], reason: "not valid base64")
            }
            lengths[index] = length
        }
        return (type, lengths)
    }

    /// Assembles an EncString from its parts and formats it.
    public init(type: EncryptionType, iv: Data?, ciphertext: Data, mac: Data?) throws {
        var parts: [Data] = []
        if type.isSymmetric {
            guard let iv else { throw CryptoError.malformedEncString(part: "iv", reason: "missing") }
            parts.append(iv)
        }
        parts.append(ciphertext)
        let hasMAC = type.partNames.last == "mac"
        if hasMAC {
            guard let mac else { throw CryptoError.malformedEncString(part: "mac", reason: "missing") }
            parts.append(mac)
        }
        var lengths = PartLengths()
        for (index, part) in parts.enumerated() { lengths[index] = part.count }
        try EncString.validateLengths(type: type, lengths: lengths)
        self.type = type
        self.serialized = Base64.join(prefix: type.header, parts: parts, separator: UInt8(ascii: "|"))
        self.assembled = Decoded(iv: type.isSymmetric ? iv : nil, ciphertext: ciphertext, mac: hasMAC ? mac : nil)
    }

    /// Checks IV, MAC and ciphertext lengths; `lengths` are the decoded parts' byte counts in the type's part order.
    private static func validateLengths(type: EncryptionType, lengths: PartLengths) throws {
        guard type.isSymmetric else { return }
        let (iv, ciphertext) = (lengths[0], lengths[1])
        if iv != 16 {
            throw CryptoError.malformedEncString(part: "iv", reason: "must be 16 bytes, got \(iv)")
        }
        if type != .aesCbc256B64, lengths[2] != 32 {
            throw CryptoError.malformedEncString(part: "mac", reason: "must be 32 bytes, got \(lengths[2])")
        }
        if ciphertext == 0 || ciphertext % 16 != 0 {
            throw CryptoError.malformedEncString(part: "ciphertext", reason: "must be a non-empty multiple of 16 bytes, got \(ciphertext)")
        }
    }

    // MARK: Binary form (attachment bodies, spec §1.10)

    /// Reads the binary form: `[type=2][iv 16][mac 32][ct…]`, `[type=1][iv 16][mac 32][ct…]` or `[type=0][iv 16][ct…]`.
    public init<Bytes: DataProtocol>(binary: Bytes) throws {
        let bytes = [UInt8](binary)
        guard let first = bytes.first else { throw CryptoError.malformedBinaryEncString("empty") }
        switch first {
        case 0:
            guard bytes.count > 17 else { throw CryptoError.malformedBinaryEncString("type 0 needs an IV and ciphertext") }
            try self.init(type: .aesCbc256B64, iv: Data(bytes[1..<17]), ciphertext: Data(bytes[17...]), mac: nil)
        case 1, 2:
            guard bytes.count > 49 else { throw CryptoError.malformedBinaryEncString("type \(first) needs an IV, a MAC and ciphertext") }
            try self.init(type: EncryptionType(rawValue: Int(first))!, iv: Data(bytes[1..<17]),
                          ciphertext: Data(bytes[49...]), mac: Data(bytes[17..<49]))
        default:
            throw CryptoError.malformedBinaryEncString("unsupported type \(first)")
        }
    }

    /// The binary form of a symmetric EncString (MAC before ciphertext).
    /// - Throws: ``CryptoError/unsupportedEncryptionType(_:)`` for RSA types, which have no binary form.
    public func binary() throws -> Data {
        let parts = decoded()  // once: a parsed value decodes its parts on every read
        guard type.isSymmetric, let iv = parts.iv else { throw CryptoError.unsupportedEncryptionType(type.rawValue) }
        var out = Data([UInt8(type.rawValue)])
        out.append(iv)
        if let mac = parts.mac { out.append(mac) }
        out.append(parts.ciphertext)
        return out
    }
}

extension EncString: CustomStringConvertible {
    public var description: String { serialized }
}

extension EncString: Codable {
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        try self.init(text)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(serialized)
    }
}

