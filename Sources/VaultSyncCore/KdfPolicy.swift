import VaultCrypto

/// Whether a login may derive the master key with the KDF settings the server announced
/// (docs/SECURITY.md, "KDF downgrade").
///
/// The server's prelogin answer is not authenticated: a hostile server (or anyone on the path)
/// can announce cheap settings, and the password hash derived with them is sent to it, a verifier
/// that is far cheaper to brute-force. So the settings are checked before anything is derived or
/// sent: against the settings this device has seen unlock the account (the pin), or, for an
/// account new to this device, against Bitwarden's current minimums. Either check is passed by
/// the user confirming exactly the announced settings.
public enum KdfPolicy {
    /// The decision for one login.
    public enum Verdict: Sendable, Equatable {
        /// Derive with the announced settings.
        case accept
        /// An account new to this device whose announced settings are below the current minimums.
        case belowMinimums(offered: KdfConfiguration)
        /// Settings weaker than those this device saw unlock the account.
        case weakerThanPinned(pinned: KdfConfiguration, offered: KdfConfiguration)
    }

    /// Decides for `offered` (the prelogin answer, already within the absolute limits of
    /// ``KdfConfiguration/validate()``), given the account's pinned settings on this device (`nil`
    /// for a first login here) and the settings the user confirmed for this login (`nil`: none).
    public static func evaluate(offered: KdfConfiguration, pinned: KdfConfiguration?,
                                confirmed: KdfConfiguration?) -> Verdict {
        if let confirmed, confirmed == offered { return .accept }
        if let pinned {
            return offered.isAtLeastAsStrong(as: pinned) ? .accept : .weakerThanPinned(pinned: pinned, offered: offered)
        }
        return offered.meetsCurrentMinimums ? .accept : .belowMinimums(offered: offered)
    }
}
