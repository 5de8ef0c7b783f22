import Crypto
import Foundation
import VaultCrypto
import VaultModels

/// The claims of an access token (spec §2.3; Vaultwarden's `LoginJwtClaims`).
struct AccessClaims: Sendable, Equatable {
    var subject: String
    var email: String
    var name: String
    var securityStamp: String
    var device: String
    var deviceType: Int
    var clientID: String
    var notBefore: Int64
    var expires: Int64
    /// The device's revocation generation when the token was issued (`dgen`; 0 in tokens from before it
    /// existed). Every revocation of the device increments the stored one, so a token issued before a
    /// revocation stays refused after the device signs in again (docs/SECURITY.md, "Attack review 2026-12-01").
    var generation: Int64 = 0
}

/// Signs and verifies access tokens: JWTs with HS256 (HMAC-SHA256 from swift-crypto).
///
/// The key comes from configuration (or a file in the data directory, created on first start), so
/// several instances sharing one database accept each other's tokens.
struct AccessTokenSigner: Sendable {
    let key: SymmetricKey
    let issuer: String

    init(keyBytes: [UInt8], issuer: String) {
        key = SymmetricKey(data: keyBytes)
        self.issuer = issuer
    }

    func sign(_ claims: AccessClaims) -> String {
        let header = Self.base64URL(Data(#"{"alg":"HS256","typ":"JWT"}"#.utf8))
        var payload = JSONObject()
        payload["nbf"] = .number(String(claims.notBefore))
        payload["exp"] = .number(String(claims.expires))
        payload["iss"] = .string(issuer)
        payload["sub"] = .string(claims.subject)
        payload["premium"] = .bool(true)
        payload["name"] = .string(claims.name)
        payload["email"] = .string(claims.email)
        payload["email_verified"] = .bool(true)
        payload["sstamp"] = .string(claims.securityStamp)
        payload["device"] = .string(claims.device)
        payload["devicetype"] = .string(String(claims.deviceType))
        payload["client_id"] = .string(claims.clientID)
        payload["dgen"] = .number(String(claims.generation))
        payload["scope"] = .array([.string("api"), .string("offline_access")])
        payload["amr"] = .array([.string("Application")])
        let body = header + "." + Self.base64URL(Data(payload.serialized()))
        let signature = HMAC<SHA256>.authenticationCode(for: Data(body.utf8), using: key)
        return body + "." + Self.base64URL(Data(signature))
    }

    /// The claims of a valid, unexpired token signed with this key; `nil` otherwise.
    ///
    /// Runs on every `/api` request, so it works on the token's bytes: the parts are found by their dots
    /// and decoded without intermediate strings (Foundation's `replacingOccurrences` and `split` were
    /// ~5% of the update load's profile).
    func verify(_ token: String, nowSeconds: Int64) -> AccessClaims? {
        let bytes = Array(token.utf8)
        let dot = UInt8(ascii: ".")
        guard let firstDot = bytes.firstIndex(of: dot), let secondDot = bytes[(firstDot + 1)...].firstIndex(of: dot),
              !bytes[(secondDot + 1)...].contains(dot),
              let signature = Self.decodeBase64URL(bytes: bytes[(secondDot + 1)...]) else { return nil }
        let signed = bytes[..<secondDot]
        guard HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: signed, using: key) else { return nil }
        guard let headerData = Self.decodeBase64URL(bytes: bytes[..<firstDot]),
              let header = try? JSONParser.parseObject(headerData), header["alg"]?.stringValue == "HS256",
              let payloadData = Self.decodeBase64URL(bytes: bytes[(firstDot + 1)..<secondDot]),
              let payload = try? JSONParser.parseObject(payloadData),
              let expires = payload["exp"]?.intValue, let notBefore = payload["nbf"]?.intValue,
              let subject = payload["sub"]?.stringValue else { return nil }
        guard nowSeconds < Int64(expires), nowSeconds + 60 >= Int64(notBefore) else { return nil }
        return AccessClaims(
            subject: subject, email: payload["email"]?.stringValue ?? "", name: payload["name"]?.stringValue ?? "",
            securityStamp: payload["sstamp"]?.stringValue ?? "", device: payload["device"]?.stringValue ?? "",
            deviceType: Int(payload["devicetype"]?.stringValue ?? "") ?? 0, clientID: payload["client_id"]?.stringValue ?? "",
            notBefore: Int64(notBefore), expires: Int64(expires), generation: Int64(payload["dgen"]?.intValue ?? 0))
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// ``decodeBase64URL(_:)`` of UTF-8 bytes.
    static func decodeBase64URL(bytes: ArraySlice<UInt8>) -> Data? {
        var base64: [UInt8] = []
        base64.reserveCapacity(bytes.count + 3)
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "-"): base64.append(UInt8(ascii: "+"))
            case UInt8(ascii: "_"): base64.append(UInt8(ascii: "/"))
            default: base64.append(byte)
            }
        }
        while base64.count % 4 != 0 { base64.append(UInt8(ascii: "=")) }
        return Data(base64Encoded: Data(base64))
    }

    static func decodeBase64URL<S: StringProtocol>(_ text: S) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.utf8.count % 4 != 0 { base64 += "=" }
        return Data(base64Encoded: base64)
    }
}

