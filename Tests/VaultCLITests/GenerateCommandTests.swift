import Foundation
import Testing
import VaultCrypto
import VaultModels
import VaultTestSupport

@Suite("CLI: generate")
struct GenerateCommandTests {
    static let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!@#$%^&*")

    @Test("a 14-character password from the allowed set, with no profile, server or vault")
    func password() async throws {
        let device = CLIDevice()
        for _ in 0..<5 {
            let result = try await device.expect(["generate"])
            #expect(result.stdout.hasSuffix("\n"))
            let secret = result.stdout.trimmingCharacters(in: .newlines)
            #expect(secret.count == 14, "\(secret)")
            #expect(secret.allSatisfy(Self.allowed.contains), "\(secret)")
            #expect(result.stderr.isEmpty)
        }
        // Nothing was created, and a profile directory that cannot exist does not matter.
        #expect(!FileManager.default.fileExists(atPath: device.home))
        try await device.expect(["generate"], environment: ["VAULTSYNC_HOME": "/dev/null/no-profile-here"])

        let long = try await device.expect(["generate", "--length", "40", "--no-symbols", "--min-digits", "5", "--avoid-ambiguous"])
        let secret = long.stdout.trimmingCharacters(in: .newlines)
        #expect(secret.count == 40)
        #expect(secret.filter(\.isNumber).count >= 5)
        #expect(!secret.contains(where: { "!@#$%^&*IOl01".contains($0) }), "\(secret)")
    }

    @Test("a passphrase of EFF words with the separator, capitalized, with a number")
    func passphrase() async throws {
        let device = CLIDevice()
        let list = Set(PasswordGenerator.wordList)
        let result = try await device.expect(["generate", "--passphrase", "--words", "5", "--separator", "."])
        let words = result.stdout.trimmingCharacters(in: .newlines).split(separator: ".").map(String.init)
        #expect(words.count == 5)
        #expect(words.allSatisfy(list.contains), "\(words)")

        let fancy = try await device.expect(["generate", "--passphrase", "--capitalize", "--include-number"])
        let fancyWords = fancy.stdout.trimmingCharacters(in: .newlines).split(separator: "-").map(String.init)
        #expect(fancyWords.count >= 6)  // six words; a hyphenated word (t-shirt) splits in two
        #expect(fancyWords.filter { $0.last?.isNumber == true }.count == 1)
    }

    @Test("--json has the value, its entropy, kind and length")
    func json() async throws {
        let device = CLIDevice()
        let password = try await device.json(["generate", "--length", "16", "--min-uppercase", "0", "--min-lowercase", "0",
                                              "--min-digits", "0", "--min-symbols", "0"])
        #expect(password["kind"]?.stringValue == "password")
        #expect(password["length"]?.intValue == 16)
        #expect(password["value"]?.stringValue?.count == 16)
        // 16 × log2(70) = 98.07 bits.
        #expect(password["entropyBits"] == .number("98.1"))

        let passphrase = try await device.json(["generate", "--passphrase", "--words", "4"])
        #expect(passphrase["kind"]?.stringValue == "passphrase")
        #expect(passphrase["words"]?.intValue == 4)
        #expect(passphrase["length"]?.intValue == passphrase["value"]?.stringValue?.count)
        // 4 × log2(7776) = 51.70 bits.
        #expect(passphrase["entropyBits"] == .number("51.7"))
    }

    @Test("bad options exit 64 with the generator's message")
    func usageErrors() async throws {
        let device = CLIDevice()
        let cases: [([String], String)] = [
            (["--length", "2"], "length 2 is below the minimum of 5"),
            (["--length", "200"], "length 200 is above the maximum of 128"),
            // A negative number is a value, not a flag (`NegativeNumbers`): the range check names it.
            (["--length", "-5"], "length -5 is below the minimum of 5"),
            (["--min-digits", "-1"], "the minimum number of digits must be between 0 and 9, not -1"),
            (["--passphrase", "--words", "50"], "50 words is above the maximum of 20"),
            (["--no-uppercase", "--no-lowercase", "--no-digits", "--no-symbols"], "no character class enabled"),
            (["--length", "10", "--min-digits", "6", "--min-symbols", "6"], "minimums add up to 14, more than the length 10"),
            (["--min-digits", "12"], "the minimum number of digits must be between 0 and 9, not 12"),
            (["--passphrase", "--no-symbols"], "--no-symbols is for passwords and cannot be used with --passphrase"),
            (["--words", "5"], "--words needs --passphrase"),
            (["--no-digits", "--min-digits", "2"], "--min-digits and --no-digits contradict each other"),
        ]
        for (arguments, message) in cases {
            let result = try await device.expect(["generate"] + arguments, status: 64)
            #expect(result.stdout.isEmpty)
            #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
        }
    }
}
