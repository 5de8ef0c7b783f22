import AsyncHTTPClient
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import NIOHTTP1
import VaultAPI
import VaultServer

/// The real server's application answering in process: requests go straight to its router
/// (HummingbirdTesting's `.router` framework), with no sockets and no event loop between client and
/// server, on a fresh SQLite data directory and with a ``SimulatedTime`` as its clock.
///
/// What the network would add is added here: a `Date` header from the server's clock (whole seconds,
/// as on the wire), so devices measure their clock offsets as they do against a real server.
public struct InProcessServer: Sendable {
    let client: any TestClientProtocol
    public let time: SimulatedTime
    /// Every notification the server's hub published, in order (nothing is connected to the hub:
    /// the owner of the world delivers them as it chooses).
    public let notifications: PublishedNotifications

    /// The address engines are configured with: a loopback port where nothing listens, so a request
    /// that missed the in-process transport fails instead of reaching something real.
    public static let url = "http://127.0.0.1:9"

    /// Builds the server with test settings (those of ``LiveServer``, a fixed token key and `time` as its
    /// clock), runs `body` with it, then shuts it down. Its data is in `dataDirectory` (which then stays,
    /// SQLite file closed: a template to copy), or else in a temporary directory removed at the end.
    public static func run<Value: Sendable>(time: SimulatedTime, dataDirectory: String? = nil,
                                            _ body: @Sendable (InProcessServer) async throws -> Value) async throws -> Value {
        let directory = dataDirectory ?? temporaryDirectory("vaultsync-sim-server")
        defer { if dataDirectory == nil { try? FileManager.default.removeItem(atPath: directory) } }
        var configuration = ServerConfiguration()
        configuration.host = "127.0.0.1"
        configuration.port = 0
        configuration.dataDirectory = directory
        configuration.logLevel = .error
        configuration.accountLoginBurst = 1000
        configuration.addressLoginBurst = 1000
        configuration.insecureTestingPasswordIterations = 1_000
        configuration.tokenKey = Array(repeating: 0x5A, count: 64)
        configuration.now = { time.serverMicroseconds }
        let notifications = PublishedNotifications()
        configuration.notificationObserver = { users, record in notifications.append(userIDs: users, record: record) }
        let app = try await buildApplication(configuration: configuration)
        return try await app.test(.router) { client in
            try await body(InProcessServer(client: client, time: time, notifications: notifications))
        }
    }

    /// The server's answer to one request (the server's clock ticks a millisecond first).
    func answer(_ request: TransportRequest, target: String) async throws -> TransportResponse {
        time.tickServer(microseconds: 1_000)
        var fields = HTTPFields()
        for (name, value) in request.headers {
            guard let field = HTTPField.Name(name) else { continue }
            fields.append(HTTPField(name: field, value: value))
        }
        let method = HTTPRequest.Method(request.method.rawValue) ?? .get
        let response = try await client.executeRequest(uri: target, method: method, headers: fields,
                                                       body: (try request.bodyFile?.collected() ?? request.body).map { ByteBuffer(bytes: $0) })
        var headers = HTTPHeaders()
        for field in response.head.headerFields { headers.add(name: field.name.rawName, value: field.value) }
        headers.replaceOrAdd(name: "Date", value: Self.httpDate(microseconds: time.serverMicroseconds))
        return TransportResponse(status: response.head.status.code, headers: headers, body: Array(response.body.readableBytesView))
    }

    /// `Thu, 01 Jan 2026 00:00:00 GMT` (RFC 9110's IMF-fixdate), without a formatter or a locale.
    public static func httpDate(microseconds: Int64) -> String {
        let seconds = microseconds / 1_000_000
        let days = seconds / 86_400
        let secondOfDay = seconds % 86_400
        // Days since the epoch to a civil date (Howard Hinnant's algorithm).
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(weekdays[Int(days % 7)]), \(two(day)) \(months[Int(month - 1)]) \(year) "
            + "\(two(secondOfDay / 3_600)):\(two(secondOfDay % 3_600 / 60)):\(two(secondOfDay % 60)) GMT"
    }
}

/// The notifications an ``InProcessServer`` published: each the JSON hub protocol's record (as a JSON
/// client of the hub would receive it) and the users it is for.
public final class PublishedNotifications: @unchecked Sendable {
    public struct Published: Sendable, Equatable {
        public let userIDs: [String]
        public let record: String
    }

    private let lock = NSLock()
    private var published: [Published] = []

    func append(userIDs: [String], record: String) {
        lock.withLock { published.append(Published(userIDs: userIDs, record: record)) }
    }

