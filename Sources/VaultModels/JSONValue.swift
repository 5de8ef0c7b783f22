#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A JSON value that keeps everything it was given.
///
/// Numbers keep their literal text (a 64-bit id or a millisecond timestamp survives unchanged) and
/// objects keep their key order, so a value decoded from a newer server encodes back to the same
/// meaning, including the parts VaultSync does not model.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    /// A number, as its JSON literal.
    case number(String)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// A number value from an integer.
    public static func int(_ value: Int) -> JSONValue { .number(String(value)) }

    /// A short name of the value's kind, for error messages.
    public var kindName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .number: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }
}

/// A JSON object: ordered keys, looked up the way Bitwarden clients do.
///
/// ``subscript(_:)`` finds `key` exactly, or else with its first letter's case flipped (`Key` for
/// `key`), as `BaseResponse.getResponseProperty` in the official clients and the SDK's serde aliases
/// do (spec §2.0). Setting a key replaces whichever spelling is present.
public struct JSONObject: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    /// One key and its value.
    public struct Entry: Sendable, Hashable {
        public var key: String
        public var value: JSONValue

        public init(key: String, value: JSONValue) {
            self.key = key
            self.value = value
        }
    }

    /// The entries in their original order.
    public private(set) var entries: [Entry]

    public init() { entries = [] }

    public init(entries: [Entry]) { self.entries = entries }

    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        entries = elements.map { Entry(key: $0.0, value: $0.1) }
    }

    public var count: Int { entries.count }
    public var isEmpty: Bool { entries.isEmpty }

    public func makeIterator() -> IndexingIterator<[Entry]> { entries.makeIterator() }

    /// The index of `key`, matched exactly or with the first letter's case flipped.
    public func index(of key: String) -> Int? {
        if let exact = entries.firstIndex(where: { $0.key == key }) { return exact }
        // A miss is the common case for optional fields: compare in place instead of building the
        // flipped spelling (an allocation per lookup).
        return entries.firstIndex(where: { JSONObject.equalWithFirstLetterFlipped($0.key, key) })
    }

    /// Whether `a` is `b` with its first letter's ASCII case flipped ("Key" and "key").
    static func equalWithFirstLetterFlipped(_ a: String, _ b: String) -> Bool {
        let (left, right) = (a.utf8, b.utf8)
        guard left.count == right.count, let first = left.first, let other = right.first,
              first ^ 0x20 == other, (0x61...0x7A).contains(first | 0x20) else { return false }
        return left.dropFirst().elementsEqual(right.dropFirst())
    }

    /// The value for `key` (first-letter case-insensitive), `nil` when absent.
    public subscript(_ key: String) -> JSONValue? {
        get { index(of: key).map { entries[$0].value } }
        set {
            if let index = index(of: key) {
                if let newValue {
                    entries[index] = Entry(key: key, value: newValue)
                } else {
                    entries.remove(at: index)
                }
            } else if let newValue {
                entries.append(Entry(key: key, value: newValue))
            }
        }
    }

    /// Appends without looking for an existing key (the caller knows it is new).
    mutating func appendNew(_ key: String, _ value: JSONValue) {
        entries.append(Entry(key: key, value: value))
    }

    /// Adds every entry of `other` whose key is not present yet.
    public mutating func merge(missingFrom other: JSONObject) {
        guard other.count > KeySpellings.linearLimit else {
            for entry in other.entries where index(of: entry.key) == nil {
                entries.append(entry)
            }
            return
        }
        var present = KeySpellings(entries.lazy.map(\.key))
        for entry in other.entries where !present.contains(entry.key) {
            present.insert(entry.key)
            entries.append(entry)
        }
    }

    /// The key's bytes with its first letter's ASCII case flipped; `nil` when it does not begin with a letter.
    static func firstLetterFlipped(_ key: String) -> [UInt8]? {
        var bytes = Array(key.utf8)
        guard let first = bytes.first, (0x61...0x7A).contains(first | 0x20) else { return nil }
        bytes[0] = first ^ 0x20
        return bytes
    }

    /// `key` with its first character's case flipped ("Key" ⇄ "key").
    public static func flipFirstLetter(_ key: String) -> String {
        guard let first = key.unicodeScalars.first else { return key }
        let value = first.value
        let flipped: UInt32
        switch value {
        case 0x41...0x5A: flipped = value + 0x20
        case 0x61...0x7A: flipped = value - 0x20
        default: return key
        }
        var scalars = String.UnicodeScalarView()
        scalars.append(Unicode.Scalar(flipped)!)
        scalars.append(contentsOf: key.unicodeScalars.dropFirst())
        return String(scalars)
    }

    /// `key` with a lowercase first letter (the camelCase spelling).
    public static func camelCase(_ key: String) -> String {
        guard let first = key.utf8.first, first >= 0x41, first <= 0x5A else { return key }
        return flipFirstLetter(key)
    }
}

extension JSONValue {
    /// The string, if this is a string.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The object, if this is an object.
    public var objectValue: JSONObject? {
        if case .object(let value) = self { return value }
        return nil
    }

    /// The array, if this is an array.
    public var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    /// The boolean, if this is a boolean.
    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// The integer, if this is a number literal that is an integer in range.
    public var intValue: Int? {
        if case .number(let literal) = self { return Int(literal) }
        return nil
    }

    /// Whether this is JSON `null`.
    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }
}

extension JSONValue: Codable {
    /// Decodes through `Decoder` (for interoperability; the hot paths use ``JSONParser``).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .number(String(value))
        } else if let value = try? container.decode(Double.self) {
            self = .number(String(value))
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            let dictionary = try container.decode([String: JSONValue].self)
            self = .object(JSONObject(entries: dictionary.sorted { $0.key < $1.key }.map { .init(key: $0.key, value: $0.value) }))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let literal):
            if let int = Int64(literal) { try container.encode(int) } else { try container.encode(Double(literal) ?? 0) }
        case .string(let value): try container.encode(value)
        case .array(let values): try container.encode(values)
        case .object(let object):
            var keyed = encoder.container(keyedBy: AnyCodingKey.self)
            for entry in object.entries {
                try keyed.encode(entry.value, forKey: AnyCodingKey(entry.key))
            }
        }
    }
}

struct AnyCodingKey: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(_ string: String) { stringValue = string }
    init?(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { return nil }
}

/// The keys of an object, looked up as ``JSONObject/index(of:)`` matches them (exactly, or with the first
/// letter's ASCII case flipped), but hashed: for many unknown keys (a hostile object of many keys must not
/// cost a comparison of every pair). A model's own keys are few, so up to ``linearLimit`` unknown keys are
/// compared one by one, as before: an item of a real server carries a few (building the hash for those
/// would cost more than the comparisons).
struct KeySpellings {
    /// Up to this many unknown keys, keys are compared one by one.
    static let linearLimit = 32
    private var exact: Set<String> = []
    private var spelled: Set<[UInt8]> = []

    init<Keys: Sequence>(_ keys: Keys) where Keys.Element == String {
        for key in keys { insert(key) }
    }

    mutating func insert(_ key: String) {
        exact.insert(key)
        spelled.insert(Array(key.utf8))
    }

    /// Whether `key` is present, exactly or with its first letter's case flipped.
    func contains(_ key: String) -> Bool { exact.contains(key) || containsTwin(of: key) }

    /// Whether `key` with its first letter's case flipped is present.
    func containsTwin(of key: String) -> Bool {
        JSONObject.firstLetterFlipped(key).map(spelled.contains) ?? false
    }
}
