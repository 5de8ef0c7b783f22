import Foundation
import HTTPTypes
import Hummingbird
import Testing
import VaultCrypto
import VaultModels
@testable import VaultServer

/// One signed-in device of a test user: its access and refresh tokens.
struct SignedInDevice: Sendable {
    let identifier: String
    let access: String
    let refresh: String

    static func login(_ user: TestUser, _ api: APIClient, password: String? = nil) async throws -> SignedInDevice {
        let identifier = UUID().uuidString
        let answer = try await user.login(api, device: identifier, password: password)
        return SignedInDevice(identifier: identifier, access: try #require(answer.object["access_token"]?.stringValue, "login: \(answer.message ?? "")"),
                              refresh: try #require(answer.object["refresh_token"]?.stringValue))
    }

    /// Whether its access token is accepted and its refresh token still refreshes (checked in that order:
    /// the refresh rotates the chain).
    func works(_ api: APIClient) async throws -> (access: Bool, refresh: Bool) {
        let access = try await api.request(.get, "/api/sync", token: self.access).status
        let refresh = try await api.refresh(self.refresh)
        if !refresh.ok { #expect(refresh.refusedAsInvalidGrant) }
        if access != .ok { #expect(access == .unauthorized) }
        return (access == .ok, refresh.ok)
    }
}

extension TestUser {
    /// The server authorization hash of `password` for this account.
    func authorizationHash(_ password: String) throws -> String {
        try MasterKey.derive(password: password, salt: email, kdf: Self.kdf).serverAuthorizationHash(password: password)
    }
}

@Suite("Sessions: the security stamp on every request, log out everywhere, password change, device revocation, logout",
       .serialized)
struct SessionTests {
    @Test("an access token carrying another security stamp gets 401, on every route", arguments: Backend.available)
    func stampChecked(backend: Backend) async throws {
        let key = SystemRandomSource().bytes(count: 64)
        let clock = ManualClock(frozen: true)
        try await withTestServer(backend, configure: { $0.tokenKey = key; $0.now = { clock.now } }) { api in
            let user = try await TestUser.register(api)
            let device = try await SignedInDevice.login(user, api)
            let signer = AccessTokenSigner(keyBytes: key, issuer: "vaultsync")
            var claims = try #require(signer.verify(device.access, nowSeconds: clock.now / 1_000_000))
            #expect(try await api.request(.get, "/api/sync", token: signer.sign(claims)).status == .ok, "the same claims re-signed")
            claims.securityStamp = newID()
            let otherStamp = signer.sign(claims)
            for (method, path) in [(HTTPRequest.Method.get, "/api/sync"), (.get, "/api/accounts/revision-date"), (.get, "/api/ciphers"),
                                   (.get, "/api/devices")] {
                #expect(try await api.request(method, path, token: otherStamp).status == .unauthorized, "\(method) \(path)")
            }
            // And a token for a device the account never signed in on.
            var otherDevice = try #require(signer.verify(device.access, nowSeconds: clock.now / 1_000_000))
            otherDevice.device = UUID().uuidString
            #expect(try await api.request(.get, "/api/sync", token: signer.sign(otherDevice)).status == .unauthorized)
        }
    }

    @Test("log out everywhere: POST /api/accounts/security-stamp with the password stops every token; a wrong password changes nothing",
          arguments: Backend.available)
    func logOutEverywhere(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let user = try await TestUser.register(api)
            let other = try await TestUser.register(api)
            let first = try await SignedInDevice.login(user, api)
            let second = try await SignedInDevice.login(user, api)
            let bystander = try await SignedInDevice.login(other, api)
            let wrong = try await api.request(.post, "/api/accounts/security-stamp", token: first.access,
                                              json: .object(["masterPasswordHash": .string(try user.authorizationHash("not the password"))]))
            #expect(wrong.status == .badRequest)
            #expect(wrong.object["validationErrors"]?.objectValue?["masterPasswordHash"] != nil)
            #expect(try await api.request(.post, "/api/accounts/security-stamp", token: first.access, json: .object([:])).status == .badRequest)
            #expect(try await api.request(.get, "/api/sync", token: second.access).status == .ok)
            let rotated = try await api.request(.post, "/api/accounts/security-stamp", token: first.access,
                                                json: .object(["masterPasswordHash": .string(try user.authorizationHash(user.password))]))
            #expect(rotated.status == .ok, "\(rotated.message ?? "")")
            for device in [first, second] {
                let works = try await device.works(api)
                #expect(!works.access && !works.refresh)
            }
            let unaffected = try await bystander.works(api)
            #expect(unaffected.access && unaffected.refresh, "another account's sessions go on")
            let again = try await SignedInDevice.login(user, api)
            let works = try await again.works(api)
            #expect(works.access && works.refresh)
        }
    }

    @Test("changing the master password: the old one stops, the new one logs in with the new key, every token stops",
          arguments: Backend.available)
    func changePassword(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let user = try await TestUser.register(api)
            let device = try await SignedInDevice.login(user, api)
            let newPassword = "a much longer new master password"
            let newMaster = try MasterKey.derive(password: newPassword, salt: user.email, kdf: TestUser.kdf)
            let newKey = try newMaster.encryptUserKey(user.userKey).serialized
            func change(current: String) async throws -> APIResponse {
                try await api.request(.post, "/api/accounts/password", token: device.access, json: .object([
                    "masterPasswordHash": .string(try user.authorizationHash(current)),
                    "newMasterPasswordHash": .string(newMaster.serverAuthorizationHash(password: newPassword)),
                    "key": .string(newKey), "masterPasswordHint": .null,
                ]))
            }
            let refused = try await change(current: "a wrong guess")
            #expect(refused.status == .badRequest)
            #expect(try await api.request(.get, "/api/sync", token: device.access).status == .ok, "a refused change ends nothing")
            #expect(try await user.login(api).status == .ok)
            let changed = try await change(current: user.password)
            #expect(changed.status == .ok, "\(changed.message ?? "")")
            let works = try await device.works(api)
            #expect(!works.access && !works.refresh)
            #expect(try await user.login(api).status == .badRequest, "the old password")
            let login = try await user.login(api, password: newPassword)
            #expect(login.status == .ok)
            #expect(login.object["Key"] == .string(newKey))
            #expect(try newMaster.decryptUserKey(EncString(try #require(login.object["Key"]?.stringValue))) == user.userKey)
        }
    }

    @Test("the newer password-change body keeps the KDF: a changed KDF is refused", arguments: Backend.available)
    func changePasswordNewBody(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let user = try await TestUser.register(api)
            let device = try await SignedInDevice.login(user, api)
            let newPassword = "another new master password"
            let newMaster = try MasterKey.derive(password: newPassword, salt: user.email, kdf: TestUser.kdf)
            func body(iterations: Int) throws -> JSONValue {
                let kdf = JSONValue.object(["kdfType": .int(0), "iterations": .int(iterations), "memory": .null, "parallelism": .null])
                return .object([
                    "masterPasswordHash": .string(try user.authorizationHash(user.password)),
                    "authenticationData": .object(["kdf": kdf, "salt": .string(user.email),
                                                   "masterPasswordAuthenticationHash": .string(newMaster.serverAuthorizationHash(password: newPassword))]),
                    "unlockData": .object(["kdf": kdf, "salt": .string(user.email),
                                           "masterKeyWrappedUserKey": .string(try newMaster.encryptUserKey(user.userKey).serialized)]),
                ])
            }
            #expect(try await api.request(.post, "/api/accounts/password", token: device.access, json: body(iterations: 600_000)).status == .badRequest)
            #expect(try await api.request(.post, "/api/accounts/password", token: device.access, json: body(iterations: 100_000)).status == .ok)
            #expect(try await user.login(api, password: newPassword).status == .ok)
        }
    }

