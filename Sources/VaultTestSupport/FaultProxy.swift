import AsyncHTTPClient
import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import ServiceLifecycle
import HTTPTypes

/// A fault-injecting HTTP proxy on loopback between a client and the real server.
///
/// Each request is matched against the rules in order; the first matching rule with uses left fires:
/// answer an error without forwarding, or forward and then drop the answer (the server did the work,
/// the client never hears of it). Everything else is forwarded unchanged.
public actor FaultProxy {
    public enum Action: Sendable {
        /// Answer with this status without forwarding.
        case fail(status: Int)
        /// Forward, let the server do the work, then answer 502 as if the connection broke.
        case forwardThenDrop
    }

    public struct Rule: Sendable {
        public var method: String
        public var pathPrefix: String
        public var action: Action
        public var remaining: Int

        public init(method: String, pathPrefix: String, action: Action, times: Int = 1) {
            self.method = method
            self.pathPrefix = pathPrefix
            self.action = action
            remaining = times
        }
    }

    public let upstream: String
    public private(set) var port = 0
    private var rules: [Rule] = []
    private var group: ServiceGroup?
    private var runTask: Task<Void, any Error>?
    public private(set) var firedCount = 0

    public init(upstream: String) {
        self.upstream = upstream
    }

    public var url: String { "http://127.0.0.1:\(port)" }

    public func add(_ rule: Rule) {
        rules.append(rule)
    }

    /// The action for a request, consuming one use of the matching rule.
    func action(method: String, path: String) -> Action? {
        guard let index = rules.firstIndex(where: { $0.remaining > 0 && $0.method == method && path.hasPrefix($0.pathPrefix) }) else {
            return nil
        }
        rules[index].remaining -= 1
        firedCount += 1
        return rules[index].action
    }

    public func start() async throws {
        let router = Router()
        let proxy = self
        let upstream = self.upstream
        for method in [HTTPRequest.Method.get, .post, .put, .delete] {
            router.on("**", method: method) { request, _ in
                let path = request.uri.description
                let action = await proxy.action(method: request.method.rawValue, path: request.uri.path)
                if case .fail(let status)? = action {
                    return Response(status: .init(code: status), body: .init(byteBuffer: ByteBuffer(string: "injected failure")))
                }
                var forwarded = HTTPClientRequest(url: upstream + path)
                forwarded.method = HTTPMethod(rawValue: request.method.rawValue)
                for field in request.headers where field.name != .contentLength {
                    forwarded.headers.add(name: field.name.rawName, value: field.value)
                }
                let body = try await request.body.collect(upTo: 256 * 1024 * 1024)
                forwarded.body = .bytes(body)
                let response = try await HTTPClient.shared.execute(forwarded, timeout: .seconds(30))
                let responseBody = try await response.body.collect(upTo: 256 * 1024 * 1024)
                if case .forwardThenDrop? = action {
                    return Response(status: .badGateway, body: .init(byteBuffer: ByteBuffer(string: "connection lost (injected)")))
                }
                var headers = HTTPFields()
                for header in response.headers where header.name.lowercased() != "content-length" && header.name.lowercased() != "transfer-encoding" {
                    if let name = HTTPField.Name(header.name) { headers.append(HTTPField(name: name, value: header.value)) }
                }
                return Response(status: .init(code: Int(response.status.code)), headers: headers, body: .init(byteBuffer: responseBody))
            }
        }
        let (stream, continuation) = AsyncStream<Int>.makeStream()
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                              onServerRunning: { channel in
                                  continuation.yield(channel.localAddress?.port ?? 0)
                                  continuation.finish()
                              }, logger: Logger(label: "fault-proxy"))
        let group = ServiceGroup(configuration: .init(services: [app], gracefulShutdownSignals: [], logger: Logger(label: "fault-proxy")))
        self.group = group
        runTask = Task { try await group.run() }
        for await bound in stream {
            port = bound
            break
        }
    }

    public func stop() async {
        await group?.triggerGracefulShutdown()
        _ = try? await runTask?.value
        group = nil
    }
}
