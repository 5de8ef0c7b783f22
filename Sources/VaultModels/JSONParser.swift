#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A strict RFC 8259 JSON parser producing ``JSONValue``.
///
/// Strict: no trailing commas, no comments, no duplicate keys, no lone surrogates, valid UTF-8 only.
/// Bounded: nesting deeper than ``maximumDepth`` is refused, so hostile input cannot exhaust the stack.
/// Errors are ``ModelError/invalidJSON(offset:reason:)`` with the byte offset.
public struct JSONParser {
    /// The deepest nesting accepted.
    public static let maximumDepth = 256

    /// Parses a complete JSON text.
    public static func parse<Bytes: Collection>(_ bytes: Bytes) throws -> JSONValue where Bytes.Element == UInt8 {
        if let result = try bytes.withContiguousStorageIfAvailable({ try parse(buffer: $0) }) {
            return result
        }
        return try Array(bytes).withUnsafeBufferPointer { try parse(buffer: $0) }
    }

    /// Parses a complete JSON text given as a string.
    public static func parse(_ text: String) throws -> JSONValue {
        var copy = text
        return try copy.withUTF8 { try parse(buffer: $0) }
    }

    /// Parses a JSON text that must be an object.
    public static func parseObject<Bytes: Collection>(_ bytes: Bytes) throws -> JSONObject where Bytes.Element == UInt8 {
        let value = try parse(bytes)
        guard case .object(let object) = value else {
            throw ModelError.invalidJSON(offset: 0, reason: "expected an object, found \(value.kindName)")
        }
        return object
    }

    /// Parses a JSON text that must be an object, like ``parseObject(_:)``, except that each element of an
    /// array under one of `streamedKeys` (top level; a key matches as ``JSONObject`` matches keys, its
    /// first letter in either case) goes to `element` as soon as it is parsed and is not kept: the object
    /// returned holds an empty array there. A large response whose elements are turned into something
    /// else at once (a vault's items) is then never held as one tree. The whole text is still checked: an
    /// error anywhere throws, whatever `element` was handed before.
    public static func parseObject<Bytes: Collection>(_ bytes: Bytes, streaming streamedKeys: Set<String>,
                                                      element: (_ key: String, _ index: Int, _ value: JSONValue) throws -> Void) throws -> JSONObject
    where Bytes.Element == UInt8 {
        func run(_ buffer: UnsafeBufferPointer<UInt8>) throws -> JSONObject {
            try parseObject(buffer: buffer, streaming: streamedKeys) { key, index, value, _ in try element(key, index, value) }
        }
        if let result = try bytes.withContiguousStorageIfAvailable({ try run($0) }) { return result }
        return try Array(bytes).withUnsafeBufferPointer { try run($0) }
    }

    /// ``parseObject(_:streaming:element:)`` over memory the caller holds (a mapped file), telling
    /// `element` also where each streamed element ends (`end`: the offset just past it). Nothing before
    /// `end` is read again, so the caller may let the memory before it go (`madvise`) as the parse moves on.
    public static func parseObject(buffer: UnsafeBufferPointer<UInt8>, streaming streamedKeys: Set<String>,
                                   element: (_ key: String, _ index: Int, _ value: JSONValue, _ end: Int) throws -> Void) throws -> JSONObject {
        try withoutActuallyEscaping(element) { sink in
            var parser = JSONParser(buffer: buffer)
            parser.streamed = (Set(streamedKeys.map(JSONObject.camelCase)), sink)
            parser.skipWhitespace()
            guard parser.position < buffer.count, buffer[parser.position] == UInt8(ascii: "{") else {
                throw parser.error("expected a JSON object")
            }
            let object = try parser.parseObject(depth: 1)
            parser.skipWhitespace()
            guard parser.position == buffer.count else { throw parser.error("unexpected data after the JSON value") }
            return object
        }
    }

