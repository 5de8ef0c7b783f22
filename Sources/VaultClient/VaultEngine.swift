import AsyncHTTPClient
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOSSL
import VaultAPI
import VaultCrypto
import VaultModels
import VaultStore
import VaultSyncCore

/// Tokens of the signed-in session, sealed with the user key at rest.
struct SessionTokens: Codable, Sendable {
    var accessToken: String
    /// `nil` for a session opened with an API key: it renews by logging in with the key again.
    var refreshToken: String?
    /// The API key of a session opened with one (sealed with the rest, never on disk in the clear).
    var apiKey: APIKeyCredentials?

    init(accessToken: String, refreshToken: String?, apiKey: APIKeyCredentials? = nil) {
        self.accessToken = accessToken
        self.refreshToken = refreshToken
        self.apiKey = apiKey
    }
}

/// A personal API key: client id `user.<user id>` and its secret (docs/PROTOCOL.md, "API keys").
public struct APIKeyCredentials: Codable, Sendable, Equatable {
    public var clientID: String
    public var clientSecret: String

    public init(clientID: String, clientSecret: String) {
        self.clientID = clientID
        self.clientSecret = clientSecret
    }

    /// The user id in a client id of the form `user.<user id>`, `nil` for any other form.
    public var userID: String? {
        guard clientID.hasPrefix("user."), clientID.count > 5 else { return nil }
        return String(clientID.dropFirst(5)).lowercased()
    }
}

/// What is in memory while the vault is unlocked. Dropped on `lock()`.
struct UnlockedSession: Sendable {
    var userID: String
    var email: String
    var keys: VaultKeys
    var tokens: SessionTokens?
}

