import Foundation
import Hummingbird
import Logging
import VaultCrypto
import VaultModels

/// Prelogin, registration and the token endpoint (spec §2.1–§2.3).
struct IdentityController {
    let services: ServerServices

    func addRoutes(to router: Router<VaultRequestContext>) {
        for path in ["/identity/accounts/prelogin", "/identity/accounts/prelogin/password", "/api/accounts/prelogin"] {
            router.post(RouterPath(path)) { request, _ in try await prelogin(request) }
        }
        router.post("/identity/accounts/register") { request, context in try await register(request, context, finish: false) }
        router.post("/identity/accounts/register/finish") { request, context in try await register(request, context, finish: true) }
        router.post("/identity/accounts/register/send-verification-email") { request, context in try await startRegistration(request, context) }
        router.post("/identity/connect/token") { request, context in try await token(request, context: context) }
    }

    func prelogin(_ request: Request) async throws -> Response {
        let body = try await request.jsonObject(limit: services.configuration.maxBodyBytes)
        let email = DecoyKdf.normalise(body["email"]?.stringValue ?? "")
        // An unknown email gets settings chosen by a keyed hash of it, in the same shape: the answer does
        // not tell whether an account exists, even one with uncommon settings.
        let user = email.isEmpty ? nil : try await services.repository.user(email: email)
        let decoy = services.decoyKdf.settings(for: email)
        let kdf = user.map { ($0.kdfType, $0.kdfIterations, $0.kdfMemory, $0.kdfParallelism) }
            ?? (decoy.type, decoy.iterations, decoy.memory, decoy.parallelism)
        var object = JSONObject()
        object["kdf"] = .int(kdf.0)
        object["kdfIterations"] = .int(kdf.1)
        object["kdfMemory"] = kdf.2.map(JSONValue.int) ?? .null
        object["kdfParallelism"] = kdf.3.map(JSONValue.int) ?? .null
        object["kdfSettings"] = .object([
            "kdfType": .int(kdf.0), "iterations": .int(kdf.1),
            "memory": kdf.2.map(JSONValue.int) ?? .null, "parallelism": kdf.3.map(JSONValue.int) ?? .null,
        ])
        object["salt"] = .null
        return JSONResponse.make(.object(object))
    }

    /// Server-side KDF limits (Vaultwarden's: PBKDF2 ≥ 100,000; Argon2id t ≥ 1, 15–1024 MiB, 1–16 lanes).
    static func validateKdf(type: Int, iterations: Int, memory: Int?, parallelism: Int?) throws {
        switch type {
        case 0:
            guard (100_000...2_000_000).contains(iterations) else {
                throw APIError.invalidModel(["kdfIterations": ["PBKDF2 iterations must be between 100,000 and 2,000,000."]])
            }
        case 1:
            guard (1...10).contains(iterations), let memory, (15...1024).contains(memory), let parallelism, (1...16).contains(parallelism) else {
                throw APIError.invalidModel(["kdf": ["Argon2id needs 1–10 iterations, 15–1024 MiB and 1–16 lanes."]])
            }
        default:
            throw APIError.invalidModel(["kdf": ["Unknown KDF type \(type)."]])
        }
    }

    /// The first step of the official clients' sign-up (docs/PROTOCOL.md, "Registration"): no mail is sent, so the
    /// answer is the verification token itself, which the client takes straight to `register/finish` (as
    /// Vaultwarden answers without mail). The same answer whether or not the email has an account: a taken one is
    /// refused at the finish, as a direct registration is.
    func startRegistration(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let body = try await request.jsonObject(limit: services.configuration.maxBodyBytes)
        let email = EmailAddress.normalise(body["email"]?.stringValue ?? "")
        guard Self.isEmailAddress(email) else {
            throw APIError.invalidModel(["email": ["The Email field is not a supported e-mail address format."]])
        }
        try Self.refuseInvisibleCharacters(email)
        try await refuseUninvited(email)
        return JSONResponse.make(.string(services.registrationTokens.token(email: email, nowSeconds: services.now() / 1_000_000)))
    }

    static func isEmailAddress(_ email: String) -> Bool {
        email.count <= 256 && email.contains("@") && !email.hasPrefix("@") && !email.hasSuffix("@")
    }

