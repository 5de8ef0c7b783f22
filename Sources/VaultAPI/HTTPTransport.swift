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
    /// The deadline of the whole exchange (the API configuration's request timeout).
    public var timeout: TimeAmount

    public init(method: HTTPMethod, url: String, headers: HTTPHeaders, body: [UInt8]?, timeout: TimeAmount) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
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
        let response = try await client.execute(outgoing, timeout: request.timeout, logger: logger)
        let body = try await response.body.collect(upTo: 256 * 1024 * 1024)
        return TransportResponse(status: Int(response.status.code), headers: response.headers, body: Array(body.readableBytesView))
    }
}
