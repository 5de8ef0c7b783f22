import Foundation
import NIOHTTP1
import VaultModels

/// What a "two-step login required" answer told (docs/PROTOCOL.md, "Two-step login").
public struct TwoFactorChallenge: Sendable, Equatable {
    /// The providers the account accepts, from the keys of `TwoFactorProviders2`.
    public var providers: [TwoFactorProviderType]
    /// The masked address an email code goes to (`"te*****@example.com"`), when email is offered.
    public var emailHint: String?
    /// The official server's short-lived token that authorizes a request for the email code
    /// (`SsoEmail2faSessionToken`), when it sent one.
    public var emailSessionToken: String?

    public init(providers: [TwoFactorProviderType], emailHint: String? = nil, emailSessionToken: String? = nil) {
        self.providers = providers
        self.emailHint = emailHint
        self.emailSessionToken = emailSessionToken
    }
}

/// A second factor sent with a password login.
public struct SecondFactor: Sendable, Equatable {
    public var provider: TwoFactorProviderType
    /// The code as typed; sent without spaces (see `TwoFactorRules.normalisedCode`).
    public var code: String
    /// Ask the server for a "remember this device" token.
    public var remember: Bool

    public init(provider: TwoFactorProviderType, code: String, remember: Bool = false) {
        self.provider = provider
        self.code = code
        self.remember = remember
    }
}

/// How the token endpoint answered a login. Answers that are neither tokens nor one of these
/// refusals are thrown as ``ServerCallError``.
public enum LoginOutcome: Sendable {
    case tokens(TokenResponse)
    /// The password was right; the account needs a second factor.
    case twoFactorRequired(TwoFactorChallenge)
    /// The official server's new-device verification: a code was mailed to the account's address.
    case newDeviceVerificationRequired
    case wrongPassword
    /// The second factor was refused (the server's message).
    case invalidTwoFactorCode(String)
    /// The new-device code was refused.
    case invalidNewDeviceCode
    /// The API key (client id or secret) was refused.
    case invalidClient

    /// The tokens, or the refusal thrown as ``ServerCallError/http(status:message:)`` (for callers that
    /// expect a plain login to succeed: tools, benchmarks).
    public func tokens() throws -> TokenResponse {
        switch self {
        case .tokens(let tokens): return tokens
        case .twoFactorRequired: throw ServerCallError.http(status: 400, message: "Two factor required.")
        case .newDeviceVerificationRequired: throw ServerCallError.http(status: 400, message: "new device verification required")
        case .wrongPassword: throw ServerCallError.http(status: 400, message: "Username or password is incorrect. Try again.")
        case .invalidTwoFactorCode(let message): throw ServerCallError.http(status: 400, message: message)
        case .invalidNewDeviceCode: throw ServerCallError.http(status: 400, message: "invalid new device otp")
        case .invalidClient: throw ServerCallError.http(status: 400, message: "invalid_client")
        }
    }
}

extension BitwardenAPI {
    /// Password grant, with a second factor or a new-device code when the caller has one.
    /// The form fields are spelled as the official clients send them (camelCase; `twoFactorRemember`
    /// as `1`/`0`).
    public func login(email: String, passwordHash: String, deviceIdentifier: String, deviceName: String,
                      secondFactor: SecondFactor? = nil, newDeviceCode: String? = nil) async throws -> LoginOutcome {
        var form: [(String, String)] = [
            ("grant_type", "password"), ("username", email), ("password", passwordHash), ("scope", "api offline_access"),
            ("client_id", configuration.clientName), ("deviceType", String(configuration.deviceType)),
            ("deviceIdentifier", deviceIdentifier), ("deviceName", deviceName),
        ]
        if let secondFactor {
            form.append(("twoFactorToken", secondFactor.code))
            form.append(("twoFactorProvider", String(secondFactor.provider.rawValue)))
            form.append(("twoFactorRemember", secondFactor.remember ? "1" : "0"))
        }
        if let newDeviceCode { form.append(("newDeviceOtp", newDeviceCode)) }
        let reply = try await send(.POST, "/identity/connect/token", form: form, acceptingErrors: true)
        return try loginOutcome(reply, sentSecondFactor: secondFactor != nil, sentNewDeviceCode: newDeviceCode != nil)
    }