    /// 400 for an address with a character that displays as nothing (``EmailAddress/invisibleCharacter(in:)``):
    /// such an address can only be meant to look like another.
    static func refuseInvisibleCharacters(_ email: String) throws {
        if let scalar = EmailAddress.invisibleCharacter(in: email) {
            let code = "U+" + String(scalar.value, radix: 16, uppercase: true)
            throw APIError.invalidModel(["email": ["The Email field contains an invisible character (\(code))."]])
        }
    }

    /// `body[key]` as an integer, `nil` when absent or `null`; 400 naming the field when it is anything else
    /// (a string, a fraction): a KDF setting the server cannot read is refused, never replaced by the default.
    static func optionalInteger(_ body: JSONObject, _ key: String, field: String? = nil) throws -> Int? {
        guard let value = body[key], !value.isNull else { return nil }
        guard let number = value.intValue else {
            let name = field ?? key
            throw APIError.invalidModel([name: ["The field \(name) must be an integer."]])
        }
        return number
    }

    /// With sign-ups closed only an address an administrator invited may register (`vaultsync-server admin
    /// invite`); others get the answer a taken address gets.
    func refuseUninvited(_ email: String) async throws {
        guard services.configuration.disableSignups else { return }
        guard try await services.repository.read({ try await VaultRepository.isInvited(email: email, $0) }) else {
            throw APIError(.badRequest, "Registration not allowed or user already exists")
        }
    }

