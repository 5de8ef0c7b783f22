import Foundation
import VaultCrypto
import VaultModels
import VaultStore

/// The sealed name index (docs/ARCHITECTURE.md, "The name index"; issue 25, P7): every item's id, decrypted
/// name and searched fields (username, notes, URIs), each with the SHA-256 of the stored row it was read
/// from, sealed with the user key as one EncString, with the version of the rows it was built at. Finding
/// an item by name opens it with one decryption. When the rows' version (moved by store triggers on every
/// insert, update and delete, whoever writes) is the one the index holds, nothing changed: the index is
/// the answer. Otherwise the rows are hashed and only a row whose digest differs (changed by a sync, a
/// save, the resolver, or by anyone writing to the file) is decrypted again. So no path that stores items
/// has to maintain it, and a stale, damaged or foreign index costs a rebuild, never a wrong answer.
/// Nothing in it reaches the disk unencrypted.
struct NameIndex: Sendable {
    struct Entry: Sendable {
        var digest: ContentDigest
        var name: String
        /// The searched fields, encoded as in the index (read only when a search needs them).
        var searched: ArraySlice<UInt8>

        init(digest: ContentDigest, name: String, searched: ArraySlice<UInt8>) {
            self.digest = digest
            self.name = name
            self.searched = searched
        }

        init(digest: ContentDigest, view: CipherView) {
            var encoded: [UInt8] = []
            let fields = [view.login?.username, view.notes].compactMap { $0 } + (view.login?.uris.compactMap(\.uri) ?? [])
            NameIndex.appendNumber(fields.count, to: &encoded)
            for field in fields { NameIndex.append(Array(field.utf8), to: &encoded) }
            self.init(digest: digest, name: view.name, searched: encoded[...])
        }

        /// `vaultsync list --search TEXT`'s rule: the name, username, notes or a URI contains the text
        /// (case-insensitively: ``CaseInsensitive/contains(_:_:)``).
        func matches(_ text: String) -> Bool {
            if CaseInsensitive.contains(name, text) { return true }
            var reader = NameIndex.Reader(bytes: searched)
            guard let count = reader.number() else { return false }
            for _ in 0..<count {
                guard let field = reader.text() else { return false }
                if CaseInsensitive.contains(field, text) { return true }
            }
            return false
        }
    }

    var entries: [String: Entry] = [:]
    /// The indexed ids, in the rows' order.
    var order: [String] = []
    /// The version of the cached items (``CipherCache/version()``) the index was built at, when it holds
    /// every row; -1 when some row could not be indexed (then every lookup checks the rows).
    var version: Int64 = -1

    /// The format's first bytes (a later format gets other ones; an index it cannot read is rebuilt).
    static let magic = Array("vaultsync-names-4".utf8)

    init() {}

    /// Opens a sealed index; `nil` when it does not open with `key` or is not in this format.
    init?(sealed: String, key: SymmetricCryptoKey) {
        guard let bytes = try? EncString(sealed).decrypt(key: key), let parsed = Self.parse(Array(bytes)) else { return nil }
        (entries, order, version) = parsed
    }

    func sealed(key: SymmetricCryptoKey) throws -> String {
        try EncString.encrypt(encoded(), key: key).serialized
    }

    /// `magic`, the version (8 bytes), then per entry in the rows' order: id, digest (32 bytes), name and
    /// the searched fields (their count, then each); every text and the count with its length or value in
    /// 4 bytes, little-endian.
    func encoded() -> [UInt8] {
        var out = Self.magic
        out.reserveCapacity(entries.count * 160)
        withUnsafeBytes(of: version.littleEndian) { out.append(contentsOf: $0) }
        for id in order {
            guard let entry = entries[id] else { continue }
            Self.append(Array(id.utf8), to: &out)
            out.append(contentsOf: entry.digest.bytes)
            Self.append(Array(entry.name.utf8), to: &out)
            out.append(contentsOf: entry.searched)
        }
        return out
    }

    static func appendNumber(_ number: Int, to out: inout [UInt8]) {
        withUnsafeBytes(of: UInt32(number).littleEndian) { out.append(contentsOf: $0) }
    }

    static func append(_ bytes: [UInt8], to out: inout [UInt8]) {
        appendNumber(bytes.count, to: &out)
        out.append(contentsOf: bytes)
    }

    /// Reads the encoding's fields in order; `nil` at anything malformed.
    struct Reader {
        let bytes: ArraySlice<UInt8>
        var position: Int

        init(bytes: ArraySlice<UInt8>) {
            self.bytes = bytes
            position = bytes.startIndex
        }

        var atEnd: Bool { position >= bytes.endIndex }

        mutating func take(_ count: Int) -> ArraySlice<UInt8>? {
            guard count >= 0, bytes.endIndex - position >= count else { return nil }
            defer { position += count }
            return bytes[position..<position + count]
        }

        mutating func number() -> Int? {
            take(4).map { $0.reversed().reduce(0) { $0 << 8 | Int($1) } }
        }

