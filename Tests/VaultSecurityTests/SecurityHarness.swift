import Foundation
import Logging
import VaultClient
import VaultCrypto
import VaultModels
import VaultServer
import VaultTestSupport

/// The test KDF: the server's minimum, so tests stay quick.
let securityKDF = KdfConfiguration.pbkdf2(iterations: 100_000)

/// One device of a security test: a profile directory, its database and an engine.
struct SecureDevice {
    let profile: String
    let engine: VaultEngine

    var databasePath: String { profile + "/vault.sqlite" }

    static func make(url: String, profile: String = temporaryDirectory("vaultsync-security"), logger: Logger? = nil) throws -> SecureDevice {
        var configuration = EngineConfiguration(serverURL: url)
        configuration.api.connectTimeout = .seconds(10)
        configuration.api.requestTimeout = .seconds(20)
        // Two cores running suites side by side: a save is not queued because the machine was slow.
        configuration.api.saveTimeout = .seconds(20)
        let engine = try VaultEngine(databasePath: profile + "/vault.sqlite", configuration: configuration,
                                     logger: logger ?? Logger(label: "vaultsync.engine"))
        return SecureDevice(profile: profile, engine: engine)
    }

    /// Another engine on the same profile (the app restarted), pointed at `url`.
    func reopen(url: String, logger: Logger? = nil) throws -> SecureDevice {
        try SecureDevice.make(url: url, profile: profile, logger: logger)
    }
}

/// Runs `body` against a started server (its URL), destroying the server afterwards whatever happens.
func withLiveServer<T>(_ server: LiveServer = LiveServer(), _ body: (String) async throws -> T) async throws -> T {
    try await server.start()
    let url = await server.url
    do {
        let result = try await body(url)
        await server.destroy()
        return result
    } catch {
        await server.destroy()
        throw error
    }
}

func uniqueEmail(_ prefix: String = "user") -> String {
    "\(prefix)-\(UUID().uuidString.prefix(8).lowercased())@example.com"
}

/// A log handler that keeps every message with its metadata, for grepping.
final class CapturedLogs: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []

    func append(_ line: String) {
        lock.lock()
        lines.append(line)
        lock.unlock()
    }

    var all: [String] {
        lock.lock()
        defer { lock.unlock() }
        return lines
    }

    /// A logger whose messages (at every level) land here.
    func logger(_ label: String) -> Logger {
        var logger = Logger(label: label) { label in CapturingLogHandler(label: label, sink: self) }
        logger.logLevel = .trace
        return logger
    }
}

struct CapturingLogHandler: LogHandler {
    let label: String
    let sink: CapturedLogs
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }
        sink.append("\(event.level) \(label) \(event.message) \(merged)")
    }
}
