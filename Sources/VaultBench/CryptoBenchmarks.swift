import Crypto
import Foundation
import VaultCrypto
import VaultModels
import _CryptoExtras

/// P4: EncString encrypt/decrypt throughput next to raw BoringSSL AES-256-CBC + HMAC-SHA256 on the
/// same plaintexts, in the same run.
enum CryptoBenchmarks {
    static func run(options: BenchOptions) throws -> [BenchResult] {
        let count = options.quick ? 20_000 : 200_000
        let key = SymmetricCryptoKey.generate()
        let raw = key.rawBytes
        let encKey = SymmetricKey(data: raw.prefix(32))
        let macKey = SymmetricKey(data: raw.suffix(32))
        let random = SystemRandomSource()
        // Typical vault field sizes: names, usernames, passwords, URIs, a few notes.
        let plaintexts: [[UInt8]] = (0..<count).map { index in
            let length = [12, 20, 32, 48, 200][index % 5]
            return (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) & 0x7F | 0x20 }
        }
        let bytes = plaintexts.reduce(0) { $0 + $1.count }
        var results: [BenchResult] = []

        // Encrypt: EncString (random IV, MAC, base64 string) vs raw (random IV, CBC, HMAC, bytes only).
        var encrypted: [EncString] = []
        encrypted.reserveCapacity(count)
        var rawOutputs: [(iv: Data, ciphertext: Data, mac: Data)] = []
        rawOutputs.reserveCapacity(count)
        let (ours, reference) = try compare(rounds: 5, ours: {
            encrypted.removeAll(keepingCapacity: true)
            for plaintext in plaintexts { encrypted.append(try EncString.encrypt(plaintext, key: key, random: random)) }
        }, reference: {
            rawOutputs.removeAll(keepingCapacity: true)
            for plaintext in plaintexts {
                rawOutputs.append(try RawCrypto.encrypt(plaintext, encKey: encKey, macKey: macKey, random: random))
            }
        })
        results.append(throughput("P4-enc", "EncString encrypt (\(count) fields, \(bytes / count) B avg)", ours, reference, count))