    /// The notifications published since the last call, oldest first.
    public func take() -> [Published] {
        lock.withLock {
            defer { published = [] }
            return published
        }
    }
}

/// One device's network to an ``InProcessServer``: the faults of a ``FaultProxy`` (the same rules,
/// seeded random faults, partitions, forward hook and tallies, drawn in the same order), applied
/// without sockets. A failure is thrown as AsyncHTTPClient would report the real one on the wire, so
/// the engine classifies it the same way: a dropped or closed connection as `remoteConnectionClosed`,
/// a body cut short as the HTTP parser's `invalidEOFState`; a delay moves the server's clock instead
/// of waiting. Requests are answered one at a time, in the order they are made.
public final class InProcessTransport: HTTPTransport, @unchecked Sendable {
    public let server: InProcessServer
    let plan = FaultPlan()
    private let lock = NSLock()
    private var met: [String] = []
    private var requests = 0

    public init(server: InProcessServer) {
        self.server = server
    }

    /// See ``FaultProxy/setRandomFaults(_:seed:)``.
    public func setRandomFaults(_ faults: [FaultProxy.RandomFault], seed: UInt64) {
        plan.setRandomFaults(faults, seed: seed)
    }

    /// See ``FaultProxy/setPartitioned(_:)``: every request is dropped before it reaches the server.
    public func setPartitioned(_ partitioned: Bool) {
        plan.setPartitioned(partitioned)
    }

    /// See ``FaultProxy/add(_:)``.
    public func add(_ rule: FaultProxy.Rule) {
        plan.add(rule)
    }

    /// See ``FaultProxy/setForwardHook(_:)``: runs after the server answered, before the device hears.
    public func setForwardHook(_ hook: (@Sendable (String, String) async -> Void)?) {
        plan.setForwardHook(hook)
    }

    /// See ``FaultProxy/tally(pathPrefix:)``.
    public func tally(pathPrefix: String) -> [String: Int] {
        plan.tally(pathPrefix)
    }

    /// The faults met since the last call, in order: "METHOD /path fault", ids in paths shown as `{id}`;
    /// and how many requests were made.
    public func takeLog() -> (faults: [String], requests: Int) {
        lock.withLock {
            defer { met = []; requests = 0 }
            return (met, requests)
        }
    }

    public func execute(_ request: TransportRequest, logger: Logger) async throws -> TransportResponse {
        let target = Self.target(of: request.url)
        let path = target.split(separator: "?", maxSplits: 1).first.map(String.init) ?? target
        let method = request.method.rawValue
        let action = plan.action(method: method, path: path)
        lock.withLock {
            requests += 1
            if let action { met.append("\(method) \(Self.masked(path)) \(action.name)") }
        }
        switch action {
        case .fail(let status)?:
            return TransportResponse(status: status, headers: HTTPHeaders(), body: Array("injected failure".utf8))
        case .dropBeforeForwarding?:
            throw HTTPClientError.remoteConnectionClosed
        case .delay(let milliseconds)?:
            server.time.tickServer(microseconds: Int64(milliseconds) * 1_000)
        case .holdUntilReleased?:
            await plan.waitForRelease()
        default:
            break
        }
        var response = try await server.answer(request, target: target)
        await plan.forwarded(method: method, path: path)
        if let tamper = plan.currentTamper, let rewritten = tamper(method, path, response.body) {
            response.body = rewritten
        }
        switch action {
        case .forwardThenDrop?:
            return TransportResponse(status: 502, headers: HTTPHeaders(), body: Array("connection lost (injected)".utf8))
        case .forwardThenClose?:
            throw HTTPClientError.remoteConnectionClosed
        case .truncateBody?:
            throw HTTPParserError.invalidEOFState
        default:
            return response
        }
    }

    /// The path and query of a URL (`http://host:port/api/sync?x=1` → `/api/sync?x=1`).
    static func target(of url: String) -> String {
        guard let schemeEnd = url.range(of: "://") else { return url }
        let rest = url[schemeEnd.upperBound...]
        guard let slash = rest.firstIndex(of: "/") else { return "/" }
        return String(rest[slash...])
    }

    /// A path with every UUID-shaped segment as `{id}` (ids are random; the trace must not be).
    public static func masked(_ path: String) -> String {
        path.split(separator: "/", omittingEmptySubsequences: false).map { segment in
            segment.count == 36 && segment.filter { $0 == "-" }.count == 4 ? "{id}" : String(segment)
        }.joined(separator: "/")
    }
}
