import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore

/// `GET /notifications/hub`: the SignalR hub the official clients keep open for live sync
/// (docs/PROTOCOL.md, "The notifications hub"). The access token comes as the `access_token` query
/// parameter (browsers cannot set headers on a WebSocket) or a bearer header, checked as on every
/// `/api` call.
struct NotificationsController {
    let services: ServerServices
    let hub: NotificationHub

    static let path = "/notifications/hub"

    /// The route of the WebSocket router: the upgrade, when the token holds and the limits allow.
    func addWebSocketRoutes(to router: Router<VaultRequestContext>) {
        router.group(RouterPath(Self.path))
            .add(middleware: HubAuthMiddleware(services: services))
            .ws("", shouldUpgrade: { request, context in
                guard let userID = context.userID else { return .dontUpgrade }
                if hub.wouldAccept(userID: userID, address: services.clientAddress(request, context)) != nil { return .dontUpgrade }
                return .upgrade([:])
            }, onUpgrade: { inbound, outbound, context in
                try await session(inbound: inbound, outbound: outbound, context: context)
            })
    }

    /// The same path on the HTTP router: what a request that was not upgraded gets (401 without a valid
    /// token, 429 over the limits, 400 otherwise).
    func addRoutes(to router: Router<VaultRequestContext>) {
        router.get(RouterPath(Self.path)) { request, context -> Response in
            guard let claims = try await HubAuthMiddleware(services: services).claims(request) else { throw APIError.unauthorized }
            if let refusal = hub.wouldAccept(userID: claims.subject, address: services.clientAddress(request, context)) {
                switch refusal {
                case .tooManyForUser: throw APIError(.tooManyRequests, "Too many open notification connections for this account.")
                case .tooManyForAddress: throw APIError(.tooManyRequests, "Too many open notification connections from this address.")
                case .shuttingDown: throw APIError(.serviceUnavailable, "The server is shutting down.")
                }
            }
            throw APIError(.badRequest, "The notifications hub is reached with a WebSocket upgrade.")
        }
    }

    /// Every how many pings a connection's token is checked again.
    static let ticksPerRecheck = 4

    /// What the connection's loop waits for.
    private enum LoopEvent: Sendable {
        case frame([UInt8])
        case tooLarge
        case ended
        case tick
        case hub(NotificationHub.Event)
    }

    func session(inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter,
                 context: WebSocketRouterContext<VaultRequestContext>) async throws {
        guard let claims = context.requestContext.claims else { return }
        let address = services.clientAddress(context.request, context.requestContext)
        let limits = hub.limits
        let (events, sink) = AsyncStream.makeStream(of: LoopEvent.self, bufferingPolicy: .bufferingOldest(1024))
        let clock = ContinuousClock()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                do {
                    for try await message in inbound.messages(maxSize: limits.maxInboundBytes) {
                        switch message {
                        case .text(let text): sink.yield(.frame(Array(text.utf8)))
                        case .binary(let buffer): sink.yield(.frame(Array(buffer.readableBytesView)))
                        }
                    }
                    sink.yield(.ended)
                } catch {
                    sink.yield(.tooLarge)
                }
            }
            group.addTask {
                while !Task.isCancelled {
                    try await Task.sleep(for: limits.pingInterval)
                    sink.yield(.tick)
                }
            }
            var hubProtocol: HubProtocol?
            var connection: NotificationHub.Connection?
            var lastHeard = clock.now
            var ticks = 0
            func send(_ bytes: [UInt8]) async throws {
                if hubProtocol?.isBinary ?? false {
                    try await outbound.write(.binary(ByteBuffer(bytes: bytes)))
                } else {
                    try await outbound.write(.text(String(decoding: bytes, as: UTF8.self)))
                }
            }
            func close(_ error: String?, allowReconnect: Bool) async throws {
                if let hubProtocol { try await send(hubProtocol.encode(.close(error: error, allowReconnect: allowReconnect))) }
            }
            loop: for await event in events {
                switch event {
                case .frame(let bytes):
                    lastHeard = clock.now
                    var messages: [UInt8] = bytes
                    if hubProtocol == nil {
                        do {
                            let (agreed, rest) = try HubProtocol.handshake(bytes)
                            hubProtocol = agreed
                            messages = rest
                        } catch {
                            try await send(HubProtocol.handshakeError((error as? HubProtocolError)?.handshakeAnswer ?? "The handshake request is not valid."))
                            break loop
                        }
                        try await send(HubProtocol.handshakeResponse)
                        do {
                            let registered = try hub.register(userID: claims.subject, device: claims.device, address: address)
                            connection = registered
                            group.addTask {
                                for await hubEvent in registered.events { sink.yield(.hub(hubEvent)) }
                            }
                        } catch {
                            try await close("Too many connections.", allowReconnect: false)
                            break loop
                        }
                    }
                    guard let hubProtocol, !messages.isEmpty else { continue }
                    do {
                        // Pings only keep the connection alive; the hub offers clients nothing to invoke.
                        if try hubProtocol.decode(messages, limit: limits.maxInboundBytes).contains(.close) { break loop }
                    } catch {
                        try await close("The message is not valid for the \(hubProtocol.rawValue) protocol.", allowReconnect: false)
                        break loop
                    }
                case .tooLarge:
                    try await close("A message is larger than \(limits.maxInboundBytes) bytes.", allowReconnect: false)
                    break loop
                case .ended:
                    break loop
                case .tick:
                    if clock.now - lastHeard > limits.idleTimeout {
                        try await close("The connection was idle too long.", allowReconnect: true)
                        break loop
                    }
                    // A session can also end without a notification (a reused refresh token revokes its device):
                    // about once a minute the token is checked again as a request would be.
                    ticks += 1
                    if ticks % Self.ticksPerRecheck == 0,
                       try await !services.repository.accessTokenIsLive(userID: claims.subject, device: claims.device, stamp: claims.securityStamp, generation: claims.generation) {
                        try await close("The session has ended.", allowReconnect: false)
                        break loop
                    }
                    if let hubProtocol { try await send(hubProtocol.encode(.ping)) }
                case .hub(.message(let shared)):
                    if let hubProtocol { try await send(shared.bytes(hubProtocol)) }
                case .hub(.close(let error, let allowReconnect)):
                    try await close(error, allowReconnect: allowReconnect)
                    break loop
                }
            }
            if let connection { hub.unregister(connection) }
            sink.finish()
            group.cancelAll()
        }
    }
}

/// Authenticates the hub's upgrade request like ``AuthMiddleware`` does an `/api` call, with the token
/// from the `access_token` query parameter or the `Authorization` header.
struct HubAuthMiddleware: RouterMiddleware {
    typealias Context = VaultRequestContext
    let services: ServerServices

    func claims(_ request: Request) async throws -> AccessClaims? {
        var token = request.uri.queryParameters.get("access_token")
        if token == nil || token?.isEmpty == true, let header = request.headers[.authorization], header.lowercased().hasPrefix("bearer ") {
            token = String(header.dropFirst(7))
        }
        guard let token, let claims = services.signer.verify(token, nowSeconds: services.now() / 1_000_000),
              UUID(uuidString: claims.subject) != nil,
              try await services.repository.accessTokenIsLive(userID: claims.subject, device: claims.device, stamp: claims.securityStamp, generation: claims.generation) else {
            return nil
        }
        return claims
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let claims = try await claims(request) else { throw APIError.unauthorized }
        var context = context
        context.userID = claims.subject
        context.claims = claims
        return try await next(request, context)
    }
}
