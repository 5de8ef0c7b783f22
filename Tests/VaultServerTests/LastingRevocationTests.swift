import Foundation
import Hummingbird
import Testing
import VaultCrypto
import VaultModels
@testable import VaultServer

/// A revoked access token stays refused after the device signs in again; refresh-token reuse ends the
/// chain's access tokens; log out everywhere and a password change end the API key's sessions and the key
/// (docs/SECURITY.md, "Attack review 2026-12-01", findings 2 and 8a).
@Suite("Security: revocation lasts past the next login; API-key sessions end with the security stamp")
struct LastingRevocationTests {
    static func status(_ api: APIClient, _ token: String) async throws -> HTTPResponse.Status {
        try await api.request(.get, "/api/sync", token: token).status
    }

    @Test("logout and DELETE /api/devices/{id}: the revoked access token stays 401 after the same device identifier logs in again",
          arguments: Backend.available)
    func revokedStaysRevoked(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let user = try await TestUser.register(api)
            // Logged out with its access token (RFC 7009), then signed in again on the same device.
            let device = UUID().uuidString
            let first = try #require(try await user.login(api, device: device).object["access_token"]?.stringValue)
            #expect(try await api.form("/identity/connect/revocation", [("token", first)]).status == .ok)
            #expect(try await Self.status(api, first) == .unauthorized)
            let second = try #require(try await user.login(api, device: device).object["access_token"]?.stringValue)
            #expect(try await Self.status(api, second) == .ok)
            #expect(try await Self.status(api, first) == .unauthorized, "the logged-out token does not come back with the next login")

            // Logged out with its refresh token: the access token issued beside it stays refused too.
            let login = try await user.login(api, device: device)
            let third = try #require(login.object["access_token"]?.stringValue)
            #expect(try await api.form("/identity/connect/revocation", [("token", try #require(login.object["refresh_token"]?.stringValue))])
                .status == .ok)
            let fourth = try #require(try await user.login(api, device: device).object["access_token"]?.stringValue)
            #expect(try await Self.status(api, fourth) == .ok)
            for token in [first, second, third] { #expect(try await Self.status(api, token) == .unauthorized) }

            // Deactivated from another device, then signed in again.
            let other = try await SignedInDevice.login(user, api)
            let devices = try await api.request(.get, "/api/devices", token: other.access).object["data"]?.arrayValue ?? []
            let rowID = try #require(devices.compactMap(\.objectValue).first { $0["identifier"] == .string(device) }?["id"]?.stringValue)
            #expect(try await api.request(.delete, "/api/devices/\(rowID)", token: other.access).status == .ok)
            #expect(try await Self.status(api, fourth) == .unauthorized)
            let fifth = try #require(try await user.login(api, device: device).object["access_token"]?.stringValue)
            #expect(try await Self.status(api, fifth) == .ok)
            #expect(try await Self.status(api, fourth) == .unauthorized, "the deactivated device's token does not come back")
            #expect(try await Self.status(api, other.access) == .ok, "the other device goes on")
        }
    }

    @Test("refresh-token reuse ends every access token of the chain, and they stay refused after the owner signs in again",
          arguments: Backend.available)
    func reuseEndsTheChain(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let user = try await TestUser.register(api)
            let device = UUID().uuidString
            let login = try await user.login(api, device: device)
            var accesses = [try #require(login.object["access_token"]?.stringValue)]
            let first = try #require(login.object["refresh_token"]?.stringValue)
            // The thief refreshes twice with the copy; each answer's access token works.
            var refresh = first
            for _ in 0..<2 {
                let answer = try await api.refresh(refresh)
                #expect(answer.ok)
                refresh = try #require(answer.refresh)
                accesses.append(try #require(answer.access))
            }
            for access in accesses { #expect(try await Self.status(api, access) == .ok) }
            // The owner presents the first token: reuse, the device is revoked.
            #expect(try await api.refresh(first).refusedAsInvalidGrant)
            for access in accesses { #expect(try await Self.status(api, access) == .unauthorized, "every access token of the chain") }
            let again = try #require(try await user.login(api, device: device).object["access_token"]?.stringValue)
            #expect(try await Self.status(api, again) == .ok)
            for access in accesses { #expect(try await Self.status(api, access) == .unauthorized, "still refused after the new login") }
        }
    }

    @Test("log out everywhere and a password change end the API key's access tokens and the key; a new key works",
          arguments: Backend.available)
    func apiKeySessionsEnd(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let user = try await TestUser.register(api)
            let token = try await user.token(api)
            let userID = try #require(try await api.request(.get, "/api/accounts/profile", token: token).object["id"]?.stringValue)
            func keyLogin(_ key: String) async throws -> String? {
                try await APIKeyTests.clientCredentials(api, clientID: "user.\(userID)", secret: key).object["access_token"]?.stringValue
            }
            let key = try #require(try await APIKeyTests.apiKey(api, user, token: token).object["apiKey"]?.stringValue)
            let keyAccess = try #require(try await keyLogin(key))
            #expect(try await Self.status(api, keyAccess) == .ok)

            // Log out everywhere, from a password session.
            let rotated = try await api.request(.post, "/api/accounts/security-stamp", token: token,
                                                json: .object(["masterPasswordHash": .string(try user.authorizationHash(user.password))]))
            #expect(rotated.status == .ok)
            #expect(try await Self.status(api, keyAccess) == .unauthorized, "the key's session ends")
            #expect(try await keyLogin(key) == nil, "the key no longer logs in")
            let token2 = try await user.token(api)
            let key2 = try #require(try await APIKeyTests.apiKey(api, user, token: token2).object["apiKey"]?.stringValue)
            #expect(key2 != key)
            let keyAccess2 = try #require(try await keyLogin(key2))
            #expect(try await Self.status(api, keyAccess2) == .ok)

            // A password change, made from the API key's own session.
            let newPassword = "a different master password"
            let newMaster = try MasterKey.derive(password: newPassword, salt: user.email, kdf: TestUser.kdf)
            let changed = try await api.request(.post, "/api/accounts/password", token: keyAccess2, json: .object([
                "masterPasswordHash": .string(try user.authorizationHash(user.password)),
                "newMasterPasswordHash": .string(newMaster.serverAuthorizationHash(password: newPassword)),
                "key": .string(try newMaster.encryptUserKey(user.userKey).serialized), "masterPasswordHint": .null,
            ]))
            #expect(changed.status == .ok, "\(changed.message ?? "")")
            #expect(try await Self.status(api, keyAccess2) == .unauthorized)
            #expect(try await keyLogin(key2) == nil)
        }
    }

    @Test("migration 12: a device revoked before it starts at generation 1, so its old tokens (no generation) stay refused")
    func migrationCountsEarlierRevocations() async throws {
        let directory = NSTemporaryDirectory() + "vaultsync-test-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = try SQLiteDatabase(path: directory + "/vaultsync.sqlite")
        try await Migrations.run(on: database, through: 11)
        let repository = VaultRepository(database: database)
        let user = UserRecord(id: newID(), email: "old@example.com", name: nil, passwordHash: "x", passwordSalt: "x", passwordIterations: 1,
                              passwordHint: nil, akey: "x", privateKey: nil, publicKey: nil, kdfType: 0, kdfIterations: 100_000,
                              kdfMemory: nil, kdfParallelism: nil, securityStamp: "stamp", now: 1)
        #expect(try await repository.insert(user: user))
        try await database.transaction { session in
            for (identifier, revoked) in [("live", SQLValue.null), ("revoked", .int(5))] {
                try await session.query("""
                    INSERT INTO devices (id, user_id, identifier, name, type, refresh_token_hash, created_at, updated_at, revoked_at)
                    VALUES (?, ?, ?, 'd', 8, ?, 1, 1, ?)
                    """, [.text(newID()), .text(user.id), .text(identifier), .text(newID()), revoked])
            }
        }
        try await repository.migrate()
        #expect(try await repository.accessTokenIsLive(userID: user.id, device: "live", stamp: "stamp", generation: 0))
        _ = try await repository.registerDevice(userID: user.id, identifier: "revoked", name: "d", type: 8, now: 10,
                                                makeToken: RefreshTokens.make(chain:))
        #expect(try await !repository.accessTokenIsLive(userID: user.id, device: "revoked", stamp: "stamp", generation: 0),
                "a token from before the revocation, after the device signed in again")
        #expect(try await repository.accessTokenIsLive(userID: user.id, device: "revoked", stamp: "stamp", generation: 1))
    }
}
