import Foundation
import Testing
import VaultModels
@testable import VaultServer

/// The hub's MessagePack codec and SignalR framing, checked against the byte examples of the
/// MessagePack specification and of SignalR's hub protocol specification.
@Suite("Hub codec")
struct HubCodecTests {
    static func hex(_ text: String) -> [UInt8] {
        text.split(separator: " ").map { UInt8($0.hasPrefix("0x") ? $0.dropFirst(2) : $0, radix: 16)! }
    }

    @Test("Formats: each value in the smallest form the MessagePack spec gives it")
    func formats() throws {
        let cases: [(MessagePackValue, String)] = [
            (.nil, "c0"), (.bool(false), "c2"), (.bool(true), "c3"),
            (.int(0), "00"), (.int(127), "7f"), (.int(128), "cc 80"), (.int(255), "cc ff"), (.int(256), "cd 01 00"),
            (.int(65_536), "ce 00 01 00 00"), (.uint(1 << 32), "cf 00 00 00 01 00 00 00 00"),
            (.int(-1), "ff"), (.int(-32), "e0"), (.int(-33), "d0 df"), (.int(-129), "d1 ff 7f"),
            (.int(-32_769), "d2 ff ff 7f ff"), (.int(Int64.min), "d3 80 00 00 00 00 00 00 00"),
            (.string(""), "a0"), (.string("abc"), "a3 61 62 63"),
            (.string(String(repeating: "x", count: 32)), "d9 20 " + Array(repeating: "78", count: 32).joined(separator: " ")),
            (.binary([1, 2]), "c4 02 01 02"),
            (.array([]), "90"), (.array([.int(1), .int(2)]), "92 01 02"),
            (.map([]), "80"), (.map([(.string("a"), .int(1))]), "81 a1 61 01"),
            (.double(1.5), "cb 3f f8 00 00 00 00 00 00"),
            // Timestamp extension (type -1): 32-bit seconds, 64-bit nanoseconds<<34|seconds, 96-bit.
            (.timestamp(seconds: 1, nanoseconds: 0), "d6 ff 00 00 00 01"),
            (.timestamp(seconds: 1, nanoseconds: 1), "d7 ff 00 00 00 04 00 00 00 01"),
            (.timestamp(seconds: -1, nanoseconds: 0), "c7 0c ff 00 00 00 00 ff ff ff ff ff ff ff ff"),
        ]
        for (value, bytes) in cases {
            #expect(value.encoded() == Self.hex(bytes), "\(value)")
            #expect(try MessagePackReader.decode(Self.hex(bytes)) == value, "\(bytes)")
        }
        // Long strings and arrays take the 16-bit length forms.
        #expect(MessagePackValue.string(String(repeating: "y", count: 256)).encoded().prefix(3) == [0xda, 0x01, 0x00])
        #expect(MessagePackValue.array(Array(repeating: .nil, count: 16)).encoded().prefix(3) == [0xdc, 0x00, 0x10])
        #expect(MessagePackValue.map(Array(repeating: (.nil, .nil), count: 16)).encoded().prefix(3) == [0xde, 0x00, 0x10])
    }

    @Test("A date becomes the timestamp extension with its microseconds as nanoseconds")
    func dates() throws {
        let value = MessagePackValue.timestamp(microsecondsSinceEpoch: 1_764_000_000_123_456)
        #expect(value == .timestamp(seconds: 1_764_000_000, nanoseconds: 123_456_000))
        let bytes = value.encoded()
        #expect(bytes.prefix(2) == [0xd7, 0xff])
        #expect(try MessagePackReader.decode(bytes) == value)
        #expect(MessagePackValue.timestamp(microsecondsSinceEpoch: -1) == .timestamp(seconds: -1, nanoseconds: 999_999_000))
    }

    @Test("The reader refuses truncated, never-used and too deeply nested bytes")
    func refusals() {
        #expect(throws: MessagePackError.truncated(offset: 1)) { try MessagePackReader.decode([0xa3, 0x61]) }
        #expect(throws: MessagePackError.invalidByte(0xc1, offset: 0)) { try MessagePackReader.decode([0xc1]) }
        #expect(throws: MessagePackError.invalidString(offset: 0)) { try MessagePackReader.decode([0xa1, 0xff]) }
        #expect(throws: MessagePackError.tooDeep) { try MessagePackReader.decode(Array(repeating: 0x91, count: 40) + [0xc0]) }
        // An array claiming four billion elements in five bytes is refused before anything is allocated.
        #expect(throws: MessagePackError.truncated(offset: 5)) { try MessagePackReader.decode([0xdd, 0xff, 0xff, 0xff, 0xff]) }
    }

    @Test("VarInt: the SignalR spec's examples, and its five-byte maximum")
    func varInt() throws {
        #expect(VarInt.encode(0x35) == [0x35])
        #expect(VarInt.encode(5248) == [0x80, 0x29])
        #expect(VarInt.encode(0x7fff_ffff) == [0xff, 0xff, 0xff, 0xff, 0x07])
        #expect(try VarInt.decode([0x80, 0x29])! == (5248, 2))
        #expect(try VarInt.decode([0x80]) == nil)
        #expect(throws: MessagePackError.invalidLength) { try VarInt.decode([0xff, 0xff, 0xff, 0xff, 0xff, 0x01]) }
        // The spec's framing example: "Hello\nWorld" and 0x01 0x02 in one binary frame.
        let frame = [0x0b] + Array("Hello\nWorld".utf8) + [0x02, 0x01, 0x02]
        #expect(try VarInt.split(frame, limit: 100).map(Array.init) == [Array("Hello\nWorld".utf8), [0x01, 0x02]])
        #expect(throws: MessagePackError.invalidLength) { try VarInt.split(frame, limit: 5) }
        #expect(throws: MessagePackError.truncated(offset: 3)) { try VarInt.split([0x05, 0x01, 0x02], limit: 100) }
    }

