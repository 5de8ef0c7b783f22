import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A small real HTTP proxy on loopback that only tunnels (`CONNECT host:port`), as corporate proxies
/// do for https: it sees the target and the bytes, never the content of a TLS connection. Counts the
/// tunnels it opened, by target; optionally requires basic authentication (407 otherwise).
public actor ConnectProxy {
    public private(set) var port = 0
    let record = NIOLockedValueBox<Record>(Record())
    let credentials: (user: String, password: String)?
    private var serverChannel: (any Channel)?
    private var acceptTask: Task<Void, Never>?

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
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .bind(host: "127.0.0.1", port: 0) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        port = channel.channel.localAddress?.port ?? 0
        serverChannel = channel.channel
        let record = self.record
        let expected = credentials.map { "Basic " + Data("\($0.user):\($0.password)".utf8).base64EncodedString() }
        acceptTask = Task {
            await withDiscardingTaskGroup { group in
                do {
                    try await channel.executeThenClose { inbound in
                        for try await connection in inbound {
                            group.addTask { await Self.serve(connection, record: record, expectedAuthorization: expected) }
                        }
                    }
                } catch {}
                group.cancelAll()
            }
        }
    }

    public func stop() async {
        try? await serverChannel?.close()
        acceptTask?.cancel()
        await acceptTask?.value
        serverChannel = nil
        acceptTask = nil
    }

    static func serve(_ connection: NIOAsyncChannel<ByteBuffer, ByteBuffer>, record: NIOLockedValueBox<Record>,
                      expectedAuthorization: String?) async {
        try? await connection.executeThenClose { inbound, outbound in
            var iterator = inbound.makeAsyncIterator()
            var received: [UInt8] = []
            var headEnd: Range<Int>?
            while headEnd == nil {
                guard var buffer = try await iterator.next() else { return }
                received += buffer.readBytes(length: buffer.readableBytes) ?? []
                headEnd = received.firstRange(of: Array("\r\n\r\n".utf8))
                if headEnd == nil, received.count > 16_384 { return }
            }
            let head = String(decoding: received[..<headEnd!.lowerBound], as: UTF8.self)
            let leftover = Array(received[headEnd!.upperBound...])
            let lines = head.components(separatedBy: "\r\n")
            let parts = lines[0].split(separator: " ")
            guard parts.count == 3, parts[0] == "CONNECT" else {
                try await outbound.write(ByteBuffer(string: "HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
                return
            }
            if let expectedAuthorization {
                let given = lines.dropFirst().first { $0.lowercased().hasPrefix("proxy-authorization:") }
                    .map { String($0.dropFirst("proxy-authorization:".count)).trimmingCharacters(in: .whitespaces) }
                guard given == expectedAuthorization else {
                    record.withLockedValue { $0.refused += 1 }
                    try await outbound.write(ByteBuffer(string: "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"test\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
                    return
                }
            }
            let target = String(parts[1])
            guard let colon = target.lastIndex(of: ":"), let port = Int(target[target.index(after: colon)...]) else {
                try await outbound.write(ByteBuffer(string: "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
                return
            }
            var host = String(target[..<colon])
            if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            let upstream: NIOAsyncChannel<ByteBuffer, ByteBuffer>
            do {
                upstream = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                    .connectTimeout(.seconds(5))
                    .connect(host: host, port: port) { channel in
                        channel.eventLoop.makeCompletedFuture {
                            try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                        }
                    }
            } catch {
                try await outbound.write(ByteBuffer(string: "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
                return
            }
            record.withLockedValue { $0.tunnels.append(target) }
            try await outbound.write(ByteBuffer(string: "HTTP/1.1 200 Connection established\r\n\r\n"))
            try await upstream.executeThenClose { upstreamInbound, upstreamOutbound in
                if !leftover.isEmpty { try await upstreamOutbound.write(ByteBuffer(bytes: leftover)) }
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for try await buffer in upstreamInbound { try await outbound.write(buffer) }
                        outbound.finish()
                    }
                    while let buffer = try await iterator.next() { try await upstreamOutbound.write(buffer) }
                    upstreamOutbound.finish()
                    try await group.waitForAll()
                }
            }
        }
    }
}
