import Foundation
import VaultModels

/// One `ReceiveMessage` argument: `{ContextId, Type, Payload}`. The payload holds ids and dates only,
/// never vault content (docs/PROTOCOL.md, "The notifications hub").
struct HubNotification: Sendable, Equatable {
    enum Field: Sendable, Equatable {
        case id(String?)
        case ids([String]?)
        /// Microseconds since 1970.
        case date(Int64)
    }

    var type: PushType
    /// The device identifier whose request made the change (`nil`: none, e.g. a change made by the server).
    var contextID: String?
    /// Payload fields, in the order they are written.
    var payload: [(String, Field)]

    static func == (lhs: HubNotification, rhs: HubNotification) -> Bool {
        lhs.type == rhs.type && lhs.contextID == rhs.contextID && lhs.payload.count == rhs.payload.count
            && zip(lhs.payload, rhs.payload).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
    }

    /// `SyncCipherPushNotification`: `{Id, UserId, OrganizationId, CollectionIds, RevisionDate}`.
    static func cipher(_ type: PushType, id: String, userID: String?, organizationID: String?, collectionIDs: [String]?,
                       revisionDate: Int64, contextID: String?) -> HubNotification {
        HubNotification(type: type, contextID: contextID, payload: [
            ("Id", .id(id)), ("UserId", .id(userID)), ("OrganizationId", .id(organizationID)),
            ("CollectionIds", .ids(collectionIDs)), ("RevisionDate", .date(revisionDate)),
        ])
    }

    /// `SyncFolderPushNotification`: `{Id, UserId, RevisionDate}`.
    static func folder(_ type: PushType, id: String, userID: String, revisionDate: Int64, contextID: String?) -> HubNotification {
        HubNotification(type: type, contextID: contextID, payload: [("Id", .id(id)), ("UserId", .id(userID)), ("RevisionDate", .date(revisionDate))])
    }

    /// `UserPushNotification`: `{UserId, Date}` (SyncVault, SyncOrgKeys, SyncSettings, LogOut, SyncCiphers).
    static func user(_ type: PushType, userID: String, date: Int64, contextID: String?) -> HubNotification {
        HubNotification(type: type, contextID: contextID, payload: [("UserId", .id(userID)), ("Date", .date(date))])
    }

    var argumentJSON: JSONValue {
        var payloadObject = JSONObject()
        for (key, field) in payload {
            switch field {
            case .id(let id): payloadObject[key] = id.map(JSONValue.string) ?? .null
            case .ids(let ids): payloadObject[key] = ids.map { .array($0.map(JSONValue.string)) } ?? .null
            case .date(let micros): payloadObject[key] = .string(WireDate(microsecondsSinceEpoch: micros).iso8601)
            }
        }
        return .object(["ContextId": contextID.map(JSONValue.string) ?? .null, "Type": .int(type.rawValue), "Payload": .object(payloadObject)])
    }

    var argumentMessagePack: MessagePackValue {
        let fields: [(MessagePackValue, MessagePackValue)] = payload.map { key, field in
            switch field {
            case .id(let id): return (.string(key), id.map(MessagePackValue.string) ?? .nil)
            case .ids(let ids): return (.string(key), ids.map { .array($0.map(MessagePackValue.string)) } ?? .nil)
            case .date(let micros): return (.string(key), .timestamp(microsecondsSinceEpoch: micros))
            }
        }
        return .map([
            (.string("ContextId"), contextID.map(MessagePackValue.string) ?? .nil),
            (.string("Type"), .int(Int64(type.rawValue))),
            (.string("Payload"), .map(fields)),
        ])
    }
}

/// The SignalR hub protocol a connection agreed on in its handshake.
enum HubProtocol: String, Sendable {
    case json
    case messagePack = "messagepack"

    static let recordSeparator: UInt8 = 0x1e
    static let receiveMessage = "ReceiveMessage"

    /// Whether frames are binary (MessagePack) or text (JSON).
    var isBinary: Bool { self == .messagePack }

    /// The handshake answer: an empty JSON object and the record separator (in either protocol).
    static let handshakeResponse: [UInt8] = Array("{}".utf8) + [recordSeparator]

    /// The handshake's error answer.
    static func handshakeError(_ message: String) -> [UInt8] {
        JSONValue.object(["error": .string(message)]).serialized() + [recordSeparator]
    }