    /// The keys of an object to build, by path ("id", "login.username"), for ``parseObject(_:keeping:)``.
    public struct Selection: Sendable {
        /// Each kept key (camelCase) with the selection inside its value; `nil`: the whole value.
        var keys: [String: Selection?]

        public init(paths: [String]) {
            var keys: [String: [String]] = [:]
            var whole: Set<String> = []
            for path in paths {
                let parts = path.split(separator: ".", maxSplits: 1).map(String.init)
                if parts.count == 2 { keys[parts[0], default: []].append(parts[1]) } else { whole.insert(parts[0]) }
            }
            var selection: [String: Selection?] = [:]
            for key in whole { selection[key] = .some(nil) }
            for (key, inner) in keys where !whole.contains(key) { selection[key] = Selection(paths: inner) }
            self.keys = selection
            keyBytes = selection.map { (Array($0.key.utf8), $0.value) }
        }

        /// The kept keys' bytes: a key read from the text is looked up by its bytes, without a string or a
        /// hash (the lookup by string was a sixth of a list's selective parse, docs/BENCHMARKS.md, measured 2026-11-28).
        private let keyBytes: [(bytes: [UInt8], inner: Selection?)]

        /// The selection inside the value of the key spelled `raw` in the text: `.some(nil)` for the whole
        /// value, `nil` when the key is not kept. The same rule as `keys[JSONObject.camelCase(key)]`: a
        /// first letter A–Z is read as lowercase, every other byte compared as it is.
        func inner(forKey raw: UnsafeBufferPointer<UInt8>) -> Selection?? {
            guard let first = raw.first else { return keys[""] }
            let lowered = (0x41...0x5A).contains(first) ? first | 0x20 : first
            for entry in keyBytes where entry.bytes.count == raw.count && entry.bytes[0] == lowered
                && entry.bytes.dropFirst().elementsEqual(raw.dropFirst()) {
                return .some(entry.inner)
            }
            return nil
        }
    }

    /// Parses a JSON text that must be an object, building only the values `selection` names: the others are
    /// read over and checked as JSON (structure, escapes) but never built, nor are their strings checked as
    /// UTF-8. For a stored item of which only a few fields are wanted (a list's names and usernames): its
    /// history, fields and notes cost a scan, not a tree (docs/BENCHMARKS.md, measured 2026-11-27).
    public static func parseObject<Bytes: Collection>(_ bytes: Bytes, keeping selection: Selection) throws -> JSONObject where Bytes.Element == UInt8 {
        func run(_ buffer: UnsafeBufferPointer<UInt8>) throws -> JSONObject {
            var parser = JSONParser(buffer: buffer)
            parser.skipWhitespace()
            guard parser.position < buffer.count, buffer[parser.position] == UInt8(ascii: "{") else {
                throw parser.error("expected a JSON object")
            }
            let object = try parser.parseObject(depth: 1, keeping: selection)
            parser.skipWhitespace()
            guard parser.position == buffer.count else { throw parser.error("unexpected data after the JSON value") }
            return object
        }
        if let result = try bytes.withContiguousStorageIfAvailable({ try run($0) }) { return result }
        return try Array(bytes).withUnsafeBufferPointer { try run($0) }
    }

    static func parse(buffer: UnsafeBufferPointer<UInt8>) throws -> JSONValue {
        var parser = JSONParser(buffer: buffer)
        parser.skipWhitespace()
        let value = try parser.parseValue(depth: 0)
        parser.skipWhitespace()
        guard parser.position == buffer.count else { throw parser.error("unexpected data after the JSON value") }
        return value
    }

    private let buffer: UnsafeBufferPointer<UInt8>
    private var position = 0
    /// The top-level keys (camelCase) whose array elements go to the sink instead of the tree.
    private var streamed: (keys: Set<String>, sink: (String, Int, JSONValue, Int) throws -> Void)?

    private init(buffer: UnsafeBufferPointer<UInt8>) { self.buffer = buffer }

