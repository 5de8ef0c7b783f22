#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What a random password is made of. The rules follow Bitwarden's generator (length 5–128,
/// default 14; per-class minimums 0–9; the same character sets), except that symbols are on by
/// default here (Bitwarden's default leaves them off).
public struct PasswordOptions: Sendable, Equatable {
    public static let lengthRange = 5...128
    public static let minimumRange = 0...9
    public static let defaultLength = 14

    /// Number of characters.
    public var length: Int
    /// Character classes to draw from (see ``PasswordGenerator/uppercase`` and the other sets).
    public var uppercase: Bool
    public var lowercase: Bool
    public var digits: Bool
    public var symbols: Bool
    /// At least this many characters of each class. A class's minimum only counts while the class
    /// is enabled; set it to 0 to let an enabled class be absent.
    public var minimumUppercase: Int
    public var minimumLowercase: Int
    public var minimumDigits: Int
    public var minimumSymbols: Int
    /// Leave out characters that are easily confused: I, O, l, 0 and 1.
    public var avoidAmbiguous: Bool

    public init(length: Int = PasswordOptions.defaultLength,
                uppercase: Bool = true, lowercase: Bool = true, digits: Bool = true, symbols: Bool = true,
                minimumUppercase: Int = 1, minimumLowercase: Int = 1, minimumDigits: Int = 1, minimumSymbols: Int = 1,
                avoidAmbiguous: Bool = false) {
        self.length = length
        self.uppercase = uppercase
        self.lowercase = lowercase
        self.digits = digits
        self.symbols = symbols
        self.minimumUppercase = minimumUppercase
        self.minimumLowercase = minimumLowercase
        self.minimumDigits = minimumDigits
        self.minimumSymbols = minimumSymbols
        self.avoidAmbiguous = avoidAmbiguous
    }
}

/// What a passphrase is made of: words of the EFF large wordlist, as in Bitwarden's generator.
public struct PassphraseOptions: Sendable, Equatable {
    public static let wordRange = 3...20
    public static let defaultWords = 6
    public static let defaultSeparator = "-"

    /// Number of words.
    public var words: Int
    /// Put between the words; may be empty. Control characters (newlines, tabs…) are refused.
    public var separator: String
    /// Upper-case each word's first letter.
    public var capitalize: Bool
    /// Append one random digit (0–9) to one randomly chosen word.
    public var includeNumber: Bool

    public init(words: Int = PassphraseOptions.defaultWords, separator: String = PassphraseOptions.defaultSeparator,
                capitalize: Bool = false, includeNumber: Bool = false) {
        self.words = words
        self.separator = separator
        self.capitalize = capitalize
        self.includeNumber = includeNumber
    }
}

/// A generated password or passphrase and how hard it is to guess.
public struct GeneratedSecret: Sendable, Equatable {
    /// The secret itself.
    public let value: String
    /// The Shannon entropy, in bits, of the generator's output distribution for the options used:
    /// how many fair coin flips guessing it is worth to an attacker who knows the options.
    /// See ``PasswordGenerator`` for how it is computed.
    public let entropyBits: Double

    public init(value: String, entropyBits: Double) {
        self.value = value
        self.entropyBits = entropyBits
    }
}

/// Options a generator cannot use, each with a message for the person who gave them.
public enum GeneratorError: Error, Sendable, Equatable, CustomStringConvertible {
    case lengthOutOfRange(Int)
    case minimumOutOfRange(characterClass: String, Int)
    case noCharacterClass
    case minimumsExceedLength(total: Int, length: Int)
    case wordCountOutOfRange(Int)
    case invalidSeparator

    public var description: String {
        switch self {
        case .lengthOutOfRange(let length):
            let range = PasswordOptions.lengthRange
            return length < range.lowerBound
                ? "length \(length) is below the minimum of \(range.lowerBound)"
                : "length \(length) is above the maximum of \(range.upperBound)"
        case .minimumOutOfRange(let characterClass, let value):
            let range = PasswordOptions.minimumRange
            return "the minimum number of \(characterClass) must be between \(range.lowerBound) and \(range.upperBound), not \(value)"
        case .noCharacterClass:
            return "no character class enabled (enable at least one of uppercase, lowercase, digits and symbols)"
        case .minimumsExceedLength(let total, let length):
            return "minimums add up to \(total), more than the length \(length)"
        case .wordCountOutOfRange(let words):
            let range = PassphraseOptions.wordRange
            return words < range.lowerBound
                ? "\(words) words is below the minimum of \(range.lowerBound)"
                : "\(words) words is above the maximum of \(range.upperBound)"
        case .invalidSeparator:
            return "the separator must not contain control characters (such as a newline or a tab)"
        }
    }
}

