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

/// SHA-256 of bytes in place, for fingerprints of stored records (the sealed name index).
public enum ContentDigest {
    public static func sha256(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        Array(SHA256.hash(data: bytes))
    }

    /// SHA-256 of a string's UTF-8 bytes (without a copy when the string is stored contiguously).
    public static func sha256(_ text: String) -> [UInt8] {
        text.utf8.withContiguousStorageIfAvailable { sha256(UnsafeRawBufferPointer($0)) } ?? Array(SHA256.hash(data: Array(text.utf8)))
    }
}
