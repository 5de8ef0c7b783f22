import Foundation
import VaultCrypto
import VaultExchange
import VaultModels
import VaultStore
import VaultSyncCore

/// What to do with imported items that are already in the vault (same type, name and content).
public enum DuplicatePolicy: Sendable {
    /// Import nothing and say how many are already there (the default: the same file imported twice).
    case refuse
    /// Import only the items that are not in the vault yet.
    case skip
    /// Import everything.
    case allow
}

/// What an import did.
public struct ImportSummary: Sendable, Equatable {
    /// Imported items per type, in type order.
    public var imported: [CipherType: Int]
    public var importedCount: Int
    /// Folders made for the import, and folders of the file that already existed (matched by name).
    public var foldersCreated: [String]
    public var foldersMatched: [String]
    /// Entries of the file that were not imported, with the reason (from the reader).
    public var skipped: [SkippedEntry]
    /// Items left out because they are already in the vault (`DuplicatePolicy.skip`).
    public var duplicatesSkipped: Int
    /// Changes waiting for the server after the import.
    public var pendingCount: Int
}

extension VaultEngine {
    /// The positions in `vault.items` of items already in this vault: same type,
    /// name and content (``ImportedItem/contentKey``), wherever they are filed.
    public func alreadyInVault(_ vault: ImportedVault) async throws -> [Int] {
        let known = Set(try await items().compactMap { item -> String? in
            guard case .success(let view) = item.result, !view.isDeleted else { return nil }
            return ImportedItem.contentKey(of: view)
        })
        // Only the vault's items count: two equal entries of one file (one login in two KeePassXC groups) are two
        // items the user has, not one "already in the vault" (RELIABILITY bug 71: refused, or one dropped, on an empty vault).
        return vault.items.indices.filter { known.contains(ImportedItem.contentKey(of: vault.items[$0].view)) }
    }

    /// Imports `vault` into the personal vault, offline-first: every item and every missing folder is
    /// encrypted, stored and queued as a create in **one transaction**, so a failure imports nothing.
    /// The next sync sends them. Folders are matched by name; parents of nested names ("A/B") are made
    /// too, as Bitwarden does. Imported items get new ids; their dates are kept.
    ///
    /// The duplicate check holds against another program importing into the same profile at the same time:
    /// when the vault's items changed between the check and the transaction, the import starts again from
    /// the check (and the second of two imports of one file is refused as a repeat).
    public func importItems(_ vault: ImportedVault, duplicates: DuplicatePolicy = .refuse) async throws -> ImportSummary {
        for _ in 0..<5 {
            do {
                return try await importOnce(vault, duplicates: duplicates)
            } catch is SaveRaced {
                continue
            }
        }
        throw VaultError.storage("the vault kept changing (another program was saving to it) while the import was checked; nothing was imported, try again")
    }