/// Random passwords and passphrases, drawn uniformly from a ``RandomSource`` (the system's CSPRNG
/// unless a test injects another).
///
/// Passwords, as Bitwarden makes them: first the required characters of each enabled class (its
/// minimum), then the rest of the length from all enabled classes together, then a Fisher–Yates
/// shuffle. Every choice is an unbiased index (rejection sampling, never `x % n` on its own).
///
/// Entropy of a password: exactly the Shannon entropy of that procedure's output. With no minimums
/// (or one class) every string is equally likely and it is `length × log2(alphabet size)`; minimums
/// make some strings likelier than others, so it is a little lower than that bound (computed over
/// the classes' character counts; it is not `log2` of the number of strings the rules allow).
///
/// Passphrases: each word drawn uniformly from the 7,776 of the EFF large wordlist (repeats allowed),
/// entropy `words × log2(7776)` (≈ 12.925 bits a word); `includeNumber` adds `log2(words × 10)` (which
/// word, which digit). Capitalizing adds nothing. Exact when the separator holds no letter or
/// digit (the list's hyphenated words, such as t-shirt, cannot be read as two words); with an empty
/// separator or one with letters or digits two choices could spell the same string, and it is an
/// upper bound.
public enum PasswordGenerator {
    public static let uppercase = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
    public static let lowercase = Array("abcdefghijklmnopqrstuvwxyz")
    public static let digits = Array("0123456789")
    /// Bitwarden's special characters.
    public static let symbols = Array("!@#$%^&*")
    /// Left out with ``PasswordOptions/avoidAmbiguous``.
    public static let ambiguous: Set<Character> = ["I", "O", "l", "0", "1"]
    /// The EFF large wordlist (7,776 words).
    public static var wordList: [String] { EFFWordList.words }

    public static func password(_ options: PasswordOptions,
                                random: any RandomSource = SystemRandomSource()) throws -> GeneratedSecret {
        let classes = try characterClasses(options)
        var characters: [Character] = []
        characters.reserveCapacity(options.length)
        for characterClass in classes {
            for _ in 0..<characterClass.minimum {
                characters.append(characterClass.characters[uniformIndex(below: characterClass.characters.count, random: random)])
            }
        }
        let all = classes.flatMap(\.characters)
        while characters.count < options.length {
            characters.append(all[uniformIndex(below: all.count, random: random)])
        }
        shuffle(&characters, random: random)
        let entropy = passwordEntropy(classSizes: classes.map(\.characters.count),
                                      minimums: classes.map(\.minimum), length: options.length)
        return GeneratedSecret(value: String(characters), entropyBits: entropy)
    }