    func register(_ request: Request, _ context: VaultRequestContext, finish: Bool) async throws -> Response {
        let body = try await request.jsonObject(limit: services.configuration.maxBodyBytes)
        func string(_ key: String) -> String? { body[key]?.stringValue }
        var email = EmailAddress.normalise(string("email") ?? "")
        var hash = string("masterPasswordHash")
        var key = string("key") ?? string("userSymmetricKey")
        var kdfType = try Self.optionalInteger(body, "kdf")
        var iterations = try Self.optionalInteger(body, "kdfIterations")
        var memory = try Self.optionalInteger(body, "kdfMemory")
        var parallelism = try Self.optionalInteger(body, "kdfParallelism")
        if body["key"] != nil && body["userSymmetricKey"] != nil {
            throw APIError.invalidModel(["key": ["Send either key or userSymmetricKey, not both."]])
        }
        if body["keys"] != nil && body["userAsymmetricKeys"] != nil {
            throw APIError.invalidModel(["keys": ["Send either keys or userAsymmetricKeys, not both."]])
        }
        // register/finish: the newer body nests these.
        if let authentication = body["masterPasswordAuthentication"]?.objectValue {
            hash = authentication["masterPasswordAuthenticationHash"]?.stringValue
            if let kdf = authentication["kdf"]?.objectValue {
                let path = "masterPasswordAuthentication.kdf."
                kdfType = try Self.optionalInteger(kdf, "kdfType", field: path + "kdfType")
                iterations = try Self.optionalInteger(kdf, "iterations", field: path + "iterations")
                memory = try Self.optionalInteger(kdf, "memory", field: path + "memory")
                parallelism = try Self.optionalInteger(kdf, "parallelism", field: path + "parallelism")
            }
            if let salt = authentication["salt"]?.stringValue, EmailAddress.normalise(salt) != email {
                throw APIError(.unprocessableContent, "Unexpected RegisterData format")
            }
        }
        if let unlock = body["masterPasswordUnlock"]?.objectValue {
            key = unlock["masterKeyWrappedUserKey"]?.stringValue ?? key
            if let kdf = unlock["kdf"]?.objectValue, kdf["kdfType"]?.intValue != kdfType || kdf["iterations"]?.intValue != iterations {
                throw APIError(.unprocessableContent, "Unexpected RegisterData format")
            }
        }
        if email.isEmpty, let fromToken = string("email") { email = EmailAddress.normalise(fromToken) }
        guard Self.isEmailAddress(email) else {
            throw APIError.invalidModel(["email": ["The Email field is not a supported e-mail address format."]])
        }
        try Self.refuseInvisibleCharacters(email)
        try await refuseUninvited(email)
        // A finish that carries the first step's token creates the account of the email the token was made for.
        if finish, let token = string("emailVerificationToken"),
           services.registrationTokens.email(of: token, nowSeconds: services.now() / 1_000_000) != email {
            throw APIError(.badRequest, "Invalid email verification token.")
        }
        guard let hash, !hash.isEmpty, hash.count <= 300 else { throw APIError.invalidModel(["masterPasswordHash": ["The MasterPasswordHash field is required."]]) }
        guard let key, let protectedKey = try? EncString(key), protectedKey.type.isSymmetric else {
            throw APIError.invalidModel(["key": ["Key is not a valid encrypted string."]])
        }
        let kdf = (type: kdfType ?? 0, iterations: iterations ?? 600_000)
        try Self.validateKdf(type: kdf.type, iterations: kdf.iterations, memory: memory, parallelism: parallelism)
        let keys = (body["keys"] ?? body["userAsymmetricKeys"])?.objectValue
        let publicKey = keys?["publicKey"]?.stringValue
        let privateKey = keys?["encryptedPrivateKey"]?.stringValue
        if let privateKey, (try? EncString(privateKey)) == nil {
            throw APIError.invalidModel(["keys.encryptedPrivateKey": ["EncryptedPrivateKey is not a valid encrypted string."]])
        }
        if let publicKey, (try? RSAPublicKey(spkiBase64: publicKey)) == nil {
            throw APIError.invalidModel(["keys.publicKey": ["PublicKey is not a valid public key."]])
        }
        // Limited once the body is valid, before the slow hash (docs/PROTOCOL.md, "Login limits").
        let address = services.clientAddress(request, context)
        if let wait = try await services.registrationLimiter.attempt(account: email, address: address) {
            throw APIError.tooMany("registrations", wait: wait)
        }
        // A look-alike of an existing account (the same address but for accents, width or Cyrillic and Greek
        // letters drawn like Latin ones), or an account stored before emails were normalised (in another
        // composition), is taken; the lookup tries those stored forms (``VaultRepository/user(email:_:)``).
        let skeleton = EmailAddress.skeleton(email)
        let legacy = EmailAddress.legacyForm(string("email") ?? "")
        for taken in Set([email, skeleton, legacy]) where Self.isEmailAddress(taken) {
            if try await services.repository.user(email: taken) != nil {
                try await services.registrationLimiter.recordFailure(account: email, address: address)
                throw APIError(.badRequest, "Registration not allowed or user already exists")
            }
        }
        let salt = SystemRandomSource().bytes(count: 32)
        let iterationsServer = storedHashIterations
        let stored = try await slowHash { try StoredPasswordHash.derive(clientHash: hash, salt: salt, iterations: iterationsServer) }
        let now = services.now()
        let user = UserRecord(
            id: newID(), email: email, name: string("name").map { String($0.prefix(50)) }, passwordHash: Data(stored).base64EncodedString(),
            passwordSalt: Data(salt).base64EncodedString(), passwordIterations: iterationsServer,
            passwordHint: string("masterPasswordHint"), akey: key, privateKey: privateKey, publicKey: publicKey,
            kdfType: kdf.type, kdfIterations: kdf.iterations, kdfMemory: kdf.type == 1 ? memory : nil,
            kdfParallelism: kdf.type == 1 ? parallelism : nil, securityStamp: newID(), now: now)
        guard try await services.repository.insert(user: user, requiringInvitation: services.configuration.disableSignups) else {
            try await services.registrationLimiter.recordFailure(account: email, address: address)
            throw APIError(.badRequest, "Registration not allowed or user already exists")
        }
        services.logger.info("account registered", metadata: ["user": "\(user.id)"])
        return JSONResponse.make(.object(finish ? ["object": .string("registerFinish")] : ["object": .string("register"), "captchaBypassToken": .string("")]))
    }

    /// A disabled account is refused after its password checked out, so that the answer tells only someone
    /// who knows the password that the account exists (docs/OPERATIONS.md, "Administration").
    static func refuseDisabled(_ user: UserRecord) throws {
        guard user.disabledAt == nil else {
            throw grantError("invalid_grant", message: "This account is disabled. Ask the server's administrator to enable it.")
        }
    }

    /// OAuth-style failure (spec §2.3).
    static func grantError(_ description: String, message: String, status: HTTPResponse.Status = .badRequest) -> APIError {
        var error = APIError(status, message)
        error.oauthError = ("invalid_grant", description)
        return error
    }

    func token(_ request: Request, context: VaultRequestContext) async throws -> Response {
        let form = Self.parseForm(try await request.readBody(limit: 64 * 1024))
        func field(_ name: String) -> String? { form[Self.normalise(name)] }
        switch field("grant_type") {
        case "password":
            return try await passwordGrant(field, address: services.clientAddress(request, context))
        case "client_credentials":
            return try await clientCredentialsGrant(field, address: services.clientAddress(request, context))
        case "refresh_token":
            guard let refresh = field("refresh_token"), !refresh.isEmpty else {
                throw Self.grantError("invalid_grant", message: "refresh_token cannot be blank")
            }
            return try await refreshGrant(refresh, clientID: field("client_id") ?? "")
        default:
            throw APIError(.badRequest, "Unsupported grant type.").withOAuth("unsupported_grant_type")
        }
    }

