import Foundation
import Logging
import VaultServer

/// A real `vaultsync-server` on a loopback port that tests can stop ("offline") and start again on the
/// same port with the same data: an ``EmbeddedServer`` with test settings (quiet logs, generous login
/// limits) and a throwaway data directory.
public actor LiveServer {
    public let dataDirectory: String
    private let server: EmbeddedServer

    /// - Parameter logger: the server's logger (tests capture logs with their own handler); its level is
    ///   the configuration's `logLevel`.
    public init(dataDirectory: String? = nil, logger: Logger? = nil,
                configure: @escaping @Sendable (inout ServerConfiguration) -> Void = { _ in }) {
        let directory = dataDirectory ?? NSTemporaryDirectory() + "vaultsync-live-" + UUID().uuidString
        self.dataDirectory = directory
        var configuration = ServerConfiguration()
        configuration.host = "127.0.0.1"
        configuration.port = 0
        configuration.dataDirectory = directory
        configuration.logLevel = .error
        configuration.accountLoginBurst = 1000
        configuration.addressLoginBurst = 1000
        // One process-wide queue of slow hashes serves every test server; its cost is not what these tests measure.
        configuration.insecureTestingPasswordIterations = 1_000
        configure(&configuration)
        server = EmbeddedServer(configuration: configuration, logger: logger)
    }

    public var port: Int { get async { await server.port } }

    /// `http://127.0.0.1:PORT`.
    public var url: String { get async { await server.url } }

    /// Starts (or restarts, on the same port) the server and waits until it listens.
    public func start() async throws { try await server.start() }

    /// Stops the server (gracefully) and waits until it no longer listens.
    public func stop() async { await server.stop() }

    /// Stops the server and removes its data.
    public func destroy() async {
        await server.stop()
        try? FileManager.default.removeItem(atPath: dataDirectory)
    }
}

/// A fresh temporary directory.
public func temporaryDirectory(_ prefix: String = "vaultsync") -> String {
    let path = NSTemporaryDirectory() + "\(prefix)-" + UUID().uuidString
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

/// A dead loopback URL: nothing listens there.
public func deadServerURL() -> String { "http://127.0.0.1:9" }
