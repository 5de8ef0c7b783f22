import Foundation
import VaultCrypto
import VaultModels
import VaultStore

/// The sealed name index (docs/ARCHITECTURE.md, "The name index"; issue 25, P7-get): every item's id and
/// decrypted name, each with the SHA-256 of the stored row it was read from, sealed with the user key as
/// one EncString. Finding an item by name opens it with one decryption and reads the rows to compare
/// digests; only a row whose digest differs (changed by a sync, a save, the resolver, or by anyone writing
/// to the file) has its name decrypted again. So the index checks itself against the rows every time, no
/// path that stores items has to maintain it, and a stale, damaged or foreign index costs a rebuild, never
/// a wrong answer. Nothing in it reaches the disk unencrypted.
struct NameIndex: Sendable {
    struct Entry: Sendable {
        var digest: [UInt8]
        var name: String
    }

    var entries: [String: Entry] = [:]

    /// The format's first bytes (a later format gets other ones; an index it cannot read is rebuilt).
    static let magic = Array("vaultsync-names-1".utf8)

    init() {}

    /// Opens a sealed index; `nil` when it does not open with `key` or is not in this format.
    init?(sealed: String, key: SymmetricCryptoKey) {
        guard let bytes = try? EncString(sealed).decrypt(key: key) else { return nil }
        guard let parsed = Self.parse(Array(bytes)) else { return nil }
        entries = parsed
    }

    func sealed(key: SymmetricCryptoKey) throws -> String {
        try EncString.encrypt(encoded(), key: key).serialized
    }

    /// `magic`, then per entry: id, digest and name, each with its length (4 bytes, little-endian).
    func encoded() -> [UInt8] {
        var out = Self.magic
        out.reserveCapacity(entries.count * 128)
        for (id, entry) in entries {
            Self.append(Array(id.utf8), to: &out)
            Self.append(entry.digest, to: &out)
            Self.append(Array(entry.name.utf8), to: &out)
        }
        return out
    }

    static func append(_ bytes: [UInt8], to out: inout [UInt8]) {
        withUnsafeBytes(of: UInt32(bytes.count).littleEndian) { out.append(contentsOf: $0) }
        out.append(contentsOf: bytes)
    }

    static func parse(_ bytes: [UInt8]) -> [String: Entry]? {
        guard bytes.starts(with: magic) else { return nil }
        var position = magic.count
        func field() -> ArraySlice<UInt8>? {
            guard bytes.count - position >= 4 else { return nil }
            let length = bytes[position..<position + 4].reversed().reduce(0) { $0 << 8 | Int($1) }
            position += 4
            guard bytes.count - position >= length else { return nil }
            defer { position += length }
            return bytes[position..<position + length]
        }
        var entries: [String: Entry] = [:]
        while position < bytes.count {
            guard let id = field(), let digest = field(), digest.count == 32, let name = field(),
                  let idText = String(validating: id, as: UTF8.self), let nameText = String(validating: name, as: UTF8.self) else { return nil }
            entries[idText] = Entry(digest: Array(digest), name: nameText)
        }
        return entries
    }
}

extension VaultEngine {
    /// Every item's name (``itemNames()``) through the name index: names of rows unchanged since the index
    /// was written come from it; the others are decrypted (two decryptions each) and the index is written
    /// back when anything differed. Writing it is best effort: a failure costs the next command a rebuild.
    func indexedItemNames() async throws -> [VaultItemName] {
        let current = try requireSession()
        let (userID, keys) = (current.userID, current.keys)
        let (rows, sealed) = try await read { tx in (try tx.ciphers(of: userID).all(), try tx.nameIndex(of: userID).sealed()) }
        let index = sealed.flatMap { NameIndex(sealed: $0, key: keys.userKey) } ?? NameIndex()
        let looked = await Self.inSlices(rows) { row -> (VaultItemName, NameIndex.Entry?, fresh: Bool) in
            let digest = ContentDigest.sha256(row.json)
            if let entry = index.entries[row.id], entry.digest == digest {
                return (VaultItemName(id: row.id, name: .success(entry.name)), entry, false)
            }
            let name = Self.decryptedName(row, keys: keys)
            return (VaultItemName(id: row.id, name: name), (try? name.get()).map { NameIndex.Entry(digest: digest, name: $0) }, true)
        }
        var rebuilt = NameIndex()
        for (name, entry, _) in looked { if let entry { rebuilt.entries[name.id] = entry } }
        if looked.contains(where: \.fresh) || rebuilt.entries.count != index.entries.count {
            do {
                let sealed = try rebuilt.sealed(key: keys.userKey)
                try await write { tx in try tx.nameIndex(of: userID).store(sealed) }
            } catch {
                logger.info("the name index was not written", metadata: ["error": "\(error)"])
            }
        }
        return looked.map(\.0)
    }

    /// A row's name, decrypted alone, or why it could not be.
    nonisolated static func decryptedName(_ row: CipherRow, keys: VaultKeys) -> Result<String, ModelError> {
        do {
            return .success(try CipherWire.decryptedName(jsonBytes: row.json.utf8, keys: keys))
        } catch let error as ModelError {
            return .failure(error)
        } catch {
            return .failure(.invalidValue(path: "cipher", reason: String(describing: error)))
        }
    }
}
