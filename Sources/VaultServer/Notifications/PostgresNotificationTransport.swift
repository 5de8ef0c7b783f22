import Foundation
import Logging
import ServiceLifecycle
import VaultModels

/// Several nodes on one PostgreSQL database: a publication is a `NOTIFY` on one channel, and every node
/// (the publishing one too) `LISTEN`s there and hands what arrives to its own hub. A notification sent
/// while a node's listening connection is down is lost to that node's clients; their next sync (on
/// reconnecting, the official clients sync) brings the change anyway.
final class PostgresNotificationTransport: NotificationTransport, Service {
    static let channel = "vaultsync_hub"
    /// Users per `NOTIFY`: PostgreSQL takes payloads below 8,000 bytes; an organization's audience is split.
    static let usersPerNotify = 100

    let database: PostgresDatabase
    let hub: NotificationHub
    let logger: Logger
    private let ready: AsyncStream<Void>
    private let readySink: AsyncStream<Void>.Continuation

    init(database: PostgresDatabase, hub: NotificationHub, logger: Logger) {
        self.database = database
        self.hub = hub
        self.logger = logger
        (ready, readySink) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    func publish(_ delivery: HubDelivery) async {
        for start in stride(from: 0, to: max(delivery.userIDs.count, 1), by: Self.usersPerNotify) {
            var part = delivery
            part.userIDs = Array(delivery.userIDs[start..<min(start + Self.usersPerNotify, delivery.userIDs.count)])
            do {
                try await database.notify(channel: Self.channel, payload: String(decoding: part.json.serialized(), as: UTF8.self))
            } catch {
                logger.warning("notification not published", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Listens until the server shuts down; a failed connection is retried every second.
    func run() async throws {
        await cancelWhenGracefulShutdown { [database, hub, logger, readySink] in
            while !Task.isCancelled {
                do {
                    try await database.listen(channel: Self.channel, ready: { readySink.yield() }) { payload in
                        guard let object = try? JSONParser.parseObject(Array(payload.utf8)), let delivery = HubDelivery(json: object) else {
                            logger.warning("unreadable hub notification ignored")
                            return
                        }
                        hub.deliver(delivery)
                    }
                } catch {
                    if Task.isCancelled { break }
                    logger.warning("listening for hub notifications failed; retrying", metadata: ["error": "\(error)"])
                }
                try? await Task.sleep(for: .seconds(1))
            }
        }
        readySink.finish()
    }

    /// Returns once the first `LISTEN` stands: the server waits for it before it takes requests, so a
    /// change made after the start reaches this node's clients.
    func waitUntilListening() async {
        for await _ in ready { return }
    }
}

extension HubDelivery {
    /// The delivery as the `NOTIFY` payload carries it between nodes.
    var json: JSONValue {
        var object: JSONObject = ["users": .array(userIDs.map(JSONValue.string))]
        if let devices { object["devices"] = .array(devices.sorted().map(JSONValue.string)) }
        if let notification {
            object["notification"] = .object([
                "type": .int(notification.type.rawValue),
                "context": notification.contextID.map(JSONValue.string) ?? .null,
                "payload": .array(notification.payload.map { key, field in
                    switch field {
                    case .id(let id): return .array([.string(key), .string("id"), id.map(JSONValue.string) ?? .null])
                    case .ids(let ids): return .array([.string(key), .string("ids"), ids.map { .array($0.map(JSONValue.string)) } ?? .null])
                    case .date(let micros): return .array([.string(key), .string("date"), .number(String(micros))])
                    }
                }),
            ])
        }
        if let close { object["close"] = .object(["error": close.error.map(JSONValue.string) ?? .null, "allowReconnect": .bool(close.allowReconnect)]) }
        return .object(object)
    }

    init?(json object: JSONObject) {
        guard let users = object["users"]?.arrayValue?.compactMap(\.stringValue) else { return nil }
        userIDs = users
        devices = object["devices"]?.arrayValue.map { Set($0.compactMap(\.stringValue)) }
        notification = nil
        close = nil
        if let entry = object["notification"]?.objectValue {
            guard let type = entry["type"]?.intValue.flatMap(PushType.init(rawValue:)), let fields = entry["payload"]?.arrayValue else { return nil }
            var payload: [(String, HubNotification.Field)] = []
            for field in fields {
                guard let parts = field.arrayValue, parts.count == 3, let key = parts[0].stringValue else { return nil }
                switch parts[1].stringValue {
                case "id": payload.append((key, .id(parts[2].stringValue)))
                case "ids": payload.append((key, .ids(parts[2].arrayValue?.compactMap(\.stringValue))))
                case "date":
                    guard case .number(let text) = parts[2], let micros = Int64(text) else { return nil }
                    payload.append((key, .date(micros)))
                default: return nil
                }
            }
            notification = HubNotification(type: type, contextID: entry["context"]?.stringValue, payload: payload)
        }
        if let entry = object["close"]?.objectValue {
            close = Close(error: entry["error"]?.stringValue, allowReconnect: entry["allowReconnect"]?.boolValue ?? false)
        }
    }
}
