import Foundation
import Hummingbird
import VaultCrypto
import VaultModels

/// Setting up two-step login with an authenticator app, and the recovery code (docs/PROTOCOL.md,
/// "Two-step login"). The answers have the flat shape most clients read: `{"enabled","key",
/// "userVerificationToken","object":"twoFactorAuthenticator"}`.
struct TwoFactorController {
    let services: ServerServices

    func addPublicRoutes(to router: Router<VaultRequestContext>) {
        router.post("/api/two-factor/recover") { request, context in try await recover(request, context) }
    }

    func addRoutes(to api: RouterGroup<VaultRequestContext>) {
        api.get("two-factor") { _, context in try await list(context) }
        api.post("two-factor/get") { _, context in try await list(context) }
        api.post("two-factor/get-authenticator") { request, context in try await getAuthenticator(request, context) }
        api.put("two-factor/authenticator") { request, context in try await activate(request, context) }
        api.post("two-factor/authenticator") { request, context in try await activate(request, context) }
        api.delete("two-factor/authenticator") { request, context in try await deleteAuthenticator(request, context) }
        api.put("two-factor/disable") { request, context in try await disable(request, context) }
        api.post("two-factor/disable") { request, context in try await disable(request, context) }
        api.post("two-factor/get-recover") { request, context in try await getRecover(request, context) }
    }

    private var sessions: SessionsController { SessionsController(services: services) }
    private var nowSeconds: Int64 { services.now() / 1_000_000 }

    /// `GET /api/two-factor`: the providers the account has enabled.
    func list(_ context: VaultRequestContext) async throws -> Response {
        let state = try await services.repository.twoFactorState(userID: try context.requireUser())
        return JSONResponse.list(state.enabledTypes.map { type in
            JSONValue.object(["enabled": .bool(true), "type": .int(type), "object": .string("twoFactorProvider")]).serialized()
        })
    }

    /// `POST /api/two-factor/get-authenticator` `{masterPasswordHash}`: the enabled authenticator's key,
    /// or a new key (not stored until a code made with it is shown) with a token that confirms the user
    /// for that key for 30 minutes.
    func getAuthenticator(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let body = try await request.jsonObject(limit: services.configuration.maxBodyBytes)
        let user = try await sessions.verifiedUser(request, context, presented: body["masterPasswordHash"]?.stringValue)
        let state = try await services.repository.twoFactorState(userID: user.id)
        let enabled = state.authenticatorEnabled && state.authenticatorKey != nil
        let key = enabled ? state.authenticatorKey! : AuthenticatorKey.generate()
        return authenticatorResponse(enabled: enabled, key: key,
                                     token: services.twoFactorSecrets.userVerificationToken(userID: user.id, key: key, nowSeconds: nowSeconds))
    }

    private func authenticatorResponse(enabled: Bool, key: String, token: String?) -> Response {
        JSONResponse.make(.object([
            "enabled": .bool(enabled), "key": .string(key), "userVerificationToken": token.map(JSONValue.string) ?? .null,
            "object": .string("twoFactorAuthenticator"),
        ]))
    }

    /// The caller, confirmed either by a user-verification token bound to `key` or by the master
    /// password hash (400 "User verification failed." under `UserVerificationToken` without either).
    private func verifiedUser(_ request: Request, _ context: VaultRequestContext, _ body: JSONObject, key: String) async throws -> UserRecord {
        let userID = try context.requireUser()
        if let token = body["userVerificationToken"]?.stringValue, !token.isEmpty,
           services.twoFactorSecrets.verify(userVerificationToken: token, userID: userID, key: key, nowSeconds: nowSeconds) {
            guard let user = try await services.repository.user(id: userID) else { throw APIError.unauthorized }
            return user
        }
        if let hash = body["masterPasswordHash"]?.stringValue, !hash.isEmpty {
            return try await sessions.verifiedUser(request, context, presented: hash)
        }
        throw APIError.invalidModel(["UserVerificationToken": ["User verification failed."]])
    }

    /// `PUT` (or `POST`) `/api/two-factor/authenticator` `{token, key, userVerificationToken | masterPasswordHash}`:
    /// turns the authenticator on with `key` once `token` is its current code; makes the recovery code.
    func activate(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let body = try await request.jsonObject(limit: services.configuration.maxBodyBytes)
        guard let rawKey = body["key"]?.stringValue, rawKey.count <= 64 else {
            throw APIError.invalidModel(["Key": ["The Key field is required."]])
        }
        let key = AuthenticatorKey.normalise(rawKey)
        // A number is accepted too (Vaultwarden's clients once sent one).
        let code = (body["token"]?.stringValue ?? body["token"]?.intValue.map { String(format: "%06d", $0) } ?? "").filter { !$0.isWhitespace }
        guard !code.isEmpty, code.count <= 50 else { throw APIError.invalidModel(["Token": ["The Token field is required."]]) }
        let user = try await verifiedUser(request, context, body, key: key)
        guard let secret = AuthenticatorKey.decode(key) else {
            throw APIError.invalidModel(["Key": ["The key must be 20 bytes in Base32."]])
        }
        // Wrong codes here count towards the same kind of lockout as at login, keyed apart from it.
        let limiterKey = "setup\n" + user.id
        if let wait = try await services.twoFactorLimiter.attempt(account: limiterKey, address: "") {
            throw Self.tooMany(wait)
        }
        // Re-enabling with the same key: a code already used (at login) is not shown again.
        let state = try await services.repository.twoFactorState(userID: user.id)
        let lastUsed = state.authenticatorKey == key ? state.lastUsedStep : 0
        guard let step = AuthenticatorKey.matchingStep(code: code, secret: secret, nowSeconds: nowSeconds, after: lastUsed) else {
            try await services.twoFactorLimiter.recordFailure(account: limiterKey, address: "")
            throw APIError.invalidModel(["Token": ["Invalid token."]])
        }
        try await services.twoFactorLimiter.recordSuccess(account: limiterKey, address: "")
        try await services.repository.enableAuthenticator(userID: user.id, key: key, step: step, now: services.now())
        services.logger.info("two-step login enabled", metadata: ["user": "\(user.id)"])
        return authenticatorResponse(enabled: true, key: key, token: nil)
    }

