import Foundation
import Testing
import VaultCrypto
@testable import VaultModels

@Suite("JSON parser and serializer")
struct JSONParserTests {
    @Test("valid documents parse and re-serialize to the same value", arguments: [
        #"{"a":1,"b":[true,false,null],"c":{"d":"e"}}"#,
        #"[-0,0.5,1e10,-2.5E-3,12345678901234567890123]"#,
        #""\u00e9\ud83d\udd10\n\t\"\\/""#,
        #"  {"spaces" :  [ 1 , 2 ] }  "#,
        #"{}"#, #"[]"#, #""""#,
    ])
    func valid(text: String) throws {
        let value = try JSONParser.parse(text)
        #expect(try JSONParser.parse(value.serialized()) == value)
    }

    @Test("numbers keep their literal text")
    func numberLiterals() throws {
        #expect(try JSONParser.parse("[1706637336150, 1.50, 12345678901234567890]") ==
            .array([.number("1706637336150"), .number("1.50"), .number("12345678901234567890")]))
    }

    @Test("escapes decode to the right characters")
    func escapes() throws {
        #expect(try JSONParser.parse(#""a\u00e9\ud83d\udd10\n""#) == .string("aé🔐\n"))
        #expect(JSONValue.string("q\"\\\u{1}").jsonText == #""q\"\\\u0001""#)
        // Runs between escapes, multi-byte text and an escape at either end are copied intact.
        let text = "\nab\"cd\te\u{1f}é🔐 2.x|\\"
        #expect(JSONValue.string(text).jsonText == #""\nab\"cd\te\u001fé🔐 2.x|\\""#)
        #expect(try JSONParser.parse(JSONValue.string(text).jsonText) == .string(text))
    }

    @Test("escapes and control characters are found at every offset (the parser scans 8 bytes at a time)")
    func everyOffset() throws {
        for length in 0..<24 {
            let plain = String(repeating: "a", count: length)
            #expect(try JSONParser.parse("\"\(plain)\"") == .string(plain))
            for offset in 0...length {
                let (head, tail) = (String(plain.prefix(offset)), String(plain.dropFirst(offset)))
                #expect(try JSONParser.parse("\"\(head)\\\"\(tail)\"") == .string(head + "\"" + tail))
                #expect(try JSONParser.parse("\"\(head)\\\\\(tail)\"") == .string(head + "\\" + tail))
                #expect(try JSONParser.parse("\"\(head)é🔐\(tail)\"") == .string(head + "é🔐" + tail))
                #expect(throws: ModelError.self) { try JSONParser.parse("\"\(head)\u{1F}\(tail)\"") }
                #expect(throws: ModelError.self) { try JSONParser.parse("\"\(head)\u{0}\(tail)\"") }
                #expect(throws: ModelError.self) { try JSONParser.parse("\"\(head)\(tail)") }
            }
        }
    }

    @Test("invalid documents are refused with an offset", arguments: [
        "", "{", "[1,]", #"{"a":1,}"#, #"{"a" 1}"#, "01", "1.", "-", "tru", "nul", #""abc"#, "[1 2]",
        #"{"a":1,"a":2}"#, #""\ud83d""#, #""\x""#, "\"\u{1}\"", "{} {}", "// comment", "NaN", "[1e]",
    ])
    func invalid(text: String) {
        #expect {
            try JSONParser.parse(text)
        } throws: { error in
            guard case ModelError.invalidJSON(let offset, let reason) = error else { return false }
            return offset >= 0 && !reason.isEmpty
        }
    }

    @Test("invalid UTF-8 inside a string is refused")
    func invalidUTF8() {
        #expect(throws: ModelError.self) { try JSONParser.parse([0x22, 0xFF, 0xFE, 0x22]) }
    }

    @Test("invalid UTF-8 is refused at every offset after ASCII of any length (all-ASCII strings skip the validation)")
    func invalidUTF8EveryOffset() throws {
        for length in 0..<24 {
            for offset in 0...length {
                var bytes: [UInt8] = [0x22] + Array(repeating: UInt8(ascii: "a"), count: length) + [0x22]
                bytes.insert(0xFF, at: 1 + offset)
                #expect(throws: ModelError.self) { try JSONParser.parse(bytes) }
                bytes[1 + offset] = 0x7F  // DEL: ASCII, allowed unescaped
                #expect(try JSONParser.parse(bytes) == .string(String(repeating: "a", count: offset) + "\u{7F}" + String(repeating: "a", count: length - offset)))
            }
        }
    }

    @Test("deep nesting is refused instead of exhausting the stack")
    func depth() throws {
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(throws: ModelError.self) { try JSONParser.parse(deep) }
        let ok = String(repeating: "[", count: 200) + String(repeating: "]", count: 200)
        #expect(throws: Never.self) { try JSONParser.parse(ok) }
    }

    @Test("duplicate keys in large objects are found without quadratic work")
    func largeObjects() throws {
        let keys = (0..<20_000).map { "\"k\($0)\":\($0)" }
        let object = try JSONParser.parseObject(Array(("{" + keys.joined(separator: ",") + "}").utf8))
        #expect(object.count == 20_000)
        #expect(throws: ModelError.self) { try JSONParser.parse("{" + keys.joined(separator: ",") + ",\"k5\":1}") }
    }

    @Test("duplicate keys in small objects: the same text, or canonically equivalent text (what every key lookup treats as equal)")
    func smallObjectDuplicates() throws {
        let duplicates: [(String, String)] = [
            ("name", "name"), ("a", "a"), ("", ""),
            ("caf\u{E9}", "cafe\u{301}"),          // é precomposed, and e + combining acute: equal to Swift
            ("\u{E9}t\u{E9}", "e\u{301}te\u{301}"),  // differs in the first and the last byte, both non-ASCII
            ("x\u{1E0B}\u{323}", "x\u{1E0D}\u{307}"),  // combining marks in another order
            ("K", "\u{212A}"), ("sK", "s\u{212A}"),     // an ASCII key and the KELVIN SIGN, which is "K"
            (";", "\u{37E}"),                            // GREEK QUESTION MARK is ";"
            ("\u{C5}", "\u{212B}"),                      // ANGSTROM SIGN is Å
        ]
        let distinct: [(String, String)] = [("name", "notes"), ("name", "nome"), ("creationDate", "revisionDate"), ("ab", "abc"), ("a", "A"),
                                            ("caf\u{E9}", "cafe"), ("K", "\u{212A}x"), ("", "\u{E9}")]
        for (first, second) in duplicates {
            #expect(throws: ModelError.self, "\(first) / \(second)") { try JSONParser.parse(#"{"\#(first)":1,"b":2,"\#(second)":3}"#) }
            #expect(throws: ModelError.self) {
                try JSONParser.parseObject(Array(#"{"\#(first)":1,"\#(second)":3}"#.utf8), keeping: CipherWire.summaryFields)
            }
        }
        for (first, second) in distinct {
            #expect(try JSONParser.parseObject(Array(#"{"\#(first)":1,"\#(second)":3}"#.utf8)).count == 2)
        }
    }

    @Test("the duplicate-key check agrees with Swift's equality of strings, on small objects and large, selective or not")
    func duplicatesAsSwiftSeesThem() throws {
        // ASCII keys, keys that are equal to Swift in other bytes (precomposed and decomposed, KELVIN SIGN and
        // "K", GREEK QUESTION MARK and ";"), and keys that differ in one byte in the middle.
        let pool = ["a", "b", "K", "\u{212A}", "caf\u{E9}", "cafe\u{301}", "name", "nome", "nmae", ";", "\u{37E}", "", "ab", "ba",
                    "\u{C5}", "\u{212B}", "A\u{30A}", "x\u{1E0B}\u{323}", "x\u{1E0D}\u{307}", "key", "login", "Login"]
        var random = SplitMix64(seed: 2026_11_28)
        for round in 0..<3_000 {
            let count = round % 10 == 0 ? 30 + Int(random.next() % 10) : 1 + Int(random.next() % 8)
            // Large objects take distinct filler keys besides a few from the pool (the hashed path past 32 keys).
            let keys = (0..<count).map { index in count > 16 && index % 4 != 0 ? "filler\(index)" : pool[Int(random.next() % UInt64(pool.count))] }
            let text = "{" + keys.enumerated().map { "\"\($0.element)\":\($0.offset)" }.joined(separator: ",") + "}"
            let repeated = Set(keys).count < keys.count
            let bytes = Array(text.utf8)
            if repeated {
                #expect(throws: ModelError.self, "\(keys)") { try JSONParser.parseObject(bytes) }
                #expect(throws: ModelError.self, "\(keys)") { try JSONParser.parseObject(bytes, keeping: CipherWire.summaryFields) }
            } else {
                #expect(try JSONParser.parseObject(bytes).count == keys.count, "\(keys)")
                _ = try JSONParser.parseObject(bytes, keeping: CipherWire.summaryFields)
            }
        }
    }

    @Test("a streamed array's elements reach the sink in order and are not kept; the rest parses as before")
    func streamedArray() throws {
        var random = SplitMix64(seed: 2026_11_26)
        for round in 0..<200 {
            let elements = (0..<Int(random.next() % 6)).map { index -> String in
                ["{\"id\":\(index),\"n\":{\"ciphers\":[1]}}", "[\(index),\"]\"]", "\"s\\\"\(index)\"", "\(index)", "null"][Int(random.next() % 5)]
            }
            let key = round % 2 == 0 ? "ciphers" : "Ciphers"
            let text = "{\"profile\":{\"ciphers\":[7]},\"\(key)\": [ \(elements.joined(separator: " , ")) ] ,\"folders\":[{\"a\":[]}]}"
            var seen: [(String, Int, JSONValue)] = []
            let object = try JSONParser.parseObject(Array(text.utf8), streaming: ["ciphers"]) { key, index, value in seen.append((key, index, value)) }
            let whole = try JSONParser.parseObject(Array(text.utf8))
            #expect(seen.map(\.1) == Array(0..<elements.count))
            #expect(seen.map(\.2) == whole[key]?.arrayValue)
            #expect(seen.allSatisfy { $0.0 == key })
            #expect(object[key] == .array([]), "nothing kept under the streamed key")
            #expect(object["profile"] == whole["profile"] && object["folders"] == whole["folders"], "nested keys of that name are not streamed")
            // Over caller-held memory, each element also comes with the offset just past it.
            let bytes = Array(text.utf8)
            var ends: [Int] = []
            _ = try bytes.withUnsafeBufferPointer { buffer in
                try JSONParser.parseObject(buffer: buffer, streaming: ["ciphers"]) { _, _, _, end in ends.append(end) }
            }
            var start = try #require(text.range(of: "\"\(key)\": [ ")).upperBound.utf16Offset(in: text)
            var expected: [Int] = []
            for element in elements {
                expected.append(start + element.utf8.count)
                start += element.utf8.count + 3  // " , "
            }
            #expect(ends == expected)
        }
        // Not an array there: parsed as any value. Errors after streamed elements still throw.
        #expect(try JSONParser.parseObject(Array(#"{"ciphers":{"a":1}}"#.utf8), streaming: ["ciphers"]) { _, _, _ in Issue.record("no array") }["ciphers"]?.objectValue != nil)
        var handed = 0
        #expect(throws: ModelError.self) {
            try JSONParser.parseObject(Array(#"{"ciphers":[1,2,3],"x":tru}"#.utf8), streaming: ["ciphers"]) { _, _, _ in handed += 1 }
        }
        #expect(handed == 3)
        #expect(throws: ModelError.self) { try JSONParser.parseObject(Array(#"[{"ciphers":[1]}]"#.utf8), streaming: ["ciphers"]) { _, _, _ in } }
    }

    /// Only the selected values are built; the rest is read over but still checked as JSON.
    @Test("a selective parse builds what it keeps exactly as the whole parse does, and refuses what the whole parse refuses")
    func selectiveParse() throws {
        let selection = JSONParser.Selection(paths: ["id", "name", "login.username", "type"])
        func expected(_ whole: JSONObject) -> JSONObject {
            JSONObject(entries: whole.entries.filter { ["id", "name", "type", "login"].contains(JSONObject.camelCase($0.key)) }.map { entry in
                guard JSONObject.camelCase(entry.key) == "login", let login = entry.value.objectValue else { return entry }
                return JSONObject.Entry(key: entry.key, value: .object(JSONObject(entries: login.entries.filter { JSONObject.camelCase($0.key) == "username" })))
            })
        }
        let texts = [
            #"{"Id":"1","notes":"a \"quoted\" \\ note \u00e9\ud83d\udd10","fields":[{"name":"x","value":null}],"Login":{"Username":"u","password":"p","uris":[{"uri":"\n"}]},"name":"n","type":1}"#,
            #"{"login":null,"passwordHistory":[],"x":{"deep":[[[{}]]]},"y":-1.5e3,"z":true}"#,
            #"{"login":"not an object","name":"é"}"#,
            #"{}"#,
        ]
        for text in texts {
            let kept = try JSONParser.parseObject(Array(text.utf8), keeping: selection)
            let whole = try JSONParser.parseObject(Array(text.utf8))
            #expect(kept.entries.map(\.key) == expected(whole).entries.map(\.key) && kept == expected(whole), "\(text)")
        }
        // Stored items of every type, with unknown fields at every level.
        var random = RandomViews(rng: SplitMix64(seed: 2026_11_27), keys: VaultKeys(userKey: SymmetricCryptoKey.generate()))
        for index in 0..<200 {
            let wire = try random.cipher(type: CipherType.supported[index % CipherType.supported.count]).encrypted(with: random.keys)
            let bytes = wire.jsonBytes()
            #expect(try JSONParser.parseObject(bytes, keeping: selection) == expected(try JSONParser.parseObject(bytes)), "item \(index)")
        }
        // Damage in a value that is read over is still found, and so is a repeated key, kept or not.
        for text in [
            #"{"notes":"\x","name":"n"}"#, "{\"notes\":\"\u{1}\",\"name\":\"n\"}", #"{"notes":"open,"name":"n"}"#, #"{"fields":[1 2],"name":"n"}"#,
            #"{"fields":[1,],"name":"n"}"#, #"{"x":{"a" 1},"name":"n"}"#, #"{"x":tru,"name":"n"}"#, #"{"x":1,"x":2}"#, #"{"name":"a","name":"b"}"#,
            #"{"x":1,}"#, #"{"name":"n"} {}"#, #"{"x":"\u12"}"#, String(repeating: "[", count: 300),
            "{\"x\":" + String(repeating: "[", count: 300) + String(repeating: "]", count: 300) + "}",
        ] {
            #expect(throws: ModelError.self, "\(text.prefix(60))") { try JSONParser.parseObject(Array(text.utf8), keeping: selection) }
        }
    }

    @Test("a selection finds a key by its bytes exactly as by its camelCase string")
    func selectionByBytes() {
        let selection = CipherWire.summaryFields
        var candidates = ["", "N", "n", "nam", "names", "_name", "1d", "ID", "Id", "iD", "id", "idd", "Name", "NAME", "nAme", "key", "Key", "kEy",
                          "login", "Login", "LOGIN", "type", "Type", "folderId", "FolderId", "folderID", "favorite", "deletedDate",
                          "DeletedDate", "archivedDate", "organizationId", "OrganizationId", "username", "é", "Éd"]
        candidates += selection.keys.keys.flatMap { [$0, JSONObject.flipFirstLetter($0), String($0.dropLast()), $0 + "x", $0.uppercased()] }
        for key in candidates {
            let bytes = Array(key.utf8)
            let found = bytes.withUnsafeBufferPointer { selection.inner(forKey: $0) }
            let expected = selection.keys[JSONObject.camelCase(key)]
            #expect((found == nil) == (expected == nil), "\(key)")
            // The nested selection found is the same one: login's holds username alone.
            if case .some(.some(let inner)) = found, case .some(.some(let wanted)) = expected {
                #expect(inner.keys.keys.sorted() == wanted.keys.keys.sorted(), "\(key)")
            }
            if case .some(.none) = found { #expect(expected! == nil, "\(key)") }
        }
    }

    @Test("a model's text written without the tree is the tree's text, byte for byte, unknown keys and their spellings included")
    func textIsTheTreesText() throws {
        var random = RandomViews(rng: SplitMix64(seed: 2026_11_28), keys: VaultKeys(userKey: SymmetricCryptoKey.generate()))
        for index in 0..<300 {
            var wire = try random.cipher(type: CipherType.supported[index % CipherType.supported.count]).encrypted(with: random.keys)
            #expect(wire.jsonBytes() == wire.jsonObject().serialized(), "item \(index)")
            // Unknown keys: new ones, one that repeats a modelled key with its first letter's case flipped (the
            // modelled key wins), and two spellings of one unknown key (the first wins).
            wire.unknown = ["futureField": .object(["a": .array([.number("1.5e3"), .null, .bool(true)])]), "Name": .string("shadow"),
                            "Extra": .string("first"), "extra": .string("second"), "ünicode \"key\"": .string("\u{1}\n")]
            wire.login?.unknown = ["Password": .string("shadow"), "passkeyHint": .number("7")]
            let text = wire.jsonBytes()
            #expect(text == wire.jsonObject().serialized(), "item \(index) with unknown keys")
            let object = try JSONParser.parseObject(text)
            #expect(object["name"] == .string(wire.name.serialized) && object.entries.filter { $0.key == "Name" }.isEmpty)
            #expect(object["Extra"] == .string("first") && object.entries.filter { $0.key == "extra" }.isEmpty)
        }
        let folder = FolderWire(id: "f-1", name: try EncString.encrypt("folder", key: random.keys.userKey), revisionDate: WireDate(microsecondsSinceEpoch: 1))
        #expect(folder.jsonBytes() == folder.jsonObject().serialized())
    }

    @Test("strings are escaped wherever the byte to escape falls, eight bytes at a time or one")
    func escapingAtEveryOffset() throws {
        // The word test against the byte rule, on every single byte in every lane and on random words.
        for lane in 0..<8 {
            for byte in 0...255 {
                let word = (UInt64(0x41) &* 0x0101_0101_0101_0101 & ~(UInt64(0xFF) << (lane * 8))) | UInt64(byte) << (lane * 8)
                #expect(JSONValue.needsEscaping(word) == (byte < 0x20 || byte == 0x22 || byte == 0x5C), "byte \(byte) in lane \(lane)")
            }
        }
        var random = SplitMix64(seed: 2026_11_28)
        for _ in 0..<20_000 {
            let word = random.next()
            let bytes = (0..<8).map { UInt8(truncatingIfNeeded: word >> ($0 * 8)) }
            #expect(JSONValue.needsEscaping(word) == bytes.contains { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C })
        }
        // Text of every length up to 40 with a character to escape at every offset, and with none.
        for length in 0..<40 {
            for special in ["\"", "\\", "\n", "\u{1}", "é", "🔐", nil] as [String?] {
                for offset in 0...length {
                    var text = String(repeating: "a", count: length)
                    if let special { text.insert(contentsOf: special, at: text.index(text.startIndex, offsetBy: offset)) }
                    let written = JSONValue.string(text).serialized()
                    #expect(try JSONParser.parse(written) == .string(text))
                    #expect(!written.dropFirst().dropLast().contains { $0 < 0x20 })
                    if special == nil { break }
                }
            }
        }
    }

    @Test("lookup is first-letter case-insensitive and setting replaces either spelling")
    func caseInsensitive() {
        var object: JSONObject = ["Key": .string("a"), "other": .null]
        #expect(object["key"] == .string("a"))
        #expect(object["Key"] == .string("a"))
        #expect(object["KEY"] == nil)
        object["key"] = .string("b")
        #expect(object.entries.map(\.key) == ["key", "other"])
        #expect(JSONObject.flipFirstLetter("ErrorModel") == "errorModel")
        #expect(JSONObject.flipFirstLetter("1x") == "1x")
        let mixed: JSONObject = ["Name": .string("1"), "x": .null, "[ame": .string("2"), "éa": .string("3")]
        #expect(mixed["name"] == .string("1"))
        #expect(mixed["{ame"] == nil)  // '[' ^ 0x20 is '{', not a letter
        #expect(mixed["X"] == .null)
        #expect(mixed["Éa"] == nil)  // ASCII letters only
        #expect(mixed["nam"] == nil && mixed["names"] == nil)
    }
}

@Suite("Wire dates (spec §3.7)")
struct WireDateTests {
    @Test("0–9 fractional digits, Z, offsets and no zone all parse", arguments: [
        ("2024-01-30T17:55:36Z", "2024-01-30T17:55:36.000000Z"),
        ("2024-01-30T17:55:36.1Z", "2024-01-30T17:55:36.100000Z"),
        ("2024-01-30T17:55:36.150Z", "2024-01-30T17:55:36.150000Z"),
        ("2024-01-30T17:55:36.150123Z", "2024-01-30T17:55:36.150123Z"),
        ("2024-01-30T17:55:36.1501239Z", "2024-01-30T17:55:36.150123Z"),
        ("2024-01-30T17:55:36.150123999Z", "2024-01-30T17:55:36.150123Z"),
        ("2024-01-30T19:55:36.5+02:00", "2024-01-30T17:55:36.500000Z"),
        ("2024-01-30T12:25:36-05:30", "2024-01-30T17:55:36.000000Z"),
        ("2024-01-30T17:55:36", "2024-01-30T17:55:36.000000Z"),
        ("0001-01-01T00:00:00", "0001-01-01T00:00:00.000000Z"),
        ("2024-02-29T00:00:00Z", "2024-02-29T00:00:00.000000Z"),
        ("1969-12-31T23:59:59.999999Z", "1969-12-31T23:59:59.999999Z"),
        ("9999-12-31T23:59:59.000001Z", "9999-12-31T23:59:59.000001Z"),
        ("2038-01-19T03:14:08.010203Z", "2038-01-19T03:14:08.010203Z"),
    ])
    func parse(text: String, expected: String) throws {
        let date = try #require(WireDate(iso8601: text))
        #expect(date.iso8601 == expected)
        #expect(WireDate(iso8601: date.iso8601) == date)
    }

    @Test("invalid dates are refused", arguments: [
        "", "2024-01-30", "2024-13-01T00:00:00Z", "2023-02-29T00:00:00Z", "2024-01-30T24:00:00Z",
        "2024-01-30T17:55:36.Z", "2024-01-30T17:55:36.1234567890Z", "2024-01-30T17:55:36+0200", "2024-01-30T17:55:36Zjunk",
    ])
    func invalid(text: String) {
        #expect(WireDate(iso8601: text) == nil)
    }

    @Test("agrees with Foundation's clock and milliseconds")
    func foundation() throws {
        let date = Date(timeIntervalSince1970: 1_706_637_336.150)
        let wire = WireDate(date)
        #expect(wire.millisecondsSinceEpoch == 1_706_637_336_150)
        #expect(abs(wire.date.timeIntervalSince(date)) < 0.000_001)
        #expect(wire.iso8601 == "2024-01-30T17:55:36.150000Z")
    }
}
