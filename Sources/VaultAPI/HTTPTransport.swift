import Foundation
import AsyncHTTPClient
import Logging
import NIOCore
import NIOHTTP1

/// One request as ``BitwardenAPI`` sends it: everything is built, nothing is on the wire yet.
public struct TransportRequest: Sendable {
    public var method: HTTPMethod
    /// The full URL (the API's base URL and the path with its query).
    public var url: String
    public var headers: HTTPHeaders
    public var body: [UInt8]?
    /// A body sent from a file as it is read (an attachment), instead of `body`.
    public var bodyFile: FileBody?
    /// The deadline of the whole exchange (the API configuration's request timeout).
    public var timeout: TimeAmount
    /// The longest answer body taken into a file (``HTTPTransport/download(_:into:progress:logger:)``);
    /// `nil`: no limit beyond what the caller checks itself (an attachment's announced size).
    public var maximumBodySize: Int?

    public init(method: HTTPMethod, url: String, headers: HTTPHeaders, body: [UInt8]?, bodyFile: FileBody? = nil, timeout: TimeAmount) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.bodyFile = bodyFile
        self.timeout = timeout
    }

    /// Refuses an answer body of `size` bytes when that is over ``maximumBodySize``.
    func checkBodySize(_ size: Int) throws {
        guard let maximumBodySize, size > maximumBodySize else { return }
        throw ServerCallError.invalidResponse("the answer is larger than \(maximumBodySize) bytes")
    }

    /// Refuses an answer whose `Content-Length` announces more than ``maximumBodySize`` before a byte of
    /// its body is read: a server that says 2 GiB is not read up to the limit first.
    func checkAnnouncedSize(_ headers: HTTPHeaders) throws {
        guard let announced = announcedLength(headers) else { return }
        try checkBodySize(announced)
    }
}

/// The body length an answer's `Content-Length` announces, when it has one that is a number.
func announcedLength(_ headers: HTTPHeaders) -> Int? {
    headers.first(name: "Content-Length").flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
}

/// A request body read from a file as it is sent: `prefix`, the file's bytes, `suffix` (a multipart
/// frame around an encrypted attachment), so a large file never has to be in memory.
public struct FileBody: Sendable {
    public var prefix: [UInt8]
    public var path: String
    public var fileSize: Int
    public var suffix: [UInt8]
    /// Told how many of the file's bytes went out so far.
    public var progress: (@Sendable (Int) -> Void)?

    public init(prefix: [UInt8] = [], path: String, fileSize: Int, suffix: [UInt8] = [], progress: (@Sendable (Int) -> Void)? = nil) {
        self.prefix = prefix
        self.path = path
        self.fileSize = fileSize
        self.suffix = suffix
        self.progress = progress
    }

    public var length: Int { prefix.count + fileSize + suffix.count }

    /// The whole body in memory (for transports that do not stream).
    public func collected() throws -> [UInt8] {
        guard let data = FileManager.default.contents(atPath: path) else { throw FileBodyError.unreadable(path) }
        return prefix + Array(data) + suffix
    }

    /// The body in pieces of `size` bytes, each read from the file when it is asked for (the sender's
    /// pace: nothing piles up in memory when the network is slower than the disk).
    public func pieces(size: Int = 256 * 1024) -> Pieces { Pieces(body: self, size: size) }

    public struct Pieces: AsyncSequence, Sendable {
        public typealias Element = [UInt8]
        let body: FileBody
        let size: Int

        public func makeAsyncIterator() -> Iterator { Iterator(body: body, size: size) }

        public final class Iterator: AsyncIteratorProtocol {
            private let body: FileBody
            private let size: Int
            private var descriptor: Int32 = -1
            private var stage = 0  // 0: prefix, 1: file, 2: suffix, 3: done
            private var sent = 0

            init(body: FileBody, size: Int) {
                self.body = body
                self.size = size
            }

            deinit { if descriptor >= 0 { close(descriptor) } }

