import Crypto
import Foundation
import VaultCrypto
import VaultModels

/// Provider numbers of two-step login on the wire (docs/PROTOCOL.md, "Two-step login").
enum TwoFactorProvider {
    static let authenticator = 0
    static let remember = 5
    static let recoveryCode = 8
}

/// The server's keyed secrets of two-step login and personal API keys, derived from the token key
/// (HKDF), so instances sharing the key agree:
/// - user-verification tokens of `get-authenticator`: an HMAC of the user, the authenticator key and an
///   expiry, so the key the client shows the user can be confirmed without a second password prompt;
/// - sealing of API keys at rest (AES-GCM): a database dump alone does not reveal them, and the server
///   can still show the key again (`POST /api/accounts/api-key`), which a hash would not allow.
struct TwoFactorSecrets: Sendable {
    /// How long a user-verification token stands, in seconds (official: 30 minutes).
    static let verificationLifetime: Int64 = 30 * 60

    private let verificationKey: SymmetricKey
    private let sealingKey: SymmetricKey

    init(tokenKey: [UInt8]) {
        let material = SymmetricKey(data: tokenKey)
        verificationKey = HKDF<SHA256>.deriveKey(inputKeyMaterial: material, info: Data("vaultsync 2fa user verification".utf8),
                                                 outputByteCount: 32)
        sealingKey = HKDF<SHA256>.deriveKey(inputKeyMaterial: material, info: Data("vaultsync sealed account secrets".utf8),
                                            outputByteCount: 32)
    }

    /// `EXPIRES.MAC`: valid until `EXPIRES` (seconds since the epoch) for this user and this key only.
    func userVerificationToken(userID: String, key: String, nowSeconds: Int64) -> String {
        let expires = nowSeconds + Self.verificationLifetime
        return "\(expires)." + mac(userID: userID, key: key, expires: expires)
    }

    func verify(userVerificationToken token: String, userID: String, key: String, nowSeconds: Int64) -> Bool {
        let parts = token.split(separator: ".", maxSplits: 1)
        guard parts.count == 2, let expires = Int64(parts[0]), nowSeconds < expires,
              let presented = AccessTokenSigner.decodeBase64URL(parts[1]) else { return false }
        return HMAC<SHA256>.isValidAuthenticationCode(presented, authenticating: Self.verificationMessage(userID, key, expires),
                                                      using: verificationKey)
    }

    private func mac(userID: String, key: String, expires: Int64) -> String {
        let code = HMAC<SHA256>.authenticationCode(for: Self.verificationMessage(userID, key, expires), using: verificationKey)
        return AccessTokenSigner.base64URL(Data(code))
    }

    private static func verificationMessage(_ userID: String, _ key: String, _ expires: Int64) -> Data {
        Data("\(userID.lowercased())\n\(AuthenticatorKey.normalise(key))\n\(expires)".utf8)
    }

    /// `text` sealed for storage (base64 of nonce, ciphertext and tag).
    func seal(_ text: String) throws -> String {
        try AES.GCM.seal(Data(text.utf8), using: sealingKey).combined!.base64EncodedString()
    }

    /// The text of a sealed value; `nil` if it was not sealed with this key (the token key changed).
    func unseal(_ sealed: String) -> String? {
        guard let data = Data(base64Encoded: sealed), let box = try? AES.GCM.SealedBox(combined: data),
              let plain = try? AES.GCM.open(box, using: sealingKey) else { return nil }
        return String(decoding: plain, as: UTF8.self)
    }
}

/// Authenticator (TOTP) keys and codes: RFC 6238 with SHA-1, 6 digits, 30-second steps, one step of
/// drift either way; a key is 20 random bytes in Base32 (32 characters).
enum AuthenticatorKey {
    static let period: Int64 = 30

    static func generate() -> String {
        base32(SystemRandomSource().bytes(count: 20))
    }

    /// Upper case, without spaces or padding.
    static func normalise(_ key: String) -> String {
        key.uppercased().filter { $0 != " " && $0 != "=" && $0 != "-" }
    }

    /// The key's 20 bytes; `nil` for anything else.
    static func decode(_ key: String) -> [UInt8]? {
        guard !key.isEmpty, key.count <= 64, let bytes = try? TOTP.base32Decode(key), bytes.count == 20 else { return nil }
        return bytes
    }

    static func base32(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
        var output = ""
        var buffer: UInt32 = 0
        var bits = 0
        for byte in bytes {
            buffer = (buffer << 8) | UInt32(byte)
            bits += 8
            while bits >= 5 {
                bits -= 5
                output.append(alphabet[Int((buffer >> UInt32(bits)) & 31)])
            }
        }
        if bits > 0 { output.append(alphabet[Int((buffer << UInt32(5 - bits)) & 31)]) }
        return output
    }

    /// The time step `code` was made for, if it is the key's code for the current step or one step
    /// either side, and later than `lastUsed` (a code once accepted, or any older one, is refused).
    static func matchingStep(code: String, secret: [UInt8], nowSeconds: Int64, after lastUsed: Int64) -> Int64? {
        guard code.utf8.count == 6, code.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
              let totp = try? TOTP(secret: secret) else { return nil }
        let current = nowSeconds / period
        var found: Int64?
        for step in (current - 1)...(current + 1) where step > lastUsed && step >= 0 {
            if constantTimeEqual(totp.code(counter: UInt64(step)), code) { found = step }
        }
        return found
    }
}

/// A random string of `count` characters drawn uniformly from `alphabet` (rejection sampling).
func randomString(count: Int, alphabet: String) -> String {
    let characters = Array(alphabet)
    let limit = 256 - 256 % characters.count
    var output = ""
    let random = SystemRandomSource()
    while output.count < count {
        for byte in random.bytes(count: count) where Int(byte) < limit && output.count < count {
            output.append(characters[Int(byte) % characters.count])
        }
    }
    return output
}

enum AccountSecrets {
    /// A recovery code: 32 lower-case letters and digits (as the official server makes them).
    static func recoveryCode() -> String {
        randomString(count: 32, alphabet: "abcdefghijklmnopqrstuvwxyz0123456789")
    }

    /// A recovery code as typed: spaces removed, lower case.
    static func normaliseRecoveryCode(_ code: String) -> String {
        code.filter { !$0.isWhitespace }.lowercased()
    }

    /// A personal API key (the `client_secret` of the `client_credentials` grant): 30 letters and digits.
    static func apiKey() -> String {
        randomString(count: 30, alphabet: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
    }
}

/// Equality whose time does not depend on where two strings differ.
func constantTimeEqual(_ a: String, _ b: String) -> Bool {
    let x = Array(a.utf8), y = Array(b.utf8)
    guard x.count == y.count else { return false }
    var difference: UInt8 = 0
    for index in x.indices { difference |= x[index] ^ y[index] }
    return difference == 0
}
