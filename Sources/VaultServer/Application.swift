import Foundation
import GRDB
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import HummingbirdWebSocket
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import VaultCrypto
import VaultModels

/// The dependencies every controller receives.
struct ServerServices: Sendable {
    let repository: VaultRepository
    let signer: AccessTokenSigner
    let refreshTokens: RefreshTokens
    let decoyKdf: DecoyKdf
    let limiter: LoginRateLimiter
    /// Registrations: per email and per address, and lockouts for addresses probing taken emails.
    let registrationLimiter: LoginRateLimiter
    /// Wrong two-step codes, per account: lockouts that grow (docs/PROTOCOL.md, "Two-step login").
    let twoFactorLimiter: LoginRateLimiter
    /// Refused logins, summarised (one line per interval).
    let refusals: RefusalLog
    let twoFactorSecrets: TwoFactorSecrets
    let registrationTokens: RegistrationTokens
    let configuration: ServerConfiguration
    let logger: Logger
    /// This process's notifications hub connections.
    let hub: NotificationHub
    /// What controllers call after a committed change (docs/PROTOCOL.md, "The notifications hub").
    let notifier: Notifier
    /// `--metrics`: what `/metrics` reports (`nil`: off).
    let metrics: ServerMetrics?

    /// A refused login, counted for `/metrics` (a reason of ``ServerMetrics/loginsRefusedReasons``).
    func loginRefused(_ reason: String) {
        metrics?.loginRefused(reason)
    }

    var now: @Sendable () -> Int64 { configuration.now }

    /// `http://host:port` as the client addressed us (for links in responses).
    func baseURL(for request: Request?) -> String {
        if let host = request?.head.authority, !host.isEmpty { return "\(configuration.scheme)://\(host)" }
        return "\(configuration.scheme)://\(configuration.host):\(configuration.port)"
    }

    /// The client's address: the socket's peer, or, when that peer is a configured trusted proxy, the
    /// rightmost address of `X-Forwarded-For` that is not a trusted proxy itself (each proxy appends the
    /// peer it saw, so entries left of that are whatever the client sent). A malformed entry is not
    /// believed: the peer's address is used.
    func clientAddress(_ request: Request, _ context: VaultRequestContext) -> String {
        let peer = context.remoteAddress
        let trusted = configuration.trustedProxies
        let values = request.headers[values: HTTPField.Name("X-Forwarded-For")!]
        guard trusted.contains(peer), !values.isEmpty else { return peer }
        let entries = values.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }
        for entry in entries.reversed() {
            guard ServerConfiguration.isIPAddress(entry) else { return peer }
            if !trusted.contains(entry) { return entry }
        }
        return entries.first ?? peer
    }

    func renderer(for request: Request?) -> Renderer {
        Renderer(baseURL: baseURL(for: request) + "/api", signer: signer, now: configuration.now)
    }
}

/// Opens the configured database (creating the data directory and SQLite file as needed).
public func openDatabase(_ configuration: ServerConfiguration, logger: Logger) throws -> any SQLDatabase {
    if let url = configuration.databaseURL, !url.isEmpty {
        return try PostgresDatabase(url: url, logger: logger)
    }
    try ensureDataDirectory(configuration)
    // The folder exists but this user may not be able to write it (another owner, a read-only mount): say
    // which file and why, not SQLite's bare "unable to open database file".
    let path = configuration.sqlitePath
    if !FileManager.default.isWritableFile(atPath: configuration.dataDirectory)
        || (FileManager.default.fileExists(atPath: path) && !FileManager.default.isWritableFile(atPath: path)) {
        throw ServerConfigurationError.dataDirectory("""
            cannot write \(path): this user (uid \(getuid())) has no write permission there. Give the server a data \
            directory it owns (--data-dir or VAULTSYNC_DATA_DIR), or fix the folder's owner or permissions.
            """)
    }
    do {
        return try SQLiteDatabase(path: path)
    } catch let error as DatabaseError where error.resultCode == .SQLITE_NOTADB || error.resultCode == .SQLITE_CORRUPT {
        throw ServerConfigurationError.dataDirectory("""
            \(path) is not a SQLite database this server can read (damaged, or another kind of file). Nothing was changed. \
            Move it away and restore the last backup, or give the server another data directory (--data-dir or VAULTSYNC_DATA_DIR).
            """)
    }
}

