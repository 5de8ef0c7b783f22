import Foundation
import VaultCrypto
import VaultModels

/// Ids that come from the server are data, never paths (docs/SECURITY.md, "Ids from the server never
/// name a path"). A server, or anyone who answers in its place, chooses the user id in the access
/// token's `sub` claim, the attachment ids and the item ids; the client names folders and files after
/// some of them. Every such name passes through here, so that `../..`, a slash, a NUL or an empty id
/// can never reach outside the profile's own folders, and a removal (logout, eviction) can only remove
/// what the client itself put there.
enum DiskName {
    /// The folder name for a user's files: the user id itself when it is a UUID (Bitwarden-compatible
    /// servers use UUIDs), otherwise `id-` and the SHA-256 of the id in hex, which is a plain file name
    /// whatever the id holds. A name this function made maps to itself, so a folder listed from disk
    /// names the same folder again.
    static func userFolder(_ userID: String) -> String {
        if isUUID(userID) { return userID.lowercased() }
        if userID.hasPrefix("id-"), userID.utf8.count == 67, userID.utf8.dropFirst(3).allSatisfy(isLowerHex) { return userID }
        let bytes = Array(userID.utf8)
        return "id-" + bytes.withUnsafeBytes { ContentDigest(of: $0) }.hex()
    }

    /// The file name for a server-made id (an attachment's), or `nil` when the id is not a plain name:
    /// 1–128 ASCII letters, digits and dashes. Bitwarden's attachment ids are 32 random lowercase
    /// letters and digits; Vaultwarden's are UUIDs or the same form.
    static func file(_ id: String) -> String? {
        guard (1...128).contains(id.utf8.count), id.utf8.allSatisfy(isNameByte) else { return nil }
        return id
    }

    /// Whether `text` is a UUID in its 8-4-4-4-12 hex form (either case).
    static func isUUID(_ text: String) -> Bool { UUIDText.isUUID(text) }

    private static func isLowerHex(_ byte: UInt8) -> Bool { UUIDText.isLowerHex(byte) }

    private static func isNameByte(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
            || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) || byte == UInt8(ascii: "-")
    }
}