    private func error(_ reason: String) -> ModelError {
        ModelError.invalidJSON(offset: position, reason: reason)
    }

    private mutating func skipWhitespace() {
        while position < buffer.count {
            switch buffer[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }

    private mutating func parseValue(depth: Int) throws -> JSONValue {
        guard position < buffer.count else { throw error("unexpected end of input") }
        switch buffer[position] {
        case UInt8(ascii: "{"):
            guard depth < Self.maximumDepth else { throw error("nesting deeper than \(Self.maximumDepth)") }
            return .object(try parseObject(depth: depth + 1))
        case UInt8(ascii: "["):
            guard depth < Self.maximumDepth else { throw error("nesting deeper than \(Self.maximumDepth)") }
            return .array(try parseArray(depth: depth + 1))
        case UInt8(ascii: "\""):
            return .string(try parseString())
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return .number(try parseNumber())
        default:
            throw error("unexpected character '\(Unicode.Scalar(buffer[position]))'")
        }
    }

    private mutating func expectLiteral(_ literal: StaticString) throws {
        let count = literal.utf8CodeUnitCount
        guard position + count <= buffer.count else { throw error("unexpected end of input") }
        for index in 0..<count where buffer[position + index] != literal.utf8Start[index] {
            throw error("invalid literal")
        }
        position += count
    }

    private mutating func parseObject(depth: Int, keeping selection: Selection? = nil) throws -> JSONObject {
        position += 1  // {
        var entries: [JSONObject.Entry] = []
        var seen: Set<String>? = nil
        // The prints of the keys read, for the duplicate check; with a selection, every key read (kept or not).
        var prints: [KeyPrint] = []
        var keysRead: [String] = []
        if selection != nil {
            prints.reserveCapacity(24)
            keysRead.reserveCapacity(24)
        }
        if closesAtOnce(UInt8(ascii: "}")) { return JSONObject(entries: entries) }
        while true {
            skipWhitespace()
            guard position < buffer.count, buffer[position] == UInt8(ascii: "\"") else {
                throw error("expected a string key")
            }
            let start = position + 1
            let key = try parseString()
            // Without escapes, the key's bytes are the text's own.
            let raw = key.utf8.count == position - 1 - start ? UnsafeBufferPointer(rebasing: buffer[start..<(position - 1)]) : nil
            let print = raw.map(KeyPrint.init(bytes:)) ?? KeyPrint(bytes: Array(key.utf8))
            if selection == nil {
                try refuseRepeated(key, print, among: prints, seen: &seen) { entries[$0].key }
            } else {
                try refuseRepeated(key, print, among: prints, seen: &seen) { keysRead[$0] }
                keysRead.append(key)
            }
            prints.append(print)
            skipWhitespace()
            guard position < buffer.count, buffer[position] == UInt8(ascii: ":") else { throw error("expected ':'") }
            position += 1
            skipWhitespace()
            let value: JSONValue
            if let selection {
                let kept: Selection??
                if let raw { kept = selection.inner(forKey: raw) } else { kept = selection.keys[JSONObject.camelCase(key)] }
                guard let inner = kept else {
                    try skipValue(depth: depth)
                    if try endOfEntry() { return JSONObject(entries: entries) }
                    continue
                }
                if let inner, position < buffer.count, buffer[position] == UInt8(ascii: "{") {
                    guard depth < Self.maximumDepth else { throw error("nesting deeper than \(Self.maximumDepth)") }
                    value = .object(try parseObject(depth: depth + 1, keeping: inner))
                } else {
                    value = try parseValue(depth: depth)
                }
            } else if depth == 1, let streamed, position < buffer.count, buffer[position] == UInt8(ascii: "["),
               streamed.keys.contains(JSONObject.camelCase(key)) {
                try parseArray(depth: depth + 1) { index, element, end in try streamed.sink(key, index, element, end) }
                value = .array([])
            } else {
                value = try parseValue(depth: depth)
            }
            entries.append(JSONObject.Entry(key: key, value: value))
            if try endOfEntry() { return JSONObject(entries: entries) }
        }
    }

    /// Refuses `key` when an earlier key of the object (`prints` theirs, `earlier` the key at an index) is
    /// the same: linear for small objects, comparing prints first; hashed for large ones (no quadratic
    /// blow-up); `seen` is the hash, made once an object grows large.
    private func refuseRepeated(_ key: String, _ print: KeyPrint, among prints: [KeyPrint], seen: inout Set<String>?,
                                earlier: (Int) -> String) throws {
        if prints.count < 32 {
            for index in prints.indices where prints[index].mayEqual(print) && earlier(index) == key {
                throw error("duplicate key '\(key.prefix(40))'")
            }
        } else {
            if seen == nil { seen = Set(prints.indices.map(earlier)) }
            if !seen!.insert(key).inserted { throw error("duplicate key '\(key.prefix(40))'") }
        }
    }

    /// After an object's value: `true` at its closing brace, `false` past a comma.
    private mutating func endOfEntry() throws -> Bool { try endOfPart(closing: "}", in: "an object") }

    /// After an array's element: `true` at its closing bracket, `false` past a comma.
    private mutating func endOfElement() throws -> Bool { try endOfPart(closing: "]", in: "an array") }

    private mutating func endOfPart(closing: Unicode.Scalar, in container: String) throws -> Bool {
        skipWhitespace()
        guard position < buffer.count else { throw error("unexpected end of input in \(container)") }
        if buffer[position] == UInt8(ascii: ",") {
            position += 1
            return false
        }
        if buffer[position] == UInt8(ascii: closing) {
            position += 1
            return true
        }
        throw error("expected ',' or '\(closing)'")
    }

    /// Reads over one value, checking its structure, building nothing.
    private mutating func skipValue(depth: Int) throws {
        guard position < buffer.count else { throw error("unexpected end of input") }
        switch buffer[position] {
        case UInt8(ascii: "{"):
            guard depth < Self.maximumDepth else { throw error("nesting deeper than \(Self.maximumDepth)") }
            position += 1
            if closesAtOnce(UInt8(ascii: "}")) { return }
            while true {
                skipWhitespace()
                guard position < buffer.count, buffer[position] == UInt8(ascii: "\"") else { throw error("expected a string key") }
                try skipString()
                skipWhitespace()
                guard position < buffer.count, buffer[position] == UInt8(ascii: ":") else { throw error("expected ':'") }
                position += 1
                skipWhitespace()
                try skipValue(depth: depth + 1)
                if try endOfEntry() { return }
            }
        case UInt8(ascii: "["):
            guard depth < Self.maximumDepth else { throw error("nesting deeper than \(Self.maximumDepth)") }
            position += 1
            if closesAtOnce(UInt8(ascii: "]")) { return }
            while true {
                skipWhitespace()
                try skipValue(depth: depth + 1)
                if try endOfElement() { return }
            }
        case UInt8(ascii: "\""):
            try skipString()
        default:
            _ = try parseValue(depth: depth)  // a literal or a number: nothing to build worth avoiding
        }
    }

    /// Reads over a string, checking its escapes and that it has no raw control characters.
    private mutating func skipString() throws {
        position += 1  // opening quote
        while position < buffer.count {
            let byte = buffer[position]
            position += 1
            switch byte {
            case UInt8(ascii: "\""):
                return
            case UInt8(ascii: "\\"):
                guard position < buffer.count else { throw error("unexpected end of input in an escape") }
                let escaped = buffer[position]
                position += 1
                switch escaped {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                     UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    break
                case UInt8(ascii: "u"):
                    _ = try parseHex4()
                default:
                    throw error("invalid escape '\\\(Unicode.Scalar(escaped))'")
                }
            default:
                if byte < 0x20 { throw error("unescaped control character in a string") }
            }
        }
        throw error("unterminated string")
    }

    private mutating func parseArray(depth: Int) throws -> [JSONValue] {
        var values: [JSONValue] = []
        try parseArray(depth: depth) { _, value, _ in values.append(value) }
        return values
    }

    /// Parses an array, handing each element to `take` in order, with the offset just past it.
    private mutating func parseArray(depth: Int, _ take: (Int, JSONValue, Int) throws -> Void) throws {
        position += 1  // [
        if closesAtOnce(UInt8(ascii: "]")) { return }
        var index = 0
        while true {
            skipWhitespace()
            let value = try parseValue(depth: depth)
            try take(index, value, position)
            index += 1
            if try endOfElement() { return }
        }
    }

    /// Just past an opening bracket or brace: whether the container is empty (then read past `closing`).
    private mutating func closesAtOnce(_ closing: UInt8) -> Bool {
        skipWhitespace()
        guard position < buffer.count, buffer[position] == closing else { return false }
        position += 1
        return true
    }

    private mutating func parseNumber() throws -> String {
        let start = position
        if buffer[position] == UInt8(ascii: "-") { position += 1 }
        guard position < buffer.count, isDigit(buffer[position]) else { throw error("invalid number") }
        if buffer[position] == UInt8(ascii: "0") {
            position += 1
        } else {
            while position < buffer.count, isDigit(buffer[position]) { position += 1 }
        }
        if position < buffer.count, buffer[position] == UInt8(ascii: ".") {
            position += 1
            guard position < buffer.count, isDigit(buffer[position]) else { throw error("invalid number: digits must follow '.'") }
            while position < buffer.count, isDigit(buffer[position]) { position += 1 }
        }
        if position < buffer.count, buffer[position] == UInt8(ascii: "e") || buffer[position] == UInt8(ascii: "E") {
            position += 1
            if position < buffer.count, buffer[position] == UInt8(ascii: "+") || buffer[position] == UInt8(ascii: "-") {
                position += 1
            }
            guard position < buffer.count, isDigit(buffer[position]) else { throw error("invalid number exponent") }
            while position < buffer.count, isDigit(buffer[position]) { position += 1 }
        }
        return String(decoding: UnsafeBufferPointer(rebasing: buffer[start..<position]), as: UTF8.self)
    }

    private func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

    private mutating func parseString() throws -> String {
        position += 1  // opening quote
        let start = position
        // Fast path: no escapes. Eight bytes at a time while none is a quote, a backslash or a control
        // character (the SWAR zero-byte test), then byte by byte. The bytes' high bits are collected on
        // the way: an ASCII string (every EncString, id and date) needs no UTF-8 validation, and the
        // generic validating initializer cost a runtime metadata lookup per string (a tenth of a
        // `vaultsync get`'s time, docs/BENCHMARKS.md P7).
        let highs: UInt64 = 0x8080_8080_8080_8080
        var seen: UInt64 = 0
        if let base = buffer.baseAddress {
            let ones: UInt64 = 0x0101_0101_0101_0101
            while position + 8 <= buffer.count {
                let word = UnsafeRawPointer(base + position).loadUnaligned(as: UInt64.self)
                let quote = word ^ 0x2222_2222_2222_2222, backslash = word ^ 0x5C5C_5C5C_5C5C_5C5C
                let special = ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash) | ((word &- 0x20 &* ones) & ~word)
                if special & highs != 0 { break }
                seen |= word
                position += 8
            }
        }
        while position < buffer.count {
            let byte = buffer[position]
            if byte == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: buffer[start..<position])
                position += 1
                if seen & highs == 0 { return String(decoding: slice, as: UTF8.self) }  // ASCII: valid as it is
                guard let text = String(validating: slice, as: UTF8.self) else {
                    throw ModelError.invalidJSON(offset: start, reason: "invalid UTF-8 in a string")
                }
                return text
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw error("unescaped control character in a string") }
            seen |= UInt64(byte)
            position += 1
        }
        // Slow path with escapes.
        var bytes = Array(UnsafeBufferPointer(rebasing: buffer[start..<position]))
        while position < buffer.count {
            let byte = buffer[position]
            switch byte {
            case UInt8(ascii: "\""):
                position += 1
                guard let text = String(validating: bytes, as: UTF8.self) else {
                    throw ModelError.invalidJSON(offset: start, reason: "invalid UTF-8 in a string")
                }
                return text
            case UInt8(ascii: "\\"):
                position += 1
                guard position < buffer.count else { throw error("unexpected end of input in an escape") }
                let escaped = buffer[position]
                position += 1
                switch escaped {
                case UInt8(ascii: "\""): bytes.append(0x22)
                case UInt8(ascii: "\\"): bytes.append(0x5C)
                case UInt8(ascii: "/"): bytes.append(0x2F)
                case UInt8(ascii: "b"): bytes.append(0x08)
                case UInt8(ascii: "f"): bytes.append(0x0C)
                case UInt8(ascii: "n"): bytes.append(0x0A)
                case UInt8(ascii: "r"): bytes.append(0x0D)
                case UInt8(ascii: "t"): bytes.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try parseHex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard position + 1 < buffer.count, buffer[position] == UInt8(ascii: "\\"),
                              buffer[position + 1] == UInt8(ascii: "u") else {
                            throw error("lone high surrogate in a string")
                        }
                        position += 2
                        let low = try parseHex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw error("invalid low surrogate in a string") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00...0xDFFF).contains(scalar) {
                        throw error("lone low surrogate in a string")
                    }
                    bytes.append(contentsOf: String(Character(Unicode.Scalar(scalar)!)).utf8)
                default:
                    throw error("invalid escape '\\\(Unicode.Scalar(escaped))'")
                }
            default:
                if byte < 0x20 { throw error("unescaped control character in a string") }
                bytes.append(byte)
                position += 1
            }
        }
        throw error("unterminated string")
    }

    private mutating func parseHex4() throws -> UInt32 {
        guard position + 4 <= buffer.count else { throw error("truncated \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = buffer[position]
            let digit: UInt32
            switch byte {
            case 0x30...0x39: digit = UInt32(byte - 0x30)
            case 0x41...0x46: digit = UInt32(byte - 0x41 + 10)
            case 0x61...0x66: digit = UInt32(byte - 0x61 + 10)
            default: throw error("invalid hex digit in \\u escape")
            }
            value = value << 4 | digit
            position += 1
        }
        return value
    }
}

