import Foundation
import Testing
import VaultCrypto

/// RFC 6238 Appendix B known answers (8 digits) for SHA-1, SHA-256 and SHA-512.
@Suite struct TOTPTests {
    static let seeds: [TOTP.Algorithm: String] = [
        .sha1: "12345678901234567890",
        .sha256: "12345678901234567890123456789012",
        .sha512: "1234567890123456789012345678901234567890123456789012345678901234",
    ]

    static let vectors: [(time: TimeInterval, sha1: String, sha256: String, sha512: String)] = [
        (59, "94287082", "46119246", "90693936"),
        (1_111_111_109, "07081804", "68084774", "25091201"),
        (1_111_111_111, "14050471", "67062674", "99943326"),
        (1_234_567_890, "89005924", "91819424", "93441116"),
        (2_000_000_000, "69279037", "90698825", "38618901"),
        (20_000_000_000, "65353130", "77737706", "47863826"),
    ]

    @Test func rfc6238Vectors() throws {
        for vector in Self.vectors {
            for (algorithm, expected) in [(TOTP.Algorithm.sha1, vector.sha1), (.sha256, vector.sha256), (.sha512, vector.sha512)] {
                let totp = try TOTP(secret: Array(Self.seeds[algorithm]!.utf8), digits: 8, algorithm: algorithm)
                #expect(totp.code(at: Date(timeIntervalSince1970: vector.time)) == expected, "\(algorithm) at \(vector.time)")
            }
        }
    }

    @Test func base32SecretAndURI() throws {
        // "12345678901234567890" in base32.
        let base32 = "GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ"
        let plain = try TOTP(secretOrURI: base32.lowercased())
        #expect(plain.code(at: Date(timeIntervalSince1970: 59)) == "287082")
        let uri = try TOTP(secretOrURI: "otpauth://totp/Example:alice?secret=\(base32)&digits=8&period=30&algorithm=SHA1")
        #expect(uri.code(at: Date(timeIntervalSince1970: 1_111_111_109)) == "07081804")
    }

    /// RELIABILITY bug 85: a `steam://` secret was taken by `add --totp` and gave no code. Steam Guard's codes are
    /// five characters of its alphabet, made from the same truncated HMAC-SHA-1 over 30-second steps; the
    /// expected codes were computed by a separate implementation (Python's hmac, Bitwarden's algorithm).
    @Test func steamCodes() throws {
        let steam = try TOTP(secretOrURI: "steam://JBSWY3DPEHPK3PXP")
        #expect(steam.encoding == .steam && steam.digits == 5)
        for (counter, expected) in [(UInt64(0), "VH8YJ"), (1, "2YXGV"), (59, "9JWF7"), (37_037_036, "CWDGV"), (66_666_666, "HNCVQ")] {
            #expect(steam.code(counter: counter) == expected, "counter \(counter)")
        }
        #expect(steam.code(at: Date(timeIntervalSince1970: 2_000_000_000)) == "HNCVQ")
        #expect(try TOTP(secretOrURI: "STEAM://jbswy3dpehpk3pxp").code(counter: 1) == "2YXGV")
        #expect(try TOTP(secretOrURI: "JBSWY3DPEHPK3PXP").encoding == .decimal)
        #expect(throws: TOTPError.self) { try TOTP(secretOrURI: "steam://!!!!") }
    }

    @Test func badSecretsAreRefused() {
        #expect(throws: TOTPError.self) { try TOTP(secretOrURI: "not base32!") }
        #expect(throws: TOTPError.self) { try TOTP(secretOrURI: "otpauth://hotp/x?secret=GEZDGNBV") }
        #expect(throws: TOTPError.self) { try TOTP(secretOrURI: "otpauth://totp/x?digits=6") }
        #expect(throws: TOTPError.self) { try TOTP(secretOrURI: "") }
    }
}
