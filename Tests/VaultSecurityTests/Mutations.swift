import Foundation
import PropertyBased
import VaultModels

/// One change to an input. All numbers come from shrinkable integer generators, so a failing case
/// shrinks to the fewest, smallest mutations that still fail.
struct Mutation: Sendable, CustomStringConvertible {
    enum Kind: Int, CaseIterable {
        // Byte level.
        case flipBit, setByte, truncate, duplicateRange, deleteRange, insertToken
        // Structure level (JSON inputs): the value at a node becomes something else.
        case wrongType, removeKey, hugeArray, deepNesting, duplicateKey
    }

    var kind: Kind
    var position: Int
    var length: Int
    var byte: UInt8

    var description: String { "\(kind)(at: \(position), length: \(length), byte: \(byte))" }

    /// Tokens that upset parsers: structure, escapes, lone surrogates, numbers out of range, separators.
    static let tokens: [String] = [
        "\"", "\\", "{", "}", "[", "]", ",", ":", "null", "true", "-", "1e999", "-0", "0.0000000000000000001",
        "99999999999999999999999", "\\ud800", "\\u0000", "\u{0}", "\u{7f}", "\u{FEFF}", "é", "🔐", "|", ".", "=", "2.", "7.",
        "\r\n", "<html>", "NaN", "Infinity", "2024-02-30T25:61:61Z", "0001-01-01T00:00:00Z",
    ]

    /// Applies the mutation; structure-level kinds need valid JSON and leave anything else unchanged.
    func apply(to input: [UInt8]) -> [UInt8] {
        var bytes = input
        let count = bytes.count
        switch kind {
        case .flipBit:
            guard count > 0 else { return bytes }
            bytes[position % count] ^= 1 << (byte % 8)
        case .setByte:
            guard count > 0 else { return bytes }
            bytes[position % count] = byte
        case .truncate:
            bytes.removeSubrange((position % (count + 1))...)
        case .duplicateRange:
            guard count > 0 else { return bytes }
            let start = position % count
            let end = min(count, start + max(1, length))
            bytes.insert(contentsOf: bytes[start..<end], at: end)
        case .deleteRange:
            guard count > 0 else { return bytes }
            let start = position % count
            bytes.removeSubrange(start..<min(count, start + max(1, length)))
        case .insertToken:
            bytes.insert(contentsOf: Array(Self.tokens[Int(byte) % Self.tokens.count].utf8), at: position % (count + 1))
        case .wrongType, .removeKey, .hugeArray, .deepNesting, .duplicateKey:
            guard let value = try? JSONParser.parse(bytes) else { return bytes }
            var index = position
            if kind == .duplicateKey {
                return Self.duplicatingKey(value, nodeIndex: &index) ?? bytes
            }
            let nodes = Self.nodeCount(value)
            index = position % nodes
            return Self.replacing(value, at: &index, with: replacement).serialized()
        }
        return bytes
    }

    /// What a structure-level mutation puts in place of a node.
    private func replacement(_ node: JSONValue) -> JSONValue? {
        switch kind {
        case .wrongType:
            let choices: [JSONValue] = [.null, .bool(true), .number("0"), .number("-1e400"), .number("1.5"), .string(""), .string("x"),
                                        .array([]), .object(JSONObject()), .string(String(repeating: "A", count: 20_000))]
            return choices[Int(byte) % choices.count]
        case .removeKey:
            guard case .object(var object) = node, !object.isEmpty else { return nil }
            let key = object.entries[Int(byte) % object.count].key
            object[key] = nil
            return .object(object)
        case .hugeArray:
            // Many copies of a scalar node, else many empty objects (each lacking every required field).
            // Moderate sizes keep the case rate up; the extreme sizes have their own tests.
            let small = Self.nodeCount(node) == 1 && node.serialized().count <= 100
            let element: JSONValue = small ? node : length % 2 == 0 ? .object(JSONObject()) : .null
            return .array(Array(repeating: element, count: 500 * (1 + Int(byte) % 10)))
        case .deepNesting:
            var nested = node
            for level in 0..<(100 + length * 5) { nested = level % 2 == 0 ? .array([nested]) : .object(["k": nested]) }
            return nested
        default:
            return nil
        }
    }

