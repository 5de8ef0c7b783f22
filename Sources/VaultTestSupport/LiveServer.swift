import Foundation
import Hummingbird
import Logging
import VaultServer

/// A real `vaultsync-server` on a loopback port that tests can stop ("offline") and start again on the
/// same port with the same data.
public actor LiveServer {
    public let dataDirectory: String
    public private(set) var port: Int = 0
    private var run: LoopbackRun?
    private let configure: @Sendable (inout ServerConfiguration) -> Void
    private let logger: Logger?

    /// - Parameter logger: the server's logger (tests capture logs with their own handler); its level is
    ///   the configuration's `logLevel`.
    public init(dataDirectory: String? = nil, logger: Logger? = nil,
                configure: @escaping @Sendable (inout ServerConfiguration) -> Void = { _ in }) {
        self.dataDirectory = dataDirectory ?? NSTemporaryDirectory() + "vaultsync-live-" + UUID().uuidString
        self.logger = logger
        self.configure = configure
    }

    /// `http://127.0.0.1:PORT`.
    public var url: String { "http://127.0.0.1:\(port)" }

    /// Starts (or restarts, on the same port) the server and waits until it listens.
    public func start() async throws {
        guard run == nil else { return }
        var configuration = ServerConfiguration()
        configuration.host = "127.0.0.1"
        configuration.port = port
        configuration.dataDirectory = dataDirectory
        configuration.logLevel = .error
        configuration.accountLoginBurst = 1000
        configuration.addressLoginBurst = 1000
        configure(&configuration)
        let final = configuration
        let run = try await LoopbackRun.start(label: "live-server") { [logger] onRunning in
            try await buildApplication(configuration: final, logger: logger, onServerRunning: onRunning)
        }
        self.run = run
        port = run.port
    }

    /// Stops the server (gracefully) and waits until it no longer listens.
    public func stop() async {
        await run?.stop()
        run = nil
    }

    /// Stops the server and removes its data.
    public func destroy() async {
        await stop()
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
