import Foundation
import Hummingbird
import Testing
import VaultCrypto
import VaultModels
@testable import VaultServer

@Suite("vaultsync-server over HTTP, on every backend", .serialized)
struct ServerFlowTests {
    @Test("register → prelogin → login → create/update/soft-delete/restore/hard-delete → sync", arguments: Backend.available)
    func fullFlow(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let user = try await TestUser.register(api)

            let prelogin = try await api.request(.post, "/identity/accounts/prelogin", json: .object(["email": .string(user.email.uppercased())]))
            #expect(prelogin.status == .ok)
            #expect(prelogin.object["kdf"] == .int(0))
            #expect(prelogin.object["kdfIterations"] == .int(100_000))
            #expect(prelogin.object["kdfSettings"]?.objectValue?["iterations"] == .int(100_000))
            #expect(prelogin.object["salt"] == .null)
            let unknown = try await api.request(.post, "/api/accounts/prelogin", json: .object(["email": .string("nobody@example.com")]))
            #expect(unknown.status == .ok && unknown.object["kdf"] != nil, "unknown emails: PreloginTests")

            let login = try await user.login(api)
            #expect(login.status == .ok)
            let tokenObject = login.object
            for field in ["access_token", "refresh_token", "Key", "PrivateKey"] {
                #expect(tokenObject[field]?.stringValue?.isEmpty == false, "token response lacks \(field)")
            }
            #expect(tokenObject["token_type"] == .string("Bearer"))
            #expect(tokenObject["expires_in"] == .int(3600))
            #expect(tokenObject["Kdf"] == .int(0))
            #expect(tokenObject["KdfIterations"] == .int(100_000))
            #expect(tokenObject["UserDecryptionOptions"]?.objectValue?["MasterPasswordUnlock"]?.objectValue?["Salt"] == .string(user.email.lowercased()))
            let token = try #require(tokenObject["access_token"]?.stringValue)

            // Create.
            let created = try await api.request(.post, "/api/ciphers", token: token, json: .object(try user.loginItem(name: "Bank")))
            #expect(created.status == .ok)
            let cipher = created.object
            let id = try #require(cipher["id"]?.stringValue)
            #expect(cipher["object"] == .string("cipherDetails"))
            #expect(cipher["type"] == .int(1))
            #expect(cipher["edit"] == .bool(true))
            #expect(cipher["viewPassword"] == .bool(true))
            #expect(cipher["permissions"] == .object(["delete": .bool(true), "restore": .bool(true)]))
            #expect(cipher["collectionIds"] == .array([]))
            #expect(cipher["deletedDate"] == .null)
            #expect(cipher["creationDate"] == cipher["revisionDate"])
            let firstRevision = try #require(cipher["revisionDate"]?.stringValue.flatMap(WireDate.init(iso8601:)))
            let wire = try CipherWire(json: cipher, path: "$")
            #expect(try wire.decrypted(with: user.keys).login?.password == "hunter2")

            // Update with lastKnownRevisionDate.
            var update = try wire.decrypted(with: user.keys)
            update.login?.password = "hunter3"
            var body = try update.encrypted(with: user.keys)
            body.lastKnownRevisionDate = firstRevision
            let updated = try await api.request(.put, "/api/ciphers/\(id)", token: token, json: body.jsonValue)
            #expect(updated.status == .ok)
            let secondRevision = try #require(updated.object["revisionDate"]?.stringValue.flatMap(WireDate.init(iso8601:)))
            #expect(secondRevision > firstRevision)
            #expect(try CipherWire(json: updated.object, path: "$").decrypted(with: user.keys).login?.password == "hunter3")

            // Soft delete, restore, hard delete.
            let revisionBefore = try await api.request(.get, "/api/accounts/revision-date", token: token).json?.intValue
            let trashed = try await api.request(.put, "/api/ciphers/\(id)/delete", token: token)
            #expect(trashed.status == .ok)
            let afterTrash = try await api.request(.get, "/api/ciphers/\(id)", token: token).object
            #expect(afterTrash["deletedDate"] != .null)
            #expect(afterTrash["deletedDate"] == afterTrash["revisionDate"])
            let revisionAfter = try await api.request(.get, "/api/accounts/revision-date", token: token).json?.intValue
            #expect((revisionAfter ?? 0) > (revisionBefore ?? 0))
            let inSync = try await api.request(.get, "/api/sync?excludeDomains=true", token: token).object
            #expect(inSync["ciphers"]?.arrayValue?.count == 1, "soft-deleted items stay in sync")

            let restored = try await api.request(.put, "/api/ciphers/\(id)/restore", token: token)
            #expect(restored.status == .ok)
            #expect(restored.object["deletedDate"] == .null)

            let deleted = try await api.request(.delete, "/api/ciphers/\(id)", token: token)
            #expect(deleted.status == .ok)
            #expect(try await api.request(.get, "/api/ciphers/\(id)", token: token).status == .notFound)

            // Sync.
            let sync = try await api.request(.get, "/api/sync", token: token)
            #expect(sync.status == .ok)
            let snapshot = sync.object
            #expect(snapshot["object"] == .string("sync"))
            #expect(snapshot["ciphers"] == .array([]))
            #expect(snapshot["policies"] == .array([]))
            #expect(snapshot["sends"] == .array([]))
            #expect(snapshot["domains"]?.objectValue?["object"] == .string("domains"))
            let profile = try #require(snapshot["profile"]?.objectValue)
            #expect(profile["email"] == .string(user.email.lowercased()))
            #expect(profile["key"] == tokenObject["Key"])
            #expect(profile["privateKey"] == tokenObject["PrivateKey"])
            #expect(profile["object"] == .string("profile"))
            #expect(snapshot["userDecryption"]?.objectValue?["masterPasswordUnlock"]?.objectValue?["salt"] == .string(user.email.lowercased()))
        }
    }

    @Test("keys from the API decrypt, and another session's items decrypt", arguments: Backend.available)
    func cryptoAcrossSessions(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let user = try await TestUser.register(api)
            let firstToken = try await user.token(api)
            _ = try await api.request(.post, "/api/ciphers", token: firstToken, json: .object(try user.loginItem(name: "Shared secret", password: "s3cret")))

            // A second session knows only the email and password.
            let login = try await user.login(api)
            let master = try MasterKey.derive(password: user.password, salt: user.email, kdf: TestUser.kdf)
            let userKey = try master.decryptUserKey(EncString(try #require(login.object["Key"]?.stringValue)))
            let privateKey = try RSAPrivateKey.decrypt(EncString(try #require(login.object["PrivateKey"]?.stringValue)), userKey: userKey)
            #expect(privateKey.publicKey.spkiDER == user.privateKey.publicKey.spkiDER)
            let token = try #require(login.object["access_token"]?.stringValue)
            let sync = try await api.request(.get, "/api/sync", token: token).object
            let ciphers = try #require(sync["ciphers"]?.arrayValue)
            let view = try CipherWire(json: try #require(ciphers.first?.objectValue), path: "$").decrypted(with: VaultKeys(userKey: userKey))
            #expect(view.name == "Shared secret")
            #expect(view.login?.password == "s3cret")
        }
    }

    @Test("refresh tokens rotate; the previous one answers the same successor again (a lost answer does not end the session)",
          arguments: Backend.available)
    func refreshRotation(backend: Backend) async throws {
        let key = SystemRandomSource().bytes(count: 64)
        try await withTestServer(backend, configure: { $0.tokenKey = key }) { api in
            let user = try await TestUser.register(api)
            let device = UUID().uuidString
            let login = try await user.login(api, device: device)
            let first = try #require(login.object["refresh_token"]?.stringValue)
            func refresh(_ token: String) async throws -> (ok: Bool, refresh: String?, access: String?) {
                let answer = try await api.form("/identity/connect/token", [("grant_type", "refresh_token"), ("refresh_token", token), ("client_id", "cli")])
                if answer.status != .ok {
                    #expect(answer.status == .badRequest)
                    #expect(answer.object["error"] == .string("invalid_grant"))
                }
                return (answer.status == .ok, answer.object["refresh_token"]?.stringValue, answer.object["access_token"]?.stringValue)
            }
            let lost = try await refresh(first)
            #expect(lost.ok && lost.refresh != nil && lost.refresh != first)
            // The device never heard that answer and sends its token again: it gets the token it missed.
            let retried = try await refresh(first)
            #expect(retried.ok && retried.refresh == lost.refresh)
            // Derived from the token presented under the signing key: every instance sharing the key
            // answers a repeated refresh alike; another key gives another token.
            #expect(lost.refresh == RefreshTokens(tokenKey: key).successor(of: first))
            #expect(lost.refresh != RefreshTokens(tokenKey: SystemRandomSource().bytes(count: 64)).successor(of: first))
            let second = try #require(retried.refresh)
            let access = try #require(retried.access)
            #expect(try await api.request(.get, "/api/sync", token: access).status == .ok)
            // Using the new token rotates again; a late duplicate of that refresh gets the same answer
            // without replacing anything. (An older token, or the previous one after its grace period, is
            // theft and revokes the device: RefreshTokenTests.)
            let third = try #require(try await refresh(second).refresh)
            #expect(try await refresh(second).refresh == third)
            let fourth = try #require(try await refresh(third).refresh)
            #expect(Set([first, second, third, fourth]).count == 4)
            // A new login on the device with the password starts over: no earlier token works.
            let relogin = try #require(try await user.login(api, device: device).object["refresh_token"]?.stringValue)
            #expect(try await refresh(third).ok == false)
            #expect(try await refresh(fourth).ok == false)
            #expect(try await refresh(relogin).ok)
            #expect(try await refresh("not-a-token").ok == false)
        }
    }

    @Test("an expired or tampered token gets 401", arguments: Backend.available)
    func expiredToken(backend: Backend) async throws {
        let clock = ManualClock()
        try await withTestServer(backend, configure: { $0.now = { clock.now } }) { api in
            let user = try await TestUser.register(api)
            let token = try await user.token(api)
            #expect(try await api.request(.get, "/api/sync", token: token).status == .ok)
            var tampered = Array(token.utf8)
            tampered[tampered.count - 3] = tampered[tampered.count - 3] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
            #expect(try await api.request(.get, "/api/sync", token: String(decoding: tampered, as: UTF8.self)).status == .unauthorized)
            #expect(try await api.request(.get, "/api/sync").status == .unauthorized)
            clock.advance(seconds: 3601)
            let expired = try await api.request(.get, "/api/sync", token: token)
            #expect(expired.status == .unauthorized)
            #expect(expired.object["object"] == .string("error"))
        }
    }

    @Test("wrong password is refused in the official shape; unknown users look the same", arguments: Backend.available)
    func wrongPassword(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let user = try await TestUser.register(api)
            let wrong = try await user.login(api, password: "not the password")
            #expect(wrong.status == .badRequest)
            #expect(wrong.object["error"] == .string("invalid_grant"))
            #expect(wrong.object["error_description"] == .string("invalid_username_or_password"))
            #expect(wrong.message == "Username or password is incorrect. Try again.")
            let ghost = try await TestUser(email: "ghost@example.com", password: "x", masterKey: user.masterKey, userKey: user.userKey,
                                            privateKey: user.privateKey).login(api)
            #expect(ghost.status == .badRequest)
            #expect(ghost.message == wrong.message)
        }
    }

    @Test("two concurrent PUTs from the same base: exactly one 200 and one 400 out of date", arguments: Backend.available)
    func concurrentUpdates(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let user = try await TestUser.register(api)
            let token = try await user.token(api)
            for round in 0..<5 {
                let created = try await api.request(.post, "/api/ciphers", token: token, json: .object(try user.loginItem(name: "race \(round)")))
                let wire = try CipherWire(json: created.object, path: "$")
                let id = try #require(wire.id)
                let bodies = try (0..<2).map { index -> JSONValue in
                    var view = try wire.decrypted(with: user.keys)
                    view.login?.password = "writer \(index)"
                    var body = try view.encrypted(with: user.keys)
                    body.lastKnownRevisionDate = wire.revisionDate
                    return body.jsonValue
                }
                let statuses = try await withThrowingTaskGroup(of: APIResponse.self) { group in
                    for body in bodies {
                        group.addTask { try await api.request(.put, "/api/ciphers/\(id)", token: token, json: body) }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                var accepted = 0
                var refused: [APIResponse] = []
                for response in statuses {
                    if response.status.code == 200 { accepted += 1 }
                    if response.status.code == 400 { refused.append(response) }
                }
                #expect(accepted == 1)
                #expect(refused.count == 1)
                #expect(refused.first?.message == "The item cannot be saved because it is out of date. To edit this item, first sync your vault, or log out and back in.")
            }
        }
    }

    @Test("a stale lastKnownRevisionDate is refused; the same revision at millisecond precision is accepted", arguments: Backend.available)
    func staleCheck(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let user = try await TestUser.register(api)
            let token = try await user.token(api)
            let created = try await api.request(.post, "/api/ciphers", token: token, json: .object(try user.loginItem(name: "x")))
            var wire = try CipherWire(json: created.object, path: "$")
            let revision = try #require(wire.revisionDate)
            wire.lastKnownRevisionDate = revision.adding(microseconds: -2_000_000)
            #expect(try await api.request(.put, "/api/ciphers/\(wire.id!)", token: token, json: wire.jsonValue).status == .badRequest)
            wire.lastKnownRevisionDate = revision.adding(microseconds: 2_000_000)
            #expect(try await api.request(.put, "/api/ciphers/\(wire.id!)", token: token, json: wire.jsonValue).status == .badRequest)
            wire.lastKnownRevisionDate = WireDate(millisecondsSinceEpoch: revision.millisecondsSinceEpoch)  // ms precision, as the SDK sends
            #expect(try await api.request(.put, "/api/ciphers/\(wire.id!)", token: token, json: wire.jsonValue).status == .ok)
            wire.lastKnownRevisionDate = nil  // absent: the check is skipped
            #expect(try await api.request(.put, "/api/ciphers/\(wire.id!)", token: token, json: wire.jsonValue).status == .ok)
        }
    }
}
