import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Testing
import VaultCrypto
import VaultModels
@testable import VaultServer

/// The storage backends under test: SQLite always; PostgreSQL when `VAULTSYNC_TEST_POSTGRES_URL`
/// names a server (`.ci/run` starts one; `scripts/test-postgres.sh` does it by hand).
enum Backend: String, CaseIterable, CustomStringConvertible, Sendable {
    case sqlite, postgres

    static var postgresAdminURL: String? {
        ProcessInfo.processInfo.environment["VAULTSYNC_TEST_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }
    }

    static var available: [Backend] { postgresAdminURL == nil ? [.sqlite] : [.sqlite, .postgres] }

    var description: String { rawValue }
}

/// A clock tests can move (to expire tokens). Running: real time plus what was advanced. Frozen: only
/// `advance` moves it, so a test whose outcome depends on elapsed time (a rate limiter's refill) does not
/// depend on how long the machine took (five slow password hashes under a busy suite once outlasted a
/// 10-second refill).
final class ManualClock: @unchecked Sendable {
    private let lock = NSLock()
    private var offset: Int64 = 0
    private let frozenAt: Int64?

    init(frozen: Bool = false) {
        frozenAt = frozen ? Self.realNow() : nil
    }

    private static func realNow() -> Int64 {
        Int64((Date().timeIntervalSince1970 * 1_000_000).rounded())
    }

    func advance(seconds: Int64) {
        lock.lock()
        offset += seconds * 1_000_000
        lock.unlock()
    }

    var now: Int64 {
        lock.lock()
        defer { lock.unlock() }
        return (frozenAt ?? Self.realNow()) + offset
    }
}

/// A fresh database for one test: a temporary SQLite file, or a new PostgreSQL database.
struct TestDatabase {
    let configuration: ServerConfiguration
    let cleanup: @Sendable () async -> Void

    static func make(_ backend: Backend, directory: String) async throws -> TestDatabase {
        var configuration = ServerConfiguration()
        configuration.host = "127.0.0.1"
        configuration.port = 0
        configuration.dataDirectory = directory
        configuration.logLevel = .warning
        // The stored-hash cost is not what these tests measure (LoginRateLimitTests measures it with the real one).
        configuration.insecureTestingPasswordIterations = 1_000
        switch backend {
        case .sqlite:
            return TestDatabase(configuration: configuration, cleanup: { try? FileManager.default.removeItem(atPath: directory) })
        case .postgres:
            let adminURL = try #require(Backend.postgresAdminURL)
            let name = "vs_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
            let admin = try PostgresDatabase(url: adminURL, logger: Logger(label: "test-admin"))
            try await admin.executeOutsideTransaction("CREATE DATABASE \(name)")
            var components = URLComponents(string: adminURL)!
            components.path = "/\(name)"
            configuration.databaseURL = components.string
            return TestDatabase(configuration: configuration, cleanup: {
                try? await admin.executeOutsideTransaction("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
                await admin.close()
                try? FileManager.default.removeItem(atPath: directory)
            })
        }
    }
}

/// Runs `body` against a real server on a random loopback port (AsyncHTTPClient underneath, so
/// concurrent requests really are concurrent).
func withTestServer(
    _ backend: Backend,
    configure: (inout ServerConfiguration) -> Void = { _ in },
    logger: Logger? = nil,
    _ body: @Sendable (APIClient) async throws -> Void
) async throws {
    let directory = NSTemporaryDirectory() + "vaultsync-test-" + UUID().uuidString
    let database = try await TestDatabase.make(backend, directory: directory)
    var configuration = database.configuration
    configure(&configuration)
    let app = try await buildApplication(configuration: configuration, logger: logger)
    do {
        try await app.test(.ahc(.http)) { client in
            try await body(APIClient(client: client))
        }
    } catch {
        await database.cleanup()
        throw error
    }
    await database.cleanup()
}

/// A response: status, headers and parsed JSON (if any).
struct APIResponse: Sendable {
    let status: HTTPResponse.Status
    let headers: HTTPFields
    let bytes: [UInt8]

