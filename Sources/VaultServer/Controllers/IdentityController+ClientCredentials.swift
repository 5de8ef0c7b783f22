import Foundation
import Hummingbird
import VaultCrypto
import VaultModels

/// The `client_credentials` grant at the token endpoint (docs/PROTOCOL.md, "Personal API keys").
extension IdentityController {
    /// 400 `{"error":"invalid_client"}`: an unknown client or a wrong secret, told apart by nothing.
    static var invalidClient: APIError {
        var error = APIError(.badRequest, "invalid_client")
        error.exactBody = ["error": .string("invalid_client")]
        return error
    }

    /// `grant_type=client_credentials` with `client_id=user.<id>`, `client_secret=<API key>`, `scope=api`
    /// and the device fields: an access token for the account without a password or two-step login, and
    /// without a refresh token (the client logs in again with the key).
    func clientCredentialsGrant(_ field: (String) -> String?, address: String) async throws -> Response {
        guard let clientID = field("client_id")?.lowercased(), !clientID.isEmpty,
              let secret = field("client_secret"), !secret.isEmpty, secret.count <= 256 else {
            throw Self.invalidClient
        }
        guard field("scope") == "api" else {
            var error = APIError(.badRequest, "invalid_scope")
            error.exactBody = ["error": .string("invalid_scope")]
            throw error
        }
        for name in ["deviceIdentifier", "deviceName", "deviceType"] {
            guard let value = field(name), !value.isEmpty else {
                var error = APIError(.badRequest, "no device information provided")
                error.oauthError = ("device_error", "No device information provided")
                throw error
            }
        }
        if let wait = try await services.limiter.attempt(account: clientID, address: address) {
            services.loginRefused("limited")
            throw APIError.tooMany("login attempts", wait: wait)
        }
        let userID = clientID.hasPrefix("user.") ? String(clientID.dropFirst(5)) : ""
        let user = UUID(uuidString: userID) == nil ? nil : try await services.repository.user(id: userID)
        let stored = try await user.asyncFlatMap { try await services.repository.sealedAPIKey(userID: $0.id) }
            .flatMap { services.twoFactorSecrets.unseal($0) }
        guard let user, let stored, constantTimeEqual(stored, secret) else {
            try await services.limiter.recordFailure(account: clientID, address: address)
            await services.refusals.note("api key login failed", address: address)
            services.loginRefused("wrong_api_key")
            throw Self.invalidClient
        }
        try await services.limiter.recordSuccess(account: clientID, address: address)
        try Self.refuseDisabled(user)
        let device = field("deviceIdentifier")!
        let deviceType = Int(field("deviceType")!) ?? 14
        let (_, _, generation) = try await services.repository.registerDevice(
            userID: user.id, identifier: device, name: String(field("deviceName")!.prefix(100)), type: deviceType,
            now: services.now(), makeToken: RefreshTokens.make(chain:))
        services.logger.info("api key login", metadata: ["user": "\(user.id)"])
        return JSONResponse.make(.object(tokenFields(user: user, device: device, deviceType: deviceType, generation: generation, clientID: clientID,
                                                      refresh: nil, scope: "api")))
    }
}

extension Optional {
    func asyncFlatMap<U>(_ transform: (Wrapped) async throws -> U?) async rethrows -> U? {
        guard let value = self else { return nil }
        return try await transform(value)
    }
}