    @Test("revoking one device (DELETE /api/devices/{id}, POST …/deactivate) stops its tokens and no one else's",
          arguments: Backend.available)
    func revokeDevice(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let user = try await TestUser.register(api)
            let phone = try await SignedInDevice.login(user, api)
            let laptop = try await SignedInDevice.login(user, api)
            let tablet = try await SignedInDevice.login(user, api)
            let list = try await api.request(.get, "/api/devices", token: laptop.access).object["data"]?.arrayValue ?? []
            #expect(list.count == 3)
            func id(_ device: SignedInDevice) throws -> String {
                try #require(list.compactMap(\.objectValue).first { $0["identifier"] == .string(device.identifier) }?["id"]?.stringValue)
            }
            let byIdentifier = try await api.request(.get, "/api/devices/identifier/\(phone.identifier)", token: laptop.access)
            #expect(byIdentifier.object["id"] == .string(try id(phone)))
            // The phone apps' anonymous question before a login (a 404 before: RELIABILITY bug 69).
            func known(_ email: String, _ identifier: String) async throws -> JSONValue? {
                try await api.request(.get, "/api/devices/knowndevice", headers: [
                    HTTPField.Name("X-Request-Email")!: AccessTokenSigner.base64URL(Data(email.utf8)),
                    HTTPField.Name("X-Device-Identifier")!: identifier]).json
            }
            #expect(try await known(user.email, phone.identifier) == .bool(true))
            #expect(try await known(user.email.uppercased(), phone.identifier) == .bool(true))
            #expect(try await known(user.email, UUID().uuidString) == .bool(false))
            #expect(try await known("nobody@example.com", phone.identifier) == .bool(false))
            #expect(try await api.request(.get, "/api/devices/knowndevice").status == .badRequest)
            // Another account cannot see or revoke them.
            let stranger = try await SignedInDevice.login(try await TestUser.register(api), api)
            #expect(try await api.request(.delete, "/api/devices/\(try id(phone))", token: stranger.access).status == .notFound)
            #expect(try await phone.works(api) == (true, true))

            #expect(try await api.request(.delete, "/api/devices/\(try id(phone))", token: laptop.access).status == .ok)
            #expect(try await api.request(.post, "/api/devices/\(try id(tablet))/deactivate", token: laptop.access).status == .ok)
            #expect(try await phone.works(api) == (false, false))
            #expect(try await tablet.works(api) == (false, false))
            #expect(try await laptop.works(api) == (true, true))
            #expect(try await known(user.email, phone.identifier) == .bool(false), "a revoked device is not known")
            #expect(try await api.request(.get, "/api/devices", token: laptop.access).object["data"]?.arrayValue?.count == 1)
        }
    }

    @Test("logout: /identity/connect/revocation with the device's refresh or access token revokes that device only; any token answers 200",
          arguments: Backend.available)
    func logout(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let user = try await TestUser.register(api)
            let byRefresh = try await SignedInDevice.login(user, api)
            let byAccess = try await SignedInDevice.login(user, api)
            let other = try await SignedInDevice.login(user, api)
            #expect(try await api.form("/identity/connect/revocation", [("token", byRefresh.refresh), ("token_type_hint", "refresh_token")]).status == .ok)
            #expect(try await api.form("/identity/connect/revocation", [("token", byAccess.access)]).status == .ok)
            let unknown = try await api.form("/identity/connect/revocation", [("token", "not-a-token")])
            #expect(unknown.status == .ok && unknown.bytes.isEmpty)
            #expect(try await byRefresh.works(api) == (false, false))
            #expect(try await byAccess.works(api) == (false, false))
            #expect(try await other.works(api) == (true, true))
        }
    }
}
