import Testing
import VaultModels
@testable import VaultSyncCore

@Suite("Two-step login rules")
struct TwoFactorRulesTests {
    @Test("without a request the authenticator comes before email; unsupported-only accounts get no choice", arguments: [
        ([TwoFactorProviderType.authenticator, .email], TwoFactorRules.Choice.use(.authenticator)),
        ([.email, .authenticator], .use(.authenticator)),
        ([.email], .use(.email)),
        ([.email, .yubiKey, .webAuthn], .use(.email)),
        ([.yubiKey, .duo], .noneSupported(offered: [.duo, .yubiKey])),
        ([.webAuthn], .noneSupported(offered: [.webAuthn])),
        ([], .noneSupported(offered: [])),
    ])
    func defaultChoice(offered: [TwoFactorProviderType], expected: TwoFactorRules.Choice) {
        #expect(TwoFactorRules.choose(requested: nil, offered: offered) == expected)
    }

    @Test("a requested provider is used only if offered; the recovery code always")
    func requested() {
        #expect(TwoFactorRules.choose(requested: .email, offered: [.authenticator, .email]) == .use(.email))
        #expect(TwoFactorRules.choose(requested: .email, offered: [.authenticator, .yubiKey]) ==
                .notOffered(requested: .email, offered: [.authenticator, .yubiKey]))
        #expect(TwoFactorRules.choose(requested: .recoveryCode, offered: [.yubiKey]) == .use(.recoveryCode))
        #expect(TwoFactorRules.choose(requested: .recoveryCode, offered: []) == .use(.recoveryCode))
    }

    @Test("the note names every provider VaultSync cannot complete, and only those")
    func unsupportedNote() {
        #expect(TwoFactorRules.unsupportedNote(offered: [.authenticator, .email]) == nil)
        #expect(TwoFactorRules.unsupportedNote(offered: [.authenticator, .yubiKey]) ==
                "this account also accepts YubiKey; VaultSync supports authenticator and email codes (and the recovery code)")
        #expect(TwoFactorRules.unsupportedNote(offered: [.webAuthn, .email, .duo, .yubiKey]) ==
                "this account also accepts Duo, YubiKey and security key (WebAuthn/FIDO2); VaultSync supports authenticator and email codes (and the recovery code)")
        #expect(TwoFactorRules.unsupportedNote(offered: [.duo], also: false) ==
                "this account accepts Duo; VaultSync supports authenticator and email codes (and the recovery code)")
        // The remember pseudo-provider is never named.
        #expect(TwoFactorRules.unsupported(in: [.remember, .email]) == [])
        // A number from a newer server is named by its number rather than dropped.
        #expect(TwoFactorRules.unsupported(in: [TwoFactorProviderType(rawValue: 9)]) == [TwoFactorProviderType(rawValue: 9)])
    }

    @Test("codes are sent without the spaces people type; recovery codes also without dashes and in lower case", arguments: [
        ("123 456", TwoFactorProviderType.authenticator, "123456"),
        (" 123456\t", .email, "123456"),
        ("12-34", .authenticator, "12-34"),
        ("ABCD EFGH-1234 ijkl", .recoveryCode, "abcdefgh1234ijkl"),
    ])
    func normalised(code: String, provider: TwoFactorProviderType, expected: String) {
        #expect(TwoFactorRules.normalisedCode(code, provider: provider) == expected)
    }
}