    /// API-key login (`client_credentials`, as `bw login --apikey`): client id `user.<user id>` and
    /// the account's API key. No second factor is asked, and the answer has no refresh token.
    public func login(clientID: String, clientSecret: String, deviceIdentifier: String, deviceName: String) async throws -> LoginOutcome {
        let reply = try await send(.POST, "/identity/connect/token", form: [
            ("grant_type", "client_credentials"), ("client_id", clientID), ("client_secret", clientSecret), ("scope", "api"),
            ("deviceType", String(configuration.deviceType)), ("deviceIdentifier", deviceIdentifier), ("deviceName", deviceName),
        ], acceptingErrors: true)
        return try loginOutcome(reply, sentSecondFactor: false, sentNewDeviceCode: false)
    }

    /// Asks the server to mail the two-step login code (`POST /api/two-factor/send-email-login`).
    public func sendEmailLoginCode(email: String, passwordHash: String, deviceIdentifier: String,
                                   sessionToken: String?) async throws {
        var body: JSONObject = ["email": .string(email), "masterPasswordHash": .string(passwordHash),
                                "deviceIdentifier": .string(deviceIdentifier)]
        if let sessionToken { body["ssoEmail2FaSessionToken"] = .string(sessionToken) }
        _ = try await send(.POST, "/api/two-factor/send-email-login", json: .object(body))
    }

    /// Asks the official server to mail a new new-device code (`POST /api/accounts/resend-new-device-otp`).
    public func resendNewDeviceCode(email: String, passwordHash: String) async throws {
        _ = try await send(.POST, "/api/accounts/resend-new-device-otp",
                           json: .object(["email": .string(email), "masterPasswordHash": .string(passwordHash)]))
    }

    /// Reads a token-endpoint answer (docs/PROTOCOL.md, "Telling the token endpoint's refusals apart").
    func loginOutcome(_ reply: Reply, sentSecondFactor: Bool, sentNewDeviceCode: Bool) throws -> LoginOutcome {
        if (200..<300).contains(reply.status) { return .tokens(try tokenResponse(reply)) }
        let message = Self.errorMessage(reply.body, status: reply.status)
        guard reply.status == 400, let object = try? JSONParser.parseObject(reply.body) else {
            throw ServerCallError.http(status: reply.status, message: message)
        }
        if let challenge = Self.twoFactorChallenge(object) { return .twoFactorRequired(challenge) }
        let error = object["error"]?.stringValue ?? ""
        let model = (object["ErrorModel"]?.objectValue?["Message"] ?? object["errorModel"]?.objectValue?["message"])?.stringValue ?? ""
        let lower = (model.isEmpty ? message : model).lowercased()
        let description = (object["error_description"]?.stringValue ?? "").lowercased()
        if error == "device_error" {
            if lower.contains("new device verification required") || description.contains("new device verification required") {
                return .newDeviceVerificationRequired
            }
            if lower.contains("invalid new device otp") || description.contains("invalid new device otp") { return .invalidNewDeviceCode }
            throw ServerCallError.http(status: 400, message: model.isEmpty ? message : model)
        }
        if error == "invalid_client" { return .invalidClient }
        if lower.contains("username or password is incorrect") { return .wrongPassword }
        if sentSecondFactor {
            let codeMessages = ["two-step token is invalid", "invalid totp code", "totp code is not a number", "token is invalid",
                                "token has expired", "no token available", "recovery code is incorrect", "invalid two factor"]
            if error == "invalid_grant" || codeMessages.contains(where: lower.contains) {
                return .invalidTwoFactorCode(model.isEmpty ? message : model)
            }
        }
        if sentNewDeviceCode, lower.contains("otp") { return .invalidNewDeviceCode }
        throw ServerCallError.http(status: 400, message: message)
    }

    /// The challenge of a 400 whose `TwoFactorProviders2` is a non-empty object (how the official
    /// clients recognise it), `nil` otherwise.
    static func twoFactorChallenge(_ object: JSONObject) -> TwoFactorChallenge? {
        guard let providers = object["TwoFactorProviders2"]?.objectValue, providers.count > 0 else { return nil }
        var types: [TwoFactorProviderType] = []
        var emailHint: String?
        for entry in providers {
            guard let number = Int(entry.key), number >= 0, number < 1000 else { continue }
            let type = TwoFactorProviderType(rawValue: number)
            if !types.contains(type) { types.append(type) }
            if type == .email, let parameters = entry.value.objectValue {
                emailHint = (parameters["Email"] ?? parameters["email"])?.stringValue
            }
        }
        guard !types.isEmpty else { return nil }
        return TwoFactorChallenge(providers: types.sorted(), emailHint: emailHint,
                                  emailSessionToken: object["SsoEmail2faSessionToken"]?.stringValue)
    }
}