    static func nodeCount(_ value: JSONValue) -> Int {
        switch value {
        case .array(let values): return 1 + values.reduce(0) { $0 + nodeCount($1) }
        case .object(let object): return 1 + object.entries.reduce(0) { $0 + nodeCount($1.value) }
        default: return 1
        }
    }

    /// The value with the node at pre-order `index` replaced (counting down `index` while walking).
    static func replacing(_ value: JSONValue, at index: inout Int, with replacement: (JSONValue) -> JSONValue?) -> JSONValue {
        if index == 0 {
            index = -1
            return replacement(value) ?? value
        }
        index -= 1
        switch value {
        case .array(let values):
            return .array(values.map { index >= 0 ? replacing($0, at: &index, with: replacement) : $0 })
        case .object(let object):
            var result = JSONObject()
            for entry in object.entries {
                result[entry.key] = index >= 0 ? replacing(entry.value, at: &index, with: replacement) : entry.value
            }
            return .object(result)
        default:
            return value
        }
    }

    /// The text with one object's first key written twice (the parser must refuse duplicates).
    static func duplicatingKey(_ value: JSONValue, nodeIndex: inout Int) -> [UInt8]? {
        var objects: [JSONObject] = []
        func collect(_ value: JSONValue) {
            switch value {
            case .array(let values): values.forEach(collect)
            case .object(let object):
                objects.append(object)
                object.entries.forEach { collect($0.value) }
            default: break
            }
        }
        collect(value)
        let candidates = objects.filter { !$0.isEmpty }
        guard !candidates.isEmpty else { return nil }
        let target = candidates[nodeIndex % candidates.count]
        let entry = target.entries[0]
        let original = target.serialized()
        var doubled = Array(original.dropLast())
        doubled.append(UInt8(ascii: ","))
        doubled.append(contentsOf: JSONObject(entries: [entry]).serialized().dropFirst().dropLast())
        doubled.append(UInt8(ascii: "}"))
        let text = value.serialized()
        guard let range = text.firstRange(of: original) else { return nil }
        var result = text
        result.replaceSubrange(range, with: doubled)
        return result
    }
}

/// Up to `maximum` random mutations (shrinkable).
func mutationsGenerator(maximum: Int = 4, structural: Bool = true) -> Generator<[Mutation], some SendableSequenceType> {
    let kinds = structural ? Mutation.Kind.allCases.count - 1 : Mutation.Kind.insertToken.rawValue
    return zip(Gen.int(in: 0...kinds), Gen.int(in: 0...1_000_000), Gen.int(in: 0...64), Gen.uint8(in: 0...255))
        .map { kind, position, length, byte in
            Mutation(kind: Mutation.Kind(rawValue: kind)!, position: position, length: length, byte: byte)
        }
        .array(of: 1...maximum)
}

/// A seed input (by index into `corpus`) with mutations applied in order.
struct MutatedInput: Sendable, CustomStringConvertible {
    let seedIndex: Int
    let mutations: [Mutation]
    let bytes: [UInt8]

    var text: String { String(decoding: bytes, as: UTF8.self) }

    var description: String {
        let preview = bytes.count > 300 ? String(decoding: bytes.prefix(300), as: UTF8.self) + "…(\(bytes.count) bytes)" : text
        return "seed #\(seedIndex) with \(mutations): \(preview.debugDescription)"
    }
}

/// Mutated inputs built from a corpus of valid ones.
func mutatedInputs(_ corpus: [[UInt8]], maximum: Int = 4, structural: Bool = true) -> Generator<MutatedInput, some SendableSequenceType> {
    zip(Gen.int(in: 0...(corpus.count - 1)), mutationsGenerator(maximum: maximum, structural: structural))
        .map { index, mutations in
            MutatedInput(seedIndex: index, mutations: mutations,
                         bytes: mutations.reduce(corpus[index]) { $1.apply(to: $0) })
        }
}
