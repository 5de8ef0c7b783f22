import Foundation
import HTTPTypes
import Hummingbird
import VaultCrypto
import VaultModels

/// Ending sessions (docs/PROTOCOL.md, "Sessions and the security stamp"): log out everywhere
/// (`POST /api/accounts/security-stamp`), change the master password (`POST /api/accounts/password`),
/// list and revoke devices (`/api/devices`), and log out this device (`POST /identity/connect/revocation`);
/// the phone apps' push registration is taken and goes nowhere (`SessionsController+Push.swift`).
/// Every change of the security stamp revokes every device in the same transaction.
struct SessionsController {
    let services: ServerServices

    func addPublicRoutes(to router: Router<VaultRequestContext>) {
        router.post("/identity/connect/revocation") { request, _ in try await revoke(request) }
        router.get("/api/devices/knowndevice") { request, _ in try await knownDevice(request) }
        for method in [HTTPRequest.Method.put, .post] {
            router.on("/api/devices/identifier/:identifier/clear-token", method: method) { _, context in try await clearPushToken(context) }
        }
    }

    /// Whether this device (`X-Device-Identifier`) has signed in to the account of `X-Request-Email` (base64url)
    /// and is not revoked: the phone apps ask before a login (it was a 404: RELIABILITY bug 69). Anonymous, as the
    /// official route; it says nothing to anyone who does not already hold the device's random identifier.
    func knownDevice(_ request: Request) async throws -> Response {
        guard let encoded = request.headers[HTTPField.Name("X-Request-Email")!], let email = AccessTokenSigner.decodeBase64URL(encoded),
              let identifier = request.headers[HTTPField.Name("X-Device-Identifier")!], !identifier.isEmpty else {
            throw APIError(.badRequest, "X-Request-Email and X-Device-Identifier are required.")
        }
        let address = String(decoding: email, as: UTF8.self).trimmingCharacters(in: .whitespaces)
        return JSONResponse.make(.bool(try await services.repository.isKnownDevice(email: address, identifier: identifier)))
    }

    func addRoutes(to api: RouterGroup<VaultRequestContext>) {
        api.post("accounts/security-stamp") { request, context in try await rotateStamp(request, context) }
        api.post("accounts/password") { request, context in try await changePassword(request, context) }
        api.get("devices") { _, context in
            let devices = try await services.repository.liveDevices(userID: try context.requireUser())
            return JSONResponse.list(devices.map { device($0).serialized() })
        }
        api.get("devices/identifier/:identifier") { _, context in
            guard let identifier = context.parameters.get("identifier"),
                  let row = try await services.repository.liveDevices(userID: try context.requireUser()).first(where: {
                      $0.text("identifier") == identifier }) else { throw APIError.notFound }
            return JSONResponse.make(.object(device(row)))
        }
        api.delete("devices/:id") { _, context in try await deactivate(context) }
        api.post("devices/:id/deactivate") { _, context in try await deactivate(context) }
        for method in [HTTPRequest.Method.put, .post] {
            api.on("devices/identifier/:identifier/token", method: method) { request, context in try await setPushToken(request, context) }
            api.on("devices/identifier/:identifier/web-push-auth", method: method) { request, context in
                try await setWebPush(request, context)
            }
        }
    }

    /// The official `DeviceResponseModel` fields this server has.
    func device(_ row: SQLRow) -> JSONObject {
        var object = JSONObject()
        object["object"] = .string("device")
        object["id"] = .string(row.text("id") ?? "")
        object["name"] = .string(row.text("name") ?? "")
        object["type"] = .int(Int(row.int("type") ?? 0))
        object["identifier"] = .string(row.text("identifier") ?? "")
        object["creationDate"] = .string(WireDate(microsecondsSinceEpoch: row.int("created_at") ?? 0).iso8601)
        object["lastActivityDate"] = .string(WireDate(microsecondsSinceEpoch: row.int("updated_at") ?? 0).iso8601)
        object["isTrusted"] = .bool(false)
        object["encryptedUserKey"] = .null
        object["encryptedPublicKey"] = .null
        return object
    }

    /// The caller's account after checking `masterPasswordHash` (400 naming the field when wrong). The
    /// account's login limit applies: a stolen access token does not make guessing the password cheaper.
    func verifiedUser(_ request: Request, _ context: VaultRequestContext, presented: String?) async throws -> UserRecord {
        guard let user = try await services.repository.user(id: try context.requireUser()) else { throw APIError.unauthorized }
        guard let presented, !presented.isEmpty, presented.count <= 300 else {
            throw APIError.invalidModel(["masterPasswordHash": ["The MasterPasswordHash field is required."]])
        }
        let address = services.clientAddress(request, context)
        if let wait = try await services.limiter.attempt(account: user.email, address: address) {
            throw APIError.tooMany("password attempts", wait: wait)
        }
        guard let salt = Data(base64Encoded: user.passwordSalt), let expected = Data(base64Encoded: user.passwordHash) else {
            throw APIError.invalidModel(["masterPasswordHash": ["Invalid password."]])
        }
        let iterations = user.passwordIterations
        let matches = try await slowHash {
            StoredPasswordHash.verify(clientHash: presented, salt: Array(salt), iterations: iterations, expected: Array(expected))
        }
        guard matches else {
            try await services.limiter.recordFailure(account: user.email, address: address)
            throw APIError.invalidModel(["masterPasswordHash": ["Invalid password."]])
        }
        return user
    }