extension JSONValue {
    /// Compact JSON text (UTF-8), keys in their stored order.
    public func serialized() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(to: &out)
        return out
    }

    /// Compact JSON text as a string.
    public var jsonText: String { String(decoding: serialized(), as: UTF8.self) }

    func write(to out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let value): out.append(contentsOf: (value ? "true" : "false").utf8)
        case .number(let literal): out.append(contentsOf: literal.utf8)
        case .string(let text): JSONValue.writeString(text, to: &out)
        case .array(let values):
            out.append(UInt8(ascii: "["))
            for (index, value) in values.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                value.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            object.write(to: &out)
        }
    }

    /// Appends `text` as a JSON string (quoted, escaped): what `serialized()` writes for `.string`.
    public static func writeString(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { bytes in
            // Copy runs that need no escaping in one go (EncStrings and ids never do), looking at eight bytes
            // at a time while none of them needs it.
            var (runStart, index) = (0, 0)
            let raw = UnsafeRawBufferPointer(bytes)
            while index < bytes.count {
                if index + 8 <= bytes.count, !needsEscaping(raw.loadUnaligned(fromByteOffset: index, as: UInt64.self)) {
                    index += 8
                    continue
                }
                let byte = bytes[index]
                if byte < 0x20 || byte == 0x22 || byte == 0x5C {
                    out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
                    appendEscaped(byte, to: &out)
                    runStart = index + 1
                }
                index += 1
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart...]))
        }
        out.append(UInt8(ascii: "\""))
    }

    /// Whether any of eight bytes is a control character, `"` or `\\` (the bytes JSON text escapes). Exact: a
    /// byte is zero in `x ^ pattern` only where it equals the pattern's byte, and `(x - 0x01…) & ~x & 0x80…` is
    /// nonzero exactly when some byte of `x` is zero (a byte of 0x80 or more, such as UTF-8's, never counts
    /// as below 0x20: `~x` clears its top bit).
    @inline(__always)
    static func needsEscaping(_ word: UInt64) -> Bool {
        let ones: UInt64 = 0x0101_0101_0101_0101, highs: UInt64 = 0x8080_8080_8080_8080
        func hasZero(_ x: UInt64) -> Bool { (x &- ones) & ~x & highs != 0 }
        let control = (word &- ones &* 0x20) & ~word & highs != 0
        return control || hasZero(word ^ (ones &* 0x22)) || hasZero(word ^ (ones &* 0x5C))
    }

    private static func appendEscaped(_ byte: UInt8, to out: inout [UInt8]) {
        switch byte {
        case 0x22: out.append(contentsOf: [0x5C, 0x22])
        case 0x5C: out.append(contentsOf: [0x5C, 0x5C])
        case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
        case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
        case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
        default:
            let hex: [UInt8] = Array("0123456789abcdef".utf8)
            out.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
        }
    }
}