    public static func passphrase(_ options: PassphraseOptions,
                                  random: any RandomSource = SystemRandomSource()) throws -> GeneratedSecret {
        guard PassphraseOptions.wordRange.contains(options.words) else {
            throw GeneratorError.wordCountOutOfRange(options.words)
        }
        guard !options.separator.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw GeneratorError.invalidSeparator
        }
        let list = EFFWordList.words
        var words = (0..<options.words).map { _ in list[uniformIndex(below: list.count, random: random)] }
        if options.capitalize {
            words = words.map { $0.prefix(1).uppercased() + $0.dropFirst() }
        }
        var entropy = Double(options.words) * log2(Double(list.count))
        if options.includeNumber {
            let word = uniformIndex(below: words.count, random: random)
            let digit = uniformIndex(below: 10, random: random)
            words[word] += String(digit)
            entropy += log2(Double(options.words * 10))
        }
        return GeneratedSecret(value: words.joined(separator: options.separator), entropyBits: entropy)
    }

    // MARK: Parts

    /// The enabled classes with their characters and minimums, after checking the options.
    static func characterClasses(_ options: PasswordOptions) throws -> [(characters: [Character], minimum: Int)] {
        guard PasswordOptions.lengthRange.contains(options.length) else {
            throw GeneratorError.lengthOutOfRange(options.length)
        }
        let candidates: [(name: String, enabled: Bool, characters: [Character], minimum: Int)] = [
            ("uppercase letters", options.uppercase, uppercase, options.minimumUppercase),
            ("lowercase letters", options.lowercase, lowercase, options.minimumLowercase),
            ("digits", options.digits, digits, options.minimumDigits),
            ("symbols", options.symbols, symbols, options.minimumSymbols),
        ]
        for candidate in candidates where !PasswordOptions.minimumRange.contains(candidate.minimum) {
            throw GeneratorError.minimumOutOfRange(characterClass: candidate.name, candidate.minimum)
        }
        let enabled = candidates.filter(\.enabled).map { candidate in
            (characters: options.avoidAmbiguous ? candidate.characters.filter { !ambiguous.contains($0) } : candidate.characters,
             minimum: candidate.minimum)
        }
        guard !enabled.isEmpty else { throw GeneratorError.noCharacterClass }
        let total = enabled.reduce(0) { $0 + $1.minimum }
        guard total <= options.length else { throw GeneratorError.minimumsExceedLength(total: total, length: options.length) }
        return enabled
    }

    /// A uniformly random integer in `0..<bound` (1 ≤ bound ≤ 2³²): four bytes read as a big-endian
    /// `UInt32`, drawn again while they fall in the incomplete last block of `bound` values, so no
    /// result is likelier than another.
    static func uniformIndex(below bound: Int, random: any RandomSource) -> Int {
        precondition(bound >= 1 && UInt64(bound) <= 1 << 32, "bound out of range")
        let span = UInt64(1) << 32
        let limit = span - span % UInt64(bound)
        while true {
            let bytes = random.bytes(count: 4)
            let value = bytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            if value < limit { return Int(value % UInt64(bound)) }
        }
    }

    /// Fisher–Yates: every order equally likely.
    static func shuffle<Element>(_ elements: inout [Element], random: any RandomSource) {
        guard elements.count > 1 else { return }
        for index in stride(from: elements.count - 1, to: 0, by: -1) {
            elements.swapAt(index, uniformIndex(below: index + 1, random: random))
        }
    }

    /// The Shannon entropy, in bits, of the password procedure's output for classes of the given
    /// sizes `s_i` and minimums `m_i` (alphabet `U = Σ s_i`, `M = Σ m_i` required, `F = L − M` free).
    ///
    /// A string with `c_i` characters of each class is made by `∏ c_i!/(c_i − m_i)! × F!` of the
    /// `∏ s_i^m_i × U^F × L!` equally likely runs (which of its characters served as the required
    /// ones, in which order, and the shuffle), so `−log2 P = −K − Σ g_i(c_i − m_i)` with
    /// `K = log2 F! − F log2 U − log2 L! − Σ m_i log2 s_i` and `g_i(d) = log2 (d + m_i)! − log2 d!`.
    /// The free characters' class counts `d_i` are multinomial, each one binomial(F, s_i/U) on its
    /// own, so the entropy `E[−log2 P] = −K − Σ E[g_i(d_i)]` is a sum over `d = 0…F` per class.
    static func passwordEntropy(classSizes: [Int], minimums: [Int], length: Int) -> Double {
        let alphabet = Double(classSizes.reduce(0, +))
        let required = minimums.reduce(0, +)
        if required == 0 || classSizes.count == 1 {
            return Double(length) * log2(alphabet)
        }
        // log2(n!) for n in 0...length.
        var logFactorial = [0.0]
        for n in stride(from: 1, through: length, by: 1) { logFactorial.append(logFactorial[n - 1] + log2(Double(n))) }
        let free = length - required
        var entropy = -(logFactorial[free] - Double(free) * log2(alphabet) - logFactorial[length])
        for (size, minimum) in zip(classSizes, minimums) {
            entropy += Double(minimum) * log2(Double(size))
            guard minimum > 0 else { continue }
            let share = Double(size) / alphabet
            for count in 0...free {
                let logBinomial = logFactorial[free] - logFactorial[count] - logFactorial[free - count]
                let probability = exp2(logBinomial + Double(count) * log2(share) + Double(free - count) * log2(1 - share))
                entropy -= probability * (logFactorial[count + minimum] - logFactorial[count])
            }
        }
        return entropy
    }
}