            public func next() async throws -> [UInt8]? {
                while true {
                    switch stage {
                    case 0:
                        stage = 1
                        if !body.prefix.isEmpty { return body.prefix }
                    case 1:
                        if sent >= body.fileSize {
                            stage = 2
                            continue
                        }
                        if descriptor < 0 {
                            descriptor = open(body.path, O_RDONLY | O_CLOEXEC)
                            guard descriptor >= 0 else { throw FileBodyError.unreadable(body.path) }
                        }
                        var buffer = [UInt8](repeating: 0, count: Swift.min(size, body.fileSize - sent))
                        let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                        guard count > 0 else { throw FileBodyError.unreadable(body.path) }
                        sent += count
                        body.progress?(sent)
                        return count == buffer.count ? buffer : Array(buffer[0..<count])
                    case 2:
                        stage = 3
                        if !body.suffix.isEmpty { return body.suffix }
                    default:
                        return nil
                    }
                }
            }
        }
    }
}

public enum FileBodyError: Error, CustomStringConvertible {
    case unreadable(String)
    case unwritable(String)

    public var description: String {
        switch self {
        case .unreadable(let path): return "\(path) could not be read"
        case .unwritable(let path): return "\(path) could not be written"
        }
    }
}

/// One complete answer: status, headers and the whole body.
public struct TransportResponse: Sendable {
    public var status: Int
    public var headers: HTTPHeaders
    public var body: [UInt8]

    public init(status: Int, headers: HTTPHeaders, body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// How ``BitwardenAPI`` exchanges a request for an answer.
///
/// Production uses ``AsyncHTTPClientTransport``. Another transport (the deterministic simulation hands
/// requests to the server's router in process) must fail the way AsyncHTTPClient fails, with
/// `HTTPClientError` or NIO's errors, so that the API classifies its failures (offline, may have
/// reached the server) exactly as it classifies real ones.
public protocol HTTPTransport: Sendable {
    /// Sends `request` and returns the complete answer, or throws why none arrived.
    func execute(_ request: TransportRequest, logger: Logger) async throws -> TransportResponse

    /// Sends `request`; a successful answer's body is written to `descriptor` (an open file) as it
    /// arrives (`progress` is told the bytes written so far), an unsuccessful one is returned whole. A body
    /// longer than `request.maximumBodySize` is refused.
    func download(_ request: TransportRequest, into descriptor: Int32, progress: (@Sendable (Int) -> Void)?,
                  logger: Logger) async throws -> TransportResponse
}

extension HTTPTransport {
    /// For transports that hold answers whole (the simulation's, in process).
    public func download(_ request: TransportRequest, into descriptor: Int32, progress: (@Sendable (Int) -> Void)?,
                         logger: Logger) async throws -> TransportResponse {
        var response = try await execute(request, logger: logger)
        guard (200..<300).contains(response.status) else { return response }
        try request.checkBodySize(response.body.count)
        try response.body.withUnsafeBytes { try writeAll($0, to: descriptor) }
        progress?(response.body.count)
        response.body = []
        return response
    }

    /// ``download(_:into:progress:logger:)`` into the file at `path` (made, or emptied, with mode 0600).
    public func download(_ request: TransportRequest, to path: String, progress: (@Sendable (Int) -> Void)?,
                         logger: Logger) async throws -> TransportResponse {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw FileBodyError.unwritable(path) }
        defer { close(descriptor) }
        return try await download(request, into: descriptor, progress: progress, logger: logger)
    }
}

/// Writes all of `bytes` to `descriptor`.
func writeAll(_ bytes: UnsafeRawBufferPointer, to descriptor: Int32) throws {
    var offset = 0
    while offset < bytes.count {
        let count = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
        if count < 0, errno == EINTR { continue }
        guard count > 0 else { throw FileBodyError.unwritable("the downloaded file (\(String(cString: strerror(errno))))") }
        offset += count
    }
}

/// The transport over an AsyncHTTPClient `HTTPClient` (one per process, shared by the engines).
public struct AsyncHTTPClientTransport: HTTPTransport {
    public let client: HTTPClient

    public init(client: HTTPClient) {
        self.client = client
    }

