#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Crypto

/// An account's fingerprint phrase (docs/PROTOCOL.md, "Fingerprint phrases"): what two people compare
/// before one trusts the other's public key (confirming an organization member). The SHA-256 of the
/// public key (SPKI DER) is the pseudorandom key of HKDF-Expand-SHA256 with the fingerprint material
/// (the user's id) as info, 32 bytes; that number, read big-endian, gives five words of the EFF long
/// word list, least significant first (five words carry at least 64 bits: 7776⁵ > 2⁶⁴).
public enum AccountFingerprint {
    public static let wordCount = 5

    /// The phrase's words joined with "-", as Bitwarden's clients print it.
    public static func phrase(material: String, publicKeySPKI: some DataProtocol) -> String {
        let keyHash = SHA256.hash(data: Array(publicKeySPKI))
        let expanded = HKDF<SHA256>.expand(pseudoRandomKey: SymmetricKey(data: Array(keyHash)), info: Array(material.utf8), outputByteCount: 32)
        return words(forHash: expanded.withUnsafeBytes { Array($0) }).joined(separator: "-")
    }

    /// The words for a 32-byte hash: repeated division of the big-endian integer by the list's length.
    static func words(forHash hash: [UInt8]) -> [String] {
        let list = EFFWordList.words
        var number = hash
        var words: [String] = []
        for _ in 0..<wordCount {
            // Long division of the base-256 number by the list's length; the remainder picks the word.
            var remainder = 0
            for index in number.indices {
                let current = remainder * 256 + Int(number[index])
                number[index] = UInt8(current / list.count)
                remainder = current % list.count
            }
            words.append(list[remainder])
        }
        return words
    }
}
