import Foundation
import NIOHTTP1
import VaultModels

/// What `POST /api/two-factor/get-authenticator` answers: the account's authenticator key, or a fresh
/// one to set up (not stored by the server until enabled with a code).
public struct AuthenticatorSetup: Sendable, Equatable {
    public var enabled: Bool
    /// Base32, 32 characters (20 bytes).
    public var key: String
    /// The official server's token binding this key to the user for 30 minutes (Vaultwarden sends none).
    public var userVerificationToken: String?

    public init(enabled: Bool = false, key: String, userVerificationToken: String? = nil) {
        self.enabled = enabled
        self.key = key
        self.userVerificationToken = userVerificationToken
    }
}

/// The account-security calls of the `/api` side (docs/PROTOCOL.md, "Managing two-step login and API
/// keys"): each proves the master password with its hash.
extension BitwardenAPI {
    /// The account's two-step providers and whether each is on (`GET /api/two-factor`).
    public func twoFactorProviders(token: String) async throws -> [(type: TwoFactorProviderType, enabled: Bool)] {
        let answer = try object(try await send(.GET, "/api/two-factor", token: token))
        guard let data = answer["data"]?.arrayValue else { throw ServerCallError.invalidResponse("the two-step list has no data") }
        return data.compactMap { value in
            guard let entry = value.objectValue, let type = entry["type"]?.intValue else { return nil }
            return (TwoFactorProviderType(rawValue: type), entry["enabled"]?.boolValue ?? false)
        }
    }

    /// The authenticator key (`POST /api/two-factor/get-authenticator`). Reads the flat answer and the
    /// official server's newer nested one (`authenticator: {enabled, key}`).
    public func authenticator(passwordHash: String, token: String) async throws -> AuthenticatorSetup {
        let answer = try object(try await send(.POST, "/api/two-factor/get-authenticator", token: token,
                                               json: .object(["masterPasswordHash": .string(passwordHash)])))
        return try Self.authenticatorSetup(answer)
    }

    /// Turns the authenticator on with `key` and a current code from it (`PUT /api/two-factor/authenticator`).
    public func enableAuthenticator(key: String, code: String, userVerificationToken: String?, passwordHash: String,
                                    token: String) async throws -> AuthenticatorSetup {
        var body: JSONObject = ["key": .string(key), "token": .string(code), "masterPasswordHash": .string(passwordHash)]
        if let userVerificationToken { body["userVerificationToken"] = .string(userVerificationToken) }
        let answer = try object(try await send(.PUT, "/api/two-factor/authenticator", token: token, json: .object(body)))
        return try Self.authenticatorSetup(answer)
    }

    /// Turns a provider off: `PUT /api/two-factor/disable` (Vaultwarden, older official servers); a
    /// server without that route (the official server since mid-2026) gets
    /// `DELETE /api/two-factor/authenticator` with the key and its verification token instead.
    public func disableTwoFactor(_ provider: TwoFactorProviderType, passwordHash: String, token: String) async throws {
        do {
            _ = try await send(.PUT, "/api/two-factor/disable", token: token,
                               json: .object(["type": .int(provider.rawValue), "masterPasswordHash": .string(passwordHash)]))
        } catch let error as ServerCallError where error.failure == .status(404) || error.failure == .status(405) {
            guard provider == .authenticator else { throw error }
            let setup = try await authenticator(passwordHash: passwordHash, token: token)
            var body: JSONObject = ["type": .int(0), "key": .string(setup.key), "masterPasswordHash": .string(passwordHash)]
            if let verification = setup.userVerificationToken { body["userVerificationToken"] = .string(verification) }
            _ = try await send(.DELETE, "/api/two-factor/authenticator", token: token, json: .object(body))
        }
    }

    /// The account's recovery code (`POST /api/two-factor/get-recover`), `nil` when it has none yet.
    public func recoveryCode(passwordHash: String, token: String) async throws -> String? {
        let answer = try object(try await send(.POST, "/api/two-factor/get-recover", token: token,
                                               json: .object(["masterPasswordHash": .string(passwordHash)])))
        return answer["code"]?.stringValue
    }

    /// The personal API key's secret (`POST /api/accounts/api-key`, or `rotate-api-key` for a new one).
    public func apiKey(rotate: Bool, passwordHash: String, token: String) async throws -> String {
        let answer = try object(try await send(.POST, rotate ? "/api/accounts/rotate-api-key" : "/api/accounts/api-key", token: token,
                                               json: .object(["masterPasswordHash": .string(passwordHash)])))
        guard let key = answer["apiKey"]?.stringValue, !key.isEmpty else { throw ServerCallError.invalidResponse("the answer has no apiKey") }
        return key
    }

    static func authenticatorSetup(_ answer: JSONObject) throws -> AuthenticatorSetup {
        let fields = answer["authenticator"]?.objectValue ?? answer
        guard let key = fields["key"]?.stringValue, !key.isEmpty else { throw ServerCallError.invalidResponse("the answer has no authenticator key") }
        return AuthenticatorSetup(enabled: fields["enabled"]?.boolValue ?? false, key: key,
                                  userVerificationToken: answer["userVerificationToken"]?.stringValue)
    }
}
