import AsyncHTTPClient
import Foundation
import Logging
import VaultAPI
import VaultCrypto
import VaultModels
import VaultTestSupport

/// An account on a running server with a deterministic vault, made through the real API (register,
/// login, `/api/ciphers/import`), for the benchmarks that need data on the server.
struct BenchAccount: Sendable {
    /// The server's minimum PBKDF2 work: unlocking is not what these benchmarks measure (UNLOCK is).
    static let kdf = KdfConfiguration.pbkdf2(iterations: 100_000)

    let url: String
    let email: String
    let password: String
    let api: BitwardenAPI
    let accessToken: String
    let keys: VaultKeys

    /// Registers a fresh account (unique email) on `url` and logs in.
    /// A running bench server with a registered account holding `count` imported items.
    static func serverWithVault(items count: Int) async throws -> (server: LiveServer, url: String, account: BenchAccount) {
        let server = benchServer()
        try await server.start()
        let url = await server.url
        let account = try await BenchAccount.register(url: url)
        try await account.importItems(count)
        return (server, url, account)
    }

    static func register(url: String, password: String = "benchmark password") async throws -> BenchAccount {
        let email = "bench-\(UUID().uuidString.lowercased().prefix(8))@example.com"
        let api = BitwardenAPI(baseURL: url, httpClient: HTTPClient.shared)
        let master = try MasterKey.derive(password: password, salt: email, kdf: kdf)
        let userKey = SymmetricCryptoKey.generate()
        let privateKey = try RSAPrivateKey.generate()
        try await api.register(email: email, name: nil, passwordHash: master.serverAuthorizationHash(password: password),
                               protectedKey: try master.encryptUserKey(userKey).serialized, kdf: kdf,
                               publicKey: privateKey.publicKey.spkiBase64,
                               encryptedPrivateKey: try privateKey.encrypted(with: userKey).serialized)
        return try await login(url: url, email: email, password: password)
    }

    /// Logs in to an existing account.
    static func login(url: String, email: String, password: String) async throws -> BenchAccount {
        let api = BitwardenAPI(baseURL: url, httpClient: HTTPClient.shared)
        let master = try MasterKey.derive(password: password, salt: email, kdf: kdf)
        let tokens = try await api.login(email: email, passwordHash: master.serverAuthorizationHash(password: password),
                                         deviceIdentifier: UUID().uuidString, deviceName: "bench").tokens()
        let keys = VaultKeys(userKey: try master.decryptUserKey(EncString(tokens.key!)))
        return BenchAccount(url: url, email: email, password: password, api: api, accessToken: tokens.accessToken, keys: keys)
    }

    /// Item `index` of the deterministic vault: a login with a per-item key, username, password, URI,
    /// and a note and a custom field on every fourth item (typical field sizes).
    func item(_ index: Int) throws -> CipherView {
        var view = try keys.newItem(type: .login, name: "Item \(index) at site\(index % 977).example")
        view.login = LoginView(uris: [LoginURIView(uri: "https://login.site\(index % 977).example/account/\(index)")],
                               username: "user\(index)@mail.example", password: "pw-\(index)-\(String(index * 7919, radix: 36))-xK9!")
        if index % 4 == 0 {
            view.notes = "Recovery codes: " + (0..<8).map { String(($0 + 1) * 104_729 &* (index + 1) % 1_000_000) }.joined(separator: " ")
            view.fields = [FieldView(type: .text, name: "PIN", value: String(index % 10_000))]
        }
        return view
    }

    /// Imports items `0..<count` in requests of `chunk` items (each one server transaction).
    func importItems(_ count: Int, chunk: Int = 5_000, customize: ((Int, inout CipherView) -> Void)? = nil) async throws {
        for start in stride(from: 0, to: count, by: chunk) {
            var ciphers: [JSONValue] = []
            ciphers.reserveCapacity(chunk)
            for index in start..<min(start + chunk, count) {
                var view = try item(index)
                customize?(index, &view)
                ciphers.append(.object(try view.encrypted(with: keys).requestObject()))
            }
            _ = try await api.rawJSON(.POST, "/api/ciphers/import", token: accessToken,
                                      body: .object(["ciphers": .array(ciphers), "folders": .array([]), "folderRelationships": .array([])]))
        }
    }
}

/// A `LiveServer` for benchmarks: large imports allowed; SQLite unless a PostgreSQL URL is given; the
/// token signing key given (several nodes on one database share one) or the data directory's.
func benchServer(postgresURL: String? = nil, tokenKey: [UInt8]? = nil) -> LiveServer {
    LiveServer(configure: { configuration in
        configuration.maxImportBytes = 256 * 1024 * 1024
        configuration.databaseURL = postgresURL
        configuration.tokenKey = tokenKey
    })
}

/// The engine's logger for benchmarks: warnings only (an offline save logs at info).
func quietLogger() -> Logger {
    var logger = Logger(label: "vaultsync.bench")
    logger.logLevel = .warning
    return logger
}

/// What a child process needs to open an account's profile against a server.
struct AccountProfile: Codable {
    var url: String
    var email: String
    var password: String
    /// The profile database path.
    var profile: String
}
