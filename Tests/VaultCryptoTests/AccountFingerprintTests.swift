import Foundation
import Testing
@testable import VaultCrypto

/// Fingerprint phrases against the two vectors Bitwarden's SDK publishes (bitwarden/sdk, crates
/// bitwarden-crypto: `fingerprint.rs` for the word selection, `lib.rs` test_fingerprint end to end).
@Suite("Account fingerprint phrases")
struct AccountFingerprintTests {
    /// The SDK's 294-byte SPKI DER RSA-2048 public key.
    static let publicKey: [UInt8] = [
        48, 130, 1, 34, 48, 13, 6, 9, 42, 134, 72, 134, 247, 13, 1, 1, 1, 5, 0, 3, 130, 1, 15,
        0, 48, 130, 1, 10, 2, 130, 1, 1, 0, 187, 38, 44, 241, 110, 205, 89, 253, 25, 191, 126,
        84, 121, 202, 61, 223, 189, 244, 118, 212, 74, 139, 130, 97, 115, 164, 167, 106, 191,
        188, 233, 218, 196, 250, 187, 146, 125, 160, 150, 49, 198, 224, 176, 10, 0, 143, 99,
        230, 232, 160, 51, 104, 154, 211, 33, 80, 170, 4, 68, 80, 219, 115, 167, 114, 156, 227,
        125, 193, 128, 123, 39, 254, 191, 124, 63, 129, 44, 63, 18, 56, 161, 48, 158, 0, 27,
        146, 2, 99, 136, 75, 21, 135, 6, 118, 12, 26, 251, 184, 172, 249, 53, 78, 210, 46, 143,
        17, 104, 202, 65, 173, 229, 219, 233, 144, 163, 101, 216, 238, 152, 54, 158, 1, 195,
        50, 203, 21, 226, 12, 82, 170, 175, 170, 160, 21, 247, 248, 80, 97, 123, 0, 152, 116,
        229, 126, 221, 199, 155, 194, 192, 51, 207, 177, 240, 160, 84, 241, 41, 88, 176, 53,
        111, 28, 173, 177, 232, 158, 22, 79, 133, 152, 31, 32, 12, 196, 147, 58, 57, 50, 252,
        208, 131, 150, 179, 132, 178, 150, 234, 251, 143, 125, 163, 144, 20, 46, 71, 168, 252,
        164, 86, 120, 124, 56, 252, 206, 210, 236, 212, 139, 127, 189, 236, 40, 46, 2, 238, 13,
        216, 40, 48, 85, 133, 229, 181, 155, 176, 217, 241, 154, 153, 213, 112, 222, 72, 219,
        197, 3, 219, 56, 77, 109, 47, 72, 251, 131, 36, 240, 96, 169, 31, 82, 93, 166, 242, 3,
        33, 213, 2, 3, 1, 0, 1,
    ]

    @Test("the SDK's end-to-end vector: its public key and user id give its phrase")
    func endToEnd() {
        #expect(Self.publicKey.count == 294)
        #expect(AccountFingerprint.phrase(material: "a09726a0-9590-49d1-a5f5-afe300b6a515", publicKeySPKI: Self.publicKey)
                == "turban-deftly-anime-chatroom-unselfish")
        #expect(AccountFingerprint.phrase(material: "a09726a0-9590-49d1-a5f5-afe300b6a516", publicKeySPKI: Self.publicKey)
                != "turban-deftly-anime-chatroom-unselfish", "the material is part of it")
    }

    @Test("the SDK's word-selection vector: a 32-byte hash gives its five words")
    func wordSelection() throws {
        let hash = try #require(Data(base64Encoded: "V5AQSk83YXd6kZqCncC6d9J72R7UZ60Xl1eIoDoWgTc="))
        #expect(AccountFingerprint.words(forHash: Array(hash)) == ["predefine", "hunting", "pastime", "enrich", "unhearing"])
    }
}