        mutating func text() -> String? {
            number().flatMap { take($0) }.flatMap { String(validating: $0, as: UTF8.self) }
        }

        /// Steps over the searched fields, returning their encoding.
        mutating func searched() -> ArraySlice<UInt8>? {
            let start = position
            guard let count = number(), count <= bytes.endIndex - position else { return nil }
            for _ in 0..<count {
                guard let length = number(), take(length) != nil else { return nil }
            }
            return bytes[start..<position]
        }
    }

    static func parse(_ bytes: [UInt8]) -> (entries: [String: Entry], order: [String], version: Int64)? {
        guard bytes.starts(with: magic) else { return nil }
        var reader = Reader(bytes: bytes[magic.count...])
        guard let versionBytes = reader.take(8) else { return nil }
        let version = Int64(littleEndian: versionBytes.withUnsafeBytes { $0.loadUnaligned(as: Int64.self) })
        var entries: [String: Entry] = [:]
        var order: [String] = []
        // At least ~80 bytes an entry (an id, a digest, a name, lengths): room without regrowing.
        entries.reserveCapacity(bytes.count / 80)
        order.reserveCapacity(bytes.count / 80)
        while !reader.atEnd {
            guard let id = reader.text(), let digest = reader.take(32).flatMap({ ContentDigest(bytes: $0) }), let name = reader.text(),
                  let searched = reader.searched(), entries[id] == nil else { return nil }
            entries[id] = Entry(digest: digest, name: name, searched: searched)
            order.append(id)
        }
        return (entries, order, version)
    }
}

extension VaultEngine {
    /// The name index brought up to date with the rows: each row's JSON is hashed where SQLite holds it; the
    /// names of rows unchanged since the index was written come from it, the other rows are read and
    /// decrypted (once, fully, for the searched fields too), and the index is written back when anything
    /// differed. Writing it is best effort: a failure costs the next command a rebuild. Returns it with every
    /// row's name, or why that could not be decrypted (such a row stays out of the index and is decrypted
    /// again next time), in the rows' order.
    func refreshedNameIndex() async throws -> (index: NameIndex, names: [VaultItemName]) {
        let current = try requireSession()
        let (userID, keys) = (current.userID, current.keys)
        let (version, sealed) = try await read { tx in (try tx.ciphers(of: userID).version(), try tx.nameIndex(of: userID).sealed()) }
        let index = sealed.flatMap { NameIndex(sealed: $0, key: keys.userKey) } ?? NameIndex()
        // Built at this version of the rows and holding all of them: nothing changed since, nothing to hash.
        if version > 0, index.version == version {
            return (index, index.order.compactMap { id in index.entries[id].map { VaultItemName(id: id, name: .success($0.name)) } })
        }
        let (digests, currentVersion) = try await read { tx in (try tx.ciphers(of: userID).jsonDigests(), try tx.ciphers(of: userID).version()) }
        var names: [VaultItemName?] = []
        names.reserveCapacity(digests.count)
        var stale: [String: (position: Int, digest: ContentDigest)] = [:]
        for (position, (id, digest)) in digests.enumerated() {
            if let entry = index.entries[id], entry.digest == digest {
                names.append(VaultItemName(id: id, name: .success(entry.name)))
            } else {
                stale[id] = (position, digest)
                names.append(nil)
            }
        }
        var rebuilt = NameIndex()
        rebuilt.entries.reserveCapacity(digests.count)
        for (id, _) in digests where stale[id] == nil { rebuilt.entries[id] = index.entries[id] }
        if !stale.isEmpty {
            let ids = Array(stale.keys)
            let rows = try await read { tx in try tx.ciphers(of: userID).find(ids: ids) }
            let opened = await Self.inSlices(rows) { row -> (VaultItemName, CipherView?) in
                guard let view = try? row.wire().decrypted(with: keys) else { return (VaultItemName(id: row.id, name: Self.decryptedName(row, keys: keys)), nil) }
                return (VaultItemName(id: row.id, name: .success(view.name)), view)
            }
            for (name, view) in opened {
                guard let (position, digest) = stale[name.id] else { continue }
                names[position] = name
                if let view { rebuilt.entries[name.id] = NameIndex.Entry(digest: digest, view: view) }
            }
        }
        rebuilt.order = digests.map(\.id).filter { rebuilt.entries[$0] != nil }
        rebuilt.version = rebuilt.order.count == digests.count ? currentVersion : -1
        if !stale.isEmpty || rebuilt.entries.count != index.entries.count || rebuilt.version != index.version || rebuilt.order != index.order {
            do {
                let sealed = try rebuilt.sealed(key: keys.userKey)
                try await write { tx in try tx.nameIndex(of: userID).store(sealed) }
            } catch {
                logger.info("the name index was not written", metadata: ["error": "\(error)"])
            }
        }
        return (rebuilt, names.compactMap { $0 })
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
