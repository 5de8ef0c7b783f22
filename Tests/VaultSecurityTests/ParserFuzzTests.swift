import Foundation
import PropertyBased
import Testing
import VaultCrypto
import VaultModels

/// Whether `error` is one of the typed errors the parsers promise (never a trap, never a foreign error).
func isTypedModelError(_ error: any Error) -> Bool {
    error is ModelError || error is CryptoError
}

/// Fuzzing of the client's parsers with mutated valid inputs (property-based, shrinking): no crash, no
/// hang (the time limit), a typed error, and whatever is accepted is accepted losslessly.
@Suite("Bad input: the parsers never trap and fail with typed errors", .timeLimit(.minutes(10 * FuzzSize.scale)))
struct ParserFuzzTests {
    /// Cases for the cheap parsers (strings) and for the JSON ones (structure mutations cost more).
    static var count: Int { FuzzSize.cases(5000) }
    static var jsonCount: Int { FuzzSize.cases(1000) }

    @Test("EncString text: accepted strings round-trip byte for byte, the rest is a CryptoError")
    func encStringText() async {
        let corpus = Corpus.encStrings.map { Array($0.utf8) }
        await propertyCheck(count: Self.count, input: mutatedInputs(corpus, structural: false)) { input in
            await Task.yield()  // CPU-bound cases: let the other suites run in between
            do {
                let parsed = try EncString(input.text)
                #expect(parsed.serialized == input.text, "\(input)")
                if parsed.type.isSymmetric {
                    // Decrypting a mutated value fails with a typed error (MAC) or yields some bytes; never traps.
                    do { _ = try parsed.decrypt(key: Corpus.userKey) } catch { #expect(error is CryptoError, "\(input): \(error)") }
                }
            } catch {
                #expect(error is CryptoError, "\(input): \(type(of: error)) \(error)")
            }
        }
    }

    @Test("EncString binary form (attachments): a CryptoError or a valid value")
    func encStringBinary() async throws {
        let corpus = [
            try EncString.encrypt(Array("file body".utf8), key: Corpus.userKey).binary(),
            Data([0]) + Data(repeating: 7, count: 32),
        ].map { Array($0) }
        await propertyCheck(count: Self.count, input: mutatedInputs(corpus, structural: false)) { input in
            await Task.yield()  // CPU-bound cases: let the other suites run in between
            do {
                let parsed = try EncString(binary: input.bytes)
                #expect(try parsed.binary() == Data(input.bytes), "\(input)")
            } catch {
                #expect(error is CryptoError, "\(input): \(error)")
            }
        }
    }

    @Test("JSON: accepted texts re-serialize to an equal value; the rest is ModelError.invalidJSON")
    func json() async {
        let corpus = Corpus.cipherObjects.map { $0.serialized() } + [Array(#"{"a":[1,-2.5e3,"\u00e9\ud83d\udd10",true,null,{}]}"#.utf8)]
        await propertyCheck(count: Self.jsonCount, input: mutatedInputs(corpus)) { input in
            await Task.yield()  // CPU-bound cases: let the other suites run in between
            do {
                let value = try JSONParser.parse(input.bytes)
                #expect(try JSONParser.parse(value.serialized()) == value, "\(input)")
            } catch let error as ModelError {
                guard case .invalidJSON(let offset, _) = error else { Issue.record("\(input): \(error)"); return }
                #expect(offset >= 0 && offset <= input.bytes.count, "\(input): offset \(offset)")
            } catch {
                Issue.record("\(input): untyped \(type(of: error)) \(error)")
            }
        }
    }

    @Test("items: a damaged item is a ModelError; an accepted one is lossless and decrypts or fails typed")
    func cipher() async {
        let corpus = Corpus.cipherObjects.map { $0.serialized() }
        let keys = Corpus.keys
        await propertyCheck(count: Self.jsonCount, input: mutatedInputs(corpus)) { input in
            await Task.yield()  // CPU-bound cases: let the other suites run in between
            do {
                let wire = try CipherWire(jsonBytes: input.bytes, path: "cipher")
                #expect(try CipherWire(jsonBytes: wire.jsonBytes(), path: "cipher") == wire, "\(input)")
                do { _ = try wire.decrypted(with: keys) } catch { #expect(error is ModelError, "\(input): \(error)") }
                _ = wire.limitViolations
            } catch {
                #expect(isTypedModelError(error), "\(input): \(type(of: error)) \(error)")
            }
        }
    }

    @Test("folders: a ModelError or a lossless folder")
    func folder() async {
        let corpus = Corpus.folderObjects.map { $0.serialized() }
        await propertyCheck(count: Self.jsonCount, input: mutatedInputs(corpus)) { input in
            await Task.yield()  // CPU-bound cases: let the other suites run in between
            do {
                let wire = try FolderWire(jsonBytes: input.bytes, path: "folder")
                #expect(try FolderWire(jsonBytes: wire.jsonBytes(), path: "folder") == wire, "\(input)")
                do { _ = try wire.decrypted(with: Corpus.keys) } catch { #expect(error is ModelError, "\(input): \(error)") }
            } catch {
                #expect(isTypedModelError(error), "\(input): \(type(of: error)) \(error)")
            }
        }
    }

    @Test("wire dates: nil or a date that prints back as a date")
    func wireDates() async {
        let corpus = Corpus.dates.map { Array($0.utf8) }
        await propertyCheck(count: Self.count, input: mutatedInputs(corpus, structural: false)) { input in
            await Task.yield()  // CPU-bound cases: let the other suites run in between
            if let date = WireDate(iso8601: input.text) {
                #expect(WireDate(iso8601: date.iso8601) == date, "\(input)")
            }
        }
    }

    @Test("deep nesting, huge arrays and huge strings are refused or parsed, not a stack overflow")
    func extremes() throws {
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(throws: ModelError.self) { try JSONParser.parse(deep) }
        let deepObjects = String(repeating: #"{"a":"#, count: 50_000) + "1" + String(repeating: "}", count: 50_000)
        #expect(throws: ModelError.self) { try JSONParser.parse(deepObjects) }
        let wide = "[" + Array(repeating: "{}", count: 200_000).joined(separator: ",") + "]"
        #expect(try JSONParser.parse(wide).arrayValue?.count == 200_000)
        let huge = "\"" + String(repeating: "A", count: 8 * 1024 * 1024) + "\""
        #expect(try JSONParser.parse(huge).stringValue?.utf8.count == 8 * 1024 * 1024)
        var item = Corpus.cipherObjects[0]
        item["fields"] = .array(Array(repeating: .object(["type": .int(0)]), count: 100_000))
        #expect(try CipherWire(json: item, path: "cipher").fields?.count == 100_000)
        item["fields"] = .array(Array(repeating: .string("x"), count: 100_000))
        #expect(throws: ModelError.wrongType(path: "cipher.fields[0]", expected: "an object", found: "string")) {
            try CipherWire(json: item, path: "cipher")
        }
    }
}

/// How many cases a fuzz test runs: the CI size, scaled by `VAULTSYNC_FUZZ_SCALE` for the long mode
/// (time limits, the hang guard, scale with it).
enum FuzzSize {
    static var scale: Int { max(1, ProcessInfo.processInfo.environment["VAULTSYNC_FUZZ_SCALE"].flatMap(Int.init) ?? 1) }

    static func cases(_ ciSize: Int) -> Int { ciSize * max(1, scale) }
}
