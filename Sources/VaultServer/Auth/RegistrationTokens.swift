import Crypto
import Foundation

/// The email-verification token of the official clients' sign-up (docs/PROTOCOL.md, "Registration"): this server
/// sends no mail, so `register/send-verification-email` answers with the token itself and `register/finish` takes
/// it back. `EXPIRES.EMAIL.MAC` (email base64url): valid until `EXPIRES` (seconds) for that email and this server's
/// token key only, so a finish can only create the account the token was made for.
struct RegistrationTokens: Sendable {
    /// How long a token stands, in seconds: the sign-up it starts is finished at once (nothing is mailed).
    static let lifetime: Int64 = 60 * 60

    private let key: SymmetricKey

    init(tokenKey: [UInt8]) {
        key = HKDF<SHA256>.deriveKey(inputKeyMaterial: SymmetricKey(data: tokenKey), info: Data("vaultsync registration email".utf8),
                                     outputByteCount: 32)
    }

    func token(email: String, nowSeconds: Int64) -> String {
        let expires = nowSeconds + Self.lifetime
        let encoded = AccessTokenSigner.base64URL(Data(email.utf8))
        return "\(expires).\(encoded)." + AccessTokenSigner.base64URL(Data(mac(encoded, expires)))
    }

    /// The email `token` was made for, when it is this server's and still valid.
    func email(of token: String, nowSeconds: Int64) -> String? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let expires = Int64(parts[0]), nowSeconds < expires,
              let presented = AccessTokenSigner.decodeBase64URL(parts[2]),
              HMAC<SHA256>.isValidAuthenticationCode(presented, authenticating: Self.message(String(parts[1]), expires), using: key),
              let email = AccessTokenSigner.decodeBase64URL(parts[1]) else { return nil }
        return String(decoding: email, as: UTF8.self)
    }

    private func mac(_ encodedEmail: String, _ expires: Int64) -> HashedAuthenticationCode<SHA256> {
        HMAC<SHA256>.authenticationCode(for: Self.message(encodedEmail, expires), using: key)
    }

    private static func message(_ encodedEmail: String, _ expires: Int64) -> Data {
        Data("register\n\(encodedEmail)\n\(expires)".utf8)
    }
}