    /// A message the server sends, framed for this protocol.
    enum Outbound: Sendable {
        case invocation(HubNotification)
        case ping
        case close(error: String?, allowReconnect: Bool)
    }

    func encode(_ message: Outbound) -> [UInt8] {
        switch self {
        case .json:
            let object: JSONObject
            switch message {
            case .invocation(let notification):
                object = ["type": .int(1), "target": .string(Self.receiveMessage), "arguments": .array([notification.argumentJSON])]
            case .ping:
                object = ["type": .int(6)]
            case .close(let error, let allowReconnect):
                var close: JSONObject = ["type": .int(7)]
                if let error { close["error"] = .string(error) }
                close["allowReconnect"] = .bool(allowReconnect)
                object = close
            }
            return JSONValue.object(object).serialized() + [Self.recordSeparator]
        case .messagePack:
            let value: MessagePackValue
            switch message {
            case .invocation(let notification):
                // [1, Headers, InvocationId, Target, Arguments]: no headers, no id (nothing to answer).
                value = .array([.int(1), .map([]), .nil, .string(Self.receiveMessage), .array([notification.argumentMessagePack])])
            case .ping:
                value = .array([.int(6)])
            case .close(let error, let allowReconnect):
                value = .array([.int(7), error.map(MessagePackValue.string) ?? .nil, .bool(allowReconnect)])
            }
            let body = value.encoded()
            return VarInt.encode(body.count) + body
        }
    }

    /// What a client sent, as far as the hub cares.
    enum Inbound: Sendable, Equatable {
        case ping
        case close
        /// Any other message (an invocation, a completion…): ignored.
        case other(type: Int)
    }

    /// The messages of one frame; throws ``HubProtocolError`` when the frame is not this protocol.
    func decode(_ bytes: [UInt8], limit: Int) throws(HubProtocolError) -> [Inbound] {
        switch self {
        case .json:
            var messages: [Inbound] = []
            for record in bytes.split(separator: Self.recordSeparator, omittingEmptySubsequences: true) {
                guard let object = try? JSONParser.parseObject(record), let type = object["type"]?.intValue else {
                    throw .malformed("a JSON hub message is an object with a numeric type")
                }
                messages.append(Self.inbound(type: type))
            }
            return messages
        case .messagePack:
            do {
                return try VarInt.split(bytes, limit: limit).map { body throws(MessagePackError) in
                    guard let type = try MessagePackReader.decode(body).arrayValue?.first?.intValue else {
                        throw MessagePackError.invalidLength
                    }
                    return Self.inbound(type: type)
                }
            } catch {
                throw .malformed("a MessagePack hub message is a length-prefixed array starting with its type")
            }
        }
    }

    private static func inbound(type: Int) -> Inbound {
        switch type {
        case 6: return .ping
        case 7: return .close
        default: return .other(type: type)
        }
    }

    /// Reads the handshake request `{"protocol", "version"}` + 0x1E at the start of the first frame;
    /// returns the protocol and whatever bytes followed the separator (messages sent along with it).
    static func handshake(_ bytes: [UInt8]) throws(HubProtocolError) -> (HubProtocol, rest: [UInt8]) {
        guard let end = bytes.firstIndex(of: recordSeparator) else { throw .malformed("the handshake ends with 0x1E") }
        guard let object = try? JSONParser.parseObject(bytes[..<end]), let name = object["protocol"]?.stringValue,
              let version = object["version"]?.intValue else {
            throw .malformed("the handshake is {\"protocol\", \"version\"}")
        }
        guard let hubProtocol = HubProtocol(rawValue: name) else { throw .unsupported("Requested protocol '\(name)' is not available.") }
        guard version == 1 else { throw .unsupported("The server does not support version \(version) of the '\(name)' protocol.") }
        return (hubProtocol, Array(bytes[(end + 1)...]))
    }
}

/// Why a client's frame was refused.
enum HubProtocolError: Error, Equatable, Sendable {
    case malformed(String)
    /// A protocol or version the hub does not speak (the message is the handshake answer's `error`).
    case unsupported(String)

    /// The `error` of the handshake answer refusing it.
    var handshakeAnswer: String {
        switch self {
        case .malformed: return "The handshake request is not valid."
        case .unsupported(let message): return message
        }
    }
}