    /// A refresh (docs/PROTOCOL.md, "Refresh tokens"): every refusal is the same `invalid_grant`, so the
    /// answer does not tell a thief that presenting the token revoked the device.
    private func refreshGrant(_ refresh: String, clientID: String) async throws -> Response {
        let configuration = services.configuration
        let outcome = try await services.repository.refresh(
            token: refresh, tokens: services.refreshTokens, now: services.now(),
            lifetime: configuration.refreshTokenLifetime * 1_000_000, grace: configuration.refreshTokenGracePeriod * 1_000_000)
        switch outcome {
        case .issued(let user, let device, let type, let generation):
            var object = tokenFields(user: user, device: device, deviceType: type, generation: generation, clientID: clientID,
                                     refresh: services.refreshTokens.successor(of: refresh))
            object["Key"] = nil
            return JSONResponse.make(.object(object))
        case .reused(let userID, let identifier):
            services.logger.warning("refresh token reused: device revoked")
            await services.notifier.deviceRevoked(userID: userID, device: identifier)
            throw Self.grantError("invalid_grant", message: "Invalid refresh token.")
        case .invalid, .expired:
            throw Self.grantError("invalid_grant", message: "Invalid refresh token.")
        }
    }

    /// The iterations of the server's stored password hash for new accounts (and of the decoy hash).
    private var storedHashIterations: Int {
        services.configuration.storedHashIterations
    }

    /// The salt of the hash computed for logins to accounts that do not exist (its value does not matter).
    private static let decoySalt = [UInt8](repeating: 0x5A, count: 32)

    private func passwordGrant(_ field: (String) -> String?, address: String) async throws -> Response {
        for name in ["client_id", "password", "scope", "username", "deviceIdentifier", "deviceName", "deviceType"] {
            guard let value = field(name), !value.isEmpty else {
                throw Self.grantError("invalid_request", message: "\(name) cannot be blank")
            }
        }
        let email = EmailAddress.normalise(field("username")!)
        if let wait = try await services.limiter.attempt(account: email, address: address) {
            services.loginRefused("limited")
            throw APIError.tooMany("login attempts", wait: wait)
        }
        let verified = try await verifyPassword(email: email, presented: field("password")!)
        guard let user = verified else {
            try await services.limiter.recordFailure(account: email, address: address)
            await services.refusals.note("login failed", address: address)
            services.loginRefused("wrong_password")
            throw Self.grantError("invalid_username_or_password", message: "Username or password is incorrect. Try again.")
        }
        try await services.limiter.recordSuccess(account: email, address: address)
        try Self.refuseDisabled(user)
        let device = field("deviceIdentifier")!
        // Two-step login, after the password (docs/PROTOCOL.md, "Two-step login").
        let step = try await twoFactorStep(field, user: user, device: device)
        let deviceType = Int(field("deviceType")!) ?? 14
        let (_, refresh, generation) = try await services.repository.registerDevice(
            userID: user.id, identifier: device, name: String(field("deviceName")!.prefix(100)), type: deviceType,
            now: services.now(), makeToken: RefreshTokens.make(chain:))
        var object = tokenFields(user: user, device: device, deviceType: deviceType, generation: generation, clientID: field("client_id")!,
                                 refresh: refresh)
        if step.remember {
            object["TwoFactorToken"] = .string(try await rememberDevice(user: user, device: device))
        }
        services.logger.info("login", metadata: ["user": "\(user.id)"])
        return JSONResponse.make(.object(object))
    }

    /// The account of `email` if `presented` is its master password hash. An unknown account costs the
    /// same slow hash as a wrong password, so the answer's timing does not tell whether the account exists
    /// (as prelogin's default KDF does not).
    func verifyPassword(email: String, presented: String) async throws -> UserRecord? {
        let found = try await services.repository.user(email: email)
        if let user = found, let salt = Data(base64Encoded: user.passwordSalt), let expected = Data(base64Encoded: user.passwordHash) {
            let iterations = user.passwordIterations
            let matches = try await slowHash {
                StoredPasswordHash.verify(clientHash: presented, salt: Array(salt), iterations: iterations, expected: Array(expected))
            }
            return matches ? user : nil
        }
        let iterations = storedHashIterations
        _ = try await slowHash {
            StoredPasswordHash.verify(clientHash: presented, salt: Self.decoySalt, iterations: iterations, expected: [])
        }
        return nil
    }

