import Foundation
import Testing
@testable import VaultCrypto

/// Argon2id from the vendored reference implementation (no system library), checked against RFC 9106's
/// Argon2id test vector (§5.3, with secret and associated data) and the reference implementation's own
/// Argon2id cases; the protocol's KDF vectors (TV2) are in KnownAnswerTests.
@Suite("Argon2id (vendored reference implementation)")
struct Argon2Tests {
    @Test("RFC 9106 §5.3: Argon2id, t=3, m=32 KiB, p=4, with secret and associated data")
    func rfc9106() throws {
        let tag = try Argon2id.derive(
            password: [UInt8](repeating: 0x01, count: 32), salt: [UInt8](repeating: 0x02, count: 16),
            secret: [UInt8](repeating: 0x03, count: 8), associatedData: [UInt8](repeating: 0x04, count: 12),
            iterations: 3, memoryKiB: 32, parallelism: 4, length: 32)
        #expect(Data(tag).hex == "0d640df58d78766c08c037a34a8b53c9d01ef0452d75b65eb52520e96b01e659")
    }

    struct Case: Sendable, CustomTestStringConvertible {
        let iterations: Int, memoryKiB: Int, parallelism: Int, password: String, salt: String, hex: String
        var testDescription: String { "t=\(iterations) m=\(memoryKiB) p=\(parallelism) \(password)/\(salt)" }
    }

    @Test("the reference implementation's Argon2id cases (v=19)", arguments: [
        Case(iterations: 2, memoryKiB: 1 << 16, parallelism: 1, password: "password", salt: "somesalt",
             hex: "09316115d5cf24ed5a15a31a3ba326e5cf32edc24702987c02b6566f61913cf7"),
        Case(iterations: 2, memoryKiB: 1 << 8, parallelism: 1, password: "password", salt: "somesalt",
             hex: "9dfeb910e80bad0311fee20f9c0e2b12c17987b4cac90c2ef54d5b3021c68bfe"),
        Case(iterations: 2, memoryKiB: 1 << 8, parallelism: 2, password: "password", salt: "somesalt",
             hex: "6d093c501fd5999645e0ea3bf620d7b8be7fd2db59c20d9fff9539da2bf57037"),
        Case(iterations: 1, memoryKiB: 1 << 16, parallelism: 1, password: "password", salt: "somesalt",
             hex: "f6a5adc1ba723dddef9b5ac1d464e180fcd9dffc9d1cbf76cca2fed795d9ca98"),
        Case(iterations: 2, memoryKiB: 1 << 16, parallelism: 1, password: "differentpassword", salt: "somesalt",
             hex: "0b84d652cf6b0c4beaef0dfe278ba6a80df6696281d7e0d2891b817d8c458fde"),
        Case(iterations: 2, memoryKiB: 1 << 16, parallelism: 1, password: "password", salt: "diffsalt",
             hex: "bdf32b05ccc42eb15d58fd19b1f856b113da1e9a5874fdcc544308565aa8141c"),
    ])
    func referenceCases(_ c: Case) throws {
        let tag = try Argon2id.derive(
            password: Array(c.password.utf8), salt: Array(c.salt.utf8),
            iterations: c.iterations, memoryKiB: c.memoryKiB, parallelism: c.parallelism, length: 32)
        #expect(Data(tag).hex == c.hex)
    }

    @Test("bad parameters are refused with the implementation's reason, not a crash")
    func refusals() {
        // Salt shorter than Argon2's 8-byte minimum.
        #expect(throws: CryptoError.self) {
            try Argon2id.derive(password: Array("pw".utf8), salt: [1], iterations: 2, memoryKiB: 64, parallelism: 1, length: 32)
        }
        // Less memory than 8 KiB per lane.
        #expect(throws: CryptoError.self) {
            try Argon2id.derive(password: Array("pw".utf8), salt: [UInt8](repeating: 2, count: 16), iterations: 2,
                                memoryKiB: 8, parallelism: 4, length: 32)
        }
        #expect(throws: CryptoError.self) {
            try Argon2id.derive(password: [], salt: [UInt8](repeating: 2, count: 16), iterations: 0, memoryKiB: 64,
                                parallelism: 1, length: 32)
        }
    }
}
