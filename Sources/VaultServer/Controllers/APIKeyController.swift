import Foundation
import Hummingbird
import VaultModels

/// Personal API keys (docs/PROTOCOL.md, "Personal API keys"): `POST /api/accounts/api-key` shows the
/// account's key (making one the first time), `POST /api/accounts/rotate-api-key` replaces it; both
/// need the master password hash. The key is the `client_secret` of the `client_credentials` grant.
struct APIKeyController {
    let services: ServerServices

    func addRoutes(to api: RouterGroup<VaultRequestContext>) {
        api.post("accounts/api-key") { request, context in try await apiKey(request, context, rotate: false) }
        api.post("accounts/rotate-api-key") { request, context in try await apiKey(request, context, rotate: true) }
    }

    func apiKey(_ request: Request, _ context: VaultRequestContext, rotate: Bool) async throws -> Response {
        let body = try await request.jsonObject(limit: services.configuration.maxBodyBytes)
        let user = try await SessionsController(services: services).verifiedUser(request, context,
                                                                                  presented: body["masterPasswordHash"]?.stringValue)
        let secrets = services.twoFactorSecrets
        let previous = try await services.repository.sealedAPIKey(userID: user.id)
        var key = previous.flatMap { secrets.unseal($0) }
        // A key sealed under another token key cannot be shown (or used): it is replaced like a missing one.
        if rotate || key == nil {
            let sealed = try await services.repository.storeAPIKey(userID: user.id, sealed: try secrets.seal(AccountSecrets.apiKey()),
                                                                   replacing: previous)
            key = secrets.unseal(sealed)
            services.logger.info(rotate ? "api key rotated" : "api key created", metadata: ["user": "\(user.id)"])
        }
        guard let key else { throw APIError(.internalServerError, "An unhandled server error has occurred.") }
        return JSONResponse.make(.object([
            "apiKey": .string(key), "revisionDate": .string(WireDate(microsecondsSinceEpoch: user.revisionDate).iso8601),
            "object": .string("apiKey"),
        ]))
    }
}

extension VaultRepository {
    /// The sealed API key of the account, if it has one.
    func sealedAPIKey(userID: String) async throws -> String? {
        try await transaction { session in
            try await session.query("SELECT api_key FROM users WHERE id = ?", [.text(userID)]).first?.text("api_key")
        }
    }

    /// Stores a new sealed API key if the account's is still `previous` (compare and swap: of two
    /// concurrent creations or rotations, one wins and both answer its key). Returns the sealed key the
    /// account has afterwards.
    func storeAPIKey(userID: String, sealed: String, replacing previous: String?) async throws -> String {
        try await transaction { session in
            // Conditional, so that of two concurrent writers (PostgreSQL re-checks the condition after the first
            // commits) only one replaces the key.
            let updated = try await session.query(
                "UPDATE users SET api_key = ? WHERE id = ? AND " + (previous == nil ? "api_key IS NULL" : "api_key = ?") + " RETURNING id",
                [.text(sealed), .text(userID)] + (previous.map { [SQLValue.text($0)] } ?? []))
            if !updated.isEmpty { return sealed }
            return try await session.query("SELECT api_key FROM users WHERE id = ?", [.text(userID)]).first?.text("api_key") ?? sealed
        }
    }
}