func ensureDataDirectory(_ configuration: ServerConfiguration) throws {
    let directory = configuration.dataDirectory
    guard !directory.isEmpty else {
        throw ServerConfigurationError.dataDirectory("the data directory is empty: give --data-dir (or VAULTSYNC_DATA_DIR) a folder")
    }
    // A file where the folder, or one of its parents, should be: named, rather than Foundation's "error 512".
    var path = directory
    while !path.isEmpty, path != "/" {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else {
                throw ServerConfigurationError.dataDirectory("cannot create \(directory): \(path) is a file, not a folder. Give --data-dir (or VAULTSYNC_DATA_DIR) a folder")
            }
            break
        }
        path = (path as NSString).deletingLastPathComponent
    }
    do {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    } catch {
        let underlying = (error as NSError).userInfo[NSUnderlyingErrorKey] as? NSError
        let reason = underlying?.domain == NSPOSIXErrorDomain ? String(cString: strerror(Int32(underlying!.code))) : error.localizedDescription
        throw ServerConfigurationError.dataDirectory("cannot create \(directory): \(reason)")
    }
}

/// The token signing key: from configuration, else the data directory's key file (created on first
/// start with mode 0600).
func loadTokenKey(_ configuration: ServerConfiguration) throws -> [UInt8] {
    if let key = configuration.tokenKey {
        guard key.count >= 32 else { throw ServerConfigurationError.tokenKey("must be at least 32 bytes") }
        return key
    }
    try ensureDataDirectory(configuration)
    let path = configuration.tokenKeyPath
    if let text = try? String(contentsOfFile: path, encoding: .utf8) {
        guard let key = Data(base64Encoded: text.trimmingCharacters(in: .whitespacesAndNewlines)), key.count >= 32 else {
            throw ServerConfigurationError.tokenKey("\(path) does not hold a base64 key of at least 32 bytes")
        }
        return Array(key)
    }
    let key = SystemRandomSource().bytes(count: 64)
    let created = FileManager.default.createFile(atPath: path, contents: Data(Data(key).base64EncodedString().utf8),
                                                 attributes: [.posixPermissions: 0o600])
    guard created else { throw ServerConfigurationError.tokenKey("cannot write \(path)") }
    return key
}