/// Opaque refresh tokens, stored only as their SHA-256 (docs/PROTOCOL.md, "Refresh tokens").
///
/// A login's token is `CHAIN.SECRET`: the device's row id (the chain) and 32 random bytes. A refresh's
/// token is the *successor* of the one presented: the same chain and the HMAC-SHA256 of the whole token
/// under a key derived from the token key (HKDF), so presenting one token twice gets the same successor.
/// That makes a refresh repeatable: a client whose answer was lost, or whose request was delayed past its
/// timeout and then sent again, gets the token it missed, and a late duplicate cannot replace the token
/// the client already holds. Instances sharing the token key derive the same successors. The chain names
/// the device an older token belonged to, so presenting one (theft: someone else refreshed with it) can
/// be told from a made-up token by walking its successors forward to the device's current token.
/// Tokens issued before chains existed have no prefix; their successors have none either.
struct RefreshTokens: Sendable {
    private let rotationKey: SymmetricKey

    /// How many successors of a presented unknown token are derived when looking for the device's
    /// current one: a refresh an hour for a 30-day chain is 720 steps; each step is two hashes.
    static let reuseSearchSteps = 5_000

    init(tokenKey: [UInt8]) {
        rotationKey = HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: tokenKey),
                                             info: Data("vaultsync refresh-token rotation".utf8), outputByteCount: 32)
    }

    /// The token a refresh with `token` answers with.
    func successor(of token: String) -> String {
        let mac = AccessTokenSigner.base64URL(Data(HMAC<SHA256>.authenticationCode(for: Data(token.utf8), using: rotationKey)))
        guard let chain = Self.chain(of: token) else { return mac }
        return chain + "." + mac
    }

    /// Whether one of the next `steps` successors of `token` has one of `hashes` (an older token of that chain).
    func leads(from token: String, toOneOf hashes: Set<String>, steps: Int = reuseSearchSteps) -> Bool {
        var next = token
        for _ in 0..<steps {
            next = successor(of: next)
            if hashes.contains(Self.hash(next)) { return true }
        }
        return false
    }

    /// A new chain's first token.
    static func make(chain: String) -> String {
        chain + "." + AccessTokenSigner.base64URL(Data(SystemRandomSource().bytes(count: 32)))
    }

    /// The chain (device row id) a token names, if it names one.
    static func chain(of token: String) -> String? {
        guard let dot = token.firstIndex(of: "."), UUID(uuidString: String(token[..<dot])) != nil else { return nil }
        return String(token[..<dot])
    }

    static func hash(_ token: String) -> String {
        Data(SHA256.hash(data: Data(token.utf8))).base64EncodedString()
    }
}

/// The KDF settings prelogin answers for an email without an account (docs/PROTOCOL.md, "Prelogin").
///
/// A fixed answer would single out every account whose KDF differs from it; the official server picks
/// one of several real-world settings by a keyed hash of the normalised email (`GetDefaultKdf`), so one
/// email always gets the same answer and nobody without the key can tell a made-up answer from a real
/// one. The key is derived from the token key (HKDF), so instances sharing the key answer alike.
struct DecoyKdf: Sendable {
    struct Settings: Sendable, Equatable {
        var type: Int
        var iterations: Int
        var memory: Int?
        var parallelism: Int?
    }

    /// Settings real accounts have, the commonest twice: PBKDF2 600,000 (today's default) and Argon2id
    /// 3 iterations, 64 MiB, 4 lanes (Bitwarden's Argon2id default). The official list adds PBKDF2 100,000
    /// and 5,000: the VaultSync client refuses both for a first login on a device (docs/SECURITY.md), so
    /// an unknown email answered with them would fail differently from a wrong password.
    static let choices: [Settings] = [
        Settings(type: 0, iterations: 600_000), Settings(type: 0, iterations: 600_000),
        Settings(type: 1, iterations: 3, memory: 64, parallelism: 4),
    ]

    private let key: SymmetricKey

    init(tokenKey: [UInt8]) {
        key = HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: tokenKey),
                                     info: Data("vaultsync prelogin decoy kdf".utf8), outputByteCount: 32)
    }

    /// `email` as accounts store it (``EmailAddress/normalise(_:)``; for ASCII: trimmed and lower-cased).
    static func normalise(_ email: String) -> String {
        EmailAddress.normalise(email)
    }

    func settings(for email: String) -> Settings {
        let mac = Array(HMAC<SHA256>.authenticationCode(for: Data(Self.normalise(email).utf8), using: key))
        let value = mac.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return Self.choices[Int(value % UInt64(Self.choices.count))]
    }
}
