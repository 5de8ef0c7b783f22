import Crypto
import Foundation
import Testing
import VaultModels
@testable import VaultServer

/// Access tokens are verified on their bytes (every `/api` request does it): the verdict must be the one
/// the string-based verification gave, kept here as the reference, for valid tokens and mangled ones.
@Suite("Access tokens")
struct AccessTokenTests {
    static let signer = AccessTokenSigner(keyBytes: Array(repeating: 42, count: 32), issuer: "vaultsync")

    /// The verification this replaced (String split, `replacingOccurrences`, string concatenation).
    static func reference(_ token: String, nowSeconds: Int64) -> AccessClaims? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let signature = AccessTokenSigner.decodeBase64URL(parts[2]) else { return nil }
        let signed = Data("\(parts[0]).\(parts[1])".utf8)
        guard HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: signed, using: signer.key) else { return nil }
        guard let headerData = AccessTokenSigner.decodeBase64URL(parts[0]),
              let header = try? JSONParser.parseObject(headerData), header["alg"]?.stringValue == "HS256",
              let payloadData = AccessTokenSigner.decodeBase64URL(parts[1]),
              let payload = try? JSONParser.parseObject(payloadData),
              let expires = payload["exp"]?.intValue, let notBefore = payload["nbf"]?.intValue,
              let subject = payload["sub"]?.stringValue else { return nil }
        guard nowSeconds < Int64(expires), nowSeconds + 60 >= Int64(notBefore) else { return nil }
        return AccessClaims(
            subject: subject, email: payload["email"]?.stringValue ?? "", name: payload["name"]?.stringValue ?? "",
            securityStamp: payload["sstamp"]?.stringValue ?? "", device: payload["device"]?.stringValue ?? "",
            deviceType: Int(payload["devicetype"]?.stringValue ?? "") ?? 0, clientID: payload["client_id"]?.stringValue ?? "",
            notBefore: Int64(notBefore), expires: Int64(expires))
    }

    /// A token signed by hand over any header and payload text (to reach the checks after the signature).
    static func handSigned(header: String, payload: String) -> String {
        let body = AccessTokenSigner.base64URL(Data(header.utf8)) + "." + AccessTokenSigner.base64URL(Data(payload.utf8))
        return body + "." + AccessTokenSigner.base64URL(Data(HMAC<SHA256>.authenticationCode(for: Data(body.utf8), using: signer.key)))
    }

    @Test("byte-level verification gives the string-based verdict for valid, expired and mangled tokens")
    func sameVerdicts() throws {
        let now: Int64 = 1_764_000_000
        let claims = AccessClaims(subject: "3f1c2a9e-0000-4000-8000-000000000001", email: "ä@example.com", name: "Zoë \"Q\"",
                                  securityStamp: "stamp", device: "device-1", deviceType: 25, clientID: "cli",
                                  notBefore: now - 10, expires: now + 3600)
        let token = Self.signer.sign(claims)
        #expect(Self.signer.verify(token, nowSeconds: now) == claims)

        var candidates = [token, token + ".", "." + token, token + "=", "", ".", "..", "...", "a.b.c", token.replacingOccurrences(of: ".", with: "..")]
        let parts = token.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        candidates += [parts[0] + "." + parts[1], parts[0] + "." + parts[1] + ".", parts.joined(separator: ".") + ".x"]
        // Padded and standard-alphabet spellings of the same parts.
        let padded = parts.map { part in part + String(repeating: "=", count: (4 - part.utf8.count % 4) % 4) }
        candidates.append(padded.joined(separator: "."))
        candidates.append(parts.map { $0.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/") }.joined(separator: "."))
        // Every byte of the token changed once.
        let bytes = Array(token.utf8)
        for index in stride(from: 0, to: bytes.count, by: 3) {
            var changed = bytes
            changed[index] = changed[index] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
            candidates.append(String(decoding: changed, as: UTF8.self))
        }
        // Signed, but wrong algorithm, missing claims, not JSON, a combining mark after a dot.
        candidates += [
            Self.handSigned(header: #"{"alg":"none"}"#, payload: #"{"sub":"x","exp":9999999999,"nbf":0}"#),
            Self.handSigned(header: #"{"alg":"HS256"}"#, payload: #"{"sub":"x","exp":9999999999}"#),
            Self.handSigned(header: #"{"alg":"HS256"}"#, payload: #"{"sub":"x","exp":9999999999,"nbf":0}"#),
            Self.handSigned(header: "not json", payload: "{}"),
            parts[0] + ".\u{301}" + parts[1] + "." + parts[2],
        ]
        for candidate in candidates {
            for moment in [now, now + 7200, now - 3600] {
                #expect(Self.signer.verify(candidate, nowSeconds: moment) == Self.reference(candidate, nowSeconds: moment), "\(candidate)")
            }
        }
        #expect(Self.signer.verify(token, nowSeconds: now + 7200) == nil)
    }
}