    @Test("SignalR's MessagePack examples: invocation, non-blocking invocation, ping, close")
    func signalRExamples() throws {
        let invocation = Self.hex("0x96 0x01 0x80 0xa3 0x78 0x79 0x7a 0xa6 0x6d 0x65 0x74 0x68 0x6f 0x64 0x91 0x2a 0x90")
        #expect(try MessagePackReader.decode(invocation)
            == .array([.int(1), .map([]), .string("xyz"), .string("method"), .array([.int(42)]), .array([])]))
        let nonBlocking = Self.hex("0x96 0x01 0x80 0xc0 0xa6 0x6d 0x65 0x74 0x68 0x6f 0x64 0x91 0x2a 0x90")
        #expect(MessagePackValue.array([.int(1), .map([]), .nil, .string("method"), .array([.int(42)]), .array([])]).encoded() == nonBlocking)
        let headers = Self.hex("0x96 0x01 0x82 0xa1 0x78 0xa1 0x79 0xa1 0x7a 0xa1 0x7a 0xa3 0x78 0x79 0x7a 0xa6 0x6d 0x65 0x74 0x68 0x6f 0x64 0x91 0x2a 0x90")
        #expect(try MessagePackReader.decode(headers).arrayValue?[1]
            == .map([(.string("x"), .string("y")), (.string("z"), .string("z"))]))
        // Ping is always exactly 0x91 0x06; close with an error and allowReconnect 0x93 0x07 … 0xc3.
        #expect(HubProtocol.messagePack.encode(.ping) == [0x02, 0x91, 0x06])
        #expect(HubProtocol.messagePack.encode(.close(error: "xyz", allowReconnect: true))
            == [0x07] + Self.hex("0x93 0x07 0xa3 0x78 0x79 0x7a 0xc3"))
        // What a client sends: its frame is parsed into messages; only ping and close matter.
        let frame = [UInt8(invocation.count)] + invocation + [0x02, 0x91, 0x06] + [0x03, 0x92, 0x07, 0xc0]
        #expect(try HubProtocol.messagePack.decode(frame, limit: 1024) == [.other(type: 1), .ping, .close])
        #expect(throws: HubProtocolError.self) { try HubProtocol.messagePack.decode([0x02, 0xc1, 0x00], limit: 1024) }
    }

    @Test("JSON: records end with 0x1E; the handshake is JSON in both protocols")
    func json() throws {
        #expect(HubProtocol.json.encode(.ping) == Array(#"{"type":6}"#.utf8) + [0x1e])
        #expect(HubProtocol.json.encode(.close(error: nil, allowReconnect: true)) == Array(#"{"type":7,"allowReconnect":true}"#.utf8) + [0x1e])
        #expect(try HubProtocol.json.decode(Array(#"{"type":6}"#.utf8) + [0x1e] + Array(#"{"type":1,"target":"x","arguments":[]}"#.utf8) + [0x1e],
                                            limit: 1024) == [.ping, .other(type: 1)])
        #expect(throws: HubProtocolError.self) { try HubProtocol.json.decode(Array("nope".utf8) + [0x1e], limit: 1024) }
        let (agreed, rest) = try HubProtocol.handshake(Array(#"{"protocol":"messagepack","version":1}"#.utf8) + [0x1e, 0x02, 0x91, 0x06])
        #expect(agreed == .messagePack)
        #expect(rest == [0x02, 0x91, 0x06])
        #expect(try HubProtocol.handshake(Array(#"{"protocol":"json","version":1}"#.utf8) + [0x1e]).0 == .json)
        #expect(throws: HubProtocolError.unsupported("Requested protocol 'xml' is not available.")) {
            try HubProtocol.handshake(Array(#"{"protocol":"xml","version":1}"#.utf8) + [0x1e])
        }
        #expect(HubProtocol.handshakeResponse == [0x7b, 0x7d, 0x1e])
    }

    @Test("ReceiveMessage in both encodings: PascalCase keys, ids and dates only")
    func receiveMessage() throws {
        let notification = HubNotification.cipher(.syncCipherUpdate, id: "c1", userID: "u1", organizationID: nil, collectionIDs: nil,
                                                  revisionDate: 1_764_000_000_123_456, contextID: "device-1")
        let json = HubProtocol.json.encode(.invocation(notification))
        #expect(String(decoding: json, as: UTF8.self) == """
            {"type":1,"target":"ReceiveMessage","arguments":[{"ContextId":"device-1","Type":0,"Payload":{"Id":"c1","UserId":"u1",\
            "OrganizationId":null,"CollectionIds":null,"RevisionDate":"2025-11-24T16:00:00.123456Z"}}]}\u{1e}
            """)
        let binary = HubProtocol.messagePack.encode(.invocation(notification))
        let bodies = try VarInt.split(binary, limit: 1024)
        #expect(bodies.count == 1)
        #expect(try MessagePackReader.decode(bodies[0]) == .array([
            .int(1), .map([]), .nil, .string("ReceiveMessage"), .array([.map([
                (.string("ContextId"), .string("device-1")), (.string("Type"), .int(0)),
                (.string("Payload"), .map([
                    (.string("Id"), .string("c1")), (.string("UserId"), .string("u1")), (.string("OrganizationId"), .nil),
                    (.string("CollectionIds"), .nil), (.string("RevisionDate"), .timestamp(seconds: 1_764_000_000, nanoseconds: 123_456_000)),
                ])),
            ])]),
        ]))
    }
}
