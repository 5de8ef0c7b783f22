#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CArgon2Reference
import Crypto
import _CryptoExtras

/// How a master key is derived from the master password (spec §1.2).
public enum KdfConfiguration: Sendable, Hashable {
    /// PBKDF2-HMAC-SHA256 with the given iteration count.
    case pbkdf2(iterations: Int)
    /// Argon2id version 0x13 with `iterations` passes, `memoryMiB` mebibytes and `parallelism` lanes.
    case argon2id(iterations: Int, memoryMiB: Int, parallelism: Int)

    /// The default for new accounts: PBKDF2 with 600,000 iterations.
    public static let defaultPBKDF2 = KdfConfiguration.pbkdf2(iterations: 600_000)
    /// Argon2id defaults of the Bitwarden SDK: 3 iterations, 64 MiB, 4 lanes.
    public static let defaultArgon2id = KdfConfiguration.argon2id(iterations: 3, memoryMiB: 64, parallelism: 4)

    /// Client limits (spec §1.2 "SDK client refuses below"); the upper bounds are the official server's,
    /// so a hostile server cannot make the client spin or exhaust memory.
    public static let pbkdf2Iterations = 5_000...2_000_000
    public static let argon2Iterations = 2...10
    public static let argon2MemoryMiB = 16...1024
    public static let argon2Parallelism = 1...16

    /// Builds a configuration from the wire fields (`kdf`, `kdfIterations`, `kdfMemory`, `kdfParallelism`)
    /// and validates it.
    public init(type: Int, iterations: Int, memoryMiB: Int?, parallelism: Int?) throws {
        switch type {
        case 0:
            self = .pbkdf2(iterations: iterations)
        case 1:
            guard let memoryMiB, let parallelism else {
                throw CryptoError.invalidKdfParameters("Argon2id needs memory and parallelism")
            }
            self = .argon2id(iterations: iterations, memoryMiB: memoryMiB, parallelism: parallelism)
        default:
            throw CryptoError.invalidKdfParameters("unknown KDF type \(type)")
        }
        try validate()
    }

    /// The wire `kdf` value: 0 for PBKDF2, 1 for Argon2id.
    public var typeCode: Int {
        switch self {
        case .pbkdf2: return 0
        case .argon2id: return 1
        }
    }

    /// The wire `kdfIterations`.
    public var iterations: Int {
        switch self {
        case .pbkdf2(let iterations), .argon2id(let iterations, _, _): return iterations
        }
    }

    /// The wire `kdfMemory` (MiB), `nil` for PBKDF2.
    public var memoryMiB: Int? {
        if case .argon2id(_, let memory, _) = self { return memory }
        return nil
    }

    /// The wire `kdfParallelism`, `nil` for PBKDF2.
    public var parallelism: Int? {
        if case .argon2id(_, _, let parallelism) = self { return parallelism }
        return nil
    }

    /// Refuses parameters outside the client's limits.
    public func validate() throws {
        switch self {
        case .pbkdf2(let iterations):
            try Self.check(iterations, in: Self.pbkdf2Iterations, "PBKDF2 iterations")
        case .argon2id(let iterations, let memory, let parallelism):
            try Self.check(iterations, in: Self.argon2Iterations, "Argon2id iterations")
            try Self.check(memory, in: Self.argon2MemoryMiB, "Argon2id memory (MiB)")
            try Self.check(parallelism, in: Self.argon2Parallelism, "Argon2id parallelism")
        }
    }

    private static func check(_ value: Int, in range: ClosedRange<Int>, _ name: String) throws {
        if value < range.lowerBound {
            throw CryptoError.invalidKdfParameters("\(name) is \(value), below the minimum of \(range.lowerBound)")
        }
        if value > range.upperBound {
            throw CryptoError.invalidKdfParameters("\(name) is \(value), above the maximum of \(range.upperBound)")
        }
    }

    /// Bitwarden's current minimums for an account's KDF: the lowest settings its clients let an
    /// account choose today (PBKDF2 600,000 iterations; Argon2id 2 iterations, 16 MiB, 1 lane). The
    /// wider ``pbkdf2Iterations`` range only exists because old accounts still have such settings; a
    /// first login below these needs the user's explicit confirmation (docs/SECURITY.md, KDF downgrade).
    public static let currentMinimumPBKDF2Iterations = 600_000
    public static let currentMinimumArgon2Iterations = 2
    public static let currentMinimumArgon2MemoryMiB = 16
    public static let currentMinimumArgon2Parallelism = 1

