#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
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
/// byte for byte.
public struct EncString: Sendable, Hashable {
    /// The encryption type.
    public let type: EncryptionType
    /// The IV (16 bytes) for symmetric types, else `nil`.
    public let iv: Data?
    /// The ciphertext.
    public let ciphertext: Data
    /// The MAC (32 bytes for types 1 and 2; whatever was given for the ignored MAC of types 5 and 6).
    public let mac: Data?
    /// The exact string form.
    public let serialized: String

    /// Parses an EncString.
    ///
    /// Accepts the legacy header-less form (3 parts ⇒ type 1, otherwise type 0).
    /// - Throws: ``CryptoError/unsupportedAccountEncryptionVersion`` for type 7 (COSE),
    ///   ``CryptoError/malformedEncString(part:reason:)`` for anything else that is not a valid EncString.
    public init(_ string: String) throws {
        var text = string
        let parsed = try text.withUTF8 { try EncString.parse($0) }
        self.init(checkedType: parsed.type, iv: parsed.iv, ciphertext: parsed.ciphertext, mac: parsed.mac, serialized: string)
        try validateLengths()
    }

    /// Parses the UTF-8 bytes of an EncString (byte-level: no grapheme or `String` work on the hot path).
    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>) throws
        -> (type: EncryptionType, iv: Data?, ciphertext: Data, mac: Data?)
    {
        let dot = bytes.firstIndex(of: UInt8(ascii: "."))
        let bodyStart = dot.map { $0 + 1 } ?? 0
        // Part boundaries in the body; no type has more than three parts, so three ranges suffice.
        var ranges: (Range<Int>, Range<Int>, Range<Int>) = (0..<0, 0..<0, 0..<0)
        var partCount = 0
        var partStart = bodyStart
        for index in bodyStart...bytes.count where index == bytes.count || bytes[index] == UInt8(ascii: "|") {
            switch partCount {
            case 0: ranges.0 = partStart..<index
            case 1: ranges.1 = partStart..<index
            case 2: ranges.2 = partStart..<index
            default: break
            }
            partCount += 1
            partStart = index + 1
        }

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
        func part(_ index: Int) throws -> Data {
            let range = index == 0 ? ranges.0 : index == 1 ? ranges.1 : ranges.2
            guard !range.isEmpty else {
                throw CryptoError.malformedEncString(part: names[index], reason: "empty")
            }
            guard let data = Base64.decode(UnsafeBufferPointer(rebasing: bytes[range])) else {
                throw CryptoError.malformedEncString(part: names[index], reason: "not valid base64")
            }
            return data
        }
        let decoded = (try part(0), partCount > 1 ? try part(1) : Data(), partCount > 2 ? try part(2) : Data())
        switch type {
        case .aesCbc256B64:
            return (type, decoded.0, decoded.1, nil)
        case .aesCbc128HmacSha256B64, .aesCbc256HmacSha256B64:
            return (type, decoded.0, decoded.1, decoded.2)
        case .rsa2048OaepSha256B64, .rsa2048OaepSha1B64:
            return (type, nil, decoded.0, nil)
        case .rsa2048OaepSha256HmacSha256B64, .rsa2048OaepSha1HmacSha256B64:
            return (type, nil, decoded.0, decoded.1)
        }
    }

    private init(checkedType: EncryptionType, iv: Data?, ciphertext: Data, mac: Data?, serialized: String) {
        self.type = checkedType
        self.iv = iv
        self.ciphertext = ciphertext
        self.mac = mac
        self.serialized = serialized
    }

    /// Assembles an EncString from its parts and formats it.
    public init(type: EncryptionType, iv: Data?, ciphertext: Data, mac: Data?) throws {
        var parts: [Data] = []
        if type.isSymmetric {
            guard let iv else { throw CryptoError.malformedEncString(part: "iv", reason: "missing") }
            parts.append(iv)
        }
        parts.append(ciphertext)
        if type.partNames.last == "mac" {
            guard let mac else { throw CryptoError.malformedEncString(part: "mac", reason: "missing") }
            parts.append(mac)
        }
        let text = Base64.join(prefix: type.header, parts: parts, separator: UInt8(ascii: "|"))
        self.init(checkedType: type, iv: type.isSymmetric ? iv : nil, ciphertext: ciphertext,
                  mac: type.partNames.last == "mac" ? mac : nil, serialized: text)
        try validateLengths()
    }

    private func validateLengths() throws {
        if let iv, iv.count != 16 {
            throw CryptoError.malformedEncString(part: "iv", reason: "must be 16 bytes, got \(iv.count)")
        }
        if type == .aesCbc128HmacSha256B64 || type == .aesCbc256HmacSha256B64, let mac, mac.count != 32 {
            throw CryptoError.malformedEncString(part: "mac", reason: "must be 32 bytes, got \(mac.count)")
        }
        if type.isSymmetric, ciphertext.isEmpty || ciphertext.count % 16 != 0 {
            throw CryptoError.malformedEncString(part: "ciphertext", reason: "must be a non-empty multiple of 16 bytes, got \(ciphertext.count)")
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
        guard type.isSymmetric, let iv else { throw CryptoError.unsupportedEncryptionType(type.rawValue) }
        var out = Data([UInt8(type.rawValue)])
        out.append(iv)
        if let mac { out.append(mac) }
        out.append(ciphertext)
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

