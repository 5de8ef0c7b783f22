import Crypto
import Foundation
import Testing
@testable import VaultCrypto

/// A deterministic RandomSource: SplitMix64 from a seed. For tests only.
final class SeededRandomSource: RandomSource, @unchecked Sendable {
    private var state: UInt64
    private let lock = NSLock()

    init(seed: UInt64) { state = seed }

    func bytes(count: Int) -> [UInt8] {
        lock.lock()
        defer { lock.unlock() }
        var out: [UInt8] = []
        out.reserveCapacity(count)
        while out.count < count {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z >> 31
            for shift in stride(from: 56, through: 0, by: -8) where out.count < count {
                out.append(UInt8(truncatingIfNeeded: z >> UInt64(shift)))
            }
        }
        return out
    }
}

/// A RandomSource that hands out given 32-bit values (big-endian, as the generator reads them).
final class ScriptedRandomSource: RandomSource, @unchecked Sendable {
    private var values: [UInt32]
    private let lock = NSLock()

    init(_ values: [UInt32]) { self.values = values }

    var remaining: Int { lock.withLock { values.count } }

    func bytes(count: Int) -> [UInt8] {
        lock.withLock {
            precondition(count == 4, "the generator reads 4 bytes at a time")
            let value = values.removeFirst()
            return [UInt8(value >> 24), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)]
        }
    }
}

@Suite("PasswordGenerator")
struct PasswordGeneratorTests {
    static let upper = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    static let lower = Set("abcdefghijklmnopqrstuvwxyz")
    static let digits = Set("0123456789")
    static let symbols = Set("!@#$%^&*")

    // MARK: Passwords