    /// Whether these settings meet Bitwarden's current minimums.
    public var meetsCurrentMinimums: Bool {
        switch self {
        case .pbkdf2(let iterations):
            return iterations >= Self.currentMinimumPBKDF2Iterations
        case .argon2id(let iterations, let memory, let parallelism):
            return iterations >= Self.currentMinimumArgon2Iterations && memory >= Self.currentMinimumArgon2MemoryMiB
                && parallelism >= Self.currentMinimumArgon2Parallelism
        }
    }

    /// Whether guessing a password costs an attacker at least as much with `self` as with `other`.
    ///
    /// Within one algorithm every cost parameter must be at least `other`'s (Argon2id's lane count
    /// does not change the total work, so it may differ). Argon2id replacing PBKDF2 is not weaker
    /// when it meets the current minimums (memory-hardness is gained); PBKDF2 replacing Argon2id
    /// always is (memory-hardness is lost, whatever the iteration count).
    public func isAtLeastAsStrong(as other: KdfConfiguration) -> Bool {
        switch (self, other) {
        case (.pbkdf2(let mine), .pbkdf2(let theirs)):
            return mine >= theirs
        case (.argon2id(let iterations, let memory, _), .argon2id(let otherIterations, let otherMemory, _)):
            return iterations >= otherIterations && memory >= otherMemory
        case (.argon2id, .pbkdf2):
            return meetsCurrentMinimums
        case (.pbkdf2, .argon2id):
            return false
        }
    }

    /// A short text a person reads, e.g. "PBKDF2-SHA256 with 100,000 iterations".
    public var summary: String {
        switch self {
        case .pbkdf2(let iterations):
            return "PBKDF2-SHA256 with \(Self.grouped(iterations)) iterations"
        case .argon2id(let iterations, let memory, let parallelism):
            return "Argon2id with \(iterations) iterations, \(memory) MiB and \(parallelism) lanes"
        }
    }

    /// The settings as one word a person can type back to confirm them: `pbkdf2:600000` or
    /// `argon2id:3,64,4` (iterations, MiB, lanes). Read with ``init(spec:)``.
    public var spec: String {
        switch self {
        case .pbkdf2(let iterations): return "pbkdf2:\(iterations)"
        case .argon2id(let iterations, let memory, let parallelism): return "argon2id:\(iterations),\(memory),\(parallelism)"
        }
    }

    /// Reads a ``spec`` word; `nil` when it is not one.
    public init?(spec: String) {
        let parts = spec.lowercased().split(separator: ":", maxSplits: 1).map(String.init)
        guard parts.count == 2 else { return nil }
        let numbers = parts[1].split(separator: ",", omittingEmptySubsequences: false).map { Int($0) }
        guard !numbers.contains(where: { $0 == nil }) else { return nil }
        let values = numbers.compactMap { $0 }
        switch (parts[0], values.count) {
        case ("pbkdf2", 1): self = .pbkdf2(iterations: values[0])
        case ("argon2id", 3): self = .argon2id(iterations: values[0], memoryMiB: values[1], parallelism: values[2])
        default: return nil
        }
    }

    private static func grouped(_ value: Int) -> String {
        let digits = Array(String(value))
        var out = ""
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { out.append(",") }
            out.append(digit)
        }
        return out
    }

    /// Derives 32 bytes from `password` and the (already normalised) `salt`.
    func derive(password: [UInt8], salt: [UInt8]) throws -> SymmetricKey {
        try validate()
        switch self {
        case .pbkdf2(let iterations):
            return try PBKDF2SHA256.derive(password: password, salt: salt, iterations: iterations)
        case .argon2id(let iterations, let memoryMiB, let parallelism):
            // spec §1.2: the Argon2 salt is the SHA-256 digest of the normalised salt string.
            let digest = Array(SHA256.hash(data: salt))
            var out = try Argon2id.derive(
                password: password, salt: digest, iterations: iterations, memoryKiB: memoryMiB * 1024,
                parallelism: parallelism, length: 32)
            defer { out.withUnsafeMutableBytes { zero($0) } }
            return SymmetricKey(data: out)
        }
    }
}

