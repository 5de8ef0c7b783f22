#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import VaultCrypto

/// A type that reads itself from a JSON object and writes itself back, keeping unknown keys.
public protocol JSONObjectConvertible: Sendable, Equatable {
    /// Reads the value; `path` names the object in error messages.
    init(json: JSONObject, path: String) throws
    /// Writes the value's keys, modelled keys first (camelCase), then the unknown keys it was read with.
    func write(into writer: inout JSONWriter)
}

extension JSONObjectConvertible {
    /// Reads the value from JSON text.
    public init<Bytes: Collection>(jsonBytes: Bytes, path: String = "$") throws where Bytes.Element == UInt8 {
        try self.init(json: JSONParser.parseObject(jsonBytes), path: path)
    }

    /// The value as a JSON object.
    public func jsonObject() -> JSONObject {
        var writer = JSONWriter()
        write(into: &writer)
        return writer.object
    }

    /// Compact JSON text (the same as `jsonObject().serialized()`, written without the tree).
    public func jsonBytes() -> [UInt8] { JSONWriter.text(of: self) }

    /// The value as a ``JSONValue``.
    public var jsonValue: JSONValue { .object(jsonObject()) }
}

/// Reads the known keys of one JSON object with typed errors, and hands back the unknown rest.
///
/// Keys match first-letter case-insensitively (spec §2.0). Every read marks its key as consumed;
/// ``unknown`` is what no read asked for, which models keep so that a newer server's fields survive
/// decode → edit → encode (seed 001 CS-2).
public struct JSONReader {
    let object: JSONObject
    let path: String
    private var consumed: [Bool]

    public init(_ object: JSONObject, path: String) {
        self.object = object
        self.path = path
        consumed = Array(repeating: false, count: object.count)
    }

    func fieldPath(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    /// The raw value (absent or null → `nil`), marking the key consumed.
    public mutating func value(_ key: String) -> JSONValue? {
        guard let index = object.index(of: key) else { return nil }
        consumed[index] = true
        let value = object.entries[index].value
        return value.isNull ? nil : value
    }

    /// The entries nobody read, in their original order.
    ///
    /// Keys match with the first letter's case flipped, so an object holding both spellings of one
    /// key ("id" and "Id") is ambiguous: a read takes the exact spelling, and writing the value back
    /// could keep only one of the two. Such an object is refused, as a repeated key is.
    public var unknown: JSONObject {
        get throws {
            var rest = JSONObject()
            // A large object's spellings are looked up hashed: a hostile object of many unknown keys must
            // not cost a comparison of every pair.
            let unread = consumed.reduce(0) { $1 ? $0 : $0 + 1 }
            let spellings = unread > KeySpellings.linearLimit ? KeySpellings(object.entries.lazy.map(\.key)) : nil
            for (index, entry) in object.entries.enumerated() where !consumed[index] {
                let hasTwin = if let spellings {
                    spellings.containsTwin(of: entry.key)
                } else {
                    object.entries.contains { JSONObject.equalWithFirstLetterFlipped($0.key, entry.key) }
                }
                if hasTwin {
                    throw ModelError.invalidValue(
                        path: fieldPath(entry.key),
                        reason: "the key is repeated with its first letter's case changed")
                }
                rest.appendNew(entry.key, entry.value)
            }
            return rest
        }
    }

    private func wrongType(_ key: String, _ expected: String, _ found: JSONValue) -> ModelError {
        .wrongType(path: fieldPath(key), expected: expected, found: found.kindName)
    }

    public mutating func string(_ key: String) throws -> String? {
        guard let value = value(key) else { return nil }
        guard case .string(let text) = value else { throw wrongType(key, "a string", value) }
        return text
    }

    public mutating func requiredString(_ key: String) throws -> String {
        guard let text = try string(key) else { throw ModelError.missingField(path: fieldPath(key)) }
        return text
    }

    /// A UUID-like id, lowercased; an empty string reads as `nil` (spec: `folderId` "" = null).
    public mutating func id(_ key: String) throws -> String? {
        guard let text = try string(key), !text.isEmpty else { return nil }
        guard text.utf8.count <= 64, text.utf8.allSatisfy({ $0 == 0x2D || ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) }) else {
            throw ModelError.invalidValue(path: fieldPath(key), reason: "not an id")
        }
        return text.lowercased()
    }

    public mutating func int(_ key: String) throws -> Int? {
        guard let value = value(key) else { return nil }
        guard case .number(let literal) = value else { throw wrongType(key, "an integer", value) }
        guard let int = Int(literal) else { throw ModelError.invalidValue(path: fieldPath(key), reason: "not an integer: \(literal.prefix(20))") }
        return int
    }