/// The client engine: accounts, offline-aware vault operations, drafts and (later) sync, composed from
/// the local store, the API client and the pure rules of VaultSyncCore. The one type apps use.
///
/// Every operation encrypts first, then tries the server; if the server cannot be reached it stores
/// the encrypted result and its queue record in one transaction and reports `savedOffline`.
public actor VaultEngine {
    public let configuration: EngineConfiguration
    let store: VaultStore
    let clock: any DeviceClock
    let random: any RandomSource
    let logger: Logger
    nonisolated let clockOffsetBox = ClockOffsetBox()
    /// The client for the configured server, made on first use (``api``).
    var madeAPI: (api: BitwardenAPI, refusal: VaultError?)?
    /// How the API is made: the HTTP client (or transport) given, or the one for the CA file and proxy.
    let makeAPI: @Sendable () -> (api: BitwardenAPI, refusal: VaultError?)
    var session: UnlockedSession?
    /// The token refresh in flight, shared by every call refused with 401 meanwhile: the server
    /// rotates refresh tokens, so a second refresh with the same token would be refused and end the session.
    var refreshing: Task<SessionTokens, any Error>?
    var statusContinuations: [UUID: AsyncStream<SyncStatus>.Continuation] = [:]
    var statusProgress: (done: Int, total: Int)?
    var statusBackups: [String] = []
    var statusMessages: [String] = []
    var statusLastError: String?
    /// The "Offline Sync Conflicts" folder being found or created (shared by concurrent resolutions).
    var conflictFolderLookup: Task<String, any Error>?
    /// Whether the server has the VaultSync bulk-update extension (`nil`: not tried yet).
    var bulkUpdateSupported: Bool?
    /// Whether the server has the VaultSync bulk-create extension (`nil`: not tried yet).
    var bulkCreateSupported: Bool?
    /// Items and folders with a save in progress, and the saves waiting for their turn on each
    /// (see ``oneSaveAtATime(of:_:)``).
    var savesInProgress: Set<String> = []
    /// Live sync (LiveSync.swift): its loop, the signal that wakes it early, how it keeps in step now,
    /// its listeners, the account revision date the last live sync caught up to, and the hub address
    /// the server's configuration names ("": none, `nil`: not asked yet).
    var liveTask: Task<Void, Never>?
    var liveWake: WakeSignal?
    var liveState: LiveState?
    var liveContinuations: [UUID: AsyncStream<LiveEvent>.Continuation] = [:]
    var lastSyncedRevision: Int64?
    var hubAddress: String?
    var savesWaiting: [String: [CheckedContinuation<Void, Never>]] = [:]
    /// The name index as last opened or rebuilt, decrypted, for the unlocked user (NameIndex.swift): an
    /// engine that outlives one command (the agent, an app) finds items without opening the sealed index
    /// again. Dropped with the keys (``lock()``).
    var nameIndexInMemory: (userID: String, index: NameIndex)? {
        get { keepsNameIndexInMemory ? rememberedNameIndex : nil }
        set { rememberedNameIndex = keepsNameIndexInMemory ? newValue : nil }
    }
    private var rememberedNameIndex: (userID: String, index: NameIndex)? {
        didSet {
            // Another index (another user, other rows): the table of the one before is dropped.
            if oldValue?.userID != rememberedNameIndex?.userID || oldValue?.index.version != rememberedNameIndex?.index.version {
                rememberedNameLookup = nil
            }
        }
    }
    /// ``nameIndexInMemory``'s names as a table (``NameIndex/Lookup``), built at the first lookup by name.
    var nameLookupInMemory: NameIndex.Lookup? {
        get { rememberedNameIndex == nil ? nil : rememberedNameLookup }
        set { rememberedNameLookup = newValue }
    }
    private var rememberedNameLookup: NameIndex.Lookup?
    /// The sealing of ``nameIndexInMemory`` waiting to run (``scheduleSealingOfNameIndex()``).
    var nameIndexSealing: Task<Void, Never>?
    /// Whether ``nameIndexInMemory`` is kept (``keepNameIndexInMemory(_:)``): off for a command's engine, which
    /// ends with its command and reads the sealed index once anyway.
    private var keepsNameIndexInMemory = false

    /// Keeps the decrypted name index in memory between calls, for an engine that serves many commands (the
    /// agent): finding an item by name or a search then opens nothing but the rows that changed.
    public func keepNameIndexInMemory(_ keep: Bool) {
        keepsNameIndexInMemory = keep
        if !keep { rememberedNameIndex = nil }
    }
    /// Why the configured server address may not be used (``ServerAddress``), `nil` when it may. Every
    /// call to the server checks it first (``requireUsableServer()``), so nothing is sent to it.
    nonisolated let serverRefusal: String?
    /// Why no connection may be made with the configured CA file or proxy (``VaultError/caFileUnusable(path:reason:)``,
    /// ``VaultError/proxyUnusable(_:)``), `nil` when they are usable. Checked with ``serverRefusal``.
    var connectionRefusal: VaultError? { madeOrNewAPI().refusal }

    /// The Bitwarden API client. Made on the first call that needs the server: reading the CA file (a
    /// system bundle in `SSL_CERT_FILE` holds well over a hundred certificates to parse) and setting up
    /// the HTTP client is work a command that only reads the vault never needs.
    var api: BitwardenAPI { madeOrNewAPI().api }

    func madeOrNewAPI() -> (api: BitwardenAPI, refusal: VaultError?) {
        if let madeAPI { return madeAPI }
        let made = makeAPI()
        madeAPI = made
        return made
    }

    /// Opens the profile database at `databasePath`. Requests go over `httpClient` (by default the
    /// process's shared client for these connection settings), or through `transport` when one is given
    /// (tests: the deterministic simulation's in-process server).
    public init(databasePath: String, configuration: EngineConfiguration, clock: any DeviceClock = SystemDeviceClock(),
                random: any RandomSource = SystemRandomSource(), httpClient: HTTPClient? = nil, transport: (any HTTPTransport)? = nil,
                logger: Logger = Logger(label: "vaultsync.engine")) throws {
        self.configuration = configuration
        do {
            store = try VaultStore(path: databasePath)
        } catch let error as StoreError {
            throw VaultError.databaseUnusable(error.description)
        }
        self.clock = clock
        self.random = random
        self.logger = logger
        var refusal: String?
        switch ServerAddress.check(configuration.serverURL, allowPlainHTTP: configuration.insecureAllowPlainHTTP) {
        case .refused(let reason) where !configuration.serverURL.isEmpty:
            refusal = reason
        case .plainHTTPAllowed(let host):
            logger.warning("plain HTTP to a server on another machine, allowed by insecureAllowPlainHTTP: the login hash and tokens cross the network readable",
                           metadata: ["host": "\(host)"])
        default:
            break
        }
        serverRefusal = refusal
        let box = clockOffsetBox
        makeAPI = {
            var connection = ConnectionSettings()
            var connectionRefusal: VaultError?
            if let path = configuration.caFile {
                do {
                    connection.authorities = try CertificateAuthorityFile.load(path: path)
                } catch let error as CertificateAuthorityFileError {
                    connectionRefusal = .caFileUnusable(path: error.path, reason: error.reason)
                } catch {
                    connectionRefusal = .caFileUnusable(path: path, reason: "\(error)")
                }
            }
            do {
                connection.proxy = try configuration.proxy.proxy(for: configuration.serverURL)
            } catch let error as ProxySettingError {
                connectionRefusal = connectionRefusal ?? .proxyUnusable(error.description)
            } catch {
                connectionRefusal = connectionRefusal ?? .proxyUnusable("\(error)")
            }
            let client = httpClient ?? HTTPClients.client(for: connection)
            let api = BitwardenAPI(baseURL: configuration.serverURL, transport: transport ?? AsyncHTTPClientTransport(client: client),
                                   configuration: configuration.api,
                                   now: { clock.now() }, onClockSample: { box.record($0) }, logger: logger, connection: connection)
            return (api, connectionRefusal)
        }
    }

    /// Ends the session's in-memory state. (The HTTP client is shared by the process and lives as long.)
    public func shutdown() async {
        if nameIndexSealing != nil { await sealNameIndexInMemory() }
        session = nil
        nameIndexInMemory = nil
    }

    /// The local store (for status queries and tests).
    public nonisolated var localStore: VaultStore { store }

    /// Whether the vault is unlocked.
    public var isUnlocked: Bool { session != nil }

    /// The unlocked user's id.
    public var currentUserID: String? { session?.userID }

    func requireSession() throws -> UnlockedSession {
        guard let session else { throw VaultError.locked }
        return session
    }

    /// Runs a store write, mapping storage failures to ``VaultError/storage(_:)``.
    func write<T: Sendable>(_ body: @Sendable @escaping (StoreTransaction) throws -> T) async throws -> T {
        do {
            return try await store.write(body)
        } catch {
            throw Self.storageError(error)
        }
    }

    func read<T: Sendable>(_ body: @Sendable @escaping (StoreTransaction) throws -> T) async throws -> T {
        do {
            return try await store.read(body)
        } catch {
            throw Self.storageError(error)
        }
    }

    /// Synchronous point reads and small writes of the save path (see ``VaultStore/writeNow(_:)``):
    /// microseconds of SQLite, without two thread hops.
    func readNow<T>(_ body: (StoreTransaction) throws -> T) throws -> T {
        do { return try store.readNow(body) } catch { throw Self.storageError(error) }
    }

    func writeNow<T>(_ body: (StoreTransaction) throws -> T) throws -> T {
        do { return try store.writeNow(body) } catch { throw Self.storageError(error) }
    }

    /// A store call's failure as the caller sees it: a ``VaultError`` as it is, ``SaveRaced`` too (the save
    /// starts again: ``VaultEngine/updateItem(_:basedOn:)``), anything else as ``VaultError/storage(_:)``.
    static func storageError(_ error: any Error) -> any Error {
        if error is VaultError || error is SaveRaced { return error }
        // A server's answer read inside a transaction (a full sync's parse) that turns out damaged: the
        // transaction rolled back, and the problem is the answer, not this device's storage.
        if case ServerCallError.invalidResponse(let reason) = error { return VaultError.serverAnswerInvalid(reason) }
        return VaultError.storage(String(describing: error))
    }

    // MARK: Server calls with one token refresh

    /// Calls the server with the session's access token, refreshing it once on 401. A file of this device
    /// that a call reads or writes (an attachment, a spooled answer) failing is a storage error, never "offline".
    func authorized<T: Sendable>(_ call: @Sendable (BitwardenAPI, String) async throws -> T) async throws -> T {
        try requireUsableServer()
        let current = try requireSession()
        guard let tokens = current.tokens else { throw VaultError.notLoggedIn }
        do {
            do {
                return try await call(api, tokens.accessToken)
            } catch let error as ServerCallError where error.failure == .status(401) {
                let renewed = try await renewedTokens(after: tokens)
                return try await call(api, renewed.accessToken)
            }
        } catch let error as FileBodyError {
            throw VaultError.storage(error.description)
        }
    }

    /// Refuses before any request when the server address is not allowed (plain HTTP to another machine).
    func requireUsableServer() throws {
        if let serverRefusal { throw VaultError.insecureServer(serverRefusal) }
        if let connectionRefusal { throw connectionRefusal }
    }

    /// Tokens to use after `refused` got 401: those another call already obtained, the refresh in
    /// flight, or a new refresh (one at a time: concurrent calls share it).
    func renewedTokens(after refused: SessionTokens) async throws -> SessionTokens {
        if let current = session?.tokens, current.accessToken != refused.accessToken { return current }
        if let refreshing { return try await refreshing.value }
        let task = Task<SessionTokens, any Error> {
            let tokens: SessionTokens
            if let refreshToken = refused.refreshToken {
                let renewed: TokenResponse
                do {
                    renewed = try await self.api.refresh(refreshToken: refreshToken)
                } catch ServerCallError.authenticationExpired {
                    throw VaultError.sessionExpired
                }
                tokens = SessionTokens(accessToken: renewed.accessToken, refreshToken: renewed.refreshToken ?? refreshToken)
            } else if let apiKey = refused.apiKey {
                // An API-key session has no refresh token: it logs in with the key again (as `bw` does).
                let userID = self.session?.userID ?? ""
                let device = try await self.read { tx in try tx.accounts.find(userID: userID)?.deviceIdentifier }
                let outcome = try await self.api.login(clientID: apiKey.clientID, clientSecret: apiKey.clientSecret,
                                                       deviceIdentifier: device ?? "", deviceName: self.configuration.deviceName)
                guard case .tokens(let renewed) = outcome else { throw VaultError.sessionExpired }
                tokens = SessionTokens(accessToken: renewed.accessToken, refreshToken: nil, apiKey: apiKey)
            } else {
                throw VaultError.sessionExpired
            }
            try await self.storeTokens(tokens)
            return tokens
        }
        refreshing = task
        defer { refreshing = nil }
        return try await task.value
    }

    /// Tests (the simulation): the access token stops working, as when it expires on the server, so
    /// the next call gets 401 and refreshes. Memory only; the stored tokens are left as they are.
    func invalidateAccessToken() {
        session?.tokens?.accessToken = "invalidated"
    }

    func storeTokens(_ tokens: SessionTokens) async throws {
        guard var current = session else { throw VaultError.locked }
        current.tokens = tokens
        session = current
        let sealed = try Sealed.seal(tokens, key: current.keys.userKey)
        let userID = current.userID
        try await write { tx in try tx.accounts.setSealedTokens(sealed, userID: userID) }
    }

    /// Records whether the server answered, for status and the known-offline shortcut, and the
    /// certificate problem when that was why it could not be used (cleared by any other outcome).
    func recordContact(success: Bool, certificateProblem: CertificateProblem? = nil) async {
        guard let userID = session?.userID else { return }
        let now = clock.now().microsecondsSinceEpoch
        let offset = clockOffsetBox.current.flatMap { try? JSONEncoder().encode($0) }.map { String(decoding: $0, as: UTF8.self) }
        let problem = certificateProblem.flatMap { try? JSONEncoder().encode($0) }.map { String(decoding: $0, as: UTF8.self) }
        if let certificateProblem { publishStatus(lastError: certificateProblem.description) }
        _ = try? store.writeNow { tx in
            try tx.syncState(of: userID).update { state in
                state.lastContactDate = now
                state.lastContactFailed = !success
                state.lastContactProblem = problem
                if let offset { state.clockOffset = offset }
            }
        }
    }

    /// The certificate problem recorded with `state`'s last contact, if that is why it failed.
    static func certificateProblem(of state: SyncStateRow?) -> CertificateProblem? {
        guard let text = state?.lastContactProblem else { return nil }
        return try? JSONDecoder().decode(CertificateProblem.self, from: Data(text.utf8))
    }

    /// Whether the recorded last contact failed less than `window` seconds ago (a clock set back: no).
    func failedRecently(_ state: SyncStateRow, within window: Double) -> Bool {
        guard state.lastContactFailed, let last = state.lastContactDate else { return false }
        let age = Double(clock.now().microsecondsSinceEpoch - last) / 1_000_000
        return age >= 0 && age < window
    }
}