extension JSONObject {
    /// Compact JSON text (UTF-8).
    public func serialized() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(512)
        write(to: &out)
        return out
    }

    func write(to out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        for (index, entry) in entries.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            JSONValue.writeString(entry.key, to: &out)
            out.append(UInt8(ascii: ":"))
            entry.value.write(to: &out)
        }
        out.append(UInt8(ascii: "}"))
    }
}

/// What the duplicate-key check knows of a key before comparing it with another in full, made once per
/// key. The check's rule is Swift's equality of strings (canonical equivalence, the equality every lookup
/// of a key uses), so that "é" precomposed and "e" + a combining accent are one key; comparing every pair
/// of an object's keys that way, and reading their first and last bytes pair by pair, was a third of the
/// selective parse a list makes of each item (docs/BENCHMARKS.md, measured 2026-11-28).
struct KeyPrint {
    /// An ASCII key's length and bytes hashed (FNV-1a); 0 for any other key.
    let asciiHash: UInt64
    /// The first and last bytes (0 for an empty key).
    let first: UInt8
    let last: UInt8

    /// The print of a key's UTF-8 bytes.
    init<Bytes: RandomAccessCollection>(bytes: Bytes) where Bytes.Element == UInt8 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        var high: UInt8 = 0
        for byte in bytes {
            high |= byte
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
        }
        first = bytes.first ?? 0
        last = bytes.last ?? 0
        asciiHash = high < 0x80 ? (hash ^ UInt64(bytes.count)) | 1 : 0
    }

    /// Whether two keys can be equal: two ASCII keys only when their hashes match (an ASCII character
    /// never decomposes and nothing composes with it into another ASCII text, so ASCII keys are equal only
    /// byte for byte); otherwise unless they begin, or end, with different ASCII characters (an ASCII
    /// character is a starter that never decomposes, so texts that begin or end differently there are
    /// never equivalent; a non-ASCII key can still equal an ASCII one: U+212A KELVIN SIGN is "K").
    @inline(__always)
    func mayEqual(_ other: KeyPrint) -> Bool {
        if asciiHash != 0, other.asciiHash != 0 { return asciiHash == other.asciiHash }
        if first != other.first, first < 0x80, other.first < 0x80 { return false }
        if last != other.last, last < 0x80, other.last < 0x80 { return false }
        return true
    }
}
