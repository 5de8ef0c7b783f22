import Foundation
import Hummingbird
import NIOCore

/// A fake server for injecting faults: every request gets the configured failure. (Only for faults;
/// real behaviour is always tested against the real server.)
public actor FaultServer {
    public enum Fault: Sendable {
        /// Answer with this status and a body that is not the Bitwarden error shape.
        case status(Int)
        /// Never answer (until the client gives up).
        case hang
        /// Answer 200 with an HTML page (a captive portal or misconfigured proxy).
        case html
    }

    public private(set) var port = 0
    private var run: LoopbackRun?
    private let fault: Fault
    private let received = Tally()

    /// Requests received so far (a test can show that an operation did not use the network).
    public nonisolated var requestCount: Int { received.value }

    public init(_ fault: Fault) {
        self.fault = fault
    }

    public var url: String { "http://127.0.0.1:\(port)" }

    public func start() async throws {
        let fault = self.fault
        let received = self.received
        let router = Router()
        for method in [HTTPRequest.Method.get, .post, .put, .delete] {
            router.on("**", method: method) { _, _ in
                received.increment()
                return try await Self.respond(fault)
            }
        }
        let run = try await LoopbackRun.start(router: router, label: "fault-server")
        self.run = run
        port = run.port
    }

    static func respond(_ fault: Fault) async throws -> Response {
        switch fault {
        case .status(let code):
            return Response(status: .init(code: code), body: .init(byteBuffer: ByteBuffer(string: "upstream failure")))
        case .hang:
            try await Task.sleep(for: .seconds(30))
            return Response(status: .ok)
        case .html:
            return Response(status: .ok, headers: [.contentType: "text/html"],
                            body: .init(byteBuffer: ByteBuffer(string: "<html><body>Sign in to the Wi-Fi</body></html>")))
        }
    }

    public func stop() async {
        await run?.stop()
        run = nil
    }
}

/// A thread-safe count.
final class Tally: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0

    func increment() { lock.withLock { count += 1 } }

    var value: Int { lock.withLock { count } }
}
