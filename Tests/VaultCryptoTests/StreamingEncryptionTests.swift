import Foundation
import Testing
@testable import VaultCrypto

/// Attachments too large to hold are encrypted and decrypted piece by piece; the bytes must be exactly
/// the one-shot binary EncString's (which the known-answer vectors pin), whatever the piece sizes.
@Suite("Binary EncStrings piece by piece")
struct StreamingEncryptionTests {
    static let key = try! SymmetricCryptoKey(bytes: (0..<64).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) })
    static let iv: [UInt8] = (0..<16).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 1) }

    /// Splits `bytes` into pieces of the given sizes, cycling.
    static func pieces(_ bytes: [UInt8], sizes: [Int]) -> [ArraySlice<UInt8>] {
        var out: [ArraySlice<UInt8>] = []
        var start = 0
        var index = 0
        while start < bytes.count {
            let end = min(bytes.count, start + sizes[index % sizes.count])
            out.append(bytes[start..<end])
            start = end
            index += 1
        }
        return out
    }

    @Test("the same bytes as the one-shot encryption, for lengths around block edges and any piece sizes", arguments: [
        0, 1, 15, 16, 17, 31, 32, 33, 1000, 65_536, 65_537, 200_003,
    ])
    func sameAsOneShot(length: Int) throws {
        let plaintext = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let oneShot = Array(try EncString.encrypt(plaintext, key: Self.key, iv: Self.iv).binary())
        for sizes in [[1], [7, 16, 3], [16], [4096], [65_536, 1]] {
            var encryptor = try StreamingEncryptor(key: Self.key, iv: Self.iv)
            var ciphertext: [UInt8] = []
            for piece in Self.pieces(plaintext, sizes: sizes) { ciphertext += try encryptor.update(piece) }
            let (last, mac) = try encryptor.finish()
            ciphertext += last
            #expect(encryptor.header(mac: mac) + ciphertext == oneShot, "length \(length), pieces \(sizes)")
            #expect(encryptor.ciphertextLength == ciphertext.count)

            let header = Array(oneShot[0..<StreamingEncryptor.headerLength])
            let body = Array(oneShot[StreamingEncryptor.headerLength...])
            var verifier = try StreamingVerifier(key: Self.key, header: header)
            var decryptor = try StreamingDecryptor(key: Self.key, header: header)
            var opened: [UInt8] = []
            for piece in Self.pieces(body, sizes: sizes) {
                verifier.update(piece)
                opened += try decryptor.update(piece)
            }
            try verifier.verify()
            opened += try decryptor.finish()
            #expect(opened == plaintext, "length \(length), pieces \(sizes)")
        }
    }

    @Test("a file's plaintext length: within one block from its length alone, exact from its last block", arguments: [
        0, 1, 15, 16, 17, 31, 32, 33, 81, 1000, 65_537,
    ])
    func plaintextLength(length: Int) throws {
        let plaintext = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 17 &+ 5) }
        let file = Array(try EncString.encrypt(plaintext, key: Self.key, iv: Self.iv).binary())
        let range = try #require(EncryptedFileLength.plaintextLengths(encryptedLength: file.count))
        #expect(range.contains(length))
        #expect(range.count == 16)
        let header = Array(file[0..<StreamingEncryptor.headerLength])
        let tail = Array(file.suffix(file.count - StreamingEncryptor.headerLength == 16 ? 16 : 32))
        #expect(try EncryptedFileLength.plaintextLength(key: Self.key, header: header, tail: tail, encryptedLength: file.count) == length)
    }

    @Test("lengths no binary EncString has are refused")
    func impossibleLengths() {
        for length in [0, 48, 49, 50, 64, 66] {
            #expect(EncryptedFileLength.plaintextLengths(encryptedLength: length) == nil, "\(length)")
        }
        #expect(EncryptedFileLength.plaintextLengths(encryptedLength: 65) == 0...15)
    }

    @Test("a changed byte anywhere fails the MAC; a cut-off file does not decrypt")
    func tampering() throws {
        let plaintext = Array(repeating: UInt8(0x41), count: 100)
        let file = Array(try EncString.encrypt(plaintext, key: Self.key, iv: Self.iv).binary())
        for position in [1, 20, 60, file.count - 1] {
            var changed = file
            changed[position] ^= 0x01
            var verifier = try StreamingVerifier(key: Self.key, header: Array(changed[0..<49]))
            verifier.update(changed[49...])
            #expect(throws: CryptoError.macMismatch) { try verifier.verify() }
        }
        var decryptor = try StreamingDecryptor(key: Self.key, header: Array(file[0..<49]))
        _ = try decryptor.update(file[49..<(file.count - 5)])
        #expect(throws: CryptoError.self) { try decryptor.finish() }
        #expect(throws: CryptoError.self) { try StreamingVerifier(key: Self.key, header: [3] + Array(file[1..<49])) }
    }
}