    @Test func defaultsAreFourteenCharactersOfEveryClass() throws {
        #expect(PasswordOptions() == PasswordOptions(length: 14, uppercase: true, lowercase: true, digits: true, symbols: true,
                                                     minimumUppercase: 1, minimumLowercase: 1, minimumDigits: 1, minimumSymbols: 1,
                                                     avoidAmbiguous: false))
        let allowed = Self.upper.union(Self.lower).union(Self.digits).union(Self.symbols)
        #expect(allowed.count == 70)
        let random = SeededRandomSource(seed: 1)
        for _ in 0..<500 {
            let secret = try PasswordGenerator.password(PasswordOptions(), random: random).value
            #expect(secret.count == 14)
            #expect(secret.allSatisfy(allowed.contains))
            #expect(secret.contains(where: Self.upper.contains) && secret.contains(where: Self.lower.contains))
            #expect(secret.contains(where: Self.digits.contains) && secret.contains(where: Self.symbols.contains))
        }
    }

    @Test(arguments: [5, 6, 14, 24, 64, 128])
    func lengths(length: Int) throws {
        let secret = try PasswordGenerator.password(PasswordOptions(length: length), random: SeededRandomSource(seed: UInt64(length)))
        #expect(secret.value.count == length)
    }

    @Test func minimumsAreHonoured() throws {
        let options = PasswordOptions(length: 20, minimumUppercase: 2, minimumLowercase: 0, minimumDigits: 5, minimumSymbols: 9)
        let random = SeededRandomSource(seed: 2)
        var sawNoLowercase = false
        for _ in 0..<2_000 {
            let secret = try PasswordGenerator.password(options, random: random).value
            #expect(secret.count == 20)
            #expect(secret.filter(Self.upper.contains).count >= 2)
            #expect(secret.filter(Self.digits.contains).count >= 5)
            #expect(secret.filter(Self.symbols.contains).count >= 9)
            if !secret.contains(where: Self.lower.contains) { sawNoLowercase = true }
        }
        // 4 free characters out of 70, none lowercase: (44/70)^4 ≈ 16 %, so 2,000 runs see it.
        #expect(sawNoLowercase)
    }

    @Test func disabledClassesAreAbsentAndTheirMinimumsIgnored() throws {
        let options = PasswordOptions(length: 30, uppercase: false, symbols: false, minimumUppercase: 9, minimumSymbols: 9)
        let random = SeededRandomSource(seed: 3)
        let allowed = Self.lower.union(Self.digits)
        for _ in 0..<500 {
            let secret = try PasswordGenerator.password(options, random: random).value
            #expect(secret.allSatisfy(allowed.contains))
        }
    }

    @Test func avoidAmbiguousNeverYieldsIOl01() throws {
        let options = PasswordOptions(length: 64, avoidAmbiguous: true)
        let random = SeededRandomSource(seed: 4)
        var seen = Set<Character>()
        for _ in 0..<2_000 {
            let secret = try PasswordGenerator.password(options, random: random).value
            #expect(!secret.contains(where: { "IOl01".contains($0) }), "\(secret)")
            seen.formUnion(secret)
        }
        // Everything else does turn up: 26 + 26 + 10 + 8 − 5.
        #expect(seen.count == 65)
    }

    @Test func optionErrors() {
        func error(_ options: PasswordOptions) -> String? {
            do {
                _ = try PasswordGenerator.password(options, random: SeededRandomSource(seed: 0))
                return nil
            } catch {
                return (error as? GeneratorError)?.description
            }
        }
        #expect(error(PasswordOptions(length: 200)) == "length 200 is above the maximum of 128")
        #expect(error(PasswordOptions(length: 4)) == "length 4 is below the minimum of 5")
        #expect(error(PasswordOptions(uppercase: false, lowercase: false, digits: false, symbols: false))
            == "no character class enabled (enable at least one of uppercase, lowercase, digits and symbols)")
        #expect(error(PasswordOptions(length: 10, minimumUppercase: 3, minimumLowercase: 3, minimumDigits: 3, minimumSymbols: 3))
            == "minimums add up to 12, more than the length 10")
        #expect(error(PasswordOptions(minimumDigits: 10)) == "the minimum number of digits must be between 0 and 9, not 10")
        #expect(error(PasswordOptions(minimumSymbols: -1)) == "the minimum number of symbols must be between 0 and 9, not -1")
        // Minimums that exactly fill the length are fine.
        #expect(error(PasswordOptions(length: 12, minimumUppercase: 3, minimumLowercase: 3, minimumDigits: 3, minimumSymbols: 3)) == nil)
    }

    @Test func aScriptedSourceGivesAKnownPassword() throws {
        // Digits only, length 5: one required digit (3), four free (1, 4, 1, 5), then the shuffle
        // draws j for i = 4, 3, 2, 1: j = i leaves the order alone.
        let identity = ScriptedRandomSource([3, 1, 4, 1, 5, 4, 3, 2, 1])
        let options = PasswordOptions(length: 5, uppercase: false, lowercase: false, symbols: false)
        #expect(try PasswordGenerator.password(options, random: identity).value == "31415")
        #expect(identity.remaining == 0)
        // j = 0 each time: swap(4,0) → 51413, swap(3,0) → 11453, swap(2,0) → 41153, swap(1,0) → 14153.
        let rotating = ScriptedRandomSource([3, 1, 4, 1, 5, 0, 0, 0, 0])
        #expect(try PasswordGenerator.password(options, random: rotating).value == "14153")
    }

    @Test func aSeededSourceGivesTheSameSecretsEveryTime() throws {
        let first = try PasswordGenerator.password(PasswordOptions(length: 32), random: SeededRandomSource(seed: 42))
        let again = try PasswordGenerator.password(PasswordOptions(length: 32), random: SeededRandomSource(seed: 42))
        let other = try PasswordGenerator.password(PasswordOptions(length: 32), random: SeededRandomSource(seed: 43))
        #expect(first == again)
        #expect(first.value != other.value)
    }

    @Test func uniformIndexRejectsTheIncompleteLastBlock() {
        // 2³² = 3 × 1431655765 + 1: the value 2³² − 1 would make 0 likelier, so it is drawn again.
        let random = ScriptedRandomSource([UInt32.max, 5])
        #expect(PasswordGenerator.uniformIndex(below: 3, random: random) == 2)
        #expect(random.remaining == 0)
        #expect(PasswordGenerator.uniformIndex(below: 3, random: ScriptedRandomSource([UInt32.max - 1])) == (UInt32.max - 1) % 3)
        // A power of two rejects nothing.
        #expect(PasswordGenerator.uniformIndex(below: 8, random: ScriptedRandomSource([UInt32.max])) == 7)
        #expect(PasswordGenerator.uniformIndex(below: 1, random: ScriptedRandomSource([12345])) == 0)
    }

    /// Chi-square over character frequencies. Deterministic (fixed seed); the bound is far above
    /// what a uniform source gives (mean = degrees of freedom), and a `% n`-sized bias or a
    /// missing character would blow through it.
    @Test func charactersAreUniform() throws {
        let options = PasswordOptions(length: 20, minimumUppercase: 0, minimumLowercase: 0, minimumDigits: 0, minimumSymbols: 0)
        let random = SeededRandomSource(seed: 5)
        var counts: [Character: Int] = [:]
        let runs = 3_500
        for _ in 0..<runs {
            for character in try PasswordGenerator.password(options, random: random).value { counts[character, default: 0] += 1 }
        }
        #expect(counts.count == 70)
        let expected = Double(runs * 20) / 70
        let chiSquare = counts.values.reduce(0.0) { $0 + pow(Double($1) - expected, 2) / expected }
        // 69 degrees of freedom: mean 69, standard deviation ≈ 11.7.
        #expect(chiSquare < 150, "chi-square \(chiSquare)")

        // With minimums, characters within a class are still uniform (here: the symbols).
        var symbolCounts: [Character: Int] = [:]
        for _ in 0..<2_000 {
            for character in try PasswordGenerator.password(PasswordOptions(minimumSymbols: 3), random: random).value
            where Self.symbols.contains(character) {
                symbolCounts[character, default: 0] += 1
            }
        }
        let symbolExpected = Double(symbolCounts.values.reduce(0, +)) / 8
        let symbolChiSquare = symbolCounts.values.reduce(0.0) { $0 + pow(Double($1) - symbolExpected, 2) / symbolExpected }
        #expect(symbolCounts.count == 8)
        #expect(symbolChiSquare < 40, "chi-square \(symbolChiSquare)")  // 7 degrees of freedom
    }

    @Test func positionsAreShuffled() throws {
        // The required characters come first before the shuffle; afterwards the symbol of a
        // symbols-minimum-1 password is as likely at the start as at the end.
        let options = PasswordOptions(length: 8, uppercase: false, digits: false, minimumLowercase: 0)
        let random = SeededRandomSource(seed: 6)
        var firstIsSymbol = 0, lastIsSymbol = 0
        for _ in 0..<4_000 {
            let secret = Array(try PasswordGenerator.password(options, random: random).value)
            if Self.symbols.contains(secret[0]) { firstIsSymbol += 1 }
            if Self.symbols.contains(secret[7]) { lastIsSymbol += 1 }
        }
        #expect(abs(firstIsSymbol - lastIsSymbol) < 300, "\(firstIsSymbol) vs \(lastIsSymbol)")
    }

    // MARK: Entropy

    @Test func entropyWithoutMinimumsIsLengthTimesLog2OfTheAlphabet() throws {
        let none = PasswordOptions(length: 16, minimumUppercase: 0, minimumLowercase: 0, minimumDigits: 0, minimumSymbols: 0)
        #expect(try PasswordGenerator.password(none).entropyBits == 16 * log2(70.0))  // ≈ 98.07
        let ambiguous = PasswordOptions(length: 16, minimumUppercase: 0, minimumLowercase: 0, minimumDigits: 0, minimumSymbols: 0,
                                        avoidAmbiguous: true)
        #expect(try PasswordGenerator.password(ambiguous).entropyBits == 16 * log2(65.0))
        // One class: its minimum changes nothing.
        let lowercase = PasswordOptions(length: 20, uppercase: false, digits: false, symbols: false, minimumLowercase: 5)
        #expect(try PasswordGenerator.password(lowercase).entropyBits == 20 * log2(26.0))
    }

    @Test func minimumsLowerTheEntropyABit() throws {
        let entropy = try PasswordGenerator.password(PasswordOptions()).entropyBits
        #expect(entropy < 14 * log2(70.0))
        #expect(entropy > 14 * log2(70.0) - 3)
        let long = try PasswordGenerator.password(PasswordOptions(length: 128, minimumDigits: 9)).entropyBits
        #expect(long < 128 * log2(70.0) && long > 128 * log2(70.0) - 3)
    }

    /// The closed form against a brute-force count of every run of the procedure (required
    /// characters, free characters, shuffle) for small made-up classes.
    @Test(arguments: [([2, 1], [1, 1], 3), ([3, 2], [2, 0], 4), ([2, 2, 1], [1, 1, 1], 4), ([3, 1], [0, 2], 4), ([2, 1, 1], [2, 1, 0], 5)])
    func entropyMatchesBruteForce(sizes: [Int], minimums: [Int], length: Int) {
        let alphabet = sizes.enumerated().map { index, size in (0..<size).map { "\(index):\($0)" } }
        let all = alphabet.flatMap { $0 }
        var prefixes: [[String]] = [[]]
        for (index, minimum) in minimums.enumerated() {
            for _ in 0..<minimum { prefixes = prefixes.flatMap { prefix in alphabet[index].map { prefix + [$0] } } }
        }
        while prefixes[0].count < length { prefixes = prefixes.flatMap { prefix in all.map { prefix + [$0] } } }
        func permutations(_ items: [Int]) -> [[Int]] {
            items.count <= 1 ? [items] : items.indices.flatMap { index in
                var rest = items
                let first = rest.remove(at: index)
                return permutations(rest).map { [first] + $0 }
            }
        }
        let orders = permutations(Array(0..<length))
        var outcomes: [[String]: Int] = [:]
        for sequence in prefixes {
            for order in orders { outcomes[order.map { sequence[$0] }, default: 0] += 1 }
        }
        let total = Double(prefixes.count * orders.count)
        let bruteForce = -outcomes.values.reduce(0.0) { $0 + Double($1) / total * log2(Double($1) / total) }
        let formula = PasswordGenerator.passwordEntropy(classSizes: sizes, minimums: minimums, length: length)
        #expect(abs(formula - bruteForce) < 1e-9, "\(formula) vs \(bruteForce)")
    }

    // MARK: Passphrases

    @Test func theWordListIsTheEFFLargeList() {
        let words = PasswordGenerator.wordList
        #expect(words.count == 7_776)
        #expect(Set(words).count == 7_776)
        #expect(Array(words.prefix(5)) == ["abacus", "abdomen", "abdominal", "abide", "abiding"])
        #expect(words.last == "zoom")
        #expect(words == words.sorted())
        #expect(words.allSatisfy { (3...9).contains($0.count) && $0.allSatisfy { $0.isLowercase || $0 == "-" } })
        // The known answer: SHA-256 of the words one per line, as EFF's file has them once its dice numbers are
        // cut away (a checksum published by others for this list), so not one word can differ.
        let digest = SHA256.hash(data: Array((words.joined(separator: "\n") + "\n").utf8))
        #expect(digest.map { String(format: "%02x", $0) }.joined() == "6d557f0693958fb5e650b68b5bee585eb82cf4da32965505c789e924743bc522")
    }

    @Test func passphraseDefaults() throws {
        #expect(PassphraseOptions() == PassphraseOptions(words: 6, separator: "-", capitalize: false, includeNumber: false))
        let list = Set(PasswordGenerator.wordList)
        let random = SeededRandomSource(seed: 7)
        for _ in 0..<500 {
            let secret = try PasswordGenerator.passphrase(PassphraseOptions(separator: " "), random: random)
            let words = secret.value.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
            #expect(words.count == 6)
            #expect(words.allSatisfy(list.contains), "\(secret.value)")
            #expect(secret.entropyBits == 6 * log2(7776.0))  // ≈ 77.55
        }
    }

    @Test func passphraseCapitalizeAndNumber() throws {
        let list = Set(PasswordGenerator.wordList)
        let random = SeededRandomSource(seed: 8)
        var numberedPositions = Set<Int>()
        for _ in 0..<500 {
            let secret = try PasswordGenerator.passphrase(
                PassphraseOptions(words: 4, separator: ".", capitalize: true, includeNumber: true), random: random)
            let words = secret.value.split(separator: ".").map(String.init)
            #expect(words.count == 4)
            #expect(words.allSatisfy { $0.first!.isUppercase })
            let numbered = words.indices.filter { words[$0].last!.isNumber }
            #expect(numbered.count == 1)
            numberedPositions.formUnion(numbered)
            let bare = words.map { String($0.filter { !$0.isNumber }).lowercased() }
            #expect(bare.allSatisfy(list.contains), "\(secret.value)")
            #expect(secret.entropyBits == 4 * log2(7776.0) + log2(40.0))
        }
        #expect(numberedPositions == [0, 1, 2, 3])
    }

    @Test func passphraseWordCountsAndSeparators() throws {
        for count in [3, 5, 20] {
            let secret = try PasswordGenerator.passphrase(PassphraseOptions(words: count, separator: "_"), random: SeededRandomSource(seed: 9))
            #expect(secret.value.split(separator: "_").count == count)
        }
        let joined = try PasswordGenerator.passphrase(PassphraseOptions(words: 3, separator: ""), random: ScriptedRandomSource([0, 1, 7_775]))
        #expect(joined.value == "abacusabdomenzoom")
    }

    @Test func passphraseErrors() {
        func error(_ options: PassphraseOptions) -> String? {
            do {
                _ = try PasswordGenerator.passphrase(options, random: SeededRandomSource(seed: 0))
                return nil
            } catch {
                return (error as? GeneratorError)?.description
            }
        }
        #expect(error(PassphraseOptions(words: 50)) == "50 words is above the maximum of 20")
        #expect(error(PassphraseOptions(words: 2)) == "2 words is below the minimum of 3")
        #expect(error(PassphraseOptions(separator: "\n")) == "the separator must not contain control characters (such as a newline or a tab)")
        #expect(error(PassphraseOptions(separator: " + ")) == nil)
    }
}