/// One HTTP client per process, as AsyncHTTPClient recommends; per-request timeouts come from each
/// engine's configuration. Never shut down (it lives as long as the process).
let sharedHTTPClient = HTTPClient(eventLoopGroupProvider: .singleton, configuration: HTTPClients.baseConfiguration())

/// The HTTP clients of engines with extra certificate authorities or a proxy: one per distinct
/// setting per process, created on first use and, like ``sharedHTTPClient``, never shut down.
enum HTTPClients {
    struct Key: Hashable {
        var authorities: [NIOSSLCertificate]?
        var proxy: ProxyEndpoint?
    }

    private static let cache = NIOLockedValueBox<[Key: HTTPClient]>([:])

    /// The shared client when nothing is set, else the cached client for these settings.
    static func client(for settings: ConnectionSettings) -> HTTPClient {
        guard settings.authorities != nil || settings.proxy != nil else { return sharedHTTPClient }
        let key = Key(authorities: settings.authorities?.certificates, proxy: settings.proxy)
        return cache.withLockedValue { clients in
            if let client = clients[key] { return client }
            var configuration = baseConfiguration()
            if let authorities = settings.authorities {
                var tls = TLSConfiguration.makeClientConfiguration()
                // In addition to the system's authorities, not instead of them.
                tls.additionalTrustRoots = [.certificates(authorities.certificates)]
                configuration.tlsConfiguration = tls
            }
            if let proxy = settings.proxy {
                configuration.proxy = .server(host: proxy.host, port: proxy.port,
                                              authorization: proxy.username.map { .basic(username: $0, password: proxy.password ?? "") })
            }
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
            clients[key] = client
            return client
        }
    }

