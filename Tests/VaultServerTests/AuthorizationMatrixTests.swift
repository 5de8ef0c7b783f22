import Foundation
import Hummingbird
import Testing
import VaultCrypto
import VaultModels
@testable import VaultServer

/// An organization with an owner, a read-write member, a read-only member, a member who may view but
/// not see passwords ("can view, except passwords") and one shared item in its default collection, made
/// through the API.
struct SharedOrganization {
    let owner: TestUser
    let ownerToken: String
    let writer: TestUser
    let writerToken: String
    let reader: TestUser
    let readerToken: String
    let hider: TestUser
    let hiderToken: String
    let orgID: String
    let orgKey: SymmetricCryptoKey
    let collectionID: String
    let cipherID: String
    let cipher: JSONObject

    static func make(_ api: APIClient) async throws -> SharedOrganization {
        let owner = try await TestUser.register(api)
        let ownerToken = try await owner.token(api)
        let (orgID, orgKey) = try await owner.createOrganization(api, token: ownerToken)
        let collectionID = try #require(try await api.request(.get, "/api/organizations/\(orgID)/collections", token: ownerToken)
            .object["data"]?.arrayValue?.first?.objectValue?["id"]?.stringValue)
        let writer = try await TestUser.register(api)
        let reader = try await TestUser.register(api)
        let hider = try await TestUser.register(api)
        for (member, readOnly, hidePasswords) in [(writer, false, false), (reader, true, false), (hider, true, true)] {
            let invite = try await api.request(.post, "/api/organizations/\(orgID)/users/invite", token: ownerToken, json: .object([
                "emails": .array([.string(member.email)]), "type": .int(2),
                "collections": .array([.object(["id": .string(collectionID), "readOnly": .bool(readOnly),
                                                "hidePasswords": .bool(hidePasswords)])]),
            ]))
            #expect(invite.status == .ok)
            try await member.acceptInvite(api, organizationID: orgID, invite: invite)
        }
        let members = try await api.request(.get, "/api/organizations/\(orgID)/users", token: ownerToken).object["data"]?.arrayValue ?? []
        for entry in members.compactMap(\.objectValue) where entry["status"] == .int(1) {
            let userID = try #require(entry["userId"]?.stringValue)
            let publicKey = try await api.request(.get, "/api/users/\(userID)/public-key", token: ownerToken).object
            let wrapped = try RSAPublicKey(spkiBase64: try #require(publicKey["publicKey"]?.stringValue)).wrap(orgKey)
            let confirm = try await api.request(.post, "/api/organizations/\(orgID)/users/\(try #require(entry["id"]?.stringValue))/confirm",
                                                token: ownerToken, json: .object(["key": .string(wrapped.serialized)]))
            #expect(confirm.status == .ok)
        }
        let keys = VaultKeys(userKey: owner.userKey, organizationKeys: [orgID: orgKey])
        var view = try keys.newItem(type: .login, name: "Shared wifi", organizationId: orgID)
        view.login = LoginView(username: "guest", password: "wifi-password")
        let created = try await api.request(.post, "/api/ciphers/create", token: ownerToken, json: .object([
            "cipher": try view.encrypted(with: keys).jsonValue, "collectionIds": .array([.string(collectionID)]),
        ]))
        #expect(created.status == .ok, "create: \(created.message ?? "")")
        return SharedOrganization(owner: owner, ownerToken: ownerToken, writer: writer, writerToken: try await writer.token(api),
                                  reader: reader, readerToken: try await reader.token(api),
                                  hider: hider, hiderToken: try await hider.token(api), orgID: orgID, orgKey: orgKey,
                                  collectionID: collectionID, cipherID: try #require(created.object["id"]?.stringValue), cipher: created.object)
    }
}

@Suite("Security: the authorization matrix of every route", .serialized)
struct AuthorizationMatrixTests {
    @Test("another user's ids get 404 on the routes not covered elsewhere; bulk routes never touch others' items",
          arguments: Backend.available)
    func crossUserRest(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let shared = try await SharedOrganization.make(api)
            let owner = shared.owner
            let personal = try await api.request(.post, "/api/ciphers", token: shared.ownerToken, json: .object(try owner.loginItem(name: "Mine")))
            let cipherID = try #require(personal.object["id"]?.stringValue)
            let folder = try await api.request(.post, "/api/folders", token: shared.ownerToken,
                                               json: .object(["name": .string(try EncString.encrypt("Work", key: owner.userKey).serialized)]))
            let folderID = try #require(folder.object["id"]?.stringValue)
            let upload = try await owner.startAttachment(api, token: shared.ownerToken, cipherID: cipherID)
            let attachmentID = try #require(upload.object["attachmentId"]?.stringValue)
            let collectionUsers = try await api.request(.get, "/api/organizations/\(shared.orgID)/users", token: shared.ownerToken)
            let membershipID = try #require(collectionUsers.object["data"]?.arrayValue?.first?.objectValue?["id"]?.stringValue)

            let intruder = try await TestUser.register(api)
            let token = try await intruder.token(api)
            var wire = try CipherWire(json: personal.object, path: "$")
            wire.organizationId = shared.orgID
            let shareBody = JSONValue.object(["cipher": wire.jsonValue, "collectionIds": .array([.string(shared.collectionID)])])
            let collectionName = JSONValue.object(["name": .string(try EncString.encrypt("x", key: shared.orgKey).serialized)])
            let orgPath = "/api/organizations/\(shared.orgID)"
            let routes: [(HTTPRequest.Method, String, JSONValue?)] = [
                (.post, "/api/ciphers/\(cipherID)/partial", .object(["favorite": .bool(true)])),
                (.post, "/api/ciphers/\(cipherID)/attachment/\(attachmentID)/delete", nil),
                (.put, "/api/ciphers/\(cipherID)/share", shareBody), (.post, "/api/ciphers/\(cipherID)/share", shareBody),
                (.put, "/api/ciphers/\(shared.cipherID)/collections", .object(["collectionIds": .array([])])),
                (.post, "/api/ciphers/\(shared.cipherID)/collections", .object(["collectionIds": .array([])])),
                (.put, "/api/ciphers/\(shared.cipherID)/collections_v2", .object(["collectionIds": .array([])])),
                (.get, "/api/ciphers/\(shared.cipherID)", nil), (.put, "/api/ciphers/\(shared.cipherID)", .object(try intruder.loginItem(name: "x"))),
                (.put, "/api/ciphers/\(shared.cipherID)/delete", nil), (.delete, "/api/ciphers/\(shared.cipherID)", nil),
                (.post, "/api/folders/\(folderID)", .object(["name": .string(try EncString.encrypt("x", key: intruder.userKey).serialized)])),
                (.get, "/api/ciphers/organization-details?organizationId=\(shared.orgID)", nil),
                (.get, orgPath, nil), (.get, "\(orgPath)/collections", nil), (.post, "\(orgPath)/collections", collectionName),
                (.put, "\(orgPath)/collections/\(shared.collectionID)", collectionName),
                (.post, "\(orgPath)/collections/\(shared.collectionID)", collectionName),
                (.delete, "\(orgPath)/collections/\(shared.collectionID)", nil),
                (.get, "\(orgPath)/collections/\(shared.collectionID)/users", nil),
                (.post, "\(orgPath)/users/invite", .object(["emails": .array([.string(intruder.email)]), "type": .int(0)])),
                (.post, "\(orgPath)/users/\(membershipID)/confirm", .object(["key": .string(try EncString.encrypt("k", key: .generate()).serialized)])),
                (.get, "\(orgPath)/users", nil),
                (.post, "\(orgPath)/users/public-keys", .object(["ids": .array([.string(membershipID)])])),
            ]
            for (method, path, json) in routes {
                let response = try await api.request(method, path, token: token, json: json)
                #expect(response.status == .notFound, "\(method) \(path) answered \(response.status): \(response.message ?? "")")
            }
            // Bulk routes with a mix of the intruder's own item and others' items change only the intruder's.
            let own = try await api.request(.post, "/api/ciphers", token: token, json: .object(try intruder.loginItem(name: "own")))
            let ownID = try #require(own.object["id"]?.stringValue)
            let mixed = JSONValue.object(["ids": .array([.string(ownID), .string(cipherID), .string(shared.cipherID)])])
            for (method, path) in [(HTTPRequest.Method.put, "/api/ciphers/archive"), (.put, "/api/ciphers/unarchive"), (.put, "/api/ciphers/delete"),
                                   (.put, "/api/ciphers/restore"), (.post, "/api/ciphers/delete"), (.delete, "/api/ciphers")] {
                _ = try await api.request(method, path, token: token, json: mixed)
            }
            _ = try await api.request(.put, "/api/ciphers/move", token: token, json: .object([
                "ids": .array([.string(cipherID), .string(shared.cipherID)]), "folderId": .null]))
            _ = try await api.request(.put, "/api/ciphers/share", token: token, json: .object([
                "ciphers": .array([.object(wire.jsonObject())]), "collectionIds": .array([.string(shared.collectionID)])]))
            // The owner's and the organization's items are untouched.
            let after = try await api.request(.get, "/api/ciphers/\(cipherID)", token: shared.ownerToken).object
            #expect(after["revisionDate"] == upload.object["cipherResponse"]?.objectValue?["revisionDate"])
            #expect(after["organizationId"] == .null && after["deletedDate"] == .null && after["archivedDate"] == .null)
            let sharedAfter = try await api.request(.get, "/api/ciphers/\(shared.cipherID)", token: shared.ownerToken).object
            #expect(sharedAfter["revisionDate"] == shared.cipher["revisionDate"] && sharedAfter["deletedDate"] == .null)
            // An item created in someone else's collection is refused.
            let keys = VaultKeys(userKey: intruder.userKey, organizationKeys: [shared.orgID: .generate()])
            let foreign = try keys.newItem(type: .login, name: "into their org", organizationId: shared.orgID)
            let intoOrg = try await api.request(.post, "/api/ciphers/create", token: token, json: .object([
                "cipher": try foreign.encrypted(with: keys).jsonValue, "collectionIds": .array([.string(shared.collectionID)]),
            ]))
            #expect(intoOrg.status == .notFound || intoOrg.status == .badRequest, "create in another's organization: \(intoOrg.status)")
            #expect(try await api.request(.get, "/api/ciphers/organization-details?organizationId=\(shared.orgID)", token: shared.ownerToken)
                .object["data"]?.arrayValue?.count == 1)
        }
    }

    @Test("a read-only member cannot edit, delete, restore, share, re-collect or attach; nor administer the organization",
          arguments: Backend.available)
    func readOnlyMember(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let shared = try await SharedOrganization.make(api)
            let token = shared.readerToken
            let id = shared.cipherID
            let keys = VaultKeys(userKey: shared.reader.userKey, organizationKeys: [shared.orgID: shared.orgKey])
            var edit = try CipherWire(json: shared.cipher, path: "$").decrypted(with: keys)
            edit.login?.password = "changed by a reader"
            let body = try edit.encrypted(with: keys).jsonValue
            let orgPath = "/api/organizations/\(shared.orgID)"
            let routes: [(HTTPRequest.Method, String, JSONValue?)] = [
                (.put, "/api/ciphers/\(id)", body), (.post, "/api/ciphers/\(id)", body),
                (.put, "/api/ciphers/\(id)/delete", nil), (.delete, "/api/ciphers/\(id)", nil), (.post, "/api/ciphers/\(id)/delete", nil),
                (.put, "/api/ciphers/\(id)/restore", nil),
                (.put, "/api/ciphers/delete", .object(["ids": .array([.string(id)])])),
                (.delete, "/api/ciphers", .object(["ids": .array([.string(id)])])),
                (.put, "/api/ciphers/\(id)/collections", .object(["collectionIds": .array([])])),
                (.put, "/api/ciphers/\(id)/collections_v2", .object(["collectionIds": .array([])])),
                (.put, "/api/ciphers/\(id)/share", .object(["cipher": body, "collectionIds": .array([.string(shared.collectionID)])])),
                (.post, "/api/ciphers/\(id)/attachment/v2", .object([
                    "fileName": .string(try EncString.encrypt("f", key: shared.orgKey).serialized), "fileSize": .int(10)])),
                (.get, "/api/ciphers/organization-details?organizationId=\(shared.orgID)", nil),
                (.get, "\(orgPath)/users", nil), (.get, "\(orgPath)/collections", nil),
                (.post, "\(orgPath)/collections", .object(["name": .string(try EncString.encrypt("c", key: shared.orgKey).serialized)])),
                (.delete, "\(orgPath)/collections/\(shared.collectionID)", nil),
                (.post, "\(orgPath)/users/invite", .object(["emails": .array([.string("new@example.com")]), "type": .int(2)])),
            ]
            for (method, path, json) in routes {
                let response = try await api.request(method, path, token: token, json: json)
                #expect([.notFound, .forbidden].contains(response.status), "\(method) \(path) answered \(response.status)")
                #expect(response.status != .ok)
            }
            // Archiving bumps the shared item's revision: a read-only member may not (ArchiveTests.readerCannotArchive).
            #expect(try await api.request(.put, "/api/ciphers/\(id)/archive", token: token).status == .forbidden)
            let after = try await api.request(.get, "/api/ciphers/\(id)", token: shared.ownerToken).object
            #expect(after["data"] == shared.cipher["data"] && after["name"] == shared.cipher["name"], "the shared item is unchanged")
            #expect(after["deletedDate"] == .null && after["archivedDate"] == .null)
            #expect(after["collectionIds"] == .array([.string(shared.collectionID)]))
            #expect(try CipherWire(json: after, path: "$").decrypted(with: keys).login?.password == "wifi-password")
            // Reading stays allowed, and the read-write member can edit.
            #expect(try await api.request(.get, "/api/ciphers/\(id)", token: token).status == .ok)
            var writerEdit = edit
            writerEdit.login?.password = "changed by the writer"
            var writerWire = try writerEdit.encrypted(with: keys)
            writerWire.lastKnownRevisionDate = try CipherWire(json: after, path: "$").revisionDate
            #expect(try await api.request(.put, "/api/ciphers/\(id)", token: shared.writerToken, json: writerWire.jsonValue).status == .ok)
        }
    }

    @Test("attachments: read-only and hide-passwords members cannot start, upload (the legacy upload route), replace or delete a shared item's file",
          arguments: Backend.available)
    func attachmentsNeedEdit(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let shared = try await SharedOrganization.make(api)
            let id = shared.cipherID
            let fileKey = SymmetricCryptoKey.generate()
            let file = Array(try EncString.encrypt(Array(repeating: 7, count: 100), key: fileKey).binary())
            let forged = Array(try EncString.encrypt(Array(repeating: 9, count: 100), key: .generate()).binary())
            let start = try await api.request(.post, "/api/ciphers/\(id)/attachment/v2", token: shared.ownerToken, json: .object([
                "key": .string(try EncString.wrap(fileKey, with: shared.orgKey).serialized),
                "fileName": .string(try EncString.encrypt("plan.pdf", key: shared.orgKey).serialized), "fileSize": .int(file.count),
            ]))
            let attachmentID = try #require(start.object["attachmentId"]?.stringValue)
            let path = "/api/ciphers/\(id)/attachment/\(attachmentID)"
            func upload(_ bytes: [UInt8], token: String) async throws -> APIResponse {
                try await api.request(.post, path, token: token, body: bytes, headers: [.contentType: "application/octet-stream"])
            }
            for (label, token) in [("read-only", shared.readerToken), ("hide-passwords", shared.hiderToken)] {
                #expect(try await api.request(.get, "/api/ciphers/\(id)", token: token).status == .ok, "\(label) sees the item")
                let routes: [(HTTPRequest.Method, String, JSONValue?)] = [
                    (.post, "/api/ciphers/\(id)/attachment/v2", .object([
                        "fileName": .string(try EncString.encrypt("f", key: shared.orgKey).serialized), "fileSize": .int(10)])),
                    (.delete, path, nil), (.post, path + "/delete", nil),
                ]
                for (method, route, json) in routes {
                    let response = try await api.request(method, route, token: token, json: json)
                    #expect(response.status == .forbidden, "\(label): \(method) \(route) answered \(response.status)")
                }
                // The file not uploaded yet: a member who may only view cannot put theirs in its place.
                let first = try await upload(forged, token: token)
                #expect(first.status == .forbidden, "\(label): upload answered \(first.status)")
            }
            #expect(try await upload(file, token: shared.ownerToken).status == .ok)
            for token in [shared.readerToken, shared.hiderToken] {
                #expect(try await upload(forged, token: token).status != .ok, "replacing the uploaded file")
            }
            let item = try await api.request(.get, "/api/ciphers/\(id)", token: shared.readerToken).object
            let link = try #require(item["attachments"]?.arrayValue?.first?.objectValue?["url"]?.stringValue)
            let download = try await api.request(.get, String(link[try #require(link.range(of: "/api/attachments/")).lowerBound...]))
            #expect(download.bytes == file, "the owner's file is the one stored")
        }
    }

    @Test("tokens: expired, not yet valid, tampered, unsigned, signed with another server's key, or an attachment link get 401",
          arguments: Backend.available)
    func tokens(backend: Backend) async throws {
        let clock = ManualClock()
        let key = SystemRandomSource().bytes(count: 64)
        try await withTestServer(backend, configure: { $0.now = { clock.now }; $0.tokenKey = key }) { api in
            let user = try await TestUser.register(api)
            let token = try await user.token(api)
            #expect(try await api.request(.get, "/api/sync", token: token).status == .ok)
            let claims = try #require(AccessTokenSigner(keyBytes: key, issuer: "vaultsync").verify(token, nowSeconds: clock.now / 1_000_000))
            let nowSeconds = clock.now / 1_000_000
            let otherServer = AccessTokenSigner(keyBytes: SystemRandomSource().bytes(count: 64), issuer: "vaultsync")
            let sameKey = AccessTokenSigner(keyBytes: key, issuer: "vaultsync")
            var future = claims
            future.notBefore = nowSeconds + 3600
            future.expires = nowSeconds + 7200
            var expired = claims
            expired.notBefore = nowSeconds - 7200
            expired.expires = nowSeconds - 1
            let parts = token.split(separator: ".").map(String.init)
            let unsignedHeader = AccessTokenSigner.base64URL(Data(#"{"alg":"none","typ":"JWT"}"#.utf8))
            let swappedPayload: JSONObject = ["sub": .string(UUID().uuidString.lowercased()), "exp": .int(Int(nowSeconds) + 999), "nbf": .int(0)]
            let forged = [
                ("another server's key", otherServer.sign(claims)),
                ("expired", sameKey.sign(expired)),
                ("not valid yet", sameKey.sign(future)),
                ("alg none", "\(unsignedHeader).\(parts[1])."),
                ("payload swapped", "\(parts[0]).\(AccessTokenSigner.base64URL(Data(swappedPayload.serialized()))).\(parts[2])"),
                ("signature removed", "\(parts[0]).\(parts[1])."),
                ("two parts", "\(parts[0]).\(parts[1])"),
                ("garbage", "not-a-token"),
                ("empty", ""),
            ]
            for (label, forgedToken) in forged {
                let response = try await api.request(.get, "/api/sync", token: forgedToken)
                #expect(response.status == .unauthorized, "\(label): \(response.status)")
                #expect(try await api.request(.post, "/api/folders", token: forgedToken, json: .object([
                    "name": .string(try EncString.encrypt("x", key: user.userKey).serialized)])).status == .unauthorized, "\(label)")
            }
            // An attachment download link's token is signed by the same key but is not an access token.
            let created = try await api.request(.post, "/api/ciphers", token: token, json: .object(try user.loginItem(name: "with file")))
            let cipherID = try #require(created.object["id"]?.stringValue)
            let upload = try await user.startAttachment(api, token: token, cipherID: cipherID)
            let attachmentID = try #require(upload.object["attachmentId"]?.stringValue)
            let body = try EncString.encrypt(Array(repeating: 1, count: 100), key: .generate()).binary()
            #expect(try await api.request(.post, "/api/ciphers/\(cipherID)/attachment/\(attachmentID)", token: token, body: Array(body),
                                          headers: [.contentType: "application/octet-stream"]).status == .ok)
            let item = try await api.request(.get, "/api/ciphers/\(cipherID)", token: token).object
            let link = try #require(item["attachments"]?.arrayValue?.first?.objectValue?["url"]?.stringValue)
            let linkToken = try #require(link.split(separator: "token=").last.map(String.init))
            for (method, path) in [(HTTPRequest.Method.get, "/api/sync"), (.post, "/api/folders"), (.get, "/api/ciphers")] {
                let response = try await api.request(method, path, token: linkToken, json: method == .post ? .object([
                    "name": .string(try EncString.encrypt("x", key: user.userKey).serialized)]) : nil)
                #expect(response.status == .unauthorized, "a download link as a bearer token: \(method) \(path) answered \(response.status)")
            }
            // The real token still works until it expires.
            clock.advance(seconds: 3601)
            #expect(try await api.request(.get, "/api/sync", token: token).status == .unauthorized)
        }
    }
}
