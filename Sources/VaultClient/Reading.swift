import Foundation
import NIOConcurrencyHelpers
import VaultAPI
import VaultCrypto
import VaultModels
import VaultStore
import VaultSyncCore

/// One item of the vault as listed: decrypted, or the reason it could not be.
public struct VaultItem: Sendable {
    public var id: String
    public var result: Result<CipherView, ModelError>
    /// Whether the item has a change waiting for the server.
    public var pending: PendingChange?
}

/// One item as a list shows it (``VaultEngine/itemSummaries()``): its summary, or why it could not be
/// decrypted, and its queued change.
public struct VaultItemSummary: Sendable {
    public var id: String
    public var result: Result<ItemSummary, ModelError>
    public var pending: PendingChange?
}

/// One item's id and decrypted name, or why the name could not be decrypted (``VaultEngine/itemNames()``).
public struct VaultItemName: Sendable {
    public var id: String
    public var name: Result<String, ModelError>
}

/// A queued change as the user sees it.
public struct PendingChangeSummary: Sendable, Equatable {
    public var itemID: String
    public var itemKind: PendingItemKind
    public var itemName: String?
    public var metadata: PendingChangeMetadata
}

extension VaultEngine {
    /// Every item, decrypted one by one: a damaged item is reported and never hides the others.
    /// Large vaults are decrypted on every core, a page of rows at a time (``eachItem(_:)``).
    public func items() async throws -> [VaultItem] {
        try await eachItem { row, keys, pending in Self.listed(row, keys: keys, pending: pending) }
    }

    /// Every item as a list shows it (``ItemSummary``: name, username and state), without decrypting the
    /// other fields: a list of a large vault need not open every secret in it.
    public func itemSummaries() async throws -> [VaultItemSummary] {
        try await eachItem { row, keys, pending in
            let result: Result<ItemSummary, ModelError>
            do {
                result = .success(try CipherWire.summary(jsonBytes: row.json.utf8, keys: keys))
            } catch let error as ModelError {
                result = .failure(error)
            } catch {
                result = .failure(.invalidValue(path: "cipher", reason: String(describing: error)))
            }
            return VaultItemSummary(id: row.id, result: result, pending: pending)
        }
    }

    /// `transform` of every cached item with its queued change (opened), in the rows' order: the rows are
    /// read a page at a time in one read transaction, and each page is transformed on every core while the
    /// transaction reads the next one (reading the rows out of SQLite was a tenth of a list's time, all of it
    /// on one core while the other waited). Memory holds two pages of rows and the results, not every row
    /// of a large vault.
    func eachItem<Output: Sendable>(_ transform: @escaping @Sendable (CipherRow, VaultKeys, PendingChange?) -> Output) async throws -> [Output] {
        let current = try requireSession()
        let (userID, keys) = (current.userID, current.keys)
        return try await read { tx in
            let pending = Dictionary(try tx.queue(of: userID).all(kind: .cipher).compactMap { row in
                (try? row.open(key: keys.userKey)).map { (row.itemID, $0) }
            }, uniquingKeysWith: { first, _ in first })
            var outputs: [Output] = []
            var previous: SlicedTransform<Output>?
            try tx.ciphers(of: userID).forEachPage(of: 1_000) { rows in
                let page = SlicedTransform(rows) { row in transform(row, keys, pending[row.id]) }
                if let previous { outputs += previous.results() }
                previous = page
            }
            if let previous { outputs += previous.results() }
            return outputs
        }
    }


    /// Every item's name, without the rest of the item: what finding an item by name needs (`vaultsync get
    /// NAME`). From the sealed name index for rows unchanged since it was written (``NameIndex``); a name
    /// decrypted alone (its key, its name, and a parse of only those fields) for the others, where
    /// ``items()`` parses and decrypts every field of every item.
    public func itemNames() async throws -> [VaultItemName] {
        try await refreshedNameIndex().names
    }

    /// Whether the vault has an item with exactly this id, or with the id a sync gave the item since (an id
    /// swapped: docs/ARCHITECTURE.md, "Ids that change"); nothing decrypted.
    public func hasItem(id: String) throws -> Bool {
        let userID = try requireSession().userID
        return try readNow { tx in try Self.located(id, kind: .cipher, userID: userID, tx).exists }
    }

    /// The id a folder has now: `id` itself, or the server's id a sync gave it since `id` was shown (a folder
    /// created offline: docs/ARCHITECTURE.md, "Ids that change"); `nil` when no folder has either.
    public func currentFolderID(_ id: String) throws -> String? {
        let userID = try requireSession().userID
        return try readNow { tx in try Self.currentFolderID(id, userID: userID, tx) }
    }

    /// One item as ``items()`` lists it (decrypted, or why not, with its queued change), without
    /// reading the others.
    public func listedItem(id: String) async throws -> VaultItem {
        let current = try requireSession()
        let id = try currentID(of: id)
        let userID = current.userID
        let (row, pendingRow) = try readNow { tx in
            (try tx.ciphers(of: userID).find(id: id), try tx.queue(of: userID).record(kind: .cipher, itemID: id))
        }
        guard let row else { throw VaultError.itemNotFound(id) }
        return Self.listed(row, keys: current.keys, pending: pendingRow.flatMap { try? $0.open(key: current.keys.userKey) })
    }

