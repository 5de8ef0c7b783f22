#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Crypto

/// Login URI checksums (spec §1.10, TV11).
public enum URIChecksum {
    /// The checksum plaintext: `base64(SHA-256(UTF-8(uri)))`. It is stored encrypted as `uriChecksum`.
    public static func plaintext(for uri: String) -> String {
        Data(SHA256.hash(data: Array(uri.utf8))).base64EncodedString()
    }
}