    /// The token endpoint's answer fields. `refresh` nil: no refresh token (the `client_credentials` grant).
    func tokenFields(user: UserRecord, device: String, deviceType: Int, generation: Int64, clientID: String, refresh: String?,
                     scope: String = "api offline_access") -> JSONObject {
        let now = services.now() / 1_000_000
        let lifetime = services.configuration.accessTokenLifetime
        let access = services.signer.sign(AccessClaims(
            subject: user.id, email: user.email, name: user.name ?? "", securityStamp: user.securityStamp, device: device,
            deviceType: deviceType, clientID: clientID, notBefore: now, expires: now + lifetime, generation: generation))
        var object = JSONObject()
        object["access_token"] = .string(access)
        object["expires_in"] = .number(String(lifetime))
        object["token_type"] = .string("Bearer")
        if let refresh { object["refresh_token"] = .string(refresh) }
        object["scope"] = .string(scope)
        object["Key"] = .string(user.akey)
        object["PrivateKey"] = user.privateKey.map(JSONValue.string) ?? .null
        object["Kdf"] = .int(user.kdfType)
        object["KdfIterations"] = .int(user.kdfIterations)
        object["KdfMemory"] = user.kdfMemory.map(JSONValue.int) ?? .null
        object["KdfParallelism"] = user.kdfParallelism.map(JSONValue.int) ?? .null
        object["ForcePasswordReset"] = .bool(false)
        object["ResetMasterPassword"] = .bool(false)
        object["MasterPasswordPolicy"] = .object(["Object": .string("masterPasswordPolicy")])
        object["AccountKeys"] = Renderer.accountKeys(user, pascal: true)
        object["UserDecryptionOptions"] = .object([
            "HasMasterPassword": .bool(true),
            "MasterPasswordUnlock": .object([
                "Kdf": .object(Renderer.kdfObject(user, pascal: true)),
                "MasterKeyEncryptedUserKey": .string(user.akey),
                "MasterKeyWrappedUserKey": .string(user.akey),
                "Salt": .string(user.email),
            ]),
            "Object": .string("userDecryptionOptions"),
        ])
        return object
    }

    /// `deviceIdentifier`, `DeviceIdentifier` and `device_identifier` are the same field.
    static func normalise(_ name: String) -> String {
        name.lowercased().replacingOccurrences(of: "_", with: "")
    }

    static func parseForm(_ bytes: [UInt8]) -> [String: String] {
        var result: [String: String] = [:]
        for pair in String(decoding: bytes, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ text: Substring) -> String {
                text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(text)
            }
            let key = normalise(decode(parts[0]))
            result[key] = parts.count > 1 ? decode(parts[1]) : ""
        }
        return result
    }
}

extension APIError {
    func withOAuth(_ code: String) -> APIError {
        var copy = self
        copy.oauthError = (code, message)
        return copy
    }
}

/// Runs a slow password hash (hundreds of milliseconds of CPU by design) on a Dispatch thread instead
/// of the cooperative pool that every request handler shares: a burst of logins must not stall every
/// other request of the server (the pool has one thread per core). At most one hash per core runs at a
/// time, the others wait their turn in order: unbounded, twenty hashes would share two cores and each
/// would take twenty times as long, so every login of a burst would be slow instead of the last ones.
func slowHash<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    await HashGate.shared.enter()
    let result = await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, any Error>, Never>) in
        DispatchQueue.global(qos: .userInitiated).async {
            continuation.resume(returning: Result { try body() })
        }
    }
    await HashGate.shared.leave()
    return try result.get()
}

/// A first-come, first-served limit on concurrent slow hashes.
actor HashGate {
    static let shared = HashGate(limit: max(1, ProcessInfo.processInfo.activeProcessorCount))

    private let limit: Int
    private var running = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(limit: Int) { self.limit = limit }

    /// For tests: hashes running, and callers waiting for a turn.
    var runningCount: Int { running }
    var waitingCount: Int { waiting.count }

    func enter() async {
        if running < limit {
            running += 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    func leave() {
        if waiting.isEmpty {
            running -= 1
        } else {
            // The slot passes straight to the next in line.
            waiting.removeFirst().resume()
        }
    }
}