        // Decrypt: parse the string, check MAC, decrypt, validate UTF-8 vs raw MAC check + decrypt of bytes.
        let strings = encrypted.map(\.serialized)
        var checksum = 0
        let (oursDecrypt, referenceDecrypt) = try compare(rounds: 5, ours: {
            for text in strings { checksum &+= try EncString(text).decryptString(key: key).utf8.count }
        }, reference: {
            for (iv, ciphertext, mac) in rawOutputs {
                checksum &+= try RawCrypto.decrypt(iv: iv, ciphertext: ciphertext, mac: mac, encKey: encKey, macKey: macKey).count
            }
        })
        precondition(checksum > 0)
        results.append(throughput("P4-dec", "EncString parse + decrypt (\(count) fields)", oursDecrypt, referenceDecrypt, count))
        results.append(try json(options: options))
        return results
    }

    /// P4-json (a report): an item's stored text written straight out (`jsonBytes()`, what storing an item
    /// and sealing a queue record do) next to the same text through a tree (`jsonObject().serialized()`,
    /// how it was written before commit 572f52d), on the benchmark vault's items.
    static func json(options: BenchOptions) throws -> BenchResult {
        let count = options.quick ? 2_000 : 10_000
        let keys = VaultKeys(userKey: SymmetricCryptoKey.generate())
        let wires = try (0..<count).map { index in
            var view = try keys.newItem(type: .login, name: "Item \(index) at site\(index % 977).example")
            view.login = LoginView(uris: [LoginURIView(uri: "https://login.site\(index % 977).example/account/\(index)")],
                                   username: "user\(index)@mail.example", password: "pw-\(index)-xK9!")
            if index % 4 == 0 { view.notes = "Recovery codes: \(index * 104_729)" }
            return try view.encrypted(with: keys)
        }
        var bytes = 0
        let (direct, tree) = compare(rounds: 5, ours: {
            for wire in wires { bytes &+= wire.jsonBytes().count }
        }, reference: {
            for wire in wires { bytes &+= wire.jsonObject().serialized().count }
        })
        precondition(bytes > 0)
        return BenchResult(id: "P4-json", what: "an item's JSON text written directly (\(count) items)", value: Double(count) / direct, unit: "ops/s",
                           reference: Double(count) / tree, referenceWhat: "the same text through a tree", ratio: direct / tree,
                           goal: "report", met: nil)
    }

    static func throughput(_ id: String, _ what: String, _ ours: Double, _ reference: Double, _ count: Int) -> BenchResult {
        let ratio = ours / reference
        return BenchResult(id: id, what: what, value: Double(count) / ours, unit: "ops/s",
                           reference: Double(count) / reference, referenceWhat: "raw BoringSSL AES-256-CBC + HMAC-SHA256",
                           ratio: ratio, goal: "≤ 1.5× raw time", met: ratio <= 1.5)
    }

    /// Unlock with the default KDF: PBKDF2-SHA256 600,000 iterations, then unwrap the user key.
    static func unlock(options: BenchOptions) throws -> [BenchResult] {
        let password = "correct horse battery staple"
        let kdf = KdfConfiguration.defaultPBKDF2
        let master = try MasterKey.derive(password: password, salt: "bench@example.com", kdf: kdf)
        let protected = try master.encryptUserKey(.generate())
        let rounds = options.quick ? 3 : 10
        let seconds = try bestOf(rounds) {
            let key = try MasterKey.derive(password: password, salt: "bench@example.com", kdf: kdf)
            _ = try key.decryptUserKey(protected)
        }
        var results = [BenchResult(id: "UNLOCK", what: "unlock: PBKDF2-SHA256 600k + unwrap user key", value: seconds * 1000,
                                   unit: "ms", reference: nil, referenceWhat: nil, ratio: nil, goal: "report", met: nil)]
        let argon = try bestOf(options.quick ? 1 : 3) {
            let key = try MasterKey.derive(password: password, salt: "bench@example.com", kdf: .defaultArgon2id)
            _ = key.serverAuthorizationHash(password: password)
        }
        results.append(BenchResult(id: "UNLOCK2", what: "unlock: Argon2id t=3 m=64MiB p=4", value: argon * 1000, unit: "ms",
                                   reference: nil, referenceWhat: nil, ratio: nil, goal: "report", met: nil))
        return results
    }

    /// Our Argon2id (the vendored reference implementation, compiled in) next to the system's libargon2,
    /// loaded at run time, on the same inputs with the default parameters; the outputs must agree.
    static func argon2(options: BenchOptions) throws -> BenchResult {
        let password = Array("correct horse battery staple".utf8)
        let salt = Array(SHA256.hash(data: Array("bench@example.com".utf8)))
        let (t, m, p) = (3, 64 * 1024, 4)
        let rounds = options.quick ? 1 : 5
        var ours: [UInt8] = []
        let oursSeconds = try bestOf(rounds) {
            ours = try Argon2id.derive(password: password, salt: salt, iterations: t, memoryKiB: m, parallelism: p, length: 32)
        }
        let what = "Argon2id t=3 m=64MiB p=4 (vendored C)"
        guard let system = SystemArgon2.load() else {
            return BenchResult(id: "ARGON2", what: what, value: oursSeconds * 1000, unit: "ms", reference: nil,
                               referenceWhat: "libargon2 not installed (Debian: libargon2-1, Homebrew: argon2)",
                               ratio: nil, goal: "≤ 1.5× libargon2", met: nil)
        }
        var theirs = [UInt8](repeating: 0, count: 32)
        let referenceSeconds = try bestOf(rounds) {
            let status = password.withUnsafeBytes { pwd in
                salt.withUnsafeBytes { saltBytes in
                    theirs.withUnsafeMutableBytes { out in
                        system.hash(UInt32(t), UInt32(m), UInt32(p), pwd.baseAddress, pwd.count,
                                    saltBytes.baseAddress, saltBytes.count, out.baseAddress, out.count)
                    }
                }
            }
            guard status == 0 else { throw SystemArgon2.Failure(status: status) }
        }
        guard ours == theirs else { throw SystemArgon2.Failure(status: -999) }
        let ratio = oursSeconds / referenceSeconds
        return BenchResult(id: "ARGON2", what: what, value: oursSeconds * 1000, unit: "ms",
                           reference: referenceSeconds * 1000, referenceWhat: "system libargon2 (\(system.path)), same output",
                           ratio: ratio, goal: "≤ 1.5× libargon2", met: ratio <= 1.5)
    }
}

/// The system's libargon2, opened with `dlopen` so the benchmark can compare without the package
/// linking it (our own copy's symbols are renamed, so the two never mix).
struct SystemArgon2 {
    typealias HashRaw = @convention(c) (
        UInt32, UInt32, UInt32, UnsafeRawPointer?, Int, UnsafeRawPointer?, Int, UnsafeMutableRawPointer?, Int
    ) -> Int32

    struct Failure: Error, CustomStringConvertible {
        let status: Int32
        var description: String {
            status == -999 ? "libargon2 and our Argon2id disagree on the same input" : "libargon2 failed with status \(status)"
        }
    }

    let path: String
    let hash: HashRaw

    static func load() -> SystemArgon2? {
        let candidates = [
            "libargon2.so.1", "libargon2.so", "libargon2.1.dylib",
            "/opt/homebrew/lib/libargon2.1.dylib", "/usr/local/lib/libargon2.1.dylib",
        ]
        for path in candidates {
            guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else { continue }
            if let symbol = dlsym(handle, "argon2id_hash_raw") {
                return SystemArgon2(path: path, hash: unsafeBitCast(symbol, to: HashRaw.self))
            }
            dlclose(handle)
        }
        return nil
    }
}
