import NIOCore
import NIOHTTP1
import NIOPosix

/// One HTTP request as a local API answers it: the method, the path (percent-decoded), the query's
/// names and values, the headers and the whole body.
public struct LocalHTTPRequest: Sendable {
    public let method: String
    public let path: String
    public let query: [String: String]
    public let headers: [(name: String, value: String)]
    public let body: [UInt8]

    public init(method: String, path: String, query: [String: String] = [:], headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
    }

    /// The first value of a header (names compare in any case).
    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    /// The path and query of a request target (`/a%20b?x=1&y`), decoded; `nil` when a percent escape is malformed.
    static func target(_ uri: String) -> (path: String, query: [String: String])? {
        let parts = uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        guard let path = decoded(parts[0], plusIsSpace: false) else { return nil }
        var query: [String: String] = [:]
        if parts.count == 2 {
            for pair in parts[1].split(separator: "&") {
                let nameValue = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard let name = decoded(nameValue[0], plusIsSpace: true),
                      let value = nameValue.count == 2 ? decoded(nameValue[1], plusIsSpace: true) : "" else { return nil }
                if query[name] == nil { query[name] = value }
            }
        }
        return (path, query)
    }

    /// Percent-decoding (and `+` as a space in a query, as forms write it); `nil` for a broken escape or bytes that are not UTF-8.
    static func decoded(_ text: Substring, plusIsSpace: Bool) -> String? {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "%"):
                guard let high = iterator.next().flatMap(hexValue), let low = iterator.next().flatMap(hexValue) else { return nil }
                bytes.append(high << 4 | low)
            case UInt8(ascii: "+") where plusIsSpace: bytes.append(UInt8(ascii: " "))
            default: bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

public struct LocalHTTPResponse: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A JSON body (`application/json; charset=utf-8`).
    public static func json(_ status: Int, _ text: String) -> LocalHTTPResponse {
        LocalHTTPResponse(status: status, headers: [("Content-Type", "application/json; charset=utf-8")], body: Array(text.utf8))
    }
}

public enum LocalHTTPError: Error, Sendable, Equatable {
    /// The address could not be bound: in use, not this machine's, or not allowed.
    case cannotListen(host: String, port: Int, reason: String)
}

/// A small HTTP/1.1 server for a local API (bw's Vault Management API): keep-alive connections, one
/// request at a time per connection, the whole body read before the handler runs (up to
/// ``maximumBodySize``, else 413), every response with its length. It binds where it is told (the
/// caller chooses loopback) and speaks plain HTTP: it is for this machine's programs.
public final class LocalHTTPServer: Sendable {
    public typealias Handler = @Sendable (LocalHTTPRequest) async -> LocalHTTPResponse
    /// The largest request body read (bw's items and folders are JSON of a few kilobytes).
    public static let maximumBodySize = 16 << 20

    public let host: String
    /// The port it listens on (the one chosen by the system when 0 was asked).
    public let port: Int
    private let channel: NIOAsyncChannel<NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>, Never>

    private init(host: String, port: Int,
                 channel: NIOAsyncChannel<NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>, Never>) {
        self.host = host
        self.port = port
        self.channel = channel
    }

