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

    /// `http://HOST:PORT` (`https://` with TLS).
    public var url: String { "\(configuration.scheme)://\(configuration.host):\(configuration.port)" }

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
        // If the group ends before the server listens (the port is taken on a restart), the stream ends
        // without a port and the start fails, instead of waiting forever.
        runTask = Task {
            defer { continuation.finish() }
            try await group.run()
        }
        var bound: Int?
        for await boundPort in stream {
            bound = boundPort
            break
        }
        guard let bound else {
            let failure: any Error
            do {
                try await runTask?.value
                failure = EmbeddedServerError.stoppedBeforeListening(host: configuration.host, port: configuration.port)
            } catch {
                failure = error
            }
            self.group = nil
            runTask = nil
            throw failure
        }
        configuration.port = bound
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

/// Why an embedded server did not start.
public enum EmbeddedServerError: Error, CustomStringConvertible {
    case stoppedBeforeListening(host: String, port: Int)

    public var description: String {
        switch self {
        case .stoppedBeforeListening(let host, let port): return "the server stopped before listening on \(host):\(port)"
        }
    }
}
