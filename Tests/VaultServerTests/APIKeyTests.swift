import Foundation
import Hummingbird
import HTTPTypes
import Testing
import VaultCrypto
import VaultModels
@testable import VaultServer

/// Personal API keys and the `client_credentials` grant (docs/PROTOCOL.md, "Personal API keys").
@Suite("Personal API keys and the client_credentials grant")
struct APIKeyTests {
    static func apiKey(_ api: APIClient, _ user: TestUser, token: String, rotate: Bool = false, hash: String? = nil) async throws -> APIResponse {
        try await api.request(.post, rotate ? "/api/accounts/rotate-api-key" : "/api/accounts/api-key", token: token,
                              json: .object(["masterPasswordHash": .string(hash ?? user.hash)]))
    }

    static func clientCredentials(_ api: APIClient, clientID: String, secret: String, scope: String = "api",
                                  device: [(String, String)] = [("deviceType", "8"), ("deviceIdentifier", "cli-1"), ("deviceName", "linux")])
        async throws -> APIResponse {
        try await api.form("/identity/connect/token", [
            ("grant_type", "client_credentials"), ("client_id", clientID), ("client_secret", secret), ("scope", scope),
        ] + device)
    }

    @Test("api-key makes the key once and shows it again; client_credentials logs in without a refresh token or a second step; rotating ends the old key",
          arguments: Backend.available)
    func apiKeyLogin(backend: Backend) async throws {
        let clock = ManualClock(frozen: true)
        try await withTestServer(backend, configure: TwoFactorTests.configure(clock)) { api in
            let user = try await TestUser.register(api)
            let login = try await user.login(api)
            let token = try #require(login.object["access_token"]?.stringValue)
            let userID = try #require(try await api.request(.get, "/api/accounts/profile", token: token).object["id"]?.stringValue)

            #expect(try await Self.apiKey(api, user, token: token, hash: try user.authorizationHash("wrong")).status == .badRequest)
            let created = try await Self.apiKey(api, user, token: token)
            #expect(created.status == .ok)
            #expect(created.object["object"] == .string("apiKey"))
            #expect(created.object["revisionDate"]?.stringValue?.hasSuffix("Z") == true)
            let key = try #require(created.object["apiKey"]?.stringValue)
            #expect(key.count == 30 && key.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber) })
            #expect(try await Self.apiKey(api, user, token: token).object["apiKey"] == .string(key), "the same key again")

            // Two-step login does not apply to the API key.
            try await TwoFactorTests.enable(user, api, clock, token: token)
            #expect(try await TwoFactorTests.login(user, api).json == TwoFactorTests.required)

            let granted = try await Self.clientCredentials(api, clientID: "user.\(userID)", secret: key)
            #expect(granted.status == .ok, "\(granted.message ?? "")")
            #expect(granted.object["refresh_token"] == nil)
            #expect(granted.object["scope"] == .string("api") && granted.object["expires_in"] == .number("3600"))
            #expect(granted.object["token_type"] == .string("Bearer"))
            #expect(granted.object["Key"] == login.object["Key"] && granted.object["PrivateKey"] == login.object["PrivateKey"])
            #expect(granted.object["Kdf"] == .int(0) && granted.object["KdfIterations"] == .int(100_000))
            #expect(granted.object["UserDecryptionOptions"]?.objectValue?["MasterPasswordUnlock"]?.objectValue?["Salt"] == .string(user.email.lowercased()))
            let access = try #require(granted.object["access_token"]?.stringValue)
            #expect(try await api.request(.get, "/api/sync", token: access).status == .ok)
            let devices = try await api.request(.get, "/api/devices", token: access).object["data"]?.arrayValue ?? []
            #expect(devices.contains { $0.objectValue?["identifier"] == .string("cli-1") }, "the device is registered")
            // The client id is the account's id, in any case.
            #expect(try await Self.clientCredentials(api, clientID: "user.\(userID.uppercased())", secret: key).status == .ok)

            let invalidClient: JSONValue = .object(["error": .string("invalid_client")])
            #expect(try await Self.clientCredentials(api, clientID: "user.\(userID)", secret: key + "x").json == invalidClient)
            #expect(try await Self.clientCredentials(api, clientID: "user.\(UUID().uuidString)", secret: key).json == invalidClient)
            #expect(try await Self.clientCredentials(api, clientID: userID, secret: key).json == invalidClient)
            #expect(try await Self.clientCredentials(api, clientID: "user.\(userID)", secret: "").json == invalidClient)
            let scope = try await Self.clientCredentials(api, clientID: "user.\(userID)", secret: key, scope: "api offline_access")
            #expect(scope.status == .badRequest && scope.json == .object(["error": .string("invalid_scope")]))
            let noDevice = try await Self.clientCredentials(api, clientID: "user.\(userID)", secret: key, device: [("deviceType", "8")])
            #expect(noDevice.status == .badRequest)
            #expect(noDevice.object["error"] == .string("device_error"))
            #expect(noDevice.object["error_description"] == .string("No device information provided"))
            #expect(noDevice.object["ErrorModel"]?.objectValue?["Message"] == .string("no device information provided"))

            let rotated = try await Self.apiKey(api, user, token: token, rotate: true)
            let newKey = try #require(rotated.object["apiKey"]?.stringValue)
            #expect(newKey != key && newKey.count == 30)
            #expect(try await Self.clientCredentials(api, clientID: "user.\(userID)", secret: key).json == invalidClient, "the old key")
            #expect(try await Self.clientCredentials(api, clientID: "user.\(userID)", secret: newKey).status == .ok)
            #expect(try await Self.apiKey(api, user, token: token).object["apiKey"] == .string(newKey))
        }
    }

    @Test("failed client_credentials logins are limited like password logins", arguments: Backend.available)
    func limited(backend: Backend) async throws {
        let clock = ManualClock(frozen: true)
        try await withTestServer(backend, configure: { configuration in
            configuration.now = { clock.now }
            configuration.accountLoginBurst = 1_000
            configuration.addressLoginBurst = 1_000
            configuration.accountLockoutThreshold = 3
        }) { api in
            let user = try await TestUser.register(api)
            let token = try await user.token(api)
            let userID = try #require(try await api.request(.get, "/api/accounts/profile", token: token).object["id"]?.stringValue)
            let key = try #require(try await Self.apiKey(api, user, token: token).object["apiKey"]?.stringValue)
            for attempt in 0..<3 {
                #expect(try await Self.clientCredentials(api, clientID: "user.\(userID)", secret: "guess-\(attempt)").status == .badRequest)
            }
            let locked = try await Self.clientCredentials(api, clientID: "user.\(userID)", secret: key)
            #expect(locked.status == .tooManyRequests && LoginRateLimitTests.retryAfter(locked) == 60)
            clock.advance(seconds: 60)
            #expect(try await Self.clientCredentials(api, clientID: "user.\(userID)", secret: key).status == .ok)
        }
    }
}
