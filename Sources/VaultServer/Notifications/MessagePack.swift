import Foundation

/// A MessagePack value: the subset of the format (msgpack spec, "Formats") the notifications hub
/// writes and reads. Maps keep their order, so an encoding is reproducible byte for byte.
enum MessagePackValue: Sendable, Equatable {
    case `nil`
    case bool(Bool)
    case int(Int64)
    case uint(UInt64)
    case double(Double)
    case string(String)
    case binary([UInt8])
    case array([MessagePackValue])
    case map([(MessagePackValue, MessagePackValue)])
    /// The timestamp extension (type -1): seconds since 1970 and nanoseconds within the second.
    case timestamp(seconds: Int64, nanoseconds: UInt32)
    /// Any other extension type.
    case ext(Int8, [UInt8])

    static func == (lhs: MessagePackValue, rhs: MessagePackValue) -> Bool {
        switch (lhs, rhs) {
        case (.nil, .nil): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.int(let a), .int(let b)): return a == b
        case (.uint(let a), .uint(let b)): return a == b
        case (.int(let a), .uint(let b)), (.uint(let b), .int(let a)): return a >= 0 && UInt64(a) == b
        case (.double(let a), .double(let b)): return a == b
        case (.string(let a), .string(let b)): return a == b
        case (.binary(let a), .binary(let b)): return a == b
        case (.array(let a), .array(let b)): return a == b
        case (.map(let a), .map(let b)): return a.count == b.count && zip(a, b).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        case (.timestamp(let s1, let n1), .timestamp(let s2, let n2)): return s1 == s2 && n1 == n2
        case (.ext(let t1, let d1), .ext(let t2, let d2)): return t1 == t2 && d1 == d2
        default: return false
        }
    }

    /// A timestamp from microseconds since 1970 (how this server stores dates).
    static func timestamp(microsecondsSinceEpoch micros: Int64) -> MessagePackValue {
        let seconds = micros >= 0 ? micros / 1_000_000 : (micros - 999_999) / 1_000_000
        let remainder = micros - seconds * 1_000_000
        return .timestamp(seconds: seconds, nanoseconds: UInt32(remainder * 1_000))
    }

    /// The integer this value holds, if it is one that fits.
    var intValue: Int? {
        switch self {
        case .int(let value): return Int(exactly: value)
        case .uint(let value): return Int(exactly: value)
        default: return nil
        }
    }

    var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    var arrayValue: [MessagePackValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    /// The value's bytes.
    func encoded() -> [UInt8] {
        var bytes: [UInt8] = []
        encode(into: &bytes)
        return bytes
    }

    /// Appends the value in the smallest format that holds it (what the spec asks of a serializer).
    func encode(into out: inout [UInt8]) {
        switch self {
        case .nil: out.append(0xc0)
        case .bool(let value): out.append(value ? 0xc3 : 0xc2)
        case .int(let value):
            if value >= 0 { Self.encodeUnsigned(UInt64(value), into: &out) } else { Self.encodeNegative(value, into: &out) }
        case .uint(let value): Self.encodeUnsigned(value, into: &out)
        case .double(let value):
            out.append(0xcb)
            Self.append(value.bitPattern, bytes: 8, into: &out)
        case .string(let value):
            let utf8 = Array(value.utf8)
            switch utf8.count {
            case 0...31: out.append(0xa0 | UInt8(utf8.count))
            case 32...0xff: out += [0xd9, UInt8(utf8.count)]
            case 0x100...0xffff: out.append(0xda); Self.append(UInt64(utf8.count), bytes: 2, into: &out)
            default: out.append(0xdb); Self.append(UInt64(utf8.count), bytes: 4, into: &out)
            }
            out += utf8
        case .binary(let value):
            switch value.count {
            case 0...0xff: out += [0xc4, UInt8(value.count)]
            case 0x100...0xffff: out.append(0xc5); Self.append(UInt64(value.count), bytes: 2, into: &out)
            default: out.append(0xc6); Self.append(UInt64(value.count), bytes: 4, into: &out)
            }
            out += value
        case .array(let values):
            Self.encodeHeader(count: values.count, fix: 0x90, sixteen: 0xdc, thirtyTwo: 0xdd, into: &out)
            for value in values { value.encode(into: &out) }
        case .map(let pairs):
            Self.encodeHeader(count: pairs.count, fix: 0x80, sixteen: 0xde, thirtyTwo: 0xdf, into: &out)
            for (key, value) in pairs {
                key.encode(into: &out)
                value.encode(into: &out)
            }
        case .timestamp(let seconds, let nanoseconds):
            // timestamp 32 when it fits, timestamp 64 for 34-bit seconds, timestamp 96 otherwise.
            if nanoseconds == 0, seconds >= 0, seconds <= Int64(UInt32.max) {
                out += [0xd6, 0xff]
                Self.append(UInt64(seconds), bytes: 4, into: &out)
            } else if seconds >= 0, seconds < (1 << 34) {
                out += [0xd7, 0xff]
                Self.append(UInt64(nanoseconds) << 34 | UInt64(seconds), bytes: 8, into: &out)
            } else {
                out += [0xc7, 12, 0xff]
                Self.append(UInt64(nanoseconds), bytes: 4, into: &out)
                Self.append(UInt64(bitPattern: seconds), bytes: 8, into: &out)
            }
        case .ext(let type, let data):
            switch data.count {
            case 1: out.append(0xd4)
            case 2: out.append(0xd5)
            case 4: out.append(0xd6)
            case 8: out.append(0xd7)
            case 16: out.append(0xd8)
            case 0...0xff: out += [0xc7, UInt8(data.count)]
            case 0x100...0xffff: out.append(0xc8); Self.append(UInt64(data.count), bytes: 2, into: &out)
            default: out.append(0xc9); Self.append(UInt64(data.count), bytes: 4, into: &out)
            }
            out.append(UInt8(bitPattern: type))
            out += data
        }
    }

    private static func encodeUnsigned(_ value: UInt64, into out: inout [UInt8]) {
        switch value {
        case 0...0x7f: out.append(UInt8(value))
        case 0x80...0xff: out += [0xcc, UInt8(value)]
        case 0x100...0xffff: out.append(0xcd); append(value, bytes: 2, into: &out)
        case 0x1_0000...0xffff_ffff: out.append(0xce); append(value, bytes: 4, into: &out)
        default: out.append(0xcf); append(value, bytes: 8, into: &out)
        }
    }

    private static func encodeNegative(_ value: Int64, into out: inout [UInt8]) {
        switch value {
        case -32...(-1): out.append(UInt8(bitPattern: Int8(value)))
        case -128...(-33): out += [0xd0, UInt8(bitPattern: Int8(value))]
        case -32768...(-129): out.append(0xd1); append(UInt64(bitPattern: value), bytes: 2, into: &out)
        case -2_147_483_648...(-32769): out.append(0xd2); append(UInt64(bitPattern: value), bytes: 4, into: &out)
        default: out.append(0xd3); append(UInt64(bitPattern: value), bytes: 8, into: &out)
        }
    }

    private static func encodeHeader(count: Int, fix: UInt8, sixteen: UInt8, thirtyTwo: UInt8, into out: inout [UInt8]) {
        switch count {
        case 0...15: out.append(fix | UInt8(count))
        case 16...0xffff: out.append(sixteen); append(UInt64(count), bytes: 2, into: &out)
        default: out.append(thirtyTwo); append(UInt64(count), bytes: 4, into: &out)
        }
    }

    /// The low `bytes` bytes of `value`, big-endian (MessagePack's byte order).
    private static func append(_ value: UInt64, bytes: Int, into out: inout [UInt8]) {
        for shift in stride(from: (bytes - 1) * 8, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }
}

/// Why bytes are not a MessagePack value this reader takes.
enum MessagePackError: Error, Equatable, Sendable {
    /// The bytes end inside a value (at `offset`).
    case truncated(offset: Int)
    /// `0xc1`, the one byte the format never uses, at `offset`.
    case invalidByte(UInt8, offset: Int)
    /// A string that is not UTF-8, at `offset`.
    case invalidString(offset: Int)
    /// Arrays and maps nested deeper than the reader follows.
    case tooDeep
    /// A length prefix that is malformed (more than 5 bytes) or says more than the limit.
    case invalidLength
}

/// Reads MessagePack values from bytes.
struct MessagePackReader {
    /// How deep arrays and maps may nest: a hub message is a few levels deep; the bound keeps a hostile
    /// frame from exhausting the stack.
    static let maxDepth = 32

    private let bytes: [UInt8]
    private(set) var offset: Int

    init<Bytes: Collection>(_ bytes: Bytes) where Bytes.Element == UInt8 {
        self.bytes = Array(bytes)
        offset = 0
    }

    var isAtEnd: Bool { offset >= bytes.count }

    /// One whole value (throws if the bytes hold anything after it).
    static func decode<Bytes: Collection>(_ bytes: Bytes) throws(MessagePackError) -> MessagePackValue where Bytes.Element == UInt8 {
        var reader = MessagePackReader(bytes)
        let value = try reader.read()
        guard reader.isAtEnd else { throw .invalidByte(reader.bytes[reader.offset], offset: reader.offset) }
        return value
    }

    mutating func read() throws(MessagePackError) -> MessagePackValue {
        try read(depth: 0)
    }

    private mutating func read(depth: Int) throws(MessagePackError) -> MessagePackValue {
        guard depth <= Self.maxDepth else { throw .tooDeep }
        let start = offset
        let byte = try take(1)[0]
        switch byte {
        case 0x00...0x7f: return .uint(UInt64(byte))
        case 0x80...0x8f: return try readMap(count: Int(byte & 0x0f), depth: depth)
        case 0x90...0x9f: return try readArray(count: Int(byte & 0x0f), depth: depth)
        case 0xa0...0xbf: return try readString(count: Int(byte & 0x1f), start: start)
        case 0xc0: return .nil
        case 0xc2: return .bool(false)
        case 0xc3: return .bool(true)
        case 0xc4: return .binary(try take(Int(try number(1))))
        case 0xc5: return .binary(try take(Int(try number(2))))
        case 0xc6: return .binary(try take(Int(try number(4))))
        case 0xc7: let count = Int(try number(1)); return try readExt(count: count, start: start)
        case 0xc8: let count = Int(try number(2)); return try readExt(count: count, start: start)
        case 0xc9: let count = Int(try number(4)); return try readExt(count: count, start: start)
        case 0xca: return .double(Double(Float(bitPattern: UInt32(try number(4)))))
        case 0xcb: return .double(Double(bitPattern: try number(8)))
        case 0xcc: return .uint(try number(1))
        case 0xcd: return .uint(try number(2))
        case 0xce: return .uint(try number(4))
        case 0xcf: return .uint(try number(8))
        case 0xd0: return .int(Int64(Int8(truncatingIfNeeded: try number(1))))
        case 0xd1: return .int(Int64(Int16(truncatingIfNeeded: try number(2))))
        case 0xd2: return .int(Int64(Int32(truncatingIfNeeded: try number(4))))
        case 0xd3: return .int(Int64(bitPattern: try number(8)))
        case 0xd4: return try readExt(count: 1, start: start)
        case 0xd5: return try readExt(count: 2, start: start)
        case 0xd6: return try readExt(count: 4, start: start)
        case 0xd7: return try readExt(count: 8, start: start)
        case 0xd8: return try readExt(count: 16, start: start)
        case 0xd9: return try readString(count: Int(try number(1)), start: start)
        case 0xda: return try readString(count: Int(try number(2)), start: start)
        case 0xdb: return try readString(count: Int(try number(4)), start: start)
        case 0xdc: return try readArray(count: Int(try number(2)), depth: depth)
        case 0xdd: return try readArray(count: Int(try number(4)), depth: depth)
        case 0xde: return try readMap(count: Int(try number(2)), depth: depth)
        case 0xdf: return try readMap(count: Int(try number(4)), depth: depth)
        case 0xe0...0xff: return .int(Int64(Int8(bitPattern: byte)))
        default: throw .invalidByte(byte, offset: start)
        }
    }

    private mutating func take(_ count: Int) throws(MessagePackError) -> [UInt8] {
        guard count >= 0, count <= bytes.count - offset else { throw .truncated(offset: offset) }
        defer { offset += count }
        return Array(bytes[offset..<(offset + count)])
    }

    private mutating func number(_ size: Int) throws(MessagePackError) -> UInt64 {
        try take(size).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    }

    private mutating func readString(count: Int, start: Int) throws(MessagePackError) -> MessagePackValue {
        guard let text = String(bytes: try take(count), encoding: .utf8) else { throw .invalidString(offset: start) }
        return .string(text)
    }

    private mutating func readArray(count: Int, depth: Int) throws(MessagePackError) -> MessagePackValue {
        // Every element takes at least a byte: a count beyond what is left is a lie, refused before allocating.
        guard count <= bytes.count - offset else { throw .truncated(offset: offset) }
        var values: [MessagePackValue] = []
        values.reserveCapacity(count)
        for _ in 0..<count { values.append(try read(depth: depth + 1)) }
        return .array(values)
    }

    private mutating func readMap(count: Int, depth: Int) throws(MessagePackError) -> MessagePackValue {
        guard count <= (bytes.count - offset) / 2 else { throw .truncated(offset: offset) }
        var pairs: [(MessagePackValue, MessagePackValue)] = []
        pairs.reserveCapacity(count)
        for _ in 0..<count {
            let key = try read(depth: depth + 1)
            pairs.append((key, try read(depth: depth + 1)))
        }
        return .map(pairs)
    }

    private mutating func readExt(count: Int, start: Int) throws(MessagePackError) -> MessagePackValue {
        let type = Int8(bitPattern: try take(1)[0])
        let data = try take(count)
        guard type == -1 else { return .ext(type, data) }
        let value = data.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        switch count {
        case 4: return .timestamp(seconds: Int64(value), nanoseconds: 0)
        case 8: return .timestamp(seconds: Int64(value & 0x3_ffff_ffff), nanoseconds: UInt32(value >> 34))
        case 12:
            let nanoseconds = data.prefix(4).reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            let seconds = data.suffix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            return .timestamp(seconds: Int64(bitPattern: seconds), nanoseconds: nanoseconds)
        default: return .ext(type, data)
        }
    }
}

/// The length prefix of SignalR's binary framing: an unsigned number in 7-bit groups, least significant
/// first, the high bit of each byte set when another byte follows; at most 5 bytes (a length below 2³¹).
enum VarInt {
    static func encode(_ value: Int) -> [UInt8] {
        precondition(value >= 0 && value <= Int(Int32.max), "a SignalR frame is shorter than 2 GiB")
        var rest = UInt32(value)
        var bytes: [UInt8] = []
        repeat {
            var byte = UInt8(rest & 0x7f)
            rest >>= 7
            if rest != 0 { byte |= 0x80 }
            bytes.append(byte)
        } while rest != 0
        return bytes
    }

    /// The value at the start of `bytes` and how many bytes it took; `nil` when the bytes end inside it.
    static func decode<Bytes: Collection>(_ bytes: Bytes) throws(MessagePackError) -> (value: Int, size: Int)? where Bytes.Element == UInt8 {
        var value = 0
        var shift = 0
        var size = 0
        for byte in bytes {
            size += 1
            guard size <= 5 else { throw .invalidLength }
            value |= Int(byte & 0x7f) << shift
            if byte & 0x80 == 0 {
                guard value <= Int(Int32.max) else { throw .invalidLength }
                return (value, size)
            }
            shift += 7
        }
        return nil
    }

    /// Splits a binary frame into the messages it carries (each prefixed by its length); a message
    /// longer than `limit` is refused.
    static func split(_ bytes: [UInt8], limit: Int) throws(MessagePackError) -> [ArraySlice<UInt8>] {
        var messages: [ArraySlice<UInt8>] = []
        var index = 0
        while index < bytes.count {
            guard let prefix = try decode(bytes[index...]) else { throw .truncated(offset: bytes.count) }
            let length = prefix.value
            guard length <= limit else { throw .invalidLength }
            let start = index + prefix.size
            guard length <= bytes.count - start else { throw .truncated(offset: bytes.count) }
            messages.append(bytes[start..<(start + length)])
            index = start + length
        }
        return messages
    }
}
