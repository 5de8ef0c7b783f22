import Foundation
import Testing
import VaultAPI
import VaultModels
import VaultTestSupport

/// How the client reads the token endpoint's refusals: the bodies below are those the official server
/// and Vaultwarden send (docs/PROTOCOL.md, "Telling the token endpoint's refusals apart"), served over
/// real HTTP.
@Suite("Token endpoint answers of the official server and Vaultwarden")
struct TokenAnswerTests {
    func outcome(_ status: Int, _ body: String, secondFactor: SecondFactor? = nil, newDeviceCode: String? = nil) async throws -> LoginOutcome {
        let server = HostileServer { _, _ in .json(body, status: status) }
        try await server.start()
        let api = BitwardenAPI(baseURL: await server.url, httpClient: HTTPClientHolder.shared)
        let outcome: Result<LoginOutcome, any Error>
        do {
            outcome = .success(try await api.login(email: "a@example.com", passwordHash: "aGFzaA==", deviceIdentifier: "d", deviceName: "n",
                                                   secondFactor: secondFactor, newDeviceCode: newDeviceCode))
        } catch {
            outcome = .failure(error)
        }
        await server.stop()
        return try outcome.get()
    }

    static let official2FA = """
        {"error":"invalid_grant","error_description":"Two factor required.","TwoFactorProviders":["1","3"],\
        "TwoFactorProviders2":{"1":{"Email":"test*****@bitwarden.com"},"3":{"Nfc":true}},\
        "SsoEmail2faSessionToken":"BwSsoEmail2FaSessionToken_abc","Email":"test@bitwarden.com",\
        "MasterPasswordPolicy":{"MinComplexity":4,"RequireLower":false,"EnforceOnLogin":true,"Object":"masterPasswordPolicy"}}
        """
    static let vaultwarden2FA = """
        {"error":"invalid_grant","error_description":"Two factor required.","TwoFactorProviders":["0","7"],\
        "TwoFactorProviders2":{"0":null,"7":{"challenge":"x","timeout":60000}},"MasterPasswordPolicy":{"Object":"masterPasswordPolicy"}}
        """

    @Test("two-step login required: providers, masked address and session token")
    func twoFactorRequired() async throws {
        guard case .twoFactorRequired(let official) = try await outcome(400, Self.official2FA) else {
            Issue.record("not read as a two-step challenge")
            return
        }
        #expect(official == TwoFactorChallenge(providers: [.email, .yubiKey], emailHint: "test*****@bitwarden.com",
                                               emailSessionToken: "BwSsoEmail2FaSessionToken_abc"))
        guard case .twoFactorRequired(let vaultwarden) = try await outcome(400, Self.vaultwarden2FA) else {
            Issue.record("not read as a two-step challenge")
            return
        }
        #expect(vaultwarden == TwoFactorChallenge(providers: [.authenticator, .webAuthn]))
        // An empty provider object is not a challenge (the official clients' rule).
        await #expect(throws: ServerCallError.self) {
            _ = try await self.outcome(400, #"{"error":"invalid_grant","error_description":"Two factor required.","TwoFactorProviders2":{}}"#)
        }
    }

    @Test("refusals: wrong password, wrong code, new device, API key", arguments: [
        // (status, body, second factor sent, new-device code sent, expected)
        (400, #"{"error":"invalid_grant","error_description":"invalid_username_or_password","ErrorModel":{"Message":"Username or password is incorrect. Try again.","Object":"error"}}"#,
         false, false, "wrongPassword"),
        (400, #"{"message":"Username or password is incorrect. Try again","validationErrors":{"":["Username or password is incorrect. Try again"]},"errorModel":{"message":"Username or password is incorrect. Try again","object":"error"},"error":"","error_description":"","object":"error"}"#,
         false, false, "wrongPassword"),
        (400, #"{"error":"invalid_grant","error_description":"invalid_username_or_password","ErrorModel":{"Message":"Two-step token is invalid. Try again.","Object":"error"}}"#,
         true, false, "invalidTwoFactorCode:Two-step token is invalid. Try again."),
        (400, #"{"message":"Invalid TOTP code! Server time: 2026-11-25 10:00:00 UTC IP: 127.0.0.1","validationErrors":{"":["Invalid TOTP code!"]},"errorModel":{"message":"Invalid TOTP code! Server time: 2026-11-25 10:00:00 UTC IP: 127.0.0.1","object":"error"},"error":"","error_description":"","object":"error"}"#,
         true, false, "invalidTwoFactorCode:Invalid TOTP code! Server time: 2026-11-25 10:00:00 UTC IP: 127.0.0.1"),
        (400, #"{"message":"Recovery code is incorrect. Try again.","errorModel":{"message":"Recovery code is incorrect. Try again.","object":"error"},"error":"","error_description":"","object":"error"}"#,
         true, false, "invalidTwoFactorCode:Recovery code is incorrect. Try again."),
        (400, #"{"error":"device_error","error_description":"New device verification required","ErrorModel":{"Message":"new device verification required","Object":"error"}}"#,
         false, false, "newDeviceVerificationRequired"),
        (400, #"{"error":"device_error","error_description":"Invalid New Device OTP","ErrorModel":{"Message":"invalid new device otp","Object":"error"}}"#,
         false, true, "invalidNewDeviceCode"),
        (400, #"{"error":"invalid_client"}"#, false, false, "invalidClient"),
    ])
    func refusals(status: Int, body: String, sentCode: Bool, sentDeviceCode: Bool, expected: String) async throws {
        let answer = try await outcome(status, body, secondFactor: sentCode ? SecondFactor(provider: .authenticator, code: "123456") : nil,
                                       newDeviceCode: sentDeviceCode ? "12345678" : nil)
        let read: String
        switch answer {
        case .wrongPassword: read = "wrongPassword"
        case .invalidTwoFactorCode(let message): read = "invalidTwoFactorCode:" + message
        case .newDeviceVerificationRequired: read = "newDeviceVerificationRequired"
        case .invalidNewDeviceCode: read = "invalidNewDeviceCode"
        case .invalidClient: read = "invalidClient"
        case .tokens: read = "tokens"
        case .twoFactorRequired: read = "twoFactorRequired"
        }
        #expect(read == expected)
    }

    @Test("other refusals stay errors with the server's message: a 429, a device error without a known message")
    func otherRefusals() async throws {
        await #expect(throws: ServerCallError.http(status: 429, message: "Too many login requests")) {
            _ = try await self.outcome(429, #"{"message":"Too many login requests","object":"error"}"#)
        }
        await #expect(throws: ServerCallError.http(status: 400, message: "no device information provided")) {
            _ = try await self.outcome(400, #"{"error":"device_error","error_description":"No device information provided","ErrorModel":{"Message":"no device information provided","Object":"error"}}"#)
        }
    }

    @Test("an API-key answer has no refresh token, and the remember token and salt are read")
    func tokenFields() async throws {
        let body = """
            {"access_token":"a.b.c","expires_in":3600,"token_type":"Bearer","scope":"api","Key":"2.x|y|z",\
            "Kdf":0,"KdfIterations":600000,"TwoFactorToken":"remember-me",\
            "UserDecryptionOptions":{"MasterPasswordUnlock":{"Salt":"User@Example.com"}}}
            """
        guard case .tokens(let tokens) = try await outcome(200, body) else {
            Issue.record("not read as tokens")
            return
        }
        #expect(tokens.refreshToken == nil)
        #expect(tokens.twoFactorToken == "remember-me")
        #expect(tokens.salt == "User@Example.com")
        #expect(tokens.kdf == .pbkdf2(iterations: 600_000))
    }
}
