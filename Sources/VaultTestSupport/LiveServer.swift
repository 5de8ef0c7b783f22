import Foundation
import Logging
import VaultServer

/// A real `vaultsync-server` on a loopback port that tests can stop ("offline") and start again on the
/// same port with the same data: an ``EmbeddedServer`` with test settings (quiet logs, generous login
/// limits) and a throwaway data directory.
public actor LiveServer {
    public let dataDirectory: String
    private var server: EmbeddedServer
    /// The settings, for a first start on another port when the chosen one is taken.
    private let configuration: ServerConfiguration
    private let logger: Logger?
    private var started = false

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
        self.configuration = configuration
        self.logger = logger
        server = EmbeddedServer(configuration: configuration, logger: logger)
    }

    public var port: Int { get async { await server.port } }

    /// `http://127.0.0.1:PORT`.
    public var url: String { get async { await server.url } }

    /// Starts (or restarts, on the same port) the server and waits until it listens.
    ///
    /// A server asked for any port gets one below the kernel's ephemeral range (``TestPorts``): a port
    /// the kernel hands out to connections and to `port 0` listeners could be taken while this server
    /// is stopped, and its restart would fail ("Address already in use"; seen in a full run).
    public func start() async throws {
        guard !started, configuration.port == 0 else {
            try await server.start()
            return
        }
        var lastError: (any Error)?
        for _ in 0..<64 {
            var chosen = configuration
            chosen.port = TestPorts.next()
            let candidate = EmbeddedServer(configuration: chosen, logger: logger)
            do {
                try await candidate.start()
                server = candidate
                started = true
                return
            } catch {
                lastError = error
            }
        }
        throw lastError ?? EmbeddedServerError.stoppedBeforeListening(host: configuration.host, port: 0)
    }

    /// Stops the server (gracefully) and waits until it no longer listens.
    public func stop() async { await server.stop() }

    /// Stops the server and removes its data.
    public func destroy() async {
        await server.stop()
        try? FileManager.default.removeItem(atPath: dataDirectory)
    }
}

/// Ports for test servers that stop and start again, handed out once per process from below the
/// kernel's ephemeral range (where outgoing connections and `port 0` listeners take theirs), starting
/// at a random point so that two test processes on one machine rarely meet.
public enum TestPorts {
    private static let state: Mutex = Mutex()

    /// The next port to try.
    public static func next() -> Int { state.next() }

    final class Mutex: @unchecked Sendable {
        private let lock = NSLock()
        private var current: Int
        private let low = 10_000
        private let high: Int

        init() {
            // Linux: "32768 60999" by default; elsewhere (macOS: 49152 and up) 32768 is below it too.
            let range = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8))?
                .split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).compactMap { Int($0) }
            high = max(low + 1_000, min(range?.first ?? 32_768, 32_768) - 1)
            current = Int.random(in: low..<high)
        }

        func next() -> Int {
            lock.withLock {
                current += 1
                if current >= high { current = low }
                return current
            }
        }
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