    var json: JSONValue? { try? JSONParser.parse(bytes) }
    var object: JSONObject { json?.objectValue ?? JSONObject() }
    var message: String? { object["message"]?.stringValue ?? object["ErrorModel"]?.objectValue?["Message"]?.stringValue }
}

/// Thin helpers over the test client.
struct APIClient: Sendable {
    let client: any TestClientProtocol

    func request(_ method: HTTPRequest.Method, _ path: String, token: String? = nil, json: JSONValue? = nil,
                 body: [UInt8]? = nil, headers extra: HTTPFields = [:]) async throws -> APIResponse {
        var headers = extra
        if let token { headers[.authorization] = "Bearer \(token)" }
        var buffer: ByteBuffer?
        if let json {
            headers[.contentType] = "application/json"
            buffer = ByteBuffer(bytes: json.serialized())
        } else if let body {
            buffer = ByteBuffer(bytes: body)
        }
        return try await client.execute(uri: path, method: method, headers: headers, body: buffer) { response in
            APIResponse(status: response.status, headers: response.headers, bytes: Array(response.body.readableBytesView))
        }
    }

    func form(_ path: String, _ fields: [(String, String)], headers extra: HTTPFields = [:]) async throws -> APIResponse {
        let text = fields.map { key, value in
            "\(key)=\(value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? value)"
        }.joined(separator: "&")
        var headers = extra
        headers[.contentType] = "application/x-www-form-urlencoded"
        return try await request(.post, path, body: Array(text.utf8), headers: headers)
    }
}

/// A user driven through the API with real client-side crypto (VaultCrypto/VaultModels).
struct TestUser: Sendable {
    let email: String
    let password: String
    let masterKey: MasterKey
    let userKey: SymmetricCryptoKey
    let privateKey: RSAPrivateKey
    var keys: VaultKeys { VaultKeys(userKey: userKey) }

    static let kdf = KdfConfiguration.pbkdf2(iterations: 100_000)

    /// Registers a new account (legacy body) and returns it.
    static func register(_ api: APIClient, email: String = "user-\(UUID().uuidString.prefix(8))@example.com",
                         password: String = "correct horse battery staple", hint: String? = nil) async throws -> TestUser {
        let master = try MasterKey.derive(password: password, salt: email, kdf: kdf)
        let userKey = SymmetricCryptoKey.generate()
        let privateKey = try RSAPrivateKey.generate()
        let body: JSONObject = [
            "email": .string(email), "name": .string("Test User"), "masterPasswordHint": hint.map(JSONValue.string) ?? .null,
            "masterPasswordHash": .string(master.serverAuthorizationHash(password: password)),
            "key": .string(try master.encryptUserKey(userKey).serialized),
            "kdf": .int(0), "kdfIterations": .int(100_000), "kdfMemory": .null, "kdfParallelism": .null,
            "keys": .object([
                "publicKey": .string(privateKey.publicKey.spkiBase64),
                "encryptedPrivateKey": .string(try privateKey.encrypted(with: userKey).serialized),
            ]),
        ]
        let response = try await api.request(.post, "/identity/accounts/register", json: .object(body))
        #expect(response.status == .ok, "register: \(response.message ?? "")")
        return TestUser(email: email, password: password, masterKey: master, userKey: userKey, privateKey: privateKey)
    }

    /// Logs in (password grant) and returns the token response.
    func login(_ api: APIClient, device: String = UUID().uuidString, password: String? = nil,
               headers: HTTPFields = [:]) async throws -> APIResponse {
        let hash = password.map { try! MasterKey.derive(password: $0, salt: email, kdf: Self.kdf).serverAuthorizationHash(password: $0) }
            ?? masterKey.serverAuthorizationHash(password: self.password)
        return try await api.form("/identity/connect/token", [
            ("grant_type", "password"), ("username", email), ("password", hash), ("scope", "api offline_access"),
            ("client_id", "cli"), ("deviceType", "25"), ("deviceIdentifier", device), ("deviceName", "linux"),
        ], headers: headers)
    }

