/// The one-time code that binds an organization invite to the person it was meant for
/// (docs/PROTOCOL.md, "Organization invites"; docs/SECURITY.md, "Invitations are bound to a one-time code").
///
/// The server makes it when an owner or admin invites an email and hands it to them only; they pass it
/// to the invitee over another channel, and accepting needs it. It is 28 symbols of the RFC 4648 base32
/// alphabet (140 bits), shown in groups of four: `ABCD-EFGH-IJKL-MNOP-QRST-UVWX-YZ23`. No 0, 1, 8 or 9, so
/// nothing reads as a letter it is not; case, spaces and dashes do not matter when it is typed.
public enum InvitationCode {
    /// The symbols a code is made of, 5 bits each.
    public static let alphabet: [Character] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
    /// How many symbols a code has.
    public static let length = 28
    /// How many symbols a shown group has.
    public static let groupSize = 4

    /// The code as typed, reduced to its symbols (upper case, spaces and dashes removed); `nil` when that
    /// is not `length` symbols of the alphabet.
    public static func normalised(_ typed: String) -> String? {
        let symbols = String(typed.filter { !$0.isWhitespace && $0 != "-" }.uppercased())
        guard symbols.count == length, symbols.allSatisfy({ alphabet.contains($0) }) else { return nil }
        return symbols
    }

    /// The code in groups of four, as it is shown to the owner.
    public static func grouped(_ symbols: String) -> String {
        var groups: [String] = []
        var rest = Substring(symbols)
        while !rest.isEmpty {
            groups.append(String(rest.prefix(groupSize)))
            rest = rest.dropFirst(groupSize)
        }
        return groups.joined(separator: "-")
    }
}