    func importOnce(_ vault: ImportedVault, duplicates: DuplicatePolicy) async throws -> ImportSummary {
        let current = try requireSession()
        let userID = current.userID
        let checkedAt = try readNow { tx in try tx.ciphers(of: userID).version() }
        // The check decrypts the whole vault: only when its answer matters.
        let repeated = duplicates == .allow ? [] : Set(try await alreadyInVault(vault))
        if !repeated.isEmpty, duplicates == .refuse {
            let names = repeated.sorted().prefix(3).map { vault.items[$0].view.name }
            throw VaultError.duplicateImport(count: repeated.count, total: vault.items.count, examples: Array(names))
        }
        let chosen = vault.items.enumerated().filter { duplicates == .allow || !repeated.contains($0.offset) }.map(\.element)

        // Folders: existing ones by name; the rest (and their parents) made now.
        var folderIDs: [String: String] = [:]
        for folder in try await folders() {
            if let id = folder.id, folderIDs[folder.name] == nil { folderIDs[folder.name] = id }
        }
        var wanted: [String] = []
        for name in vault.folderNames + chosen.compactMap(\.folderName) {
            let parts = name.split(separator: "/", omittingEmptySubsequences: false)
            for depth in 1...max(parts.count, 1) {
                let path = parts.prefix(depth).joined(separator: "/")
                if !path.isEmpty, !wanted.contains(path) { wanted.append(path) }
            }
        }
        var matched: [String] = []
        var created: [String] = []
        var newFolders: [FolderWire] = []
        let now = clock.now()
        // Temporary ids at consecutive microseconds from now: the import's folders and items, in order, sit side
        // by side in every index keyed by them (docs/ARCHITECTURE.md, "Time-ordered ids").
        var made = now.microsecondsSinceEpoch
        func nextID() -> String {
            made += 1
            return TimeOrderedID.make(microseconds: made)
        }
        for name in wanted {
            if folderIDs[name] != nil { matched.append(name); continue }
            try validateFolderName(name)
            let id = nextID()
            folderIDs[name] = id
            created.append(name)
            newFolders.append(try modelCall { try FolderView(id: id, name: name, revisionDate: now).encrypted(with: current.keys, random: random) })
        }

        // Items: encrypted before the transaction, so it holds the database for writes only.
        var wires: [CipherWire] = []
        wires.reserveCapacity(chosen.count)
        for item in chosen {
            var view = item.view
            view.id = nextID()
            view.organizationId = nil
            view.collectionIds = nil
            view.attachments = []
            view.folderId = item.folderName.flatMap { folderIDs[$0] }
            view.itemKey = try modelCall { try current.keys.wrapNewItemKey(organizationId: nil, random: random) }
            // The file's dates are the item's until it reaches the server, which sets both (docs/IMPORT-FORMATS.md, "Dates").
            view.creationDate = view.creationDate ?? now
            view.revisionDate = view.revisionDate ?? now
            do {
                try validate(view)
                wires.append(try encrypt(view, keys: current.keys))
            } catch VaultError.invalidItem(let reason) {
                throw VaultError.invalidItem("\(item.entry) of the file: \(reason)")
            } catch let error as VaultError {
                throw VaultError.invalidItem("\(item.entry) of the file: \(error.description)")
            }
        }

        let key = current.keys.userKey
        let pendingCount = try writeNow { tx -> Int in
            if duplicates != .allow, try tx.ciphers(of: userID).version() != checkedAt { throw SaveRaced() }
            let queue = tx.queue(of: userID)
            func queueCreate(kind: PendingItemKind, id: String, itemKey: String?) throws {
                guard case .upsert(let metadata) = QueueRules.apply(.create, to: nil, itemRevisionDate: nil, now: now, itemKey: itemKey) else { return }
                try queue.store(PendingChange(id: UUID().uuidString.lowercased(), userID: userID, itemID: id, itemKind: kind, metadata: metadata),
                                key: key)
            }
            for folder in newFolders {
                try tx.folders(of: userID).store(folder)
                try queueCreate(kind: .folder, id: folder.id!, itemKey: nil)
            }
            let ciphers = tx.ciphers(of: userID)
            for wire in wires {
                try ciphers.store(wire)
                try queueCreate(kind: .cipher, id: wire.id!, itemKey: wire.key?.serialized)
            }
            return try queue.count()
        }
        logger.info("imported", metadata: ["items": "\(wires.count)", "folders": "\(newFolders.count)"])
        publishStatus()
        var counts: [CipherType: Int] = [:]
        for item in chosen { counts[item.view.type, default: 0] += 1 }
        return ImportSummary(imported: counts, importedCount: chosen.count, foldersCreated: created, foldersMatched: matched,
                             skipped: vault.skipped, duplicatesSkipped: duplicates == .skip ? repeated.count : 0,
                             pendingCount: pendingCount)
    }

    /// What an export writes: the vault's items decrypted (no trash; organization items only with
    /// `includeOrganizations`) and its folders. Refused while any item it would hold cannot be decrypted: an
    /// export that silently leaves items out would be a loss the user finds too late. (One in the trash, or of
    /// an organization the export leaves out, is left out as a readable one would be.)
    public func exportContents(includeOrganizations: Bool = false) async throws -> (items: [CipherView], folders: [FolderView]) {
        let userID = try requireSession().userID
        var views: [CipherView] = []
        var unreadable: [String] = []
        for item in try await items() {
            switch item.result {
            case .success(let view):
                if view.isDeleted || (view.organizationId != nil && !includeOrganizations) { continue }
                views.append(view)
            case .failure:
                let wire = try? await cachedCipher(id: item.id, userID: userID)
                if wire?.deletedDate != nil || (wire?.organizationId != nil && !includeOrganizations) { continue }
                unreadable.append(item.id)
            }
        }
        if !unreadable.isEmpty { throw VaultError.exportUnreadable(itemIDs: unreadable) }
        let folders = try await folders().sorted { $0.name < $1.name }
        return (views.sorted { ($0.name, $0.id ?? "") < ($1.name, $1.id ?? "") }, folders)
    }
}

extension VaultEngine {
    /// The unlocked account's KDF settings (a password-protected export uses them, as Bitwarden's do).
    public func accountKdf() async throws -> KdfConfiguration {
        let userID = try requireSession().userID
        guard let account = try await read({ tx in try tx.accounts.find(userID: userID) }) else {
            throw VaultError.notLoggedIn
        }
        do { return try account.kdf } catch let error as CryptoError { throw VaultError.crypto(error) }
    }
}