    /// Binds `host:port` and returns once it listens; ``serve(_:)`` answers.
    public static func bind(host: String, port: Int) async throws(LocalHTTPError) -> LocalHTTPServer {
        do {
            let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.backlog, value: 256)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .bind(host: host, port: port) { child in
                    child.eventLoop.makeCompletedFuture {
                        try child.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                        return try NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>(wrappingChannelSynchronously: child)
                    }
                }
            return LocalHTTPServer(host: host, port: channel.channel.localAddress?.port ?? port, channel: channel)
        } catch {
            throw .cannotListen(host: host, port: port, reason: String(describing: error))
        }
    }

    /// Answers connections until ``close()`` is called (no new connections) and the task is cancelled (the
    /// open ones end: a keep-alive client never closes its own).
    public func serve(_ handler: @escaping Handler) async {
        try? await channel.executeThenClose { connections in
            try await withThrowingDiscardingTaskGroup { group in
                for try await connection in connections {
                    group.addTask { await Self.answer(connection, handler) }
                }
            }
        }
    }

    /// Stops listening (connections being answered finish their request).
    public func close() {
        channel.channel.close(promise: nil)
    }

    private static func answer(_ connection: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>,
                               _ handler: Handler) async {
        try? await connection.executeThenClose { inbound, outbound in
            var head: HTTPRequestHead?
            var body = ByteBuffer()
            var tooLarge = false
            for try await part in inbound {
                switch part {
                case .head(let requestHead):
                    head = requestHead
                    body.clear()
                    tooLarge = false
                case .body(var chunk):
                    if body.readableBytes + chunk.readableBytes > maximumBodySize { tooLarge = true } else { body.writeBuffer(&chunk) }
                case .end:
                    guard let requestHead = head else { continue }
                    head = nil
                    let response: LocalHTTPResponse
                    if tooLarge {
                        response = .json(413, #"{"success":false,"message":"The request is too large."}"#)
                    } else if let target = LocalHTTPRequest.target(requestHead.uri) {
                        let request = LocalHTTPRequest(method: requestHead.method.rawValue, path: target.path, query: target.query,
                                                       headers: requestHead.headers.map { ($0.name, $0.value) },
                                                       body: body.readableBytesView.map { $0 })
                        response = await handler(request)
                    } else {
                        response = .json(400, #"{"success":false,"message":"The request's address is malformed."}"#)
                    }
                    let keepAlive = requestHead.isKeepAlive && !tooLarge
                    var headers = HTTPHeaders(response.headers.map { ($0.name, $0.value) })
                    headers.replaceOrAdd(name: "Content-Length", value: String(response.body.count))
                    if !keepAlive { headers.replaceOrAdd(name: "Connection", value: "close") }
                    let status = HTTPResponseStatus(statusCode: response.status)
                    try await outbound.write(.head(HTTPResponseHead(version: requestHead.version, status: status, headers: headers)))
                    if !response.body.isEmpty, requestHead.method != .HEAD {
                        try await outbound.write(.body(.byteBuffer(ByteBuffer(bytes: response.body))))
                    }
                    try await outbound.write(.end(nil))
                    if !keepAlive { return }
                }
            }
        }
    }
}

extension LocalHTTPRequest {
    /// The file sent as form field `name` in a `multipart/form-data` body (RFC 7578): its file name and
    /// bytes; `nil` when the body is not multipart or has no such part.
    public func multipartFile(named name: String) -> (fileName: String, contents: [UInt8])? {
        guard let type = header("Content-Type"), type.lowercased().hasPrefix("multipart/form-data"),
              let boundaryParameter = type.split(separator: ";").map(Self.trimmed)
                .first(where: { $0.lowercased().hasPrefix("boundary=") }) else { return nil }
        var boundary = String(boundaryParameter.dropFirst("boundary=".count))
        if boundary.hasPrefix("\""), boundary.hasSuffix("\""), boundary.count >= 2 { boundary = String(boundary.dropFirst().dropLast()) }
        let delimiter = Array(("--" + boundary).utf8)
        var starts: [Int] = []
        var index = 0
        while let found = Self.find(delimiter, in: body, from: index) {
            starts.append(found)
            index = found + delimiter.count
        }
        for (start, end) in zip(starts, starts.dropFirst()) {
            // A part: CRLF, headers, CRLF CRLF, contents, CRLF before the next delimiter.
            let partStart = start + delimiter.count + 2
            guard partStart < end, let headerEnd = Self.find(Array("\r\n\r\n".utf8), in: body, from: partStart), headerEnd < end else { continue }
            let headers = String(decoding: body[partStart..<headerEnd], as: UTF8.self)
            guard let disposition = headers.split(separator: "\r\n").first(where: { $0.lowercased().hasPrefix("content-disposition:") }) else { continue }
            let parameters = Self.dispositionParameters(String(disposition))
            guard parameters["name"] == name else { continue }
            let contentEnd = max(headerEnd + 4, end - 2)
            return (parameters["filename"] ?? name, Array(body[(headerEnd + 4)..<contentEnd]))
        }
        return nil
    }

    /// Without the spaces and tabs around it.
    static func trimmed(_ text: Substring) -> String {
        String(text.drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard !needle.isEmpty, haystack.count >= needle.count, start <= haystack.count - needle.count else { return nil }
        var position = start
        while position <= haystack.count - needle.count {
            if haystack[position] == needle[0], haystack[position..<(position + needle.count)].elementsEqual(needle) { return position }
            position += 1
        }
        return nil
    }

    /// `form-data; name="file"; filename="a b.txt"` → ["name": "file", "filename": "a b.txt"].
    static func dispositionParameters(_ line: String) -> [String: String] {
        var result: [String: String] = [:]
        for piece in line.split(separator: ";").dropFirst() {
            let pair = piece.split(separator: "=", maxSplits: 1)
            guard pair.count == 2 else { continue }
            var value = Self.trimmed(pair[1])
            if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 { value = String(value.dropFirst().dropLast()) }
            result[Self.trimmed(pair[0]).lowercased()] = value
        }
        return result
    }
}
