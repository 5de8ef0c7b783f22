import Crypto
import Foundation

/// Time-based one-time passwords (RFC 6238, HOTP truncation of RFC 4226) over swift-crypto's HMAC,
/// from a base32 secret, an `otpauth://totp/…` URI or a `steam://` secret (as Bitwarden stores them).
public struct TOTP: Sendable, Equatable {
    public enum Algorithm: String, Sendable { case sha1 = "SHA1", sha256 = "SHA256", sha512 = "SHA512" }

    /// How the truncated HMAC becomes the code: decimal digits (RFC 4226), or Steam Guard's five characters
    /// of its own 26-letter alphabet, which Bitwarden's clients make for a `steam://` secret.
    public enum Encoding: Sendable, Equatable { case decimal, steam }

    /// Steam Guard's alphabet (no vowels, nothing that reads as another character), as Bitwarden's clients use it.
    static let steamCharacters = Array("23456789BCDFGHJKMNPQRTVWXY")

    public var secret: [UInt8]
    public var digits: Int
    public var period: Int
    public var algorithm: Algorithm
    public var encoding: Encoding

    public init(secret: [UInt8], digits: Int = 6, period: Int = 30, algorithm: Algorithm = .sha1) throws {
        guard !secret.isEmpty else { throw TOTPError.invalid("the secret is empty") }
        guard (6...10).contains(digits) else { throw TOTPError.invalid("digits must be 6–10") }
        guard period > 0 else { throw TOTPError.invalid("the period must be positive") }
        self.secret = secret
        self.digits = digits
        self.period = period
        self.algorithm = algorithm
        self.encoding = .decimal
    }

    /// Steam Guard: SHA-1 over 30-second steps, as any TOTP, written as five characters of its alphabet.
    public init(steamSecret secret: [UInt8]) throws {
        try self.init(secret: secret)
        digits = 5
        encoding = .steam
    }

    /// A base32 secret (spaces and padding ignored), an otpauth URI, or a `steam://` secret (base32 after
    /// the scheme). A Steam secret was taken by `add --totp` but gave no code: `get --field totp` said it was
    /// not base32 (RELIABILITY bug 85).
    public init(secretOrURI text: String) throws {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.lowercased().hasPrefix("steam://") {
            try self.init(steamSecret: try Self.base32Decode(String(trimmed.dropFirst("steam://".count))))
            return
        }
        guard trimmed.lowercased().hasPrefix("otpauth://") else {
            try self.init(secret: try Self.base32Decode(trimmed))
            return
        }
        guard let components = URLComponents(string: trimmed), components.host?.lowercased() == "totp" else {
            throw TOTPError.invalid("only otpauth://totp URIs are supported")
        }
        let items = components.queryItems ?? []
        func value(_ name: String) -> String? { items.first { $0.name.lowercased() == name }?.value }
        guard let secret = value("secret") else { throw TOTPError.invalid("the URI has no secret") }
        let digits = try value("digits").map { guard let number = Int($0) else { throw TOTPError.invalid("digits is not a number") }; return number } ?? 6
        let period = try value("period").map { guard let number = Int($0) else { throw TOTPError.invalid("period is not a number") }; return number } ?? 30
        let algorithmName = (value("algorithm") ?? "SHA1").uppercased()
        guard let algorithm = Algorithm(rawValue: algorithmName) else { throw TOTPError.invalid("unknown algorithm \(algorithmName)") }
        try self.init(secret: try Self.base32Decode(secret), digits: digits, period: period, algorithm: algorithm)
    }

    /// The code at `date`.
    public func code(at date: Date) -> String {
        code(counter: UInt64(max(0, date.timeIntervalSince1970)) / UInt64(period))
    }

    /// The HOTP value for a counter.
    public func code(counter: UInt64) -> String {
        let message = withUnsafeBytes(of: counter.bigEndian) { Array($0) }
        let key = SymmetricKey(data: secret)
        let mac: [UInt8]
        switch algorithm {
        case .sha1: mac = Array(HMAC<Insecure.SHA1>.authenticationCode(for: message, using: key))
        case .sha256: mac = Array(HMAC<SHA256>.authenticationCode(for: message, using: key))
        case .sha512: mac = Array(HMAC<SHA512>.authenticationCode(for: message, using: key))
        }
        let offset = Int(mac[mac.count - 1] & 0x0f)
        let binary = (UInt64(mac[offset] & 0x7f) << 24) | (UInt64(mac[offset + 1]) << 16) | (UInt64(mac[offset + 2]) << 8) | UInt64(mac[offset + 3])
        if encoding == .steam {
            let alphabet = Self.steamCharacters
            var rest = binary
            var code = ""
            for _ in 0..<digits {
                code.append(alphabet[Int(rest % UInt64(alphabet.count))])
                rest /= UInt64(alphabet.count)
            }
            return code
        }
        var modulus: UInt64 = 1
        for _ in 0..<digits { modulus *= 10 }
        let value = String(binary % modulus)
        return String(repeating: "0", count: digits - value.count) + value
    }

    /// RFC 4648 base32 (case-insensitive; spaces, dashes and padding ignored).
    public static func base32Decode(_ text: String) throws -> [UInt8] {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".utf8)
        var buffer: UInt32 = 0
        var bits = 0
        var output: [UInt8] = []
        for character in text.uppercased().utf8 where character != UInt8(ascii: " ") && character != UInt8(ascii: "-") && character != UInt8(ascii: "=") {
            guard let index = alphabet.firstIndex(of: character) else { throw TOTPError.invalid("the secret is not base32") }
            buffer = (buffer << 5) | UInt32(index)
            bits += 5
            if bits >= 8 {
                bits -= 8
                output.append(UInt8((buffer >> UInt32(bits)) & 0xff))
            }
        }
        guard !output.isEmpty else { throw TOTPError.invalid("the secret is empty") }
        return output
    }
}

public enum TOTPError: Error, Sendable, Equatable, CustomStringConvertible {
    case invalid(String)

    public var description: String {
        switch self {
        case .invalid(let reason): return "invalid TOTP secret: \(reason)"
        }
    }
}
