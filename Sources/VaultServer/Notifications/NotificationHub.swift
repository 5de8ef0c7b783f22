import Foundation
import Synchronization

/// The live connections of this server process to `/notifications/hub`, by user, and the limits on
/// them. Messages reach a connection only through its own user's entry: nobody receives another
/// user's notifications.
///
/// A change is published through a ``NotificationTransport`` (in process on one node, through the
/// database on several), whose deliveries land in ``deliver(_:)`` on every node.
final class NotificationHub: Sendable {
    struct Limits: Sendable {
        /// Connections one user may hold open at once (one per app and browser tab, with room to spare).
        var connectionsPerUser = 20
        /// Connections one client address may hold open at once.
        var connectionsPerAddress = 100
        /// The largest frame (and message) a client may send.
        var maxInboundBytes = 64 * 1024
        /// How often the server pings (SignalR's default keep-alive).
        var pingInterval: Duration = .seconds(15)
        /// How long a connection may go without a frame from the client (SignalR's default client timeout: the
        /// clients ping every 15 s) before it is closed; also the time allowed for the handshake.
        var idleTimeout: Duration = .seconds(30)
    }

    /// What the hub tells one connection to do.
    enum Event: Sendable {
        case message(SharedNotification)
        /// Send a close message and end the connection.
        case close(error: String?, allowReconnect: Bool)
    }

    /// One registered connection: the stream its writer reads.
    final class Connection: Sendable {
        let id = UUID()
        let userID: String
        let device: String
        let address: String
        let events: AsyncStream<Event>
        fileprivate let continuation: AsyncStream<Event>.Continuation

        fileprivate init(userID: String, device: String, address: String) {
            self.userID = userID
            self.device = device
            self.address = address
            (events, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .bufferingNewest(256))
        }
    }

    /// Why a connection was refused.
    enum Refusal: Error, Equatable, Sendable {
        case tooManyForUser
        case tooManyForAddress
        case shuttingDown
    }

    private struct State {
        var byUser: [String: [UUID: Connection]] = [:]
        var perAddress: [String: Int] = [:]
        var shuttingDown = false
    }

    let limits: Limits
    private let state = Mutex(State())
    /// ``ServerConfiguration/notificationObserver``.
    private let observer: (@Sendable (_ userIDs: [String], _ record: String) -> Void)?

    init(limits: Limits = Limits(), observer: (@Sendable (_ userIDs: [String], _ record: String) -> Void)? = nil) {
        self.limits = limits
        self.observer = observer
    }

    func register(userID: String, device: String, address: String) throws(Refusal) -> Connection {
        let result = state.withLock { state -> Result<Connection, Refusal> in
            if state.shuttingDown { return .failure(.shuttingDown) }
            if state.byUser[userID, default: [:]].count >= limits.connectionsPerUser { return .failure(.tooManyForUser) }
            if state.perAddress[address, default: 0] >= limits.connectionsPerAddress { return .failure(.tooManyForAddress) }
            let connection = Connection(userID: userID, device: device, address: address)
            state.byUser[userID, default: [:]][connection.id] = connection
            state.perAddress[address, default: 0] += 1
            return .success(connection)
        }
        return try result.get()
    }

    /// Whether a new connection from this user and address would be taken (checked before the upgrade,
    /// so a refusal is an HTTP answer; ``register(userID:device:address:)`` checks again).
    func wouldAccept(userID: String, address: String) -> Refusal? {
        state.withLock { state in
            if state.shuttingDown { return .shuttingDown }
            if state.byUser[userID, default: [:]].count >= limits.connectionsPerUser { return .tooManyForUser }
            if state.perAddress[address, default: 0] >= limits.connectionsPerAddress { return .tooManyForAddress }
            return nil
        }
    }

    func unregister(_ connection: Connection) {
        state.withLock { state in
            guard state.byUser[connection.userID]?.removeValue(forKey: connection.id) != nil else { return }
            if state.byUser[connection.userID]?.isEmpty == true { state.byUser[connection.userID] = nil }
            state.perAddress[connection.address, default: 1] -= 1
            if state.perAddress[connection.address] == 0 { state.perAddress[connection.address] = nil }
        }
        connection.continuation.finish()
    }

    /// The open connections of a user (for tests and logs).
    func connectionCount(userID: String) -> Int {
        state.withLock { $0.byUser[userID]?.count ?? 0 }
    }

    /// The open connections of every user on this node (for `/metrics`).
    var connectionTotal: Int {
        state.withLock { $0.byUser.values.reduce(0) { $0 + $1.count } }
    }

    /// Hands one delivery to the connections on this node it is for.
    func deliver(_ delivery: HubDelivery) {
        // Encoded once per protocol for all the connections it goes to (an organization's change reaches
        // thousands), not once per connection.
        let shared = delivery.notification.map(SharedNotification.init)
        if let observer, let shared {
            observer(delivery.userIDs, String(decoding: shared.bytes(.json), as: UTF8.self))
        }
        let targets = state.withLock { state -> [Connection] in
            delivery.userIDs.flatMap { user in
                (state.byUser[user].map { Array($0.values) } ?? []).filter { delivery.devices?.contains($0.device) ?? true }
            }
        }
        for connection in targets {
            if let shared { connection.continuation.yield(.message(shared)) }
            if let close = delivery.close { connection.continuation.yield(.close(error: close.error, allowReconnect: close.allowReconnect)) }
        }
    }

    /// Refuses new connections and tells every open one to close with a close message that invites a
    /// reconnect (the server is going away, another one may take its place).
    func shutdown() {
        let all = state.withLock { state -> [Connection] in
            state.shuttingDown = true
            return state.byUser.values.flatMap(\.values)
        }
        for connection in all {
            connection.continuation.yield(.close(error: "Server is shutting down.", allowReconnect: true))
        }
    }

    /// Whether every connection has ended (after ``shutdown()``).
    var isEmpty: Bool { state.withLock { $0.byUser.isEmpty } }

    /// ``shutdown()``, then waits until every connection has ended or `timeout` has passed.
    func shutdown(drainingFor timeout: Duration) async {
        shutdown()
        let deadline = ContinuousClock.now + timeout
        while !isEmpty, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
    }
}

/// A notification on its way to many connections, with its encoding in each protocol made by the first
/// connection that needs it and kept for the others.
final class SharedNotification: Sendable {
    let notification: HubNotification
    private let encodings = Mutex<[HubProtocol: [UInt8]]>([:])

    init(_ notification: HubNotification) {
        self.notification = notification
    }

    /// The invocation's bytes in `hubProtocol`.
    func bytes(_ hubProtocol: HubProtocol) -> [UInt8] {
        encodings.withLock { encodings in
            if let bytes = encodings[hubProtocol] { return bytes }
            let bytes = hubProtocol.encode(.invocation(notification))
            encodings[hubProtocol] = bytes
            return bytes
        }
    }
}

/// One publication: a notification and/or a close for some users' connections (all of their devices,
/// or only `devices`).
struct HubDelivery: Sendable, Equatable {
    struct Close: Sendable, Equatable {
        var error: String?
        var allowReconnect: Bool
    }

    var userIDs: [String]
    var devices: Set<String>?
    var notification: HubNotification?
    var close: Close?
}

/// How a publication reaches the hub of every node serving the database.
protocol NotificationTransport: Sendable {
    func publish(_ delivery: HubDelivery) async
}

/// One node: publications go straight to this process's hub.
struct LocalNotificationTransport: NotificationTransport {
    let hub: NotificationHub

    func publish(_ delivery: HubDelivery) async {
        hub.deliver(delivery)
    }
}
