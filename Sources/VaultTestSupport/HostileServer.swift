import Foundation
import Hummingbird
import NIOCore

/// A hostile (or broken) server for the client's bad-input tests: every request, whatever its method
/// and path, is answered by a responder the test can replace between calls, so one server serves wrong
/// JSON types, huge arrays, HTML pages or tampered items. (Only for bad input; real behaviour is always
/// tested against the real server.)
public actor HostileServer {
    /// One answer.
    public struct Reply: Sendable {
        public var status: Int
        public var contentType: String
        public var body: [UInt8]
        /// A `Location` header (a redirect).
        public var location: String?
        /// The body a byte at a time, this long apart (a slow-loris answer); `nil`: at once.
        public var trickle: Duration?
        /// A `Content-Length` larger than `body`: the body is sent and then the answer never ends (a
        /// server that announces gigabytes); `nil`: the body's own length.
        public var announcedLength: Int?

        public init(status: Int = 200, contentType: String = "application/json; charset=utf-8", body: [UInt8], location: String? = nil,
                    trickle: Duration? = nil, announcedLength: Int? = nil) {
            self.status = status
            self.contentType = contentType
            self.body = body
            self.location = location
            self.trickle = trickle
            self.announcedLength = announcedLength
        }

        /// A JSON answer.
        public static func json(_ text: String, status: Int = 200) -> Reply { Reply(status: status, body: Array(text.utf8)) }
    }

    /// What the server answers to `method` and `path` (the path includes the query).
    public typealias Responder = @Sendable (_ method: String, _ path: String) -> Reply

    public private(set) var port = 0
    private var run: LoopbackRun?
    private let responder = ResponderBox()

    public init(_ responder: @escaping Responder = { _, _ in Reply(status: 404, body: []) }) {
        self.responder.set(responder)
    }

    public var url: String { "http://127.0.0.1:\(port)" }

    /// Replaces the responder; the next request gets the new answers.
    public nonisolated func respond(_ responder: @escaping Responder) {
        self.responder.set(responder)
    }

    public func start() async throws {
        let box = responder
        let router = Router()
        for method in [HTTPRequest.Method.get, .post, .put, .delete] {
            router.on("**", method: method) { request, _ in
                let reply = box.current(method.rawValue, request.uri.description)
                var headers: HTTPFields = [.contentType: reply.contentType]
                if let location = reply.location { headers[.location] = location }
                if let announced = reply.announcedLength {
                    let bytes = reply.body
                    return Response(status: .init(code: reply.status), headers: headers, body: ResponseBody(contentLength: announced) { writer in
                        try await writer.write(ByteBuffer(bytes: bytes))
                        // The rest comes a space every 50 ms: a client reading on would wait for ever (and time
                        // out). A client that gave up closed the connection, and the next write ends this answer;
                        // after a minute it ends anyway, so the server can always stop.
                        for _ in 0..<1_200 {
                            try await Task.sleep(for: .milliseconds(50))
                            try await writer.write(ByteBuffer(bytes: [0x20]))
                        }
                        try await writer.finish(nil)
                    })
                }
                guard let pause = reply.trickle else {
                    return Response(status: .init(code: reply.status), headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: reply.body)))
                }
                let bytes = reply.body
                return Response(status: .init(code: reply.status), headers: headers, body: ResponseBody(contentLength: bytes.count) { writer in
                    for byte in bytes {
                        try await writer.write(ByteBuffer(bytes: [byte]))
                        try await Task.sleep(for: pause)
                    }
                    try await writer.finish(nil)
                })
            }
        }
        let run = try await LoopbackRun.start(router: router, label: "hostile-server")
        self.run = run
        port = run.port
    }

    public func stop() async {
        await run?.stop()
        run = nil
    }
}

/// The current responder, read synchronously from the server's request handlers.
private final class ResponderBox: @unchecked Sendable {
    private let lock = NSLock()
    private var responder: HostileServer.Responder = { _, _ in HostileServer.Reply(status: 404, body: []) }

    func set(_ responder: @escaping HostileServer.Responder) {
        lock.lock()
        self.responder = responder
        lock.unlock()
    }

    func current(_ method: String, _ path: String) -> HostileServer.Reply {
        lock.lock()
        let responder = self.responder
        lock.unlock()
        return responder(method, path)
    }
}