    public func execute(_ request: TransportRequest, logger: Logger) async throws -> TransportResponse {
        var outgoing = HTTPClientRequest(url: request.url)
        outgoing.method = request.method
        outgoing.headers = request.headers
        if let body = request.body { outgoing.body = .bytes(ByteBuffer(bytes: body)) }
        if let file = request.bodyFile {
            outgoing.body = .stream(file.pieces().map { ByteBuffer(bytes: $0) }, length: .known(Int64(file.length)))
        }
        let response = try await client.execute(outgoing, timeout: request.timeout, logger: logger)
        let pace = BodyPace(timeout: request.timeout)
        return TransportResponse(status: Int(response.status.code), headers: response.headers,
                                 body: try await Self.collect(response.body, expected: announcedLength(response.headers), pace: pace))
    }

    /// The most an answer held in memory may be: more is refused, from its `Content-Length` when it
    /// announces more, else once that much has arrived.
    static let inMemoryLimit = 256 * 1024 * 1024

    /// The body's bytes, appended as they arrive into one array sized by `Content-Length` when given:
    /// a large answer (a vault's `/api/sync`) is held once, not once in NIO's buffer while it grows and
    /// again as the array made from it. More than 256 MiB is refused.
    static func collect(_ body: HTTPClientResponse.Body, expected: Int?, pace: BodyPace) async throws -> [UInt8] {
        let limit = inMemoryLimit
        if let expected, expected > limit {
            throw ServerCallError.invalidResponse("the answer announces \(expected) bytes, more than \(limit / 1024 / 1024) MiB")
        }
        var bytes: [UInt8] = []
        if let expected, expected > 0 { bytes.reserveCapacity(expected) }
        for try await piece in body {
            guard bytes.count + piece.readableBytes <= limit else {
                throw ServerCallError.invalidResponse("the answer is larger than \(limit / 1024 / 1024) MiB")
            }
            bytes.append(contentsOf: piece.readableBytesView)
            try pace.check(received: bytes.count)
        }
        return bytes
    }

    public func download(_ request: TransportRequest, into descriptor: Int32, progress: (@Sendable (Int) -> Void)?,
                         logger: Logger) async throws -> TransportResponse {
        var outgoing = HTTPClientRequest(url: request.url)
        outgoing.method = request.method
        outgoing.headers = request.headers
        let response = try await client.execute(outgoing, timeout: request.timeout, logger: logger)
        let pace = BodyPace(timeout: request.timeout)
        let status = Int(response.status.code)
        guard (200..<300).contains(status) else {
            let body = try await response.body.collect(upTo: 1024 * 1024)
            return TransportResponse(status: status, headers: response.headers, body: Array(body.readableBytesView))
        }
        try request.checkAnnouncedSize(response.headers)
        var written = 0
        for try await piece in response.body {
            try request.checkBodySize(written + piece.readableBytes)
            try piece.withUnsafeReadableBytes { try writeAll($0, to: descriptor) }
            written += piece.readableBytes
            try pace.check(received: written)
            progress?(written)
        }
        return TransportResponse(status: status, headers: response.headers, body: [])
    }
}

/// How slowly an answer's body may arrive. The request's deadline covers the answer's head; an idle connection
/// times out on its own, but a body that trickles in (a byte every few seconds) never would (RELIABILITY bug 65: a
/// `sync` held for good). Counted from the head's arrival: the body gets the request timeout again, then must
/// have come at ``floor`` on average. (Counted from the request's start, a head that arrived just inside the
/// deadline left its body no time at all: a loaded machine failed a request that had been answered in time.)
struct BodyPace {
    static let floor = 16 * 1024  // bytes per second
    let headArrived: ContinuousClock.Instant
    let grace: Duration

    init(timeout: TimeAmount, headArrived: ContinuousClock.Instant = .now) {
        self.headArrived = headArrived
        grace = .nanoseconds(timeout.nanoseconds)
    }

    func check(received: Int, at now: ContinuousClock.Instant = .now) throws {
        let allowed = grace + .milliseconds(Int64(received) * 1000 / Int64(Self.floor))
        guard now - headArrived <= allowed else {
            throw ServerCallError.transport(.timeout, detail: "the answer came too slowly (\(received) bytes so far)")
        }
    }
}