/// Argon2id (version 0x13) from the vendored reference implementation (`CArgon2Reference`), the same
/// code on Linux and Apple platforms; no system library is needed.
public enum Argon2id {
    /// Derives `length` bytes. `secret` and `associatedData` are Argon2's optional inputs (Bitwarden
    /// uses neither; RFC 9106's test vector does). Limits are the caller's: `KdfConfiguration`
    /// validates the account's parameters before this runs.
    public static func derive(
        password: [UInt8], salt: [UInt8], secret: [UInt8] = [], associatedData: [UInt8] = [],
        iterations: Int, memoryKiB: Int, parallelism: Int, length: Int
    ) throws -> [UInt8] {
        guard iterations > 0, memoryKiB > 0, parallelism > 0, length >= 4,
              iterations <= Int(UInt32.max), memoryKiB <= Int(UInt32.max), parallelism <= Int(UInt32.max)
        else {
            throw CryptoError.invalidKdfParameters(
                "Argon2id needs positive iterations, memory and parallelism and at least 4 output bytes")
        }
        var out = [UInt8](repeating: 0, count: length)
        let status = password.withUnsafeBytes { pwd in
            salt.withUnsafeBytes { saltBytes in
                secret.withUnsafeBytes { secretBytes in
                    associatedData.withUnsafeBytes { adBytes in
                        out.withUnsafeMutableBytes { outBytes in
                            vaultsync_argon2id_raw(
                                pwd.baseAddress, pwd.count, saltBytes.baseAddress, saltBytes.count,
                                secretBytes.baseAddress, secretBytes.count, adBytes.baseAddress, adBytes.count,
                                UInt32(iterations), UInt32(memoryKiB), UInt32(parallelism),
                                outBytes.baseAddress, outBytes.count)
                        }
                    }
                }
            }
        }
        guard status == 0 else {
            out.withUnsafeMutableBytes { zero($0) }
            let message = String(cString: vaultsync_argon2_message(status))
            throw CryptoError.invalidKdfParameters("Argon2id failed: \(message)")
        }
        return out
    }
}

/// PBKDF2-HMAC-SHA256 from swift-crypto. Low iteration counts are allowed here on purpose: the
/// master-password hashes use 1 and 2 iterations over an already slow master key (spec §1.3).
enum PBKDF2SHA256 {
    static func derive<P: DataProtocol, S: DataProtocol>(password: P, salt: S, iterations: Int, byteCount: Int = 32) throws -> SymmetricKey {
        do {
            return try KDF.Insecure.PBKDF2.deriveKey(
                from: password, salt: salt, using: .sha256, outputByteCount: byteCount, unsafeUncheckedRounds: iterations)
        } catch {
            throw CryptoError.invalidKdfParameters("PBKDF2 failed: \(error)")
        }
    }
}

/// Overwrites a buffer with zeros in a way the optimiser keeps.
func zero(_ buffer: UnsafeMutableRawBufferPointer) {
    guard let base = buffer.baseAddress else { return }
    // A call into libc with the pointer escaping is not elided by the optimiser.
    _ = memset(base, 0, buffer.count)
}

/// Server-side password storage: a salted, slow PBKDF2-SHA256 of the client's master-password hash
/// (spec §1.3: the server stores only a salted slow hash of what it receives).
public enum StoredPasswordHash {
    /// The minimum iteration count the server accepts for its own storage.
    public static let minimumIterations = 600_000

    /// Derives the stored hash of `clientHash` (the base64 N=1 master-password hash) with `salt`.
    public static func derive(clientHash: String, salt: [UInt8], iterations: Int) throws -> [UInt8] {
        let key = try PBKDF2SHA256.derive(password: Array(clientHash.utf8), salt: salt, iterations: iterations)
        return key.withUnsafeBytes { Array($0) }
    }

    /// Recomputes and compares in constant time.
    public static func verify(clientHash: String, salt: [UInt8], iterations: Int, expected: [UInt8]) -> Bool {
        guard let actual = try? derive(clientHash: clientHash, salt: salt, iterations: iterations) else { return false }
        return ConstantTime.equals(actual, expected)
    }
}

/// Constant-time comparison of secrets (hashes, tokens).
public enum ConstantTime {
    /// `true` when both byte strings are equal; the time depends only on their lengths.
    public static func equals(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        guard lhs.count == rhs.count else { return false }
        var difference: UInt8 = 0
        for index in 0..<lhs.count { difference |= lhs[index] ^ rhs[index] }
        return difference == 0
    }
}
