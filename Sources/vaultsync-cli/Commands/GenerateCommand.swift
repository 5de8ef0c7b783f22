import ArgumentParser
import Foundation
import VaultCrypto
import VaultModels

/// `vaultsync generate`: a random password or passphrase. Needs no profile, vault or network.
struct GenerateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "generate",
        abstract: "Print a random password or passphrase (no profile or network needed).",
        discussion: """
        Passwords: 14 characters by default from A–Z, a–z, 0–9 and !@#$%^&*, at least one of each enabled class. Passphrases: words of the EFF large wordlist (7,776 words, about 12.9 bits each). --json adds the entropy estimate (see docs/CLI.md).

        Examples:
          vaultsync generate
          vaultsync generate --length 32 --avoid-ambiguous
          vaultsync generate --no-symbols --min-digits 3
          vaultsync generate --passphrase --words 5 --separator .
          vaultsync generate --passphrase --capitalize --include-number
          vaultsync generate --json
          vaultsync generate --clip
        """)

    @Option(help: ArgumentHelp("Password length (5–128; default 14).", valueName: "N")) var length: Int?
    @Flag(help: "No uppercase letters.") var noUppercase = false
    @Flag(help: "No lowercase letters.") var noLowercase = false
    @Flag(help: "No digits.") var noDigits = false
    @Flag(help: "No symbols (!@#$%^&*).") var noSymbols = false
    @Option(help: ArgumentHelp("At least N uppercase letters (0–9; default 1).", valueName: "N")) var minUppercase: Int?
    @Option(help: ArgumentHelp("At least N lowercase letters (0–9; default 1).", valueName: "N")) var minLowercase: Int?
    @Option(help: ArgumentHelp("At least N digits (0–9; default 1).", valueName: "N")) var minDigits: Int?
    @Option(help: ArgumentHelp("At least N symbols (0–9; default 1).", valueName: "N")) var minSymbols: Int?
    @Flag(help: "Leave out I, O, l, 0 and 1.") var avoidAmbiguous = false

    @Flag(help: "A passphrase of random words instead of a password.") var passphrase = false
    @Option(help: ArgumentHelp("Passphrase: number of words (3–20; default 6).", valueName: "N")) var words: Int?
    @Option(help: ArgumentHelp("Passphrase: put S between the words (default \"-\").", valueName: "S")) var separator: String?
    @Flag(help: "Passphrase: capitalize each word.") var capitalize = false
    @Flag(help: "Passphrase: append a digit to one word.") var includeNumber = false

    @Flag(help: "Copy it to the clipboard instead of printing it; cleared after `config clipboard-clear` seconds (default 30) if it still holds it.")
    var clip = false

    @OptionGroup var output: OutputOptions

    mutating func run() async throws {
        let secret: GeneratedSecret
        do {
            secret = passphrase ? try PasswordGenerator.passphrase(try passphraseOptions())
                                : try PasswordGenerator.password(try passwordOptions())
        } catch {
            throw report(error)
        }
        if clip {
            // No profile is needed; the profile's clear time when there is one.
            let environment = AgentHost.environment
            let seconds = (try? Profile.resolve(environment: environment).loadSettings())?.clipboardClear ?? Clipboard.defaultClearSeconds
            do {
                Console.note(try Clipboard.copyAndClear(secret.value, what: passphrase ? "The passphrase" : "The password",
                                                        clearAfter: seconds, environment: environment))
            } catch {
                throw report(error)
            }
            return
        }
        guard output.json else {
            print(secret.value)
            return
        }
        var object: JSONObject = [
            "value": .string(secret.value),
            "entropyBits": .number(String(format: "%.1f", secret.entropyBits)),
            "kind": .string(passphrase ? "passphrase" : "password"),
            "length": .int(secret.value.count),
        ]
        if passphrase { object["words"] = .int(words ?? PassphraseOptions.defaultWords) }
        Presentation.printJSON(.object(object))
    }

    func passwordOptions() throws -> PasswordOptions {
        let passphraseOnly = [("--words", words != nil), ("--separator", separator != nil), ("--capitalize", capitalize),
                              ("--include-number", includeNumber)]
        if let flag = passphraseOnly.first(where: \.1) { throw CLIError.usage("\(flag.0) needs --passphrase") }
        let minimums = [("--min-uppercase", minUppercase, "--no-uppercase", noUppercase),
                        ("--min-lowercase", minLowercase, "--no-lowercase", noLowercase),
                        ("--min-digits", minDigits, "--no-digits", noDigits),
                        ("--min-symbols", minSymbols, "--no-symbols", noSymbols)]
        if let clash = minimums.first(where: { $0.1 != nil && $0.3 }) {
            throw CLIError.usage("\(clash.0) and \(clash.2) contradict each other")
        }
        return PasswordOptions(length: length ?? PasswordOptions.defaultLength,
                               uppercase: !noUppercase, lowercase: !noLowercase, digits: !noDigits, symbols: !noSymbols,
                               minimumUppercase: minUppercase ?? 1, minimumLowercase: minLowercase ?? 1,
                               minimumDigits: minDigits ?? 1, minimumSymbols: minSymbols ?? 1,
                               avoidAmbiguous: avoidAmbiguous)
    }

    func passphraseOptions() throws -> PassphraseOptions {
        let passwordOnly = [("--length", length != nil), ("--no-uppercase", noUppercase), ("--no-lowercase", noLowercase),
                            ("--no-digits", noDigits), ("--no-symbols", noSymbols), ("--min-uppercase", minUppercase != nil),
                            ("--min-lowercase", minLowercase != nil), ("--min-digits", minDigits != nil),
                            ("--min-symbols", minSymbols != nil), ("--avoid-ambiguous", avoidAmbiguous)]
        if let flag = passwordOnly.first(where: \.1) {
            throw CLIError.usage("\(flag.0) is for passwords and cannot be used with --passphrase (see --words)")
        }
        return PassphraseOptions(words: words ?? PassphraseOptions.defaultWords,
                                 separator: separator ?? PassphraseOptions.defaultSeparator,
                                 capitalize: capitalize, includeNumber: includeNumber)
    }
}
