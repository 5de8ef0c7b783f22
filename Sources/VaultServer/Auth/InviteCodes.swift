import Crypto
import VaultCrypto
import VaultModels

/// The one-time codes that organization invites are accepted with (docs/SECURITY.md, "Invitations are
/// bound to a one-time code"). There is no mail to prove that whoever registered an email owns it, so the
/// inviter is shown a code and hands it to the invitee over another channel; only its hash is stored.
enum InviteCodes {
    /// Wrong codes an invite takes before it is dead (then only a new invite of the email can be accepted).
    static let maximumFailures: Int64 = 5

    /// A new code from the system's CSPRNG (140 bits), as shown, and the hash to store.
    static func make() -> (shown: String, hash: String) {
        let symbols = randomString(count: InvitationCode.length, alphabet: String(InvitationCode.alphabet))
        return (InvitationCode.grouped(symbols), hash(symbols))
    }

    /// SHA-256 (hex) of a code's normalised symbols.
    static func hash(_ symbols: String) -> String {
        SHA256.hash(data: Array(symbols.utf8)).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }

    /// Whether `typed` is the code whose hash is `stored`, compared in constant time. Anything that is not
    /// a well-formed code is hashed all the same, so a malformed guess takes as long as a wrong one.
    static func matches(_ typed: String?, stored: String?) -> Bool {
        let candidate = hash(InvitationCode.normalised(typed ?? "") ?? (typed ?? ""))
        guard let stored else {
            _ = ConstantTime.equals(Array(candidate.utf8), Array(candidate.utf8))
            return false
        }
        return ConstantTime.equals(Array(candidate.utf8), Array(stored.utf8))
    }
}
