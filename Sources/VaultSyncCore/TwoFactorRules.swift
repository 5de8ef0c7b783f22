import VaultModels

/// The pure decisions of two-step login (docs/PROTOCOL.md, "Two-step login"): which of the
/// providers an account offers VaultSync can complete, which one to use when the user names none,
/// how a typed code is sent, and what to tell a user whose account offers only others.
public enum TwoFactorRules {
    /// The providers VaultSync completes: a code from an authenticator app, a code mailed by the
    /// server, or the account's recovery code (which every account with two-step login has, listed or
    /// not, and which turns two-step login off on use).
    public static let supported: [TwoFactorProviderType] = [.authenticator, .email, .recoveryCode]

    /// What to do with a "two-step login required" answer listing `offered`.
    public enum Choice: Sendable, Equatable {
        /// Ask for a code of this provider (for email, have the server send it first).
        case use(TwoFactorProviderType)
        /// The user asked for a provider this account does not offer.
        case notOffered(requested: TwoFactorProviderType, offered: [TwoFactorProviderType])
        /// The account offers none VaultSync supports (the recovery code stays possible, but only by
        /// asking for it explicitly: it turns two-step login off).
        case noneSupported(offered: [TwoFactorProviderType])
    }

    /// The provider for this login: the requested one if the account offers it (the recovery code is
    /// always allowed), else the best supported one offered: the authenticator before email (a mailed
    /// code depends on a working mailbox).
    public static func choose(requested: TwoFactorProviderType?, offered: [TwoFactorProviderType]) -> Choice {
        if let requested {
            if requested == .recoveryCode || offered.contains(requested) { return .use(requested) }
            return .notOffered(requested: requested, offered: offered.sorted())
        }
        for provider in [TwoFactorProviderType.authenticator, .email] where offered.contains(provider) {
            return .use(provider)
        }
        return .noneSupported(offered: offered.sorted())
    }

    /// Providers the account offers that VaultSync cannot complete (named to the user).
    public static func unsupported(in offered: [TwoFactorProviderType]) -> [TwoFactorProviderType] {
        offered.filter { !supported.contains($0) && $0 != .remember }.sorted()
    }

    /// "this account also accepts a YubiKey and Duo; VaultSync supports authenticator and email
    /// codes (and the recovery code)", or `nil` when every offered provider is supported.
    public static func unsupportedNote(offered: [TwoFactorProviderType], also: Bool = true) -> String? {
        let others = unsupported(in: offered)
        guard !others.isEmpty else { return nil }
        let names = others.map(\.name)
        let list = names.count == 1 ? names[0] : names.dropLast().joined(separator: ", ") + " and " + names.last!
        return "this account \(also ? "also " : "")accepts \(list); VaultSync supports authenticator and email codes (and the recovery code)"
    }

    /// The code as it is sent: without spaces or dashes a person may type ("123 456"); a recovery
    /// code also lower-cased (servers compare it in lower case).
    public static func normalisedCode(_ code: String, provider: TwoFactorProviderType) -> String {
        let kept = code.filter { !$0.isWhitespace && (provider != .recoveryCode || $0 != "-") }
        return provider == .recoveryCode ? kept.lowercased() : kept
    }
}
