import VaultModels
import VaultSyncCore

/// The SignalR hub protocol in its JSON form, as a client speaks it to the notifications hub
/// (docs/PROTOCOL.md, "The notifications hub"): each record is a JSON object ended by the record
/// separator 0x1E; a WebSocket text message may hold several records, and a record may not be split
/// across messages in practice, but the reader keeps an unfinished tail for the next message anyway.
public enum HubJSONProtocol {
    /// The record separator that ends every record.
    public static let separator: Character = "\u{1E}"

    /// The handshake a client sends first.
    public static let handshake = #"{"protocol":"json","version":1}"# + "\u{1E}"
    /// A ping (type 6), sent by both sides every 15 s.
    public static let ping = #"{"type":6}"# + "\u{1E}"

    /// One record from the server.
    public enum Record: Sendable, Equatable {
        /// The handshake's answer: `{}`, or `{"error": …}` when the server refused it.
        case handshake(error: String?)
        /// An invocation (type 1) of `target` with its arguments.
        case invocation(target: String, arguments: [JSONValue])
        /// A ping (type 6).
        case ping
        /// The server closes (type 7), maybe saying why and whether to reconnect.
        case close(error: String?, allowReconnect: Bool)
        /// Any other message type (completions, streams): ignored by this client.
        case other(type: Int)
    }

    /// Why a record could not be read.
    public enum ReadError: Error, Sendable, Equatable {
        case notJSON(String)
        case noType
    }

    /// Splits received text into complete records plus the unfinished rest.
    public static func split(_ text: String, carry: inout String) -> [String] {
        var records: [String] = []
        var current = carry
        for character in text {
            if character == separator {
                records.append(current)
                current = ""
            } else {
                current.append(character)
            }
        }
        carry = current
        return records
    }

    /// Reads one record (without its separator). `awaitingHandshake`: the first record is the
    /// handshake's answer, which has no type.
    public static func read(_ record: String, awaitingHandshake: Bool) throws -> Record {
        let object: JSONObject
        do {
            object = try JSONParser.parseObject(Array(record.utf8))
        } catch {
            throw ReadError.notJSON(String(record.prefix(80)))
        }
        if awaitingHandshake, object["type"] == nil {
            return .handshake(error: object["error"]?.stringValue)
        }
        guard let type = object["type"]?.intValue else { throw ReadError.noType }
        switch type {
        case 1:
            return .invocation(target: object["target"]?.stringValue ?? "", arguments: object["arguments"]?.arrayValue ?? [])
        case 6:
            return .ping
        case 7:
            return .close(error: object["error"]?.stringValue, allowReconnect: object["allowReconnect"]?.boolValue ?? false)
        default:
            return .other(type: type)
        }
    }

    /// The push notifications an invocation carries: `ReceiveMessage` with one argument object each.
    public static func notifications(target: String, arguments: [JSONValue]) -> [PushNotification] {
        guard target == "ReceiveMessage" else { return [] }
        return arguments.compactMap { $0.objectValue.flatMap(PushNotification.init) }
    }
}