/// Builds the server: opens storage, runs migrations, wires the routes.
///
/// `onServerRunning` receives the bound port (useful with port 0).
public func buildApplication(
    configuration: ServerConfiguration,
    logger providedLogger: Logger? = nil,
    database providedDatabase: (any SQLDatabase)? = nil,
    onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
) async throws -> some ApplicationProtocol {
    var logger = providedLogger ?? Logger(label: "vaultsync-server")
    logger.logLevel = configuration.logLevel
    // TLS files are checked before anything is opened or stored.
    let tlsConfiguration = try configuration.tls.map { try TLSSetup.serverConfiguration($0) }
    let database = try providedDatabase ?? openDatabase(configuration, logger: logger)
    if let postgres = database as? PostgresDatabase { try await postgres.waitUntilReachable(limit: configuration.databaseWait, logger: logger) }
    let repository = VaultRepository(database: database)
    try await repository.migrate()
    let tokenKey = try loadTokenKey(configuration)
    let hub = NotificationHub(limits: .init(
        connectionsPerUser: configuration.hubConnectionsPerUser, connectionsPerAddress: configuration.hubConnectionsPerAddress,
        pingInterval: configuration.hubPingInterval, idleTimeout: configuration.hubIdleTimeout),
        observer: configuration.notificationObserver)
    // One node (SQLite): straight to this hub. PostgreSQL: through NOTIFY/LISTEN, so every node sharing the
    // database tells its own connections.
    let postgresTransport = (database as? PostgresDatabase).map { PostgresNotificationTransport(database: $0, hub: hub, logger: logger) }
    let transport: any NotificationTransport = postgresTransport ?? LocalNotificationTransport(hub: hub)
    // One node (SQLite): login limits in memory. Nodes sharing PostgreSQL: in the database, so that each
    // allows what one would.
    func limiterStore(_ scope: String) -> (@Sendable (LoginRateLimiter.Policy) -> any LimiterStore)? {
        guard database.dialect == .postgres else { return nil }
        return { SQLLimiterStore(database: database, scope: scope, policy: $0) }
    }
    let metrics = configuration.metricsEnabled ? ServerMetrics() : nil
    if let metrics { database.use.observeWaits { metrics.databaseWaited($0) } }
    let services = ServerServices(
        repository: repository,
        signer: AccessTokenSigner(keyBytes: tokenKey, issuer: "vaultsync"),
        refreshTokens: RefreshTokens(tokenKey: tokenKey),
        decoyKdf: DecoyKdf(tokenKey: tokenKey),
        limiter: LoginRateLimiter(
            account: .init(burst: configuration.accountLoginBurst, refillPerSecond: 1 / configuration.accountRefillSeconds),
            address: .init(burst: configuration.addressLoginBurst, refillPerSecond: 1 / configuration.addressRefillSeconds),
            accountEscalation: .init(threshold: configuration.accountLockoutThreshold, baseSeconds: configuration.loginLockoutBaseSeconds,
                                     maxSeconds: configuration.loginLockoutMaxSeconds),
            addressEscalation: .init(threshold: configuration.addressLockoutThreshold, baseSeconds: configuration.loginLockoutBaseSeconds,
                                     maxSeconds: configuration.loginLockoutMaxSeconds),
            capacity: configuration.loginLimiterCapacity, store: limiterStore("login"),
            now: { [now = configuration.now] in Double(now()) / 1_000_000 }),
        registrationLimiter: LoginRateLimiter(
            account: .init(burst: 5, refillPerSecond: 1.0 / 60),
            address: .init(burst: configuration.registrationBurst, refillPerSecond: 1 / configuration.registrationRefillSeconds),
            accountEscalation: .init(threshold: .max, baseSeconds: 0, maxSeconds: 0),
            addressEscalation: .init(threshold: configuration.registrationLockoutThreshold, baseSeconds: configuration.loginLockoutBaseSeconds,
                                     maxSeconds: configuration.loginLockoutMaxSeconds),
            capacity: configuration.loginLimiterCapacity, store: limiterStore("registration"),
            now: { [now = configuration.now] in Double(now()) / 1_000_000 }),
        twoFactorLimiter: LoginRateLimiter(
            // Only the lockouts count: the buckets are the login limiter's job.
            account: .init(burst: .greatestFiniteMagnitude, refillPerSecond: 1),
            address: .init(burst: .greatestFiniteMagnitude, refillPerSecond: 1),
            accountEscalation: .init(threshold: configuration.twoFactorLockoutThreshold, baseSeconds: configuration.loginLockoutBaseSeconds,
                                     maxSeconds: configuration.loginLockoutMaxSeconds),
            addressEscalation: .init(threshold: .max, baseSeconds: 0, maxSeconds: 0),
            capacity: configuration.loginLimiterCapacity, store: limiterStore("two-step"),
            now: { [now = configuration.now] in Double(now()) / 1_000_000 }),
        refusals: RefusalLog(logger: logger, intervalSeconds: configuration.refusalLogIntervalSeconds,
                             now: { [now = configuration.now] in Double(now()) / 1_000_000 }),
        twoFactorSecrets: TwoFactorSecrets(tokenKey: tokenKey),
        registrationTokens: RegistrationTokens(tokenKey: tokenKey),
        configuration: configuration,
        logger: logger,
        hub: hub,
        notifier: Notifier(repository: repository, transport: transport, logger: logger, now: configuration.now),
        metrics: metrics)

    let router = Router(context: VaultRequestContext.self)
    // Outermost when on: every request is counted, with the status the client got.
    if let metrics { router.middlewares.add(MetricsMiddleware(metrics: metrics)) }
    // Then: a preflight is answered before routing, and every answer (errors too) carries the CORS headers.
    router.middlewares.add(CORSMiddleware(extraOrigins: configuration.corsOrigins))
    router.middlewares.add(ErrorMiddleware())
    OperationsController(repository: repository, metrics: metrics, metricsToken: configuration.metricsToken, hub: hub).addRoutes(to: router)
    IdentityController(services: services).addRoutes(to: router)
    let account = AccountController(services: services)
    account.addPublicRoutes(to: router)
    AttachmentsController(services: services).addPublicRoutes(to: router)
    let sessions = SessionsController(services: services)
    sessions.addPublicRoutes(to: router)
    let profile = ProfileController(services: services)
    profile.addPublicRoutes(to: router)
    let api = router.group("api").add(middleware: AuthMiddleware(signer: services.signer, repository: repository, now: configuration.now))
    account.addRoutes(to: api)
    sessions.addRoutes(to: api)
    profile.addRoutes(to: api)
    AccountDeletionController(services: services).addRoutes(to: api)
    CiphersController(services: services).addRoutes(to: api)
    AttachmentsController(services: services).addRoutes(to: api)
    OrganizationsController(services: services).addRoutes(to: api)
    let twoFactor = TwoFactorController(services: services)
    twoFactor.addPublicRoutes(to: router)
    twoFactor.addRoutes(to: api)
    APIKeyController(services: services).addRoutes(to: api)
    let notifications = NotificationsController(services: services, hub: hub)
    notifications.addRoutes(to: router)
    // The hub's upgrade has a router of its own: only upgrade requests are matched against it.
    let webSocketRouter = Router(context: VaultRequestContext.self)
    notifications.addWebSocketRoutes(to: webSocketRouter)
    let http: HTTPServerBuilder = .http1WebSocketUpgrade(
        webSocketRouter: webSocketRouter,
        configuration: .init(ws: .init(maxFrameSize: hub.limits.maxInboundBytes, autoPing: .disabled)))
    let server: HTTPServerBuilder = try tlsConfiguration.map { try .tls(http, tlsConfiguration: $0) } ?? http

    let location = database.location
    let startLogger = logger
    var app = Application(
        router: router,
        server: server,
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "VaultSync"),
        onServerRunning: { channel in
            let port = channel.localAddress?.port ?? configuration.port
            // An IPv6 address in brackets, so the URL printed is one a client takes (http://[::1]:8087).
            let host = configuration.host.contains(":") && !configuration.host.hasPrefix("[") ? "[\(configuration.host)]" : configuration.host
            startLogger.info("vaultsync-server listening on \(configuration.scheme)://\(host):\(port); storing data in \(location)")
            await onServerRunning(port)
        },
        logger: logger)
    app.addServices(DatabaseService(database: database))
    if let postgresTransport {
        app.addServices(postgresTransport)
        app.beforeServerStarts { await postgresTransport.waitUntilListening() }
    }
    return HubApplication(inner: app, hub: hub, drainTimeout: configuration.shutdownTimeout)
}