    public mutating func requiredInt(_ key: String) throws -> Int {
        guard let int = try int(key) else { throw ModelError.missingField(path: fieldPath(key)) }
        return int
    }

    public mutating func bool(_ key: String) throws -> Bool? {
        guard let value = value(key) else { return nil }
        guard case .bool(let flag) = value else { throw wrongType(key, "a boolean", value) }
        return flag
    }

    public mutating func requiredBool(_ key: String) throws -> Bool {
        guard let flag = try bool(key) else { throw ModelError.missingField(path: fieldPath(key)) }
        return flag
    }

    /// A string-backed enum's case; an unknown raw value is an invalid value.
    public mutating func requiredRaw<T: RawRepresentable>(_ key: String, as type: T.Type = T.self) throws -> T where T.RawValue == String {
        guard let text = try string(key) else { throw ModelError.missingField(path: fieldPath(key)) }
        guard let value = T(rawValue: text) else {
            throw ModelError.invalidValue(path: fieldPath(key), reason: "unknown value '\(text.prefix(40))'")
        }
        return value
    }

    public mutating func encString(_ key: String) throws -> EncString? {
        guard let text = try string(key) else { return nil }
        do {
            return try EncString(text)
        } catch let error as CryptoError {
            throw ModelError.invalidValue(path: fieldPath(key), reason: "not a valid encrypted string (\(error.description))")
        }
    }

    public mutating func requiredEncString(_ key: String) throws -> EncString {
        guard let value = try encString(key) else { throw ModelError.missingField(path: fieldPath(key)) }
        return value
    }

    public mutating func date(_ key: String) throws -> WireDate? {
        guard let text = try string(key) else { return nil }
        guard let date = WireDate(iso8601: text) else {
            throw ModelError.invalidValue(path: fieldPath(key), reason: "not an ISO-8601 date: \(text.prefix(40))")
        }
        return date
    }

    public mutating func requiredDate(_ key: String) throws -> WireDate {
        guard let date = try date(key) else { throw ModelError.missingField(path: fieldPath(key)) }
        return date
    }

    public mutating func object<T: JSONObjectConvertible>(_ key: String, as type: T.Type = T.self) throws -> T? {
        guard let value = value(key) else { return nil }
        guard case .object(let object) = value else { throw wrongType(key, "an object", value) }
        return try T(json: object, path: fieldPath(key))
    }

    public mutating func array<T: JSONObjectConvertible>(_ key: String, of type: T.Type = T.self) throws -> [T]? {
        guard let value = value(key) else { return nil }
        guard case .array(let values) = value else { throw wrongType(key, "an array", value) }
        var result: [T] = []
        result.reserveCapacity(values.count)
        for (index, element) in values.enumerated() {
            let elementPath = "\(fieldPath(key))[\(index)]"
            guard case .object(let object) = element else {
                throw ModelError.wrongType(path: elementPath, expected: "an object", found: element.kindName)
            }
            result.append(try T(json: object, path: elementPath))
        }
        return result
    }

    /// An array of texts, as written.
    public mutating func stringArray(_ key: String) throws -> [String]? {
        guard let value = value(key) else { return nil }
        guard case .array(let values) = value else { throw wrongType(key, "an array", value) }
        return try values.enumerated().map { index, element in
            guard case .string(let text) = element else {
                throw ModelError.wrongType(path: "\(fieldPath(key))[\(index)]", expected: "a string", found: element.kindName)
            }
            return text
        }
    }

    /// An array of ids, lowercased (GUIDs compare case-insensitively on the wire).
    public mutating func idArray(_ key: String) throws -> [String]? {
        try stringArray(key)?.map { $0.lowercased() }
    }
}

/// Writes modelled keys (camelCase, in order, nulls included as the official server does) and then
/// the unknown keys a model was read with.
///
/// It writes either a tree (``object``, for ``JSONObjectConvertible/jsonObject()``) or compact text
/// straight out (``JSONObjectConvertible/jsonBytes()``), from the same `write(into:)` of each model: the
/// text is byte for byte the tree's `serialized()` (`JSONWriterTests`), without building the tree first
/// (storing an item or sealing a queue record spent about as long on the tree as on writing it out).
public struct JSONWriter {
    public private(set) var object = JSONObject()
    /// Text mode: the text written so far.
    private var text: [UInt8] = []
    private let writesText: Bool
    /// Text mode: the keys written, the objects around the current one first (one array for every level,
    /// so that no object allocates its own), for ``append(unknown:)`` (modelled keys win).
    private var keys: [String] = []
    /// Text mode: where the current object's keys begin in ``keys``.
    private var level = 0

    /// A writer of a tree.
    public init() {
        writesText = false
    }

