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
        /// The other fields a search looks in: username, notes, URIs.
        var searched: [String]

        /// `vaultsync list --search TEXT`'s rule: the name, username, notes or a URI contains the text
        /// (case-insensitively, as the locale compares).
        func matches(_ text: String) -> Bool {
            name.localizedCaseInsensitiveContains(text) || searched.contains { $0.localizedCaseInsensitiveContains(text) }
        }
    }

    var entries: [String: Entry] = [:]

    /// The format's first bytes (a later format gets other ones; an index it cannot read is rebuilt).
    static let magic = Array("vaultsync-names-2".utf8)

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

    /// `magic`, then per entry: id, digest, name, the number of searched fields and each of them, every
    /// field with its length (4 bytes, little-endian).
    func encoded() -> [UInt8] {
        var out = Self.magic
        out.reserveCapacity(entries.count * 160)
        for (id, entry) in entries {
            Self.append(Array(id.utf8), to: &out)
            Self.append(entry.digest, to: &out)
            Self.append(Array(entry.name.utf8), to: &out)
            withUnsafeBytes(of: UInt32(entry.searched.count).littleEndian) { out.append(contentsOf: $0) }
            for field in entry.searched { Self.append(Array(field.utf8), to: &out) }
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
        func number() -> Int? {
            guard bytes.count - position >= 4 else { return nil }
            defer { position += 4 }
            return bytes[position..<position + 4].reversed().reduce(0) { $0 << 8 | Int($1) }
        }
        func field() -> ArraySlice<UInt8>? {
            guard let length = number(), bytes.count - position >= length else { return nil }
            defer { position += length }
            return bytes[position..<position + length]
        }
        func text() -> String? { field().flatMap { String(validating: $0, as: UTF8.self) } }
        var entries: [String: Entry] = [:]
        while position < bytes.count {
            guard let id = text(), let digest = field(), digest.count == 32, let name = text(), let count = number(),
                  count <= bytes.count - position else { return nil }
            var searched: [String] = []
            for _ in 0..<count {
                guard let value = text() else { return nil }
                searched.append(value)
            }
            entries[id] = Entry(digest: Array(digest), name: name, searched: searched)
        }
        return entries
    }
}

extension VaultEngine {
    /// The name index brought up to date with the rows: names of rows unchanged since it was written come
    /// from it; the others are decrypted (each changed row once, fully, for the searched fields too) and the
    /// index is written back when anything differed. Writing it is best effort: a failure costs the next
    /// command a rebuild. Returns it with every row's name, or why that could not be decrypted (such a row
    /// stays out of the index and is decrypted again next time).
    func refreshedNameIndex() async throws -> (index: NameIndex, names: [VaultItemName]) {
        let current = try requireSession()
        let (userID, keys) = (current.userID, current.keys)
        let (rows, sealed) = try await read { tx in (try tx.ciphers(of: userID).all(), try tx.nameIndex(of: userID).sealed()) }
        let index = sealed.flatMap { NameIndex(sealed: $0, key: keys.userKey) } ?? NameIndex()
        let looked = await Self.inSlices(rows) { row -> (VaultItemName, NameIndex.Entry?, fresh: Bool) in
            let digest = ContentDigest.sha256(row.json)
            if let entry = index.entries[row.id], entry.digest == digest {
                return (VaultItemName(id: row.id, name: .success(entry.name)), entry, false)
            }
            guard let view = try? row.wire().decrypted(with: keys) else {
                return (VaultItemName(id: row.id, name: Self.decryptedName(row, keys: keys)), nil, true)
            }
            let searched = [view.login?.username, view.notes].compactMap { $0 } + (view.login?.uris.compactMap(\.uri) ?? [])
            return (VaultItemName(id: row.id, name: .success(view.name)), NameIndex.Entry(digest: digest, name: view.name, searched: searched), true)
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
        return (rebuilt, looked.map(\.0))
    }

    /// The items whose name, username, notes or a URI contains `text` (``NameIndex/Entry/matches(_:)``),
    /// decrypted, found through the name index: only the matches (and rows that cannot be read, reported
    /// as such) are decrypted.
    public func items(matching text: String) async throws -> [VaultItem] {
        let current = try requireSession()
        let (index, names) = try await refreshedNameIndex()
        let ids = names.filter { name in index.entries[name.id].map { $0.matches(text) } ?? true }.map(\.id)
        let userID = current.userID
        let (rows, pendingRows) = try await read { tx in
            (try tx.ciphers(of: userID).find(ids: ids), try ids.compactMap { try tx.queue(of: userID).record(kind: .cipher, itemID: $0) })
        }
        let pending = Dictionary(pendingRows.compactMap { row in (try? row.open(key: current.keys.userKey)).map { (row.itemID, $0) } },
                                 uniquingKeysWith: { first, _ in first })
        let keys = current.keys
        return await Self.inSlices(rows) { Self.listed($0, keys: keys, pending: pending[$0.id]) }
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