    /// Logs in and returns the access token.
    func token(_ api: APIClient) async throws -> String {
        let response = try await login(api)
        return try #require(response.object["access_token"]?.stringValue, "login failed: \(response.message ?? "")")
    }

    /// Creates an organization owned by this user, with a default collection; returns its id and key.
    func createOrganization(_ api: APIClient, token: String, name: String = "Family",
                            collectionName: String = "Default collection") async throws -> (id: String, key: SymmetricCryptoKey) {
        let orgKey = SymmetricCryptoKey.generate()
        let org = try await api.request(.post, "/api/organizations", token: token, json: .object([
            "name": .string(name), "billingEmail": .string(email), "planType": .int(0),
            "key": .string(try privateKey.publicKey.wrap(orgKey).serialized),
            "collectionName": .string(try EncString.encrypt(collectionName, key: orgKey).serialized),
        ]))
        #expect(org.status == .ok, "organization: \(org.message ?? "")")
        return (try #require(org.object["id"]?.stringValue), orgKey)
    }

    /// The one-time code the invite answer `invite` gave for this user's email.
    func inviteCode(in invite: APIResponse) throws -> String {
        let codes = (invite.object["inviteCodes"]?.arrayValue ?? []).compactMap(\.objectValue)
        let entry = try #require(codes.first { $0["email"] == .string(email.lowercased()) }, "no code for \(email) in the invite answer")
        return try #require(entry["code"]?.stringValue)
    }

    /// Accepts, as this user, the pending invite to `organizationID` (listed by `GET /api/vaultsync/invites`)
    /// with the one-time code the invite answer `invite` gave for this user's email.
    func acceptInvite(_ api: APIClient, organizationID: String, invite: APIResponse) async throws {
        let code = try inviteCode(in: invite)
        let token = try await token(api)
        let invites = try await api.request(.get, "/api/vaultsync/invites", token: token).object["data"]?.arrayValue ?? []
        let pending = try #require(invites.compactMap(\.objectValue).first { $0["organizationId"] == .string(organizationID) },
                                   "no invite to \(organizationID) for \(email)")
        let inviteID = try #require(pending["id"]?.stringValue)
        let accepted = try await api.request(.post, "/api/organizations/\(organizationID)/users/\(inviteID)/accept", token: token,
                                             json: .object(["token": .string(code)]))
        #expect(accepted.status == .ok, "accept: \(accepted.message ?? "")")
    }

    /// Starts an attachment (v2 flow) on one of this user's items for the encrypted form of a 100-byte file
    /// (161 bytes: type, IV, MAC and 112 bytes of ciphertext; uploads must match the announced size to the
    /// byte); the answer has `attachmentId`.
    func startAttachment(_ api: APIClient, token: String, cipherID: String) async throws -> APIResponse {
        try await api.request(.post, "/api/ciphers/\(cipherID)/attachment/v2", token: token, json: .object([
            "key": .string(try EncString.wrap(.generate(), with: userKey).serialized),
            "fileName": .string(try EncString.encrypt("a.txt", key: userKey).serialized), "fileSize": .int(161),
        ]))
    }

    /// An encrypted login item as a request body.
    func loginItem(name: String, username: String = "alice", password: String = "hunter2", folderId: String? = nil) throws -> JSONObject {
        var view = try keys.newItem(type: .login, name: name)
        view.login = LoginView(uris: [LoginURIView(uri: "https://example.com")], username: username, password: password)
        view.folderId = folderId
        return try view.encrypted(with: keys).jsonObject()
    }
}
