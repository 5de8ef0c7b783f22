import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import PropertyBased
import Testing
import VaultAPI
import VaultClient
import VaultCrypto
import VaultModels
import VaultTestSupport

/// A raw answer of the server.
struct RawReply: Sendable {
    var status: Int
    var headers: HTTPHeaders
    var body: [UInt8]

    var object: JSONObject? { try? JSONParser.parseObject(body) }
}

/// Sends one raw request (any bytes as the body) to `baseURL`.
func rawRequest(_ baseURL: String, _ method: HTTPMethod, _ path: String, token: String? = nil, body: [UInt8]? = nil,
                contentType: String = "application/json") async throws -> RawReply {
    var request = HTTPClientRequest(url: baseURL + path)
    request.method = method
    if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
    if let body {
        request.headers.add(name: "Content-Type", value: contentType)
        request.body = .bytes(ByteBuffer(bytes: body))
    }
    let response = try await SecurityHTTP.client.execute(request, timeout: .seconds(60))
    let bytes = try await response.body.collect(upTo: 64 * 1024 * 1024)
    return RawReply(status: Int(response.status.code), headers: response.headers, body: Array(bytes.readableBytesView))
}

/// An account on a live server, driven through the real client for its keys and a token for raw calls.
struct FuzzAccount {
    let email: String
    let password: String
    let keys: VaultKeys
    let token: String
    let passwordHash: String

