import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// A fault-injecting HTTP proxy on loopback between a client and the real server.
///
/// Each request is matched first against the counted rules in order (the first matching rule with
/// uses left fires), then against the random faults (the first matching one fires with its seeded
/// probability). A partitioned proxy drops every connection. Everything else is forwarded unchanged.
/// Faults are real on the wire: a drop closes the TCP connection, a truncated answer announces its
/// full length and sends half, a delay holds the request past the client's timeout.
public actor FaultProxy {
    public enum Action: Sendable, Equatable {
        /// Answer with this status without forwarding.
        case fail(status: Int)
        /// Forward, let the server do the work, then answer 502 as if the upstream connection broke.
        case forwardThenDrop
        /// Close the connection without forwarding and without an answer.
        case dropBeforeForwarding
        /// Forward (the server does the work), then close the connection without an answer.
        case forwardThenClose
        /// Hold the request this long, then forward it (after a client timeout the server still does the work).
        case delay(milliseconds: Int)
        /// Hold the request until ``FaultProxy/releaseHeld()``, then forward it: a request stuck in the
        /// network for exactly as long as the test needs, whatever the machine's speed.
        case holdUntilReleased
        /// Forward, then answer with the full status line and length but only half the body, and close.
        case truncateBody
        /// Forward unchanged: a counted rule that lets its matching requests through, so that a rule after it
        /// fires on a later one (the second `GET /api/sync` of a sync, not the first). Not counted as a fault.
        case forward

        /// A short name for statistics.
        public var name: String {
            switch self {
            case .fail(let status): return "fail-\(status)"
            case .forwardThenDrop: return "forward-then-502"
            case .dropBeforeForwarding: return "drop-before"
            case .forwardThenClose: return "forward-then-close"
            case .delay: return "delay"
            case .holdUntilReleased: return "hold"
            case .truncateBody: return "truncate"
            case .forward: return "forward"
            }
        }
    }

    /// A counted rule: fires for the next `times` matching requests.
    public struct Rule: Sendable {
        public var method: String
        public var pathPrefix: String
        /// When set, the path must also end with it (a route such as `/attachment/v2` under any item).
        public var pathSuffix: String?
        public var action: Action
        public var remaining: Int

        public init(method: String, pathPrefix: String, pathSuffix: String? = nil, action: Action, times: Int = 1) {
            self.method = method
            self.pathPrefix = pathPrefix
            self.pathSuffix = pathSuffix
            self.action = action
            remaining = times
        }

        func matches(method: String, path: String) -> Bool {
            remaining > 0 && self.method == method && path.hasPrefix(pathPrefix) && pathSuffix.map(path.hasSuffix) ?? true
        }
    }

    /// A random fault: a matching request gets one of `actions` (chosen uniformly) with `probability`.
    public struct RandomFault: Sendable {
        /// `nil`: any method.
        public var method: String?
        public var pathPrefix: String
        public var probability: Double
        public var actions: [Action]

        public init(method: String? = nil, pathPrefix: String = "/", probability: Double, actions: [Action]) {
            self.method = method
            self.pathPrefix = pathPrefix
            self.probability = probability
            self.actions = actions
        }

        /// Every kind of fault, on every route: 500/502/503, drops before and after forwarding, a delay
        /// of `delayMilliseconds` (set it past the client's timeout) and truncated bodies.
        public static func everything(probability: Double, delayMilliseconds: Int?) -> RandomFault {
            var actions: [Action] = [.fail(status: 500), .fail(status: 502), .fail(status: 503), .dropBeforeForwarding,
                                     .forwardThenClose, .forwardThenDrop, .truncateBody]
            if let delayMilliseconds { actions.append(.delay(milliseconds: delayMilliseconds)) }
            return RandomFault(probability: probability, actions: actions)
        }
    }

    public let upstream: String
    public private(set) var port = 0
    let plan = FaultPlan()
    private var serverChannel: (any Channel)?
    private var acceptTask: Task<Void, Never>?

    public init(upstream: String) {
        self.upstream = upstream
    }

    public var url: String { "http://127.0.0.1:\(port)" }

    /// How many requests got a fault.
    public var firedCount: Int { plan.firedCount }

    /// Faults fired so far, by action name.
    public var firedByAction: [String: Int] { plan.firedByAction }

    /// Requests seen so far.
    public var requestCount: Int { plan.requestCount }

    /// Requests whose path starts with `pathPrefix` and what they got, by action name ("requests":
    /// all of them); every prefix is counted from the first call on, so call it before the traffic.
    public func tally(pathPrefix: String) -> [String: Int] {
        plan.tally(pathPrefix)
    }

    public func add(_ rule: Rule) {
        plan.add(rule)
    }

    /// Replaces the random faults (an empty list turns them off); `seed` makes the choices repeatable
    /// for a given order of requests.
    public func setRandomFaults(_ faults: [RandomFault], seed: UInt64) {
        plan.setRandomFaults(faults, seed: seed)
    }

    /// A partitioned proxy closes every connection at once: the server is unreachable from behind it.
    public func setPartitioned(_ partitioned: Bool) {
        plan.setPartitioned(partitioned)
    }

    /// Called after the server answered a forwarded request and before the client hears anything
    /// (method, path): crash tests kill the client there ("the server did the work, the client died");
    /// resolution tests let another device write there (the answer waits for the hook).
    public func setForwardHook(_ hook: (@Sendable (String, String) async -> Void)?) {
        plan.setForwardHook(hook)
    }

    /// A malicious server: rewrites the real server's answer (method, path without query, body) before
    /// the client reads it; `nil` from the closure leaves the answer as it is. The hostile-server
    /// suite makes the real server lie this way, field by field.
    public typealias Tamper = @Sendable (_ method: String, _ path: String, _ body: [UInt8]) -> [UInt8]?

    /// Sets (or with `nil` removes) the rewrite of answers.
    public func setTamper(_ tamper: Tamper?) {
        plan.setTamper(tamper)
    }

    /// Every request seen so far, in arrival order, as "METHOD /path" (no query): what the client sent.
    public var requestLog: [String] { plan.requestLog }

    /// Forwards every request held by ``Action/holdUntilReleased`` (and any held later).
    public func releaseHeld() {
        plan.release()
    }

    /// The action for a request, consuming one use of a matching counted rule.
    func action(method: String, path: String) -> Action? {
        plan.action(method: method, path: path)
    }

    public func start() async throws {
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .bind(host: "127.0.0.1", port: 0) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    return try NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>(wrappingChannelSynchronously: channel)
                }
            }
        port = channel.channel.localAddress?.port ?? 0
        serverChannel = channel.channel
        let plan = self.plan
        let upstream = self.upstream
        acceptTask = Task {
            await withDiscardingTaskGroup { group in
                do {
                    try await channel.executeThenClose { inbound in
                        for try await connection in inbound {
                            group.addTask { await Self.serve(connection, plan: plan, upstream: upstream) }
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

    // MARK: Serving

    /// The proxy's connections to the server. Not `HTTPClient.shared`, which keeps an idle connection for
    /// 600 s: a test server stopped while such a connection stayed open waited for it that long
    /// (docs/RELIABILITY.md, bug 105). One client for every proxy, never shut down (a client must be shut
    /// down before it is released, and proxies are left to the process's end).
    static let upstreamClient: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.idleTimeout = .seconds(1)
        configuration.redirectConfiguration = .disallow
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()

    static func serve(_ connection: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>, plan: FaultPlan, upstream: String) async {
        try? await connection.executeThenClose { inbound, outbound in
            var head: HTTPRequestHead?
            var body = ByteBuffer()
            for try await part in inbound {
                switch part {
                case .head(let received):
                    head = received
                    body.clear()
                case .body(var chunk):
                    body.writeBuffer(&chunk)
                case .end:
                    guard let request = head else { return }
                    let keepOpen = try await respond(to: request, body: body, plan: plan, upstream: upstream, outbound: outbound)
                    if !keepOpen { return }
                }
            }
        }
    }

    /// Answers one request; returns whether the connection stays open.
    static func respond(to head: HTTPRequestHead, body: ByteBuffer, plan: FaultPlan, upstream: String,
                        outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>) async throws -> Bool {
        let path = head.uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? head.uri
        let action = plan.action(method: head.method.rawValue, path: path)
        switch action {
        case .fail(let status)?:
            try await write(status: status, headers: HTTPHeaders(), body: ByteBuffer(string: "injected failure"), to: outbound)
            return true
        case .dropBeforeForwarding?:
            return false
        case .delay(let milliseconds)?:
            try await Task.sleep(for: .milliseconds(milliseconds))
        case .holdUntilReleased?:
            await plan.waitForRelease()
        default:
            break
        }
        var forwarded = HTTPClientRequest(url: upstream + head.uri)
        forwarded.method = head.method
        for (name, value) in head.headers where !["content-length", "host", "connection"].contains(name.lowercased()) {
            forwarded.headers.add(name: name, value: value)
        }
        forwarded.body = .bytes(body)
        let status: Int
        var headers = HTTPHeaders()
        var responseBody: ByteBuffer
        do {
            let response = try await upstreamClient.execute(forwarded, timeout: .seconds(60))
            responseBody = try await response.body.collect(upTo: 256 * 1024 * 1024)
            status = Int(response.status.code)
            for (name, value) in response.headers where !["content-length", "transfer-encoding", "connection"].contains(name.lowercased()) {
                headers.add(name: name, value: value)
            }
        } catch {
            // The server is down: a proxy answers 502.
            try await write(status: 502, headers: HTTPHeaders(), body: ByteBuffer(string: "upstream unreachable"), to: outbound)
            return true
        }
        await plan.forwarded(method: head.method.rawValue, path: path)
        if let tamper = plan.currentTamper, let rewritten = tamper(head.method.rawValue, path, Array(buffer: responseBody)) {
            responseBody = ByteBuffer(bytes: rewritten)
        }
        switch action {
        case .forwardThenDrop?:
            try await write(status: 502, headers: HTTPHeaders(), body: ByteBuffer(string: "connection lost (injected)"), to: outbound)
            return true
        case .forwardThenClose?:
            return false
        case .truncateBody?:
            headers.replaceOrAdd(name: "content-length", value: "\(max(responseBody.readableBytes, 2))")
            try await outbound.write(.head(HTTPResponseHead(version: .http1_1, status: .init(statusCode: status), headers: headers)))
            let half = responseBody.getSlice(at: responseBody.readerIndex, length: responseBody.readableBytes / 2) ?? ByteBuffer()
            if half.readableBytes > 0 { try await outbound.write(.body(.byteBuffer(half))) }
            return false
        default:
            try await write(status: status, headers: headers, body: responseBody, to: outbound)
            return true
        }
    }

    static func write(status: Int, headers: HTTPHeaders, body: ByteBuffer,
                      to outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>) async throws {
        var headers = headers
        headers.replaceOrAdd(name: "content-length", value: "\(body.readableBytes)")
        try await outbound.write(.head(HTTPResponseHead(version: .http1_1, status: .init(statusCode: status), headers: headers)))
        if body.readableBytes > 0 { try await outbound.write(.body(.byteBuffer(body))) }
        try await outbound.write(.end(nil))
    }
}

/// The proxy's rules and counters, read synchronously by the connections' tasks.
final class FaultPlan: @unchecked Sendable {
    private var released = false
    private var held: [CheckedContinuation<Void, Never>] = []

    /// Returns once ``release()`` has been called.
    func waitForRelease() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let now = lock.withLock { () -> Bool in
                if released { return true }
                held.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    func release() {
        let waiting = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
            released = true
            defer { held = [] }
            return held
        }
        for continuation in waiting { continuation.resume() }
    }

    private let lock = NSLock()
    private var rules: [FaultProxy.Rule] = []
    private var randomFaults: [FaultProxy.RandomFault] = []
    private var generator = SeededRandom(seed: 0)
    private var partitioned = false
    private var hook: (@Sendable (String, String) async -> Void)?
    private var tamper: FaultProxy.Tamper?
    private var log: [String] = []

    var currentTamper: FaultProxy.Tamper? { lock.withLock { tamper } }
    var requestLog: [String] { lock.withLock { log } }

    func setTamper(_ value: FaultProxy.Tamper?) {
        lock.withLock { tamper = value }
    }
    private(set) var firedCount = 0
    private(set) var firedByAction: [String: Int] = [:]
    private(set) var requestCount = 0
    private var tallies: [String: [String: Int]] = [:]

    func tally(_ prefix: String) -> [String: Int] {
        lock.withLock {
            if tallies[prefix] == nil { tallies[prefix] = ["requests": 0] }
            return tallies[prefix]!
        }
    }

    func add(_ rule: FaultProxy.Rule) {
        lock.withLock { rules.append(rule) }
    }

    func setRandomFaults(_ faults: [FaultProxy.RandomFault], seed: UInt64) {
        lock.withLock {
            randomFaults = faults
            generator = SeededRandom(seed: seed)
        }
    }

    func setPartitioned(_ value: Bool) {
        lock.withLock { partitioned = value }
    }

    func setForwardHook(_ value: (@Sendable (String, String) async -> Void)?) {
        lock.withLock { hook = value }
    }

    func action(method: String, path: String) -> FaultProxy.Action? {
        lock.withLock {
            requestCount += 1
            log.append("\(method) \(path)")
            var chosen: FaultProxy.Action?
            if partitioned {
                chosen = .dropBeforeForwarding
            } else if let index = rules.firstIndex(where: { $0.matches(method: method, path: path) }) {
                rules[index].remaining -= 1
                chosen = rules[index].action
            } else if let fault = randomFaults.first(where: { ($0.method == nil || $0.method == method) && path.hasPrefix($0.pathPrefix) }),
                      !fault.actions.isEmpty, Double.random(in: 0..<1, using: &generator) < fault.probability {
                chosen = fault.actions[Int.random(in: 0..<fault.actions.count, using: &generator)]
            }
            if chosen == .forward { chosen = nil }
            if let chosen {
                firedCount += 1
                firedByAction[chosen.name, default: 0] += 1
            }
            for prefix in tallies.keys where path.hasPrefix(prefix) {
                tallies[prefix]!["requests", default: 0] += 1
                if let chosen { tallies[prefix]![chosen.name, default: 0] += 1 }
            }
            return chosen
        }
    }

    func forwarded(method: String, path: String) async {
        let hook = lock.withLock { self.hook }
        await hook?(method, path)
    }
}

/// A small, fast, seedable random source (SplitMix64): the same seed gives the same sequence.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) {
        state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
