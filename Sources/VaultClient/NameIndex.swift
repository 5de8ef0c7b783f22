import Foundation
import VaultCrypto
import VaultModels
import VaultStore

/// The sealed name index (docs/ARCHITECTURE.md, "The name index"; issue 25, P7): every item's id, decrypted
/// name and searched fields (username, notes, URIs), each with the SHA-256 of the stored row it was read
/// from, sealed with the user key in two parts (the ids and names; the digests and searched fields), with
/// the version of the rows it was built at. Finding an item by name opens the names part alone and walks
/// it without building a table. When the rows' version (moved by store triggers on every
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
        func matches(_ text: String) -> Bool { matches(CaseInsensitive.Containment(text)) }

        /// The same with the text prepared once for many entries; each field is searched as bytes.
        func matches(_ text: CaseInsensitive.Containment) -> Bool {
            if text.found(in: name) { return true }
            var reader = NameIndex.Reader(bytes: searched)
            guard let count = reader.number() else { return false }
            for _ in 0..<count {
                guard let field = reader.number().flatMap({ reader.take($0) }) else { return false }
                if text.found(inUTF8: field) { return true }
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

    /// The parts' first bytes (a later format gets other ones; an index it cannot read is rebuilt).
    static let namesMagic = Array("vaultsync-names-5".utf8)
    static let detailsMagic = Array("vaultsync-details-5".utf8)

    init() {}

    /// Opens a sealed index (two EncStrings under the user key, as ``sealed(key:)`` makes them); `nil` when a
    /// part does not open with `key`, is not in this format, or the two parts do not belong together.
    init?(sealed: (names: String, details: String), key: SymmetricCryptoKey) {
        guard let names = try? EncString(sealed.names).decrypt(key: key), let details = try? EncString(sealed.details).decrypt(key: key),
              let parsed = Self.parse(names: Array(names), details: Array(details)) else { return nil }
        (entries, order, version) = parsed
    }

    /// The index sealed in two parts: `names` holds what finding an item by name needs (the ids and names),
    /// `details` the rest, so that `vaultsync get NAME` opens about a third of the index and builds no table
    /// (``scan(sealedNames:key:rowsVersion:_:)``).
    func sealed(key: SymmetricCryptoKey) throws -> (names: String, details: String) {
        let (names, details) = encoded()
        return (try EncString.encrypt(names, key: key).serialized, try EncString.encrypt(details, key: key).serialized)
    }

    /// The two parts. Names: `namesMagic`, the version (8 bytes), then per entry in the rows' order its id
    /// (``appendID(_:to:)``) and name. Details: `detailsMagic`, the version, then per entry in the same
    /// order its digest (32 bytes) and searched fields (their count, then each). Every text and count
    /// with its length or value in 4 bytes, little-endian.
    func encoded() -> (names: [UInt8], details: [UInt8]) {
        var names = Self.namesMagic, details = Self.detailsMagic
        names.reserveCapacity(entries.count * 56)
        details.reserveCapacity(entries.count * 100)
        withUnsafeBytes(of: version.littleEndian) { names.append(contentsOf: $0); details.append(contentsOf: $0) }
        for id in order {
            guard let entry = entries[id] else { continue }
            Self.appendID(id, to: &names)
            Self.append(Array(entry.name.utf8), to: &names)
            details.append(contentsOf: entry.digest.bytes)
            details.append(contentsOf: entry.searched)
        }
        return (names, details)
    }

    /// An id as 1 + 16 bytes when it is a UUID in its lowercase text form (every id a server hands out),
    /// else 0 and its text: the names part is what `get` decrypts, and ids are a third of it as text.
    static func appendID(_ id: String, to out: inout [UInt8]) {
        if let uuid = UUIDText.bytes(id) {
            out.append(1)
            out.append(contentsOf: uuid)
        } else {
            out.append(0)
            append(Array(id.utf8), to: &out)
        }
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

        /// An id written by ``NameIndex/appendID(_:to:)``, as its bytes and whether they are a UUID's 16.
        mutating func idBytes() -> (bytes: ArraySlice<UInt8>, uuid: Bool)? {
            guard let tag = take(1)?.first else { return nil }
            switch tag {
            case 1: return take(16).map { ($0, true) }
            case 0: return number().flatMap { take($0) }.map { ($0, false) }
            default: return nil
            }
        }

        mutating func id() -> String? {
            idBytes().flatMap { bytes, uuid in uuid ? UUIDText.text(bytes) : String(validating: bytes, as: UTF8.self) }
        }

        mutating func version(after magic: [UInt8]) -> Int64? {
            guard take(magic.count).map({ $0.elementsEqual(magic) }) == true, let bytes = take(8) else { return nil }
            return Int64(littleEndian: bytes.withUnsafeBytes { $0.loadUnaligned(as: Int64.self) })
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

    static func parse(names: [UInt8], details: [UInt8]) -> (entries: [String: Entry], order: [String], version: Int64)? {
        var (namesReader, detailsReader) = (Reader(bytes: names[...]), Reader(bytes: details[...]))
        guard let version = namesReader.version(after: namesMagic), detailsReader.version(after: detailsMagic) == version else { return nil }
        var entries: [String: Entry] = [:]
        var order: [String] = []
        // At least ~50 bytes an entry in the names (an id, a name, a length): room without regrowing.
        entries.reserveCapacity(names.count / 50)
        order.reserveCapacity(names.count / 50)
        while !namesReader.atEnd {
            guard let id = namesReader.id(), let name = namesReader.text(), let digest = detailsReader.take(32).flatMap({ ContentDigest(bytes: $0) }),
                  let searched = detailsReader.searched(), entries[id] == nil else { return nil }
            entries[id] = Entry(digest: digest, name: name, searched: searched)
            order.append(id)
        }
        guard detailsReader.atEnd else { return nil }
        return (entries, order, version)
    }

    /// The entries of a sealed names part whose name `matches` (given the name's UTF-8 bytes), read as
    /// the part is walked: no table is built and no other id or name becomes a string. `nil` when the part
    /// does not open with `key`, is damaged, or was not built at `rowsVersion` (then only a refresh tells).
    static func scan(sealedNames: String, key: SymmetricCryptoKey, rowsVersion: Int64,
                     _ matches: (ArraySlice<UInt8>) -> Bool) -> [VaultItemName]? {
        guard let bytes = try? EncString(sealedNames).decrypt(key: key) else { return nil }
        let names = Array(bytes)
        var reader = Reader(bytes: names[...])
        guard let version = reader.version(after: namesMagic), version == rowsVersion else { return nil }
        var found: [VaultItemName] = []
        while !reader.atEnd {
            guard let (idBytes, uuid) = reader.idBytes(), let nameBytes = reader.number().flatMap({ reader.take($0) }) else { return nil }
            guard matches(nameBytes) else { continue }
            guard let id = uuid ? UUIDText.text(idBytes) : String(validating: idBytes, as: UTF8.self),
                  let name = String(validating: nameBytes, as: UTF8.self) else { return nil }
            found.append(VaultItemName(id: id, name: .success(name)))
        }
        return found
    }
}


extension NameIndex {
    /// The index's names by their ASCII-folded bytes, for an engine that answers many lookups by name from
    /// one index in memory (the agent): finding a name is one table lookup instead of a walk of every
    /// entry. A name that is not ASCII is compared as ``CaseInsensitive/equal(_:_:)`` compares it, on
    /// every lookup (the locale's rules have no byte key).
    struct Lookup: Sendable {
        /// The index's version it was built from.
        let version: Int64
        /// Positions in the index's order, ascending, of each ASCII name's folded bytes.
        let ascii: [[UInt8]: [Int]]
        /// Positions of the names that are not ASCII, ascending.
        let other: [Int]

        /// The entries in the index's order (an index held in memory holds every id of its order).
        let entries: [Entry]

        /// `nil` when an id of the order has no entry (an index that is not whole is never served from memory).
        init?(_ index: NameIndex) {
            var ascii: [[UInt8]: [Int]] = [:]
            var other: [Int] = []
            var entries: [Entry] = []
            entries.reserveCapacity(index.order.count)
            for (position, id) in index.order.enumerated() {
                guard let entry = index.entries[id] else { return nil }
                entries.append(entry)
                if let folded = CaseInsensitive.foldedASCII(entry.name) { ascii[folded, default: []].append(position) } else { other.append(position) }
            }
            self.version = index.version
            self.ascii = ascii
            self.other = other
            self.entries = entries
        }

        /// The positions, ascending, of the entries named `name` (``CaseInsensitive/equal(_:_:)``).
        func positions(named name: String) -> [Int] {
            let equalTo: (Int) -> Bool = { position in CaseInsensitive.equal(entries[position].name, name) }
            guard let folded = CaseInsensitive.foldedASCII(name) else {
                return entries.indices.filter(equalTo)
            }
            let found = ascii[folded] ?? []
            let others = other.filter(equalTo)
            return others.isEmpty ? found : (found + others).sorted()
        }
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
        let remembered = nameIndexInMemory.flatMap { $0.userID == userID ? $0.index : nil }
        let index: NameIndex
        let version: Int64
        if let remembered {
            // Held since the last command of this engine: the sealed copy is not opened again.
            version = try await read { tx in try tx.ciphers(of: userID).version() }
            index = remembered
        } else {
            let (rowsVersion, sealed) = try await read { tx in (try tx.ciphers(of: userID).version(), try tx.nameIndex(of: userID).sealed()) }
            version = rowsVersion
            index = sealed.flatMap { NameIndex(sealed: $0, key: keys.userKey) } ?? NameIndex()
        }
        // Built at this version of the rows and holding all of them: nothing changed since, nothing to hash.
        if version > 0, index.version == version {
            nameIndexInMemory = (userID, index)
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
        nameIndexInMemory = (userID, rebuilt)
        if !stale.isEmpty || rebuilt.entries.count != index.entries.count || rebuilt.version != index.version || rebuilt.order != index.order {
            if nameIndexInMemory != nil {
                // Kept in memory: sealing every entry again is left to a moment later (a burst of changes seals once).
                scheduleSealingOfNameIndex()
            } else {
                await sealNameIndex(rebuilt, userID: userID, key: keys.userKey)
            }
        }
        return (rebuilt, names.compactMap { $0 })
    }

    /// Writes `index` sealed under `key`: the copy the next process opens instead of decrypting every row.
    func sealNameIndex(_ index: NameIndex, userID: String, key: SymmetricCryptoKey) async {
        do {
            let sealed = try index.sealed(key: key)
            try await write { tx in try tx.nameIndex(of: userID).store(names: sealed.names, details: sealed.details) }
        } catch {
            logger.info("the name index was not written", metadata: ["error": "\(error)"])
        }
    }

    /// Seals the index held in memory a second after the last change asked for it, off the command's path.
    func scheduleSealingOfNameIndex() {
        guard nameIndexSealing == nil else { return }
        nameIndexSealing = Task {
            try? await Task.sleep(for: .seconds(1))
            await self.sealNameIndexInMemory()
        }
    }

    /// Writes the index held in memory now (the agent does on lock and stop, so the next process finds it current).
    public func sealNameIndexInMemory() async {
        nameIndexSealing = nil
        guard let (userID, index) = nameIndexInMemory, let current = session, current.userID == userID else { return }
        await sealNameIndex(index, userID: userID, key: current.keys.userKey)
    }

    /// The items named `name` (case-insensitively, ``CaseInsensitive/equal(_:_:)``): how `vaultsync get NAME`
    /// finds an item. When the sealed index was built at the rows' current version, only its names part is
    /// opened and walked, and only the matches become strings; otherwise the index is refreshed first
    /// (``itemNames()``'s path), and a row whose name cannot be decrypted is not among the matches.
    public func items(named name: String) async throws -> [VaultItemName] {
        let current = try requireSession()
        let (userID, key) = (current.userID, current.keys.userKey)
        // Held in memory and current: only the rows' version is read (the sealed names part is not).
        if let (index, lookup) = try currentNameIndexInMemory(userID: userID) {
            return lookup.positions(named: name).map { position in
                VaultItemName(id: index.order[position], name: .success(lookup.entries[position].name))
            }
        }
        let (version, sealedNames) = try readNow { tx in (try tx.ciphers(of: userID).version(), try tx.nameIndex(of: userID).sealedNames()) }
        let equality = CaseInsensitive.Equality(name)
        if version > 0, let sealedNames,
           let found = NameIndex.scan(sealedNames: sealedNames, key: key, rowsVersion: version, { equality.matches(utf8: $0) }) {
            return found
        }
        return try await refreshedNameIndex().names.filter { item in (try? item.name.get()).map { CaseInsensitive.equal($0, name) } ?? false }
    }

    /// The name index held in memory (``nameIndexInMemory``) with its table of names, when it was built at
    /// the rows' current version and holds every row: then only the rows' version is read.
    func currentNameIndexInMemory(userID: String) throws -> (index: NameIndex, lookup: NameIndex.Lookup)? {
        guard let remembered = nameIndexInMemory, remembered.userID == userID, remembered.index.version > 0,
              try readNow({ tx in try tx.ciphers(of: userID).version() }) == remembered.index.version else { return nil }
        if let built = nameLookupInMemory, built.version == remembered.index.version { return (remembered.index, built) }
        guard let built = NameIndex.Lookup(remembered.index) else { return nil }
        nameLookupInMemory = built
        return (remembered.index, built)
    }

    /// The ids of the cached items that start with `prefix` (lowercase), with their names.
    public func items(idPrefix prefix: String) async throws -> [VaultItemName] {
        let current = try requireSession()
        let userID = current.userID
        let rows = try await read { tx in try tx.ciphers(of: userID).find(idPrefix: prefix) }
        return rows.map { VaultItemName(id: $0.id, name: Self.decryptedName($0, keys: current.keys)) }
    }

    /// The items whose name, username, notes or a URI contains `text` (``NameIndex/Entry/matches(_:)``),
    /// decrypted, found through the name index: only the matches (and rows that cannot be read, reported
    /// as such) are decrypted.
    public func items(matching text: String) async throws -> [VaultItem] {
        let current = try requireSession()
        let userID = current.userID
        let containment = CaseInsensitive.Containment(text)
        let ids: [String]
        if let (index, lookup) = try currentNameIndexInMemory(userID: userID) {
            ids = lookup.entries.indices.filter { lookup.entries[$0].matches(containment) }.map { index.order[$0] }
        } else {
            let (index, names) = try await refreshedNameIndex()
            ids = names.filter { name in index.entries[name.id].map { $0.matches(containment) } ?? true }.map(\.id)
        }
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
