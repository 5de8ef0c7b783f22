import Foundation
import Hummingbird
import VaultModels

/// Push registration (docs/PROTOCOL.md, "Account settings"). The phone apps register a push token after
/// each login, the web vault and browser extension a Web Push subscription, and the apps clear the token
/// at logout. This server has no push relay: the token is kept on the device's row (and cleared), the
/// subscription is checked and dropped, and the answers are the official server's, so that no client logs
/// an error.
extension SessionsController {
    /// `PUT` (or `POST`) `/api/devices/identifier/{identifier}/token` `{"pushToken"}` (at most 255 characters,
    /// `null` clears it): `404` unless the account has a device with that identifier.
    func setPushToken(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let userID = try context.requireUser()
        let identifier = try Self.identifier(context)
        let body = try await request.jsonObject(limit: 64 * 1024)
        let token = try ProfileController.optionalString(body, "pushToken", maxLength: 255)
        guard try await services.repository.setPushToken(userID: userID, identifier: identifier, token: token) else {
            throw APIError.notFound
        }
        return JSONResponse.empty()
    }

    /// `PUT` (or `POST`) `/api/devices/identifier/{identifier}/web-push-auth` `{"endpoint", "p256dh", "auth"}`, all
    /// required: `404` unless the account has a device with that identifier. Nothing is stored.
    func setWebPush(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let userID = try context.requireUser()
        let identifier = try Self.identifier(context)
        let body = try await request.jsonObject(limit: 64 * 1024)
        for field in ["endpoint", "p256dh", "auth"] {
            guard let value = try ProfileController.optionalString(body, field, maxLength: 4096), !value.isEmpty else {
                throw APIError.invalidModel([field: ["The \(field) field is required."]])
            }
        }
        guard try await services.repository.hasDevice(userID: userID, identifier: identifier) else { throw APIError.notFound }
        return JSONResponse.empty()
    }

    /// `PUT` (or `POST`) `/api/devices/identifier/{identifier}/clear-token`, anonymous as on the official server:
    /// the push token of every device row with that identifier is cleared; `404` when there is none.
    func clearPushToken(_ context: VaultRequestContext) async throws -> Response {
        guard try await services.repository.clearPushToken(identifier: try Self.identifier(context)) else { throw APIError.notFound }
        return JSONResponse.empty()
    }

    static func identifier(_ context: VaultRequestContext) throws -> String {
        guard let identifier = context.parameters.get("identifier"), !identifier.isEmpty, identifier.count <= 255 else {
            throw APIError.notFound
        }
        return identifier
    }
}

extension VaultRepository {
    /// Stores a push token on the account's device rows with this identifier; `false` if it has none.
    func setPushToken(userID: String, identifier: String, token: String?) async throws -> Bool {
        try await transaction { session in
            try await !session.query("UPDATE devices SET push_token = ? WHERE user_id = ? AND identifier = ? RETURNING id",
                                     [.optionalText(token), .text(userID), .text(identifier)]).isEmpty
        }
    }

    func hasDevice(userID: String, identifier: String) async throws -> Bool {
        try await read { session in
            try await !session.query("SELECT id FROM devices WHERE user_id = ? AND identifier = ?", [.text(userID), .text(identifier)]).isEmpty
        }
    }

    /// Clears the push token of every device row with this identifier (several accounts may share one app);
    /// `false` if there is none.
    func clearPushToken(identifier: String) async throws -> Bool {
        try await transaction { session in
            try await !session.query("UPDATE devices SET push_token = NULL WHERE identifier = ? RETURNING id", [.text(identifier)]).isEmpty
        }
    }
}
