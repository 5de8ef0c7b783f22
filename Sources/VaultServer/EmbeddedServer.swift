import Foundation
import Hummingbird
import Logging
import ServiceLifecycle

/// A `vaultsync-server` running inside another process (the CLI's demo, tests, benchmarks): started on
/// a loopback port, stopped for real ("the server goes down"), and started again on the same port with
/// the same data.
public actor EmbeddedServer {
    public private(set) var configuration: ServerConfiguration
    private var group: ServiceGroup?
    private var runTask: Task<Void, any Error>?
    private let logger: Logger?

    /// `configuration.port` 0 picks a free port on the first start; restarts reuse it. `logger`: the
    /// server's logger (its level is the configuration's `logLevel`).
    public init(configuration: ServerConfiguration, logger: Logger? = nil) {
        self.configuration = configuration
        self.logger = logger
    }

    /// The port the server listens on (after the first start).
    public var port: Int { configuration.port }

    /// `http://HOST:PORT`.
    public var url: String { "http://\(configuration.host):\(configuration.port)" }

    public var isRunning: Bool { group != nil }

    /// Starts (or restarts, on the same port) the server and waits until it listens.
    public func start() async throws {
        guard group == nil else { return }
        let (stream, continuation) = AsyncStream<Int>.makeStream()
        let app = try await buildApplication(configuration: configuration, logger: logger, onServerRunning: { port in
            continuation.yield(port)
            continuation.finish()
        })
        let group = ServiceGroup(configuration: .init(services: [app], gracefulShutdownSignals: [],
                                                      logger: Logger(label: "vaultsync.embedded-server")))
        self.group = group
        runTask = Task { try await group.run() }
        for await boundPort in stream {
            configuration.port = boundPort
            break
        }
    }

    /// Stops the server (gracefully) and waits until it no longer listens.
    public func stop() async {
        guard let group else { return }
        await group.triggerGracefulShutdown()
        _ = try? await runTask?.value
        self.group = nil
        runTask = nil
    }
}