/// The application with the notifications hub's shutdown in front: on a graceful shutdown every hub
/// connection is first sent a close message that invites a reconnect (and given a moment to end), and
/// only then is the server asked to stop. Without this the WebSocket layer would end the connections
/// with a bare WebSocket close, racing the hub's close message.
struct HubApplication<Inner: ApplicationProtocol>: ApplicationProtocol {
    typealias Responder = Inner.Responder
    let inner: Inner
    let hub: NotificationHub
    /// How long the hub's connections and then the requests in flight get to finish before the server stops anyway.
    var drainTimeout: Duration = .seconds(10)

    var responder: Inner.Responder { get async throws { try await inner.responder } }
    var server: HTTPServerBuilder { inner.server }
    var eventLoopGroup: any EventLoopGroup { inner.eventLoopGroup }
    var configuration: ApplicationConfiguration { inner.configuration }
    var logger: Logger { inner.logger }
    @Sendable func onServerRunning(_ channel: any Channel) async { await inner.onServerRunning(channel) }
    var services: [any Service] { inner.services }
    var processesRunBeforeServerStart: [@Sendable () async throws -> Void] { inner.processesRunBeforeServerStart }

    func run() async throws {
        // The server runs in a group of its own, out of reach of the caller's graceful shutdown (a detached task
        // inherits none), so that shutdown can be passed on after the hub has closed its connections.
        let group = ServiceGroup(configuration: .init(services: [inner], logger: inner.logger))
        let finished = Flag()
        let running = Task.detached {
            defer { finished.set() }
            try await group.run()
        }
        try await withTaskCancellationHandler {
            try await withGracefulShutdownHandler {
                try await running.value
            } onGracefulShutdown: { [hub, drainTimeout, logger = inner.logger] in
                Task {
                    let clock = ContinuousClock(), deadline = clock.now + drainTimeout
                    await hub.shutdown(drainingFor: drainTimeout)
                    // Then the server stops accepting and lets the requests in flight finish, in what is left
                    // of the time; requests still running after it are cancelled.
                    await group.triggerGracefulShutdown()
                    while !finished.isSet, clock.now < deadline {
                        try? await Task.sleep(for: .milliseconds(20))
                    }
                    if !finished.isSet {
                        logger.warning("requests still running at the shutdown timeout were cancelled")
                        running.cancel()
                    }
                }
            }
        } onCancel: {
            running.cancel()
        }
    }
}

/// A flag one task sets and others read.
final class Flag: Sendable {
    private let state = Mutex(false)
    var isSet: Bool { state.withLock { $0 } }
    func set() { state.withLock { $0 = true } }
}

/// Closes the database when the service group shuts down.
struct DatabaseService: Service {
    let database: any SQLDatabase

    func run() async throws {
        try? await gracefulShutdown()
        await database.close()
    }
}