    /// A writer of compact text.
    init(textCapacity: Int) {
        writesText = true
        text.reserveCapacity(textCapacity)
    }

    /// The compact text of `value`.
    static func text<T: JSONObjectConvertible>(of value: T, capacity: Int = 2048) -> [UInt8] {
        var writer = JSONWriter(textCapacity: capacity)
        writer.writeObject(value)
        return writer.text
    }

    /// Text mode: `{`, the value's keys, `}` (the keys of the object around it kept aside meanwhile).
    private mutating func writeObject<T: JSONObjectConvertible>(_ value: T) {
        let outer = level
        level = keys.count
        text.append(UInt8(ascii: "{"))
        value.write(into: &self)
        text.append(UInt8(ascii: "}"))
        keys.removeSubrange(level...)
        level = outer
    }

    /// Text mode: a key of the object being written, after a comma unless it is the first.
    private mutating func writeKey(_ key: String) {
        if keys.count > level { text.append(UInt8(ascii: ",")) }
        keys.append(key)
        JSONValue.writeString(key, to: &text)
        text.append(UInt8(ascii: ":"))
    }

    public mutating func put(_ key: String, _ value: JSONValue?) {
        guard writesText else {
            object.appendNew(key, value ?? .null)
            return
        }
        writeKey(key)
        (value ?? .null).write(to: &text)
    }

    public mutating func put(_ key: String, _ value: String?) { put(key, value.map(JSONValue.string)) }
    public mutating func put(_ key: String, _ value: Int?) { put(key, value.map(JSONValue.int)) }
    public mutating func put(_ key: String, _ value: Bool?) { put(key, value.map(JSONValue.bool)) }
    public mutating func put(_ key: String, _ value: EncString?) { put(key, value.map { JSONValue.string($0.serialized) }) }
    public mutating func put(_ key: String, _ value: WireDate?) { put(key, value.map { JSONValue.string($0.iso8601) }) }

    public mutating func put<T: JSONObjectConvertible>(_ key: String, _ value: T?) {
        guard writesText else { return put(key, value.map { JSONValue.object($0.jsonObject()) }) }
        guard let value else { return put(key, JSONValue.null) }
        writeKey(key)
        writeObject(value)
    }

    public mutating func put<T: JSONObjectConvertible>(_ key: String, _ values: [T]?) {
        guard writesText else { return put(key, values.map { JSONValue.array($0.map { .object($0.jsonObject()) }) }) }
        guard let values else { return put(key, JSONValue.null) }
        writeKey(key)
        text.append(UInt8(ascii: "["))
        for (index, value) in values.enumerated() {
            if index > 0 { text.append(UInt8(ascii: ",")) }
            writeObject(value)
        }
        text.append(UInt8(ascii: "]"))
    }

    public mutating func put(_ key: String, _ values: [String]?) { put(key, values.map { JSONValue.array($0.map(JSONValue.string)) }) }

    /// Puts the key only when the value is present (for keys whose absence differs from null).
    public mutating func putIfPresent(_ key: String, _ value: JSONValue?) {
        if let value { put(key, value) }
    }

    public mutating func putIfPresent(_ key: String, _ value: String?) { putIfPresent(key, value.map(JSONValue.string)) }
    public mutating func putIfPresent(_ key: String, _ value: Bool?) { putIfPresent(key, value.map(JSONValue.bool)) }
    public mutating func putIfPresent(_ key: String, _ value: WireDate?) { putIfPresent(key, value.map { JSONValue.string($0.iso8601) }) }
    public mutating func putIfPresent<T: JSONObjectConvertible>(_ key: String, _ value: T?) {
        if let value { put(key, value) }
    }
    public mutating func putIfPresent(_ key: String, _ values: [String]?) { putIfPresent(key, values.map { JSONValue.array($0.map(JSONValue.string)) }) }

    /// Appends the unknown keys a model was read with (modelled keys win: a key already written, exactly or
    /// with its first letter's case flipped, is left out, as ``JSONObject/merge(missingFrom:)`` does).
    public mutating func append(unknown: JSONObject) {
        guard writesText else { return object.merge(missingFrom: unknown) }
        if unknown.count > KeySpellings.linearLimit {
            var present = KeySpellings(keys[level...])
            for entry in unknown.entries where !present.contains(entry.key) {
                present.insert(entry.key)
                writeKey(entry.key)
                entry.value.write(to: &text)
            }
            return
        }
        for entry in unknown.entries
        where !keys[level...].contains(where: { $0 == entry.key || JSONObject.equalWithFirstLetterFlipped($0, entry.key) }) {
            writeKey(entry.key)
            entry.value.write(to: &text)
        }
    }
}