    /// `DELETE /api/two-factor/authenticator` `{type, key, userVerificationToken | masterPasswordHash}`.
    func deleteAuthenticator(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let body = try await request.jsonObject(limit: services.configuration.maxBodyBytes)
        let key = AuthenticatorKey.normalise(body["key"]?.stringValue ?? "")
        let user = try await verifiedUser(request, context, body, key: key)
        let state = try await services.repository.twoFactorState(userID: user.id)
        if let stored = state.authenticatorKey, !constantTimeEqual(stored, key) {
            throw APIError.invalidModel(["Key": ["The key is not the authenticator's."]])
        }
        try await services.repository.disableTwoFactor(userID: user.id, type: TwoFactorProvider.authenticator)
        services.logger.info("two-step login disabled", metadata: ["user": "\(user.id)"])
        return disabledResponse(type: TwoFactorProvider.authenticator)
    }

    /// `PUT` (or `POST`) `/api/two-factor/disable` `{type, masterPasswordHash}`.
    func disable(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let body = try await request.jsonObject(limit: services.configuration.maxBodyBytes)
        guard let type = body["type"]?.intValue ?? body["type"]?.stringValue.flatMap({ Int($0) }), (0...8).contains(type) else {
            throw APIError.invalidModel(["Type": ["The Type field is required."]])
        }
        let user = try await sessions.verifiedUser(request, context, presented: body["masterPasswordHash"]?.stringValue)
        try await services.repository.disableTwoFactor(userID: user.id, type: type)
        services.logger.info("two-step login disabled", metadata: ["user": "\(user.id)"])
        return disabledResponse(type: type)
    }

    private func disabledResponse(type: Int) -> Response {
        JSONResponse.make(.object(["enabled": .bool(false), "type": .int(type), "object": .string("twoFactorProvider")]))
    }

    /// `POST /api/two-factor/get-recover` `{masterPasswordHash}`: the recovery code (null before two-step
    /// login was first set up).
    func getRecover(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let body = try await request.jsonObject(limit: services.configuration.maxBodyBytes)
        let user = try await sessions.verifiedUser(request, context, presented: body["masterPasswordHash"]?.stringValue)
        let code = try await services.repository.recoveryCode(userID: user.id)
        return JSONResponse.make(.object(["code": code.map(JSONValue.string) ?? .null, "object": .string("twoFactorRecover")]))
    }

    /// `POST /api/two-factor/recover` `{email, masterPasswordHash, recoveryCode}`, anonymous (the older way
    /// to recover; today's clients send the code to the token endpoint): turns two-step login off and
    /// makes a new recovery code. Every failure is the same 400 after the same slow hash, for accounts
    /// that do not exist too.
    func recover(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let body = try await request.jsonObject(limit: services.configuration.maxBodyBytes)
        let email = DecoyKdf.normalise(body["email"]?.stringValue ?? "")
        let hash = body["masterPasswordHash"]?.stringValue ?? ""
        let code = AccountSecrets.normaliseRecoveryCode(body["recoveryCode"]?.stringValue ?? "")
        let invalid = APIError.invalidModel(["": ["Invalid information. Try again."]])
        guard !email.isEmpty, !hash.isEmpty, hash.count <= 300, !code.isEmpty, code.count <= 64 else { throw invalid }
        let address = services.clientAddress(request, context)
        if let wait = try await services.limiter.attempt(account: email, address: address) {
            throw APIError.tooMany("attempts", wait: wait)
        }
        let user = try await IdentityController(services: services).verifyPassword(email: email, presented: hash)
        guard let user, try await services.repository.recoverTwoFactor(userID: user.id, code: code) else {
            try await services.limiter.recordFailure(account: email, address: address)
            throw invalid
        }
        try await services.limiter.recordSuccess(account: email, address: address)
        services.logger.info("two-step login recovered", metadata: ["user": "\(user.id)"])
        return JSONResponse.empty()
    }

    static func tooMany(_ wait: Double) -> APIError {
        return APIError.tooMany("two-step login attempts", wait: wait)
    }
}
