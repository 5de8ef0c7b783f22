#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Crypto

/// A digest to recognise a secret later without keeping it (the clipboard's clear compares digests).
public enum TextDigest {
    /// SHA-256 of `text`'s UTF-8, in lower-case hex.
    public static func sha256Hex(_ text: String) -> String {
        SHA256.hash(data: Array(text.utf8)).map { byte in
            let digits = Array("0123456789abcdef".utf8)
            return String(decoding: [digits[Int(byte >> 4)], digits[Int(byte & 0xF)]], as: UTF8.self)
        }.joined()
    }
}

/// The name of the file a CLI session is sealed in (`PROFILE/sessions/NAME`): the first 32 hex digits of
/// SHA-256 of a fixed label and the session key, so only the holder of the key finds its file and the
/// key itself is never on disk (docs/CLI.md). The CLI and the benchmark's floor program both read it.
public enum SessionFileName {
    public static func forKey(_ sessionKey: String) -> String {
        String(TextDigest.sha256Hex("vaultsync session file name\u{0}" + sessionKey).prefix(32))
    }
}

/// Login URI checksums (spec §1.10, TV11).
public enum URIChecksum {
    /// The checksum plaintext: `base64(SHA-256(UTF-8(uri)))`. It is stored encrypted as `uriChecksum`.
    public static func plaintext(for uri: String) -> String {
        Data(SHA256.hash(data: Array(uri.utf8))).base64EncodedString()
    }
}

/// A SHA-256 held as four words: a value that costs no allocation, for fingerprints of many stored records
/// (the sealed name index compares one per item).
public struct ContentDigest: Hashable, Sendable {
    public var words: SIMD4<UInt64>

    /// SHA-256 of bytes in place.
    public init(of bytes: UnsafeRawBufferPointer) {
        words = SHA256.hash(data: bytes).withUnsafeBytes { $0.loadUnaligned(as: SIMD4<UInt64>.self) }
    }

    /// The digest as stored: 32 bytes.
    public init?(bytes: some Collection<UInt8>) {
        guard bytes.count == 32 else { return nil }
        words = Array(bytes).withUnsafeBytes { $0.loadUnaligned(as: SIMD4<UInt64>.self) }
    }

    public var bytes: [UInt8] { withUnsafeBytes(of: words) { Array($0) } }

    /// The digest's first `count` bytes as lowercase hexadecimal (a name made from content).
    public func hex(prefix count: Int = 32) -> String {
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: bytes.prefix(count).flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] }, as: UTF8.self)
    }
}

/// An SSH public key's fingerprint as `ssh-keygen -l` prints it: "SHA256:" and the unpadded base64 of
/// SHA-256 over the key's wire blob (the base64 field of an `authorized_keys` line).
public enum SSHKeyFingerprint {
    /// `publicKey`: an OpenSSH public key line ("ssh-ed25519 AAAA… comment"); nil when it is not one.
    public static func sha256(publicKey: String) -> String? {
        let parts = publicKey.split(whereSeparator: \.isWhitespace)
        guard parts.count >= 2, parts[0].hasPrefix("ssh-") || parts[0].hasPrefix("ecdsa-") || parts[0].hasPrefix("sk-"),
              let blob = Data(base64Encoded: String(parts[1])), !blob.isEmpty else { return nil }
        let encoded = Data(SHA256.hash(data: blob)).base64EncodedString()
        return "SHA256:" + encoded.replacingOccurrences(of: "=", with: "")
    }
}

/// Have I Been Pwned's k-anonymity range query (docs/BW-COMPATIBILITY.md, `get exposed`): the SHA-1 of the
/// password in upper-case hex, of which only the first five digits leave the device; the service answers
/// every suffix it knows with that prefix, and the match is found here.
public enum PwnedPasswordHash {
    public static func split(_ password: String) -> (prefix: String, suffix: String) {
        let digits = Array("0123456789ABCDEF".utf8)
        let hex = String(decoding: Insecure.SHA1.hash(data: Array(password.utf8)).flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0xF)]] }, as: UTF8.self)
        return (String(hex.prefix(5)), String(hex.dropFirst(5)))
    }

    /// The count the range answer gives `suffix` (lines `SUFFIX:COUNT`), 0 when it is not there.
    public static func count(of suffix: String, inRange answer: String) -> Int {
        for line in answer.split(whereSeparator: \.isNewline) {
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2, parts[0].uppercased() == suffix else { continue }
            return Int(parts[1].trimmingCharacters(in: .whitespaces)) ?? 0
        }
        return 0
    }
}