    static func make(_ url: String, email: String = uniqueEmail("fuzz"), password: String = "correct horse battery staple") async throws -> FuzzAccount {
        let device = try SecureDevice.make(url: url)
        try await device.engine.register(email: email, password: password, kdf: securityKDF)
        let master = try MasterKey.derive(password: password, salt: email, kdf: securityKDF)
        let hash = master.serverAuthorizationHash(password: password)
        let api = BitwardenAPI(baseURL: url, httpClient: SecurityHTTP.client)
        let tokens = try await api.login(email: email, passwordHash: hash, deviceIdentifier: UUID().uuidString, deviceName: "fuzz").tokens()
        let userKey = try master.decryptUserKey(EncString(try #require(tokens.key)))
        await device.engine.shutdown()
        try? FileManager.default.removeItem(atPath: device.profile)
        return FuzzAccount(email: email, password: password, keys: VaultKeys(userKey: userKey), token: tokens.accessToken, passwordHash: hash)
    }

    func item(_ name: String) throws -> CipherWire {
        var view = try keys.newItem(type: .login, name: name)
        view.login = LoginView(uris: [LoginURIView(uri: "https://example.com")], username: "alice", password: "hunter2")
        view.fields = [FieldView(type: .text, name: "f", value: "v")]
        return try view.encrypted(with: keys)
    }
}

/// The server's request decoding under mutated bodies, over real HTTP: never a 5xx, never a dropped
/// connection, always the error shape for a refusal, and the server keeps serving.
@Suite("Bad input: mutated requests never break the server", .serialized, .timeLimit(.minutes(10 * FuzzSize.scale)))
struct RequestFuzzTests {
    struct Route: Sendable {
        var name: String
        var method: HTTPMethod
        var path: String
        var authorized: Bool
        var contentType = "application/json"
        var seeds: [[UInt8]]
        var count: Int
    }

    @Test("register, token, prelogin, ciphers, folders, organizations, import, share: no 5xx, typed 4xx")
    func mutatedRequests() async throws {
        try await withLiveServer { url in
            let account = try await FuzzAccount.make(url)
            let token = account.token
            let created = try await rawRequest(url, .POST, "/api/ciphers", token: token, body: try account.item("seed").jsonBytes())
            let cipher = try CipherWire(json: try #require(created.object), path: "$")
            let cipherID = try #require(cipher.id)
            let folderName = try EncString.encrypt("Folder", key: account.keys.userKey).serialized
            let folder = try await rawRequest(url, .POST, "/api/folders", token: token, body: json(["name": .string(folderName)]))
            let folderID = try #require(folder.object?["id"]?.stringValue)
            let orgKey = SymmetricCryptoKey.generate()
            let privateKey = try RSAPrivateKey.generate()
            let orgBody: JSONObject = [
                "name": .string("Org"), "billingEmail": .string(account.email), "planType": .int(0),
                "key": .string(try privateKey.publicKey.wrap(orgKey).serialized),
                "collectionName": .string(try EncString.encrypt("Default", key: orgKey).serialized),
            ]
            let org = try await rawRequest(url, .POST, "/api/organizations", token: token, body: orgBody.serialized())
            let orgID = try #require(org.object?["id"]?.stringValue)

            let collectionID = try #require(try await rawRequest(url, .GET, "/api/organizations/\(orgID)/collections", token: token)
                .object?["data"]?.arrayValue?.first?.objectValue?["id"]?.stringValue)
            // With the revision the item had (refused as out of date once another case saved) and without one (no check).
            var update = cipher
            update.lastKnownRevisionDate = cipher.revisionDate
            var unchecked = cipher
            unchecked.lastKnownRevisionDate = nil
            var shared = cipher
            shared.organizationId = orgID
            let registerBody: JSONObject = [
                "email": .string(account.email), "name": .string("x"), "masterPasswordHint": .null,
                "masterPasswordHash": .string(account.passwordHash), "key": .string(try EncString.encrypt("k", key: account.keys.userKey).serialized),
                "kdf": .int(0), "kdfIterations": .int(100_000), "kdfMemory": .null, "kdfParallelism": .null,
                "keys": .object(["publicKey": .string(privateKey.publicKey.spkiBase64),
                                 "encryptedPrivateKey": .string(try privateKey.encrypted(with: account.keys.userKey).serialized)]),
            ]
            let tokenForm = [("grant_type", "password"), ("username", account.email), ("password", account.passwordHash), ("scope", "api offline_access"),
                             ("client_id", "cli"), ("deviceType", "25"), ("deviceIdentifier", "d"), ("deviceName", "n")]
                .map { "\($0.0)=\(BitwardenAPIFormEncoding.encode($0.1))" }.joined(separator: "&")
            let ids: JSONObject = ["ids": .array([.string(cipherID)]), "folderId": .string(folderID)]
            let size = FuzzSize.scale
            let routes: [Route] = [
                Route(name: "register", method: .POST, path: "/identity/accounts/register", authorized: false, seeds: [registerBody.serialized()], count: 60 * size),
                Route(name: "token", method: .POST, path: "/identity/connect/token", authorized: false, contentType: "application/x-www-form-urlencoded",
                      seeds: [Array(tokenForm.utf8), Array("grant_type=refresh_token&refresh_token=abc&client_id=cli".utf8)], count: 80 * size),
                Route(name: "prelogin", method: .POST, path: "/identity/accounts/prelogin", authorized: false,
                      seeds: [json(["email": .string(account.email)])], count: 100 * size),
                Route(name: "cipher create", method: .POST, path: "/api/ciphers", authorized: true, seeds: [try account.item("new").jsonBytes()], count: 300 * size),
                Route(name: "cipher create (wrapped)", method: .POST, path: "/api/ciphers/create", authorized: true,
                      seeds: [json(["cipher": try account.item("w").jsonValue, "collectionIds": .array([])])], count: 150 * size),
                Route(name: "cipher update", method: .PUT, path: "/api/ciphers/\(cipherID)", authorized: true, seeds: [update.jsonBytes(), unchecked.jsonBytes()], count: 300 * size),
                Route(name: "cipher partial", method: .PUT, path: "/api/ciphers/\(cipherID)/partial", authorized: true,
                      seeds: [json(["folderId": .string(folderID), "favorite": .bool(true)])], count: 100 * size),
                Route(name: "move and bulk", method: .PUT, path: "/api/ciphers/move", authorized: true, seeds: [ids.serialized()], count: 100 * size),
                Route(name: "share", method: .PUT, path: "/api/ciphers/\(cipherID)/share", authorized: true,
                      seeds: [json(["cipher": shared.jsonValue, "collectionIds": .array([.string(collectionID)])])], count: 100 * size),
                Route(name: "import", method: .POST, path: "/api/ciphers/import", authorized: true, seeds: [json([
                    "ciphers": .array([try account.item("i").jsonValue]), "folders": .array([.object(["name": .string(folderName)])]),
                    "folderRelationships": .array([.object(["key": .int(0), "value": .int(0)])]),
                ])], count: 100 * size),
                Route(name: "folder create", method: .POST, path: "/api/folders", authorized: true,
                      seeds: [json(["name": .string(folderName)])], count: 100 * size),
                Route(name: "folder rename", method: .PUT, path: "/api/folders/\(folderID)", authorized: true,
                      seeds: [json(["name": .string(folderName)])], count: 100 * size),
                Route(name: "organization create", method: .POST, path: "/api/organizations", authorized: true, seeds: [orgBody.serialized()], count: 60 * size),
                Route(name: "collection create", method: .POST, path: "/api/organizations/\(orgID)/collections", authorized: true,
                      seeds: [json(["name": .string(try EncString.encrypt("c", key: orgKey).serialized), "users": .array([])])], count: 100 * size),
                Route(name: "invite", method: .POST, path: "/api/organizations/\(orgID)/users/invite", authorized: true, seeds: [json([
                    "emails": .array([.string("someone@example.com")]), "type": .int(2), "collections": .array([]),
                ])], count: 100 * size),
            ]
            var figures: [String] = []
            for route in routes {
                var statuses: [Int: Int] = [:]
                await propertyCheck(count: route.count, input: mutatedInputs(route.seeds)) { input in
                    do {
                        let reply = try await rawRequest(url, route.method, route.path, token: route.authorized ? token : nil, body: input.bytes,
                                                         contentType: route.contentType)
                        statuses[reply.status, default: 0] += 1
                        #expect(reply.status < 500, "\(route.name): \(reply.status) for \(input)")
                        if reply.status >= 400 {
                            let object = reply.object
                            #expect(object?["message"]?.stringValue != nil || object?["error"]?.stringValue != nil,
                                    "\(route.name): \(reply.status) without the error shape for \(input)")
                        }
                    } catch {
                        Issue.record("\(route.name): no answer (\(error)) for \(input)")
                    }
                }
                figures.append("\(route.name) \(route.count) cases \(statuses.sorted { $0.key < $1.key }.map { "\($0.key)×\($0.value)" }.joined(separator: " "))")
            }
            // Still serving, and the account still works.
            #expect(try await rawRequest(url, .GET, "/alive").status == 200)
            #expect(try await rawRequest(url, .GET, "/api/ciphers/\(cipherID)", token: token).status == 200)
            print("request fuzz:\n" + figures.joined(separator: "\n"))
        }
    }
}

/// The bytes of a JSON object.
func json(_ object: JSONObject) -> [UInt8] { object.serialized() }

/// Form encoding as the client does it (RFC 3986 unreserved characters kept).
enum BitwardenAPIFormEncoding {
    static func encode(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }
}
