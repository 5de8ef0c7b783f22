import Foundation
import HummingbirdWSClient
import Logging
import NIOCore
import Testing
import VaultModels
@testable import VaultServer

/// A SignalR client of `/notifications/hub` over a real WebSocket (the hub protocol as the official
/// clients speak it: skip-negotiation, handshake, then JSON records or length-prefixed MessagePack).
/// Every message the server sends lands in ``messages``, MessagePack values turned into JSON (dates as
/// ISO 8601 text) so both protocols are checked with the same expectations.
final class HubTestClient: Sendable {
    enum Message: Sendable, Equatable {
        case handshake(error: String?)
        case ping
        case close(error: String?, allowReconnect: Bool?)
        case invocation(target: String, arguments: [JSONValue])
        case other(JSONValue)
    }

    let hubProtocol: HubProtocol
    let messages: AsyncStream<Message>
    private let outgoing: AsyncStream<[UInt8]>.Continuation
    private let run: Task<WebSocketCloseFrame?, any Error>

    /// Connects and sends the handshake; the token goes in the query, or as a bearer header.
    init(port: Int, token: String, protocol hubProtocol: HubProtocol, tokenInHeader: Bool = false, handshake: String? = nil) {
        self.hubProtocol = hubProtocol
        let (messages, sink) = AsyncStream.makeStream(of: Message.self)
        let (outgoing, outgoingSink) = AsyncStream.makeStream(of: [UInt8].self)
        self.messages = messages
        self.outgoing = outgoingSink
        var configuration = WebSocketClientConfiguration(maxFrameSize: 1 << 20, autoPing: .disabled)
        var url = "ws://127.0.0.1:\(port)/notifications/hub"
        if tokenInHeader { configuration.additionalHeaders[.authorization] = "Bearer \(token)" } else { url += "?access_token=\(token)" }
        let request = Array((handshake ?? #"{"protocol":"\#(hubProtocol.rawValue)","version":1}"#).utf8) + [0x1e]
        run = Task {
            defer { sink.finish() }
            return try await WebSocketClient.connect(url: url, configuration: configuration, logger: Logger(label: "hub-test-client")) {
                inbound, outbound, _ in
                try await outbound.write(.text(String(decoding: request, as: UTF8.self)))
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        for await bytes in outgoing {
                            if hubProtocol.isBinary {
                                try await outbound.write(.binary(ByteBuffer(bytes: bytes)))
                            } else {
                                try await outbound.write(.text(String(decoding: bytes, as: UTF8.self)))
                            }
                        }
                        // ``disconnect()``: the WebSocket close handshake; the server's answer ends the reading below.
                        if !Task.isCancelled { try? await outbound.close(.normalClosure, reason: nil) }
                    }
                    var handshaken = false
                    for try await message in inbound.messages(maxSize: 1 << 20) {
                        var bytes: [UInt8]
                        switch message {
                        case .text(let text): bytes = Array(text.utf8)
                        case .binary(let buffer): bytes = Array(buffer.readableBytesView)
                        }
                        if !handshaken {
                            guard let end = bytes.firstIndex(of: 0x1e) else { throw HubProtocolError.malformed("handshake answer") }
                            let answer = try JSONParser.parseObject(bytes[..<end])
                            sink.yield(.handshake(error: answer["error"]?.stringValue))
                            bytes = Array(bytes[(end + 1)...])
                            handshaken = true
                        }
                        for decoded in try Self.decode(bytes, hubProtocol) { sink.yield(decoded) }
                    }
                    group.cancelAll()
                }
            }
        }
    }

    /// Sends raw bytes (already framed for the protocol).
    func send(_ bytes: [UInt8]) {
        outgoing.yield(bytes)
    }

    /// The next message that is not a ping, within `deadline` (a failure bound, not a wait).
    func next(skippingPings: Bool = true, deadline: Duration = .seconds(10)) async throws -> Message {
        try await Self.within(deadline) { [messages] in
            for await message in messages where !(skippingPings && message == .ping) { return message }
            throw HubTestError.ended
        }
    }

    /// The next `ReceiveMessage` argument.
    func nextNotification() async throws -> JSONObject {
        let message = try await next()
        guard case .invocation("ReceiveMessage", let arguments) = message, arguments.count == 1, let object = arguments[0].objectValue else {
            throw HubTestError.unexpected(message)
        }
        return object
    }

    /// Waits until the server has closed the connection (the WebSocket close handshake), within `deadline`.
    func closed(deadline: Duration = .seconds(10)) async throws -> WebSocketCloseFrame? {
        try await Self.within(deadline) { [run] in try await run.value }
    }

    /// Closes the connection as a client app does (a WebSocket close); ``closed(deadline:)`` then returns
    /// once the server has answered it.
    func disconnect() {
        outgoing.finish()
    }

    static func within<T: Sendable>(_ deadline: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: T.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(for: deadline)
                throw HubTestError.deadline(deadline)
            }
            defer { group.cancelAll() }
            return try await group.next()!
        }
    }

    static func decode(_ bytes: [UInt8], _ hubProtocol: HubProtocol) throws -> [Message] {
        switch hubProtocol {
        case .json:
            return try bytes.split(separator: 0x1e).map { record in
                let object = try JSONParser.parseObject(record)
                switch object["type"]?.intValue {
                case 1: return .invocation(target: object["target"]?.stringValue ?? "", arguments: object["arguments"]?.arrayValue ?? [])
                case 6: return .ping
                case 7: return .close(error: object["error"]?.stringValue, allowReconnect: object["allowReconnect"]?.boolValue)
                default: return .other(.object(object))
                }
            }
        case .messagePack:
            return try VarInt.split(bytes, limit: 1 << 20).map { body in
                let items = try #require(try MessagePackReader.decode(body).arrayValue)
                switch items.first?.intValue {
                case 1:
                    #expect(items.count == 5 || items.count == 6)
                    #expect(items[1] == .map([]) && items[2] == .nil, "no headers, no invocation id")
                    return .invocation(target: items[3].stringValue ?? "", arguments: (items[4].arrayValue ?? []).map(json))
                case 6:
                    #expect(items.count == 1)
                    return .ping
                case 7:
                    let allow: Bool? = if items.count > 2, case .bool(let value) = items[2] { value } else { nil }
                    return .close(error: items[1].stringValue, allowReconnect: allow)
                default: return .other(json(.array(items)))
                }
            }
        }
    }

    /// A MessagePack value as the JSON protocol carries it (timestamps as ISO 8601 text).
    static func json(_ value: MessagePackValue) -> JSONValue {
        switch value {
        case .nil: return .null
        case .bool(let value): return .bool(value)
        case .int(let value): return .number(String(value))
        case .uint(let value): return .number(String(value))
        case .double(let value): return .number(String(value))
        case .string(let value): return .string(value)
        case .binary(let value): return .string(Data(value).base64EncodedString())
        case .array(let values): return .array(values.map(json))
        case .map(let pairs): return .object(JSONObject(entries: pairs.map { .init(key: $0.0.stringValue ?? "?", value: json($0.1)) }))
        case .timestamp(let seconds, let nanoseconds):
            return .string(WireDate(microsecondsSinceEpoch: seconds * 1_000_000 + Int64(nanoseconds / 1_000)).iso8601)
        case .ext(let type, _): return .string("ext \(type)")
        }
    }
}

enum HubTestError: Error {
    case ended
    case deadline(Duration)
    case unexpected(HubTestClient.Message)
}
