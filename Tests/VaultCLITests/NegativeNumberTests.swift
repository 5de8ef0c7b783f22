import CommandLineSupport
import Testing

@Suite("CLI: negative numbers are values")
struct NegativeNumberTests {
    @Test("a negative number joins the long option before it, or goes after -- as a positional")
    func rewrite() {
        #expect(NegativeNumbers.rewrite(["generate", "--length", "-5"]) == ["generate", "--length=-5"])
        #expect(NegativeNumbers.rewrite(["config", "lock-timeout", "-5"]) == ["config", "lock-timeout", "--", "-5"])
        #expect(NegativeNumbers.rewrite(["config", "lock-timeout", "-5", "--password-file", "f"])
                == ["config", "lock-timeout", "--password-file", "f", "--", "-5"])
        // Flags, option values given with =, and anything after -- are left as they are.
        #expect(NegativeNumbers.rewrite(["list", "-h"]) == ["list", "-h"])
        #expect(NegativeNumbers.rewrite(["generate", "--length=-5"]) == ["generate", "--length=-5"])
        #expect(NegativeNumbers.rewrite(["add", "--", "-5", "-x"]) == ["add", "--", "-5", "-x"])
        #expect(NegativeNumbers.rewrite(["generate", "--length", "12"]) == ["generate", "--length", "12"])
        #expect(NegativeNumbers.isNegativeNumber("-0.5") && NegativeNumbers.isNegativeNumber("-12"))
        #expect(!NegativeNumbers.isNegativeNumber("-") && !NegativeNumbers.isNegativeNumber("-.") && !NegativeNumbers.isNegativeNumber("-v"))
        #expect(!NegativeNumbers.isNegativeNumber("--5") && !NegativeNumbers.isNegativeNumber("5"))
    }
}