    /// `transform` of every row, in order; large inputs on every core (order-preserving slices).
    nonisolated static func inSlices<Row: Sendable, Output: Sendable>(_ rows: [Row], _ transform: @Sendable @escaping (Row) -> Output) async -> [Output] {
        let slices = min(ProcessInfo.processInfo.activeProcessorCount, rows.count / 500)
        guard slices > 1 else { return rows.map(transform) }
        let size = (rows.count + slices - 1) / slices
        return await withTaskGroup(of: (Int, [Output]).self) { group in
            for start in stride(from: 0, to: rows.count, by: size) {
                let slice = rows[start..<min(start + size, rows.count)]
                group.addTask { (start, slice.map(transform)) }
            }
            var parts: [(Int, [Output])] = []
            for await part in group { parts.append(part) }
            return parts.sorted { $0.0 < $1.0 }.flatMap(\.1)
        }
    }

    /// One cached item decrypted, or why it could not be.
    nonisolated static func listed(_ row: CipherRow, keys: VaultKeys, pending: PendingChange?) -> VaultItem {
        let result: Result<CipherView, ModelError>
        do {
            result = .success(try row.wire().decrypted(with: keys))
        } catch let error as ModelError {
            result = .failure(error)
        } catch {
            result = .failure(.invalidValue(path: "cipher", reason: String(describing: error)))
        }
        return VaultItem(id: row.id, result: result, pending: pending)
    }

    /// One item, decrypted.
    public func item(id: String) async throws -> CipherView {
        let current = try requireSession()
        let wire = try await cachedCipher(id: try currentID(of: id), userID: current.userID)
        return try modelCall { try wire.decrypted(with: current.keys) }
    }

    /// The item decrypted, or `nil` when this device cannot decrypt it (damaged, or planted by a server under a
    /// key this account does not have): a command that only needs to name the item (delete) still works on it.
    public func readableItem(id: String) async throws -> CipherView? {
        do {
            return try await item(id: id)
        } catch VaultError.model, VaultError.crypto {
            return nil
        }
    }

    /// The folders, decrypted.
    public func folders() async throws -> [FolderView] {
        let current = try requireSession()
        let userID = current.userID
        let rows = try await read { tx in try tx.folders(of: userID).all() }
        return rows.compactMap { row in try? row.wire().decrypted(with: current.keys) }
    }

    /// The queued changes, with the items' names.
    public func pendingChanges() async throws -> [PendingChangeSummary] {
        let current = try requireSession()
        let userID = current.userID
        let (rows, ciphers, folders) = try await read { tx in
            (try tx.queue(of: userID).all(), try tx.ciphers(of: userID).all(), try tx.folders(of: userID).all())
        }
        let cipherByID = Dictionary(ciphers.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        let folderByID = Dictionary(folders.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        return try rows.map { row in
            let change: PendingChange
            do { change = try row.open(key: current.keys.userKey) } catch { throw VaultError.storage(String(describing: error)) }
            // An item deleted here is no longer cached: its name comes from the version the change started from.
            let base = change.metadata.baseVersion.map { Array($0.utf8) }
            let name: String?
            switch change.itemKind {
            case .cipher:
                name = (try? cipherByID[change.itemID]?.wire().decrypted(with: current.keys).name)
                    ?? base.flatMap { try? CipherWire(jsonBytes: $0).decrypted(with: current.keys).name }
            case .folder:
                name = (try? folderByID[change.itemID]?.wire().decrypted(with: current.keys).name)
                    ?? base.flatMap { try? FolderWire(jsonBytes: $0).decrypted(with: current.keys).name }
            }
            return PendingChangeSummary(itemID: change.itemID, itemKind: change.itemKind, itemName: name, metadata: change.metadata)
        }.sorted { $0.metadata.createdDate < $1.metadata.createdDate }
    }

    /// How many changes wait for the server.
    public func pendingCount() async throws -> Int {
        let userID = try requireSession().userID
        return try await read { tx in try tx.queue(of: userID).count() }
    }

    /// The last known contact with the server.
    public func syncState() async throws -> SyncStateRow? {
        let userID = try requireSession().userID
        return try await read { tx in try tx.syncState(of: userID).current() }
    }
}

/// `transform` of every element, in order, on every core, for synchronous callers (inside a read
/// transaction): started when made, on the global queue, so that the caller goes on (reads the next page)
/// while it runs; ``results()`` waits for it.
struct SlicedTransform<Output: Sendable> {
    private let group = DispatchGroup()
    private let parts: NIOLockedValueBox<[[Output]]>

    init<Element: Sendable>(_ elements: [Element], _ transform: @escaping @Sendable (Element) -> Output) {
        let slices = max(1, min(ProcessInfo.processInfo.activeProcessorCount, elements.count / 250))
        let size = (elements.count + slices - 1) / slices
        parts = NIOLockedValueBox([[Output]](repeating: [], count: slices))
        for slice in 0..<slices {
            let part = elements[min(slice * size, elements.count)..<min((slice + 1) * size, elements.count)]
            DispatchQueue.global().async(group: group) { [parts] in
                let done = part.map(transform)
                parts.withLockedValue { $0[slice] = done }
            }
        }
    }

    /// Every element's result, in order, once every slice is done.
    func results() -> [Output] {
        group.wait()
        return parts.withLockedValue { $0.flatMap { $0 } }
    }
}

extension VaultEngine {
    /// How many times `password` appears in Have I Been Pwned's breach corpus (``BitwardenAPI/timesExposed(password:serviceURL:)``:
    /// five hex digits of its SHA-1 leave the device, never the password). Needs the network; throws
    /// ``VaultError/serverUnreachable(_:)`` without it.
    public func timesExposed(password: String, serviceURL: String = BitwardenAPI.pwnedPasswordsURL) async throws -> Int {
        do {
            return try await api.timesExposed(password: password, serviceURL: serviceURL)
        } catch let error as ServerCallError {
            throw Self.onlineOnly(error)
        }
    }
}
