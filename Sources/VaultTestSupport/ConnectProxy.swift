import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A small real HTTP proxy on loopback that only tunnels (`CONNECT host:port`), as corporate proxies
/// do for https: it sees the target and the bytes, never the content of a TLS connection. Counts the
/// tunnels it opened, by target; optionally requires basic authentication (407 otherwise).
///
/// Everything runs in channel handlers on the event loops, not in Swift tasks: a suite that keeps the
/// cooperative threads busy (key derivations) cannot starve the tunnel into the client's timeouts.
public actor ConnectProxy {
    public private(set) var port = 0
    let record = NIOLockedValueBox<Record>(Record())
    let credentials: (user: String, password: String)?
    private var serverChannel: (any Channel)?

    struct Record {
        var tunnels: [String] = []
        var refused = 0
    }

    /// - Parameter credentials: the user and password a client must send (`Proxy-Authorization: Basic`), or none.
    public init(credentials: (user: String, password: String)? = nil) {
        self.credentials = credentials
    }

    /// `http://127.0.0.1:PORT`, for HTTPS_PROXY.
    public var url: String { "http://127.0.0.1:\(port)" }

    /// Tunnels opened so far.
    public nonisolated var tunnelCount: Int { record.withLockedValue { $0.tunnels.count } }

    /// The `host:port` of every tunnel opened, in order.
    public nonisolated var tunnelTargets: [String] { record.withLockedValue { $0.tunnels } }

    /// CONNECT requests refused for missing or wrong credentials.
    public nonisolated var refusedCount: Int { record.withLockedValue { $0.refused } }

    public func start() async throws {
        let record = self.record
        let expected = credentials.map { "Basic " + Data("\($0.user):\($0.password)".utf8).base64EncodedString() }
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(ConnectHead(record: record, expectedAuthorization: expected))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        port = channel.localAddress?.port ?? 0
        serverChannel = channel
    }

    public func stop() async {
        try? await serverChannel?.close()
        serverChannel = nil
    }

    /// Reads the CONNECT request, opens the upstream connection, answers 200 and hands over to two
    /// ``Forwarder``s.
    final class ConnectHead: ChannelInboundHandler, RemovableChannelHandler {
        typealias InboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer

        let record: NIOLockedValueBox<Record>
        let expectedAuthorization: String?
        var received: [UInt8] = []
        var connecting = false

        init(record: NIOLockedValueBox<Record>, expectedAuthorization: String?) {
            self.record = record
            self.expectedAuthorization = expectedAuthorization
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            var buffer = unwrapInboundIn(data)
            received += buffer.readBytes(length: buffer.readableBytes) ?? []
            guard !connecting else { return }
            guard let end = received.firstRange(of: Array("\r\n\r\n".utf8)) else {
                if received.count > 16_384 { context.close(promise: nil) }
                return
            }
            let head = String(decoding: received[..<end.lowerBound], as: UTF8.self)
            received = Array(received[end.upperBound...])
            let lines = head.components(separatedBy: "\r\n")
            let parts = lines[0].split(separator: " ")
            guard parts.count == 3, parts[0] == "CONNECT" else { return answer(context, "405 Method Not Allowed") }
            if let expectedAuthorization {
                let given = lines.dropFirst().first { $0.lowercased().hasPrefix("proxy-authorization:") }
                    .map { String($0.dropFirst("proxy-authorization:".count)).trimmingCharacters(in: .whitespaces) }
                guard given == expectedAuthorization else {
                    record.withLockedValue { $0.refused += 1 }
                    return answer(context, "407 Proxy Authentication Required", extra: "Proxy-Authenticate: Basic realm=\"test\"\r\n")
                }
            }
            let target = String(parts[1])
            guard let colon = target.lastIndex(of: ":"), let port = Int(target[target.index(after: colon)...]) else {
                return answer(context, "400 Bad Request")
            }
            var host = String(target[..<colon])
            if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            connecting = true
            let client = context.channel
            ClientBootstrap(group: context.eventLoop)
                .connectTimeout(.seconds(10))
                .channelInitializer { upstream in
                    upstream.eventLoop.makeCompletedFuture {
                        try upstream.pipeline.syncOperations.addHandler(Forwarder(peer: client))
                    }
                }
                .connect(host: host, port: port)
                .assumeIsolated()
                .whenComplete { result in
                    switch result {
                    case .success(let upstream):
                        self.record.withLockedValue { $0.tunnels.append(target) }
                        context.writeAndFlush(self.wrapOutboundOut(ByteBuffer(string: "HTTP/1.1 200 Connection established\r\n\r\n")),
                                              promise: nil)
                        do {
                            try context.pipeline.syncOperations.addHandler(Forwarder(peer: upstream), position: .after(self))
                        } catch {
                            upstream.close(promise: nil)
                            context.close(promise: nil)
                            return
                        }
                        if !self.received.isEmpty { upstream.writeAndFlush(ByteBuffer(bytes: self.received), promise: nil) }
                        self.received = []
                        context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
                    case .failure:
                        self.answer(context, "502 Bad Gateway")
                    }
                }
        }

        func answer(_ context: ChannelHandlerContext, _ status: String, extra: String = "") {
            let text = "HTTP/1.1 \(status)\r\n\(extra)Content-Length: 0\r\nConnection: close\r\n\r\n"
            context.writeAndFlush(wrapOutboundOut(ByteBuffer(string: text))).assumeIsolated().whenComplete { _ in
                context.close(promise: nil)
            }
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }

    /// Writes what one side sends to the other; closes the other when this side closes.
    final class Forwarder: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        let peer: any Channel

        init(peer: any Channel) { self.peer = peer }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            peer.writeAndFlush(unwrapInboundIn(data), promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            peer.close(promise: nil)
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }
}