    /// `POST /api/accounts/security-stamp` `{"masterPasswordHash"}`: log out everywhere.
    func rotateStamp(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let body = try await request.jsonObject(limit: services.configuration.maxBodyBytes)
        let user = try await verifiedUser(request, context, presented: body["masterPasswordHash"]?.stringValue)
        try await services.repository.rotateSecurityStamp(userID: user.id, now: services.now())
        services.logger.info("security stamp rotated", metadata: ["user": "\(user.id)"])
        await services.notifier.loggedOut(user.id, contextID: context.claims?.device)
        return JSONResponse.empty()
    }

    /// `POST /api/accounts/password`: `{"masterPasswordHash", "newMasterPasswordHash", "key", "masterPasswordHint"}`,
    /// or the newer `{"masterPasswordHash", "authenticationData": {"kdf", "masterPasswordAuthenticationHash", "salt"},
    /// "unlockData": {"kdf", "masterKeyWrappedUserKey", "salt"}}` with the account's KDF and salt unchanged.
    func changePassword(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let body = try await request.jsonObject(limit: services.configuration.maxBodyBytes)
        var newHash = body["newMasterPasswordHash"]?.stringValue
        var key = body["key"]?.stringValue
        let hint = body["masterPasswordHint"]?.stringValue
        let authentication = body["authenticationData"]?.objectValue
        let unlock = body["unlockData"]?.objectValue
        if let authentication, let unlock {
            newHash = authentication["masterPasswordAuthenticationHash"]?.stringValue
            key = unlock["masterKeyWrappedUserKey"]?.stringValue
        }
        guard let newHash, !newHash.isEmpty, newHash.count <= 300 else {
            throw APIError.invalidModel(["newMasterPasswordHash": ["The NewMasterPasswordHash field is required."]])
        }
        guard let key, let wrapped = try? EncString(key), wrapped.type.isSymmetric else {
            throw APIError.invalidModel(["key": ["Key is not a valid encrypted string."]])
        }
        if let hint, hint.count > 50 {
            throw APIError.invalidModel(["masterPasswordHint": ["The field MasterPasswordHint must be at most 50 characters."]])
        }
        let user = try await verifiedUser(request, context, presented: body["masterPasswordHash"]?.stringValue)
        if let authentication, let unlock {
            // A password change keeps the account's KDF and salt (changing the KDF is another route).
            for data in [authentication, unlock] {
                let kdf = data["kdf"]?.objectValue
                guard data["salt"]?.stringValue?.lowercased() == user.email, kdf?["kdfType"]?.intValue == user.kdfType,
                      kdf?["iterations"]?.intValue == user.kdfIterations,
                      kdf?["memory"]?.intValue == user.kdfMemory, kdf?["parallelism"]?.intValue == user.kdfParallelism else {
                    throw APIError.invalidModel(["kdf": ["A password change keeps the account's KDF settings and salt."]])
                }
            }
        }
        let salt = SystemRandomSource().bytes(count: 32)
        let iterations = services.configuration.storedHashIterations
        let stored = try await slowHash { try StoredPasswordHash.derive(clientHash: newHash, salt: salt, iterations: iterations) }
        try await services.repository.changePassword(
            userID: user.id, passwordHash: Data(stored).base64EncodedString(), salt: Data(salt).base64EncodedString(),
            iterations: iterations, key: key, hint: body["masterPasswordHint"] == nil ? user.passwordHint : hint, now: services.now())
        services.logger.info("master password changed", metadata: ["user": "\(user.id)"])
        await services.notifier.loggedOut(user.id, contextID: context.claims?.device)
        return JSONResponse.empty()
    }

    /// `DELETE /api/devices/{id}` (and the older `POST /api/devices/{id}/deactivate`): the device's
    /// refresh and access tokens stop. 404 for a device of another account.
    func deactivate(_ context: VaultRequestContext) async throws -> Response {
        let id = try OrganizationsController.uuid(context, "id")
        let userID = try context.requireUser()
        guard let identifier = try await services.repository.revokeDevice(id: id, userID: userID, now: services.now()) else {
            throw APIError.notFound
        }
        await services.notifier.deviceRevoked(userID: userID, device: identifier)
        return JSONResponse.empty()
    }

