import Foundation
import Testing
import VaultTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// SIGTERM on a serving `vaultsync-server` (docs/OPERATIONS.md, "Stopping and starting"): the request in
/// flight is answered while new connections are refused, and one that outlasts `--shutdown-timeout` is
/// cut so that the node still stops. A request is held in flight by sending its head and only part of
/// its body; `/metrics`' in-flight gauge says when the server is answering it.
@Suite("vaultsync-server shutting down")
struct ServerShutdownTests {
    /// A blocking TCP connection to the loopback address, every read bounded by a receive timeout so that
    /// a server that never answers fails the test instead of hanging it.
    final class LoopbackConnection {
        let descriptor: Int32

        struct Failed: Error { let call: String; let code: Int32 }

        init(port: Int) throws {
            #if os(Linux)
            descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            #else
            descriptor = socket(AF_INET, SOCK_STREAM, 0)
            #endif
            guard descriptor >= 0 else { throw Failed(call: "socket", code: errno) }
            var timeout = timeval(tv_sec: 60, tv_usec: 0)
            setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard connected == 0 else {
                let code = errno
                close(descriptor)
                throw Failed(call: "connect", code: code)
            }
        }

        deinit { close(descriptor) }

        func send(_ text: String) throws {
            let bytes = Array(text.utf8)
            var sent = 0
            while sent < bytes.count {
                let count = bytes[sent...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                guard count > 0 else { throw Failed(call: "send", code: errno) }
                sent += count
            }
        }

        /// Everything the server sends until it closes the connection (or a read fails: a reset, the timeout).
        func readToEnd() -> String {
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 16_384)
            while true {
                let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { break }
                received += buffer[..<count]
            }
            return String(decoding: received, as: UTF8.self)
        }
    }

    static let body = #"{"email":"someone@example.com"}"#

    /// Starts a server with `/metrics` and `arguments`, and holds a prelogin request in flight on it.
    static func serverWithRequestInFlight(in folder: String, arguments: [String]) async throws
        -> (server: KillableChild, log: OutputCollector, port: Int, held: LoopbackConnection) {
        var environment = freshEnvironment(home: folder)
        environment["VAULTSYNC_PORT"] = "0"
        let (server, log) = try await ServerExecutableTests.startServer(in: folder, environment: environment, arguments: ["--metrics"] + arguments)
        let port = try #require(Int(String(log.text.split(separator: "listening on http://127.0.0.1:").last?.prefix { $0.isNumber } ?? "")))
        let held = try LoopbackConnection(port: port)
        try held.send("POST /identity/accounts/prelogin HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nContent-Type: application/json\r\n"
                      + "Content-Length: \(body.utf8.count)\r\n\r\n" + body.prefix(10))
        // In flight once the server counts it: two requests, the held one and the scrape asking.
        let counted = await waitUntil {
            guard let scraped = try? await ServerMetricsTests.get("http://127.0.0.1:\(port)/metrics"),
                  let samples = try? ServerMetricsTests.samples(scraped.body) else { return false }
            return (samples["vaultsync_http_requests_in_flight"] ?? 0) >= 2
        }
        #expect(counted, "the held request is counted in flight")
        return (server, log, port, held)
    }

    @Test("SIGTERM: a request in flight is answered while new connections are refused, then the server exits 0")
    func requestInFlightIsAnswered() async throws {
        let folder = try emptyFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let (server, log, port, held) = try await Self.serverWithRequestInFlight(in: folder, arguments: ["--shutdown-timeout", "600"])
        defer { server.killAndCollect() }
        kill(server.pid, SIGTERM)
        // Stopping: nothing new is accepted, while the held request keeps the server running.
        let refusing = await waitUntil { (try? LoopbackConnection(port: port)) == nil }
        #expect(refusing, "new connections are refused once SIGTERM arrived")
        #expect(server.isRunning, "the request in flight holds the shutdown: \(log.text)")
        try held.send(String(Self.body.dropFirst(10)))
        let answer = held.readToEnd()
        #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer)")
        #expect(answer.contains("\"kdfIterations\""), "\(answer)")
        #expect(await waitUntil { !server.isRunning }, "it stops once the request is answered")
        #expect(server.exitedCleanly, "\(log.text)")
        #expect(!log.text.contains("cancelled"), "\(log.text)")
    }

    @Test("SIGTERM: a request still running at --shutdown-timeout is cut, said in the log, and the server stops anyway")
    func requestPastTheTimeoutIsCut() async throws {
        let folder = try emptyFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let (server, log, _, held) = try await Self.serverWithRequestInFlight(in: folder, arguments: ["--shutdown-timeout", "1"])
        defer { server.killAndCollect() }
        let signalled = ContinuousClock.now
        kill(server.pid, SIGTERM)
        #expect(await waitUntil { !server.isRunning }, "it stops although the request never ends: \(log.text)")
        #expect(ContinuousClock.now - signalled >= .seconds(1), "it waited for the request until the timeout")
        #expect(!server.wasKilled, "\(log.text)")
        #expect(log.text.contains("requests still running at the shutdown timeout were cancelled"), "\(log.text)")
        #expect(!held.readToEnd().contains("HTTP/1.1"), "the cut request is not answered")
    }
}
