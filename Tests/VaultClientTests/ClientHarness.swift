import Foundation
import GRDB
import Testing
import VaultAPI
import VaultClient
import VaultCrypto
import VaultModels
import VaultServer
import VaultStore
import VaultSyncCore
import VaultTestSupport

/// The test KDF: the server's minimum, so tests stay quick.
let testKDF = KdfConfiguration.pbkdf2(iterations: 100_000)

/// A device clock tests can set.
final class TestClock: DeviceClock, @unchecked Sendable {
    private let lock = NSLock()
    private var offset: Int64

    init(skewSeconds: Int64 = 0) { offset = skewSeconds * 1_000_000 }

    func now() -> WireDate {
        lock.lock()
        defer { lock.unlock() }
        return WireDate(Date()).adding(microseconds: offset)
    }

    func advance(seconds: Double) {
        lock.lock()
        offset += Int64(seconds * 1_000_000)
        lock.unlock()
    }
}

/// One device: a profile database and an engine pointed at a server URL.
struct Device {
    let profile: String
    let engine: VaultEngine

    static func make(url: String, profile: String = temporaryDirectory("vaultsync-device"), clock: any DeviceClock = SystemDeviceClock(),
                     transport: (any HTTPTransport)? = nil, configure: (inout EngineConfiguration) -> Void = { _ in }) throws -> Device {
        var configuration = EngineConfiguration(serverURL: url)
        // Generous: the suites run in parallel on two cores; fault tests set short timeouts themselves.
        configuration.api.connectTimeout = .seconds(10)
        configuration.api.requestTimeout = .seconds(20)
        configuration.api.saveTimeout = .seconds(20)
        configure(&configuration)
        let engine = try VaultEngine(databasePath: profile + "/vault.sqlite", configuration: configuration, clock: clock, transport: transport)
        return Device(profile: profile, engine: engine)
    }

    /// Another engine on the same profile (a restart of the app), maybe pointed elsewhere.
    func reopen(url: String, configure: (inout EngineConfiguration) -> Void = { _ in }) throws -> Device {
        try Device.make(url: url, profile: profile, configure: configure)
    }
}

/// A server plus a registered account.
struct Scenario {
    let server: LiveServer
    let email: String
    let password = "correct horse battery staple"

    static func start(server configure: @escaping @Sendable (inout ServerConfiguration) -> Void = { _ in }) async throws -> Scenario {
        let server = LiveServer(configure: configure)
        try await server.start()
        return Scenario(server: server, email: "user-\(UUID().uuidString.prefix(8).lowercased())@example.com")
    }

    /// A logged-in device (registers the account on first use).
    func device(register: Bool = false, clock: any DeviceClock = SystemDeviceClock(), transport: (any HTTPTransport)? = nil,
                configure: (inout EngineConfiguration) -> Void = { _ in }) async throws -> Device {
        let device = try Device.make(url: await server.url, clock: clock, transport: transport, configure: configure)
        if register {
            try await device.engine.register(email: email, password: password, kdf: testKDF)
        } else {
            try await device.engine.login(email: email, password: password, acceptingKdf: testKDF)
        }
        return device
    }

    func finish(_ devices: [Device]) async {
        for device in devices {
            await device.engine.shutdown()
            try? FileManager.default.removeItem(atPath: device.profile)
        }
        await server.destroy()
    }
}

/// A login item for tests.
func loginItem(_ name: String, username: String = "alice", password: String = "hunter2") -> CipherView {
    var view = CipherView(type: .login, name: name)
    view.login = LoginView(uris: [LoginURIView(uri: "https://\(name.lowercased().replacingOccurrences(of: " ", with: "-")).example")],
                           username: username, password: password)
    return view
}

extension VaultEngine {
    /// The decrypted items, failing the test on any damaged one.
    func views() async throws -> [CipherView] {
        try await items().map { try $0.result.get() }
    }

    func view(named name: String) async throws -> CipherView? {
        try await views().first { $0.name == name }
    }
}

/// A test's own connection to a profile a live engine is using (to damage a row, or read the stored order).
/// It waits for locks as the store's connections do: the engine's background checkpoint opens and closes a
/// connection of its own after a large write, and with GRDB's default (fail at once on a lock) `ListPagesTests`
/// failed once in three full runs, on opening (docs/RELIABILITY.md, "The suite, run after run").
func sideConnection(to path: String) throws -> DatabaseQueue {
    var configuration = Configuration()
    configuration.busyMode = .timeout(10)
    return try DatabaseQueue(path: path, configuration: configuration)
}