    /// `POST /identity/connect/revocation` with the form field `token` (OAuth 2.0 token revocation,
    /// RFC 7009): a refresh token or an access token of a device logs that device out. The answer is 200
    /// whether or not the token was valid (RFC 7009 §2.2), so it tells nothing about a token.
    func revoke(_ request: Request) async throws -> Response {
        let form = IdentityController.parseForm(try await request.readBody(limit: 64 * 1024))
        guard let token = form["token"], !token.isEmpty else {
            throw APIError(.badRequest, "token cannot be blank").withOAuth("invalid_request")
        }
        let now = services.now()
        if let claims = services.signer.verify(token, nowSeconds: now / 1_000_000), UUID(uuidString: claims.subject) != nil {
            try await services.repository.revokeDevice(userID: claims.subject, identifier: claims.device, now: now)
            await services.notifier.deviceRevoked(userID: claims.subject, device: claims.device)
        } else if let revoked = try await services.repository.revokeDevice(refreshTokenHash: RefreshTokens.hash(token), now: now) {
            await services.notifier.deviceRevoked(userID: revoked.userID, device: revoked.identifier)
        }
        return JSONResponse.empty()
    }
}

extension VaultRepository {
    /// The account's devices that are signed in.
    func liveDevices(userID: String) async throws -> [SQLRow] {
        try await transaction { session in
            try await session.query("SELECT * FROM devices WHERE user_id = ? AND revoked_at IS NULL ORDER BY created_at", [.text(userID)])
        }
    }

    /// Revokes one of the account's devices and returns its identifier; `nil` if it has no device with that id.
    func revokeDevice(id: String, userID: String, now: Int64) async throws -> String? {
        try await transaction { session in
            guard let row = try await session.query("SELECT revoked_at, identifier FROM devices WHERE id = ? AND user_id = ?",
                                                    [.text(id), .text(userID)]).first else { return nil }
            // Already revoked: nothing to do (the official server answers the same).
            if row.int("revoked_at") == nil { try await Self.revokeDevice(id: id, now: now, session) }
            return row.text("identifier") ?? ""
        }
    }

    /// Revokes the device an access token was issued to.
    func revokeDevice(userID: String, identifier: String, now: Int64) async throws {
        try await transaction { session in
            for row in try await session.query("SELECT id FROM devices WHERE user_id = ? AND identifier = ? AND revoked_at IS NULL",
                                               [.text(userID), .text(identifier)]) {
                try await Self.revokeDevice(id: row.text("id") ?? "", now: now, session)
            }
        }
    }

    /// Revokes the device whose current or previous refresh token has this hash, if any; returns its
    /// account and identifier.
    @discardableResult
    func revokeDevice(refreshTokenHash: String, now: Int64) async throws -> (userID: String, identifier: String)? {
        try await transaction { session in
            var revoked: (String, String)?
            for row in try await session.query("""
                SELECT id, user_id, identifier FROM devices WHERE (refresh_token_hash = ? OR previous_refresh_token_hash = ?) AND revoked_at IS NULL
                """, [.text(refreshTokenHash), .text(refreshTokenHash)]) {
                try await Self.revokeDevice(id: row.text("id") ?? "", now: now, session)
                revoked = (row.text("user_id") ?? "", row.text("identifier") ?? "")
            }
            return revoked
        }
    }

    /// A new security stamp, every device of the account revoked, and the personal API key dropped, in
    /// one transaction: log out everywhere and a password change end the sessions the key opened and the
    /// key itself (`POST /api/accounts/api-key` makes a new one).
    static func rotateSecurityStamp(userID: String, now: Int64, _ session: any SQLSession) async throws {
        try await session.query("UPDATE users SET security_stamp = ?, updated_at = ?, api_key = NULL WHERE id = ?",
                                [.text(newID()), .int(now), .text(userID)])
        try await session.query("""
            UPDATE devices SET refresh_token_hash = 'revoked:' || id, previous_refresh_token_hash = NULL,
                previous_refresh_expires_at = NULL, revoked_at = ?, updated_at = ?, generation = generation + 1
            WHERE user_id = ? AND revoked_at IS NULL
            """, [.int(now), .int(now), .text(userID)])
    }

    func rotateSecurityStamp(userID: String, now: Int64) async throws {
        try await transaction { session in try await Self.rotateSecurityStamp(userID: userID, now: now, session) }
    }

    /// Stores a new master password (its server-side hash and the user key wrapped by the new master
    /// key), bumps the account revision and rotates the stamp, in one transaction.
    func changePassword(userID: String, passwordHash: String, salt: String, iterations: Int, key: String, hint: String?,
                        now: Int64) async throws {
        try await transaction { session in
            try await session.query("""
                UPDATE users SET password_hash = ?, password_salt = ?, password_iterations = ?, akey = ?, password_hint = ?,
                    revision_date = ? WHERE id = ?
                """, [.text(passwordHash), .text(salt), .int(Int64(iterations)), .text(key), .optionalText(hint), .int(now), .text(userID)])
            try await Self.rotateSecurityStamp(userID: userID, now: now, session)
        }
    }
}