    /// The settings every client of the engine shares.
    static func baseConfiguration() -> HTTPClient.Configuration {
        var configuration = HTTPClient.Configuration()
        configuration.timeout = .init(connect: .seconds(5), read: .seconds(60))
        // A refused connection means "offline" now, not after retries until the request deadline.
        configuration.connectionPool.retryConnectionEstablishment = false
        // A redirect is never followed (RELIABILITY bug 62: a login's hash was posted again wherever a server sent
        // it, over plain HTTP too): the 3xx answer is the server's, and says "not now" (exit 7 at the CLI).
        configuration.redirectConfiguration = .disallow
        return configuration
    }
}

/// Collects clock samples from responses (called from the HTTP client's tasks).
final class ClockOffsetBox: @unchecked Sendable {
    private let lock = NSLock()
    private var estimate: ServerClockOffset?

    func record(_ sample: ClockSample) {
        let measured = ServerClockOffset.sample(serverDate: sample.serverDate, sentAt: sample.sentAt, receivedAt: sample.receivedAt)
        lock.lock()
        estimate = estimate.map { $0.merged(with: measured) } ?? measured
        lock.unlock()
    }

    func restore(_ value: ServerClockOffset?) {
        lock.lock()
        if estimate == nil { estimate = value }
        lock.unlock()
    }

    var current: ServerClockOffset? {
        lock.lock()
        defer { lock.unlock() }
        return estimate
    }
}
