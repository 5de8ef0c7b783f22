import Foundation
import VaultAPI
import VaultCrypto
import VaultModels
import VaultSyncCore

/// An attachment as the user sees it: its id, decrypted file name and size.
public struct AttachmentSummary: Sendable, Equatable {
    public var id: String
    public var fileName: String
    /// The encrypted size in bytes, as the server reports it.
    public var size: Int?
    public var sizeName: String?
}

extension VaultEngine {
    /// What Bitwarden's own clients accept for one attachment (500 MiB encrypted); a server may set
    /// less and says so when the file is announced.
    public static let attachmentSizeLimit = 500 * 1_048_576

    /// The attachments of an item, from the local copy (works offline).
    public func attachments(itemID: String) async throws -> [AttachmentSummary] {
        let view = try await item(id: itemID)
        return view.attachments.compactMap { attachment in
            guard let id = attachment.id else { return nil }
            return AttachmentSummary(id: id, fileName: attachment.fileName ?? id, size: attachment.size.flatMap { Int($0) },
                                     sizeName: attachment.sizeName)
        }
    }

    /// Finds one attachment of an item by id or file name (a file name two attachments share is refused).
    public func attachment(itemID: String, reference: String) async throws -> AttachmentSummary {
        let all = try await attachments(itemID: itemID)
        if let byID = all.first(where: { $0.id == reference.lowercased() }) { return byID }
        let named = all.filter { $0.fileName == reference }
        let name = (try? await item(id: itemID).name) ?? itemID
        switch named.count {
        case 1: return named[0]
        case 0: throw VaultError.attachmentNotFound(item: name, reference: reference)
        default: throw VaultError.attachmentAmbiguous(item: name, reference: reference, ids: named.map(\.id))
        }
    }

    /// Attaches a file to a personal item: a fresh 64-byte attachment key encrypts the file (one binary
    /// EncString) and is itself wrapped with the item's key (the user key for an item without one);
    /// the file name is encrypted with the item's key (docs/PROTOCOL.md, "Attachments"). The v2 flow:
    /// announce, then upload. Needs the server; an item with queued changes has to sync first (the
    /// attachment moves the item's revision, which those changes are based on).
    @discardableResult
    public func addAttachment(itemID: String, fileName: String, contents: [UInt8]) async throws -> AttachmentSummary {
        let current = try requireSession()
        let wire = try await cachedCipher(id: itemID, userID: current.userID)
        try await requireNoQueuedChange(itemID: itemID, name: (try? wire.decryptedName(with: current.keys)) ?? itemID)
        let itemKey = try modelCall { try current.keys.fieldKey(itemKey: wire.key, organizationId: wire.organizationId, itemID: itemID) }
        let attachmentKey = try cryptoCall { try SymmetricCryptoKey(bytes: random.bytes(count: 64)) }
        let body = try cryptoCall { try Array(EncString.encrypt(contents, key: attachmentKey, random: random).binary()) }
        guard body.count <= Self.attachmentSizeLimit else { throw VaultError.attachmentTooLarge(size: body.count, limit: Self.attachmentSizeLimit) }
        let wrappedKey = try cryptoCall { try EncString.encrypt(attachmentKey.rawBytes, key: itemKey, random: random) }
        let encryptedName = try cryptoCall { try EncString.encrypt(fileName, key: itemKey, random: random) }
        let revision = wire.revisionDate
        // Every attempt at this attachment (a retry after a refreshed token) is one attachment on a server
        // that honours the key.
        let createKey = UUID().uuidString.lowercased()
        let upload = try await attachmentCall {
            try await self.authorized { api, token in
                try await api.createAttachment(cipherID: itemID, fileName: encryptedName, key: wrappedKey, encryptedSize: body.count,
                                               lastKnownRevisionDate: revision, idempotencyKey: createKey, token: token)
            }
        }
        try await attachmentCall {
            try await self.authorized { api, token in
                try await api.uploadAttachment(upload, cipherID: itemID, fileName: encryptedName, body: body, token: token)
            }
        }
        attachmentCache(userID: current.userID).store(upload.attachmentID, encrypted: body)
        try await refreshCachedItem(itemID)
        return AttachmentSummary(id: upload.attachmentID, fileName: fileName, size: body.count, sizeName: nil)
    }

    /// The decrypted contents of an attachment, downloaded through the link the server hands out
    /// (which may be another host). Needs the server.
    public func attachmentContents(itemID: String, attachmentID: String) async throws -> [UInt8] {
        let current = try requireSession()
        let wire = try await cachedCipher(id: itemID, userID: current.userID)
        guard let attachment = (wire.attachments ?? []).first(where: { $0.id == attachmentID }) else {
            throw VaultError.attachmentNotFound(item: (try? wire.decryptedName(with: current.keys)) ?? itemID, reference: attachmentID)
        }
        let itemKey = try modelCall { try current.keys.fieldKey(itemKey: wire.key, organizationId: wire.organizationId, itemID: itemID) }
        // Attachments made before attachment keys existed are encrypted with the item's key itself.
        let fileKey = try attachment.key.map { wrapped in try cryptoCall { try wrapped.decryptKey(key: itemKey) } } ?? itemKey
        let cache = attachmentCache(userID: current.userID)
        let encrypted: [UInt8]
        do {
            encrypted = try await attachmentCall { try await self.encryptedAttachment(itemID: itemID, attachmentID: attachmentID) }
        } catch VaultError.attachmentNeedsServer {
                let name = (try? wire.decrypted(with: current.keys).attachments.first { $0.id == attachmentID }?.fileName) ?? nil
                throw VaultError.attachmentNeedsServer(
                    "The server could not be reached, and \"\(name ?? attachmentID)\" was never downloaded on this device; it can be read offline once it has been opened online.")
        }
        let contents = try cryptoCall { try Array(EncString(binary: encrypted).decrypt(key: fileKey)) }
        // Kept only once it opened: a damaged download is never cached.
        cache.store(attachmentID, encrypted: encrypted)
        return contents
    }

    /// An attachment's encrypted file: from this device's cache, else downloaded through the link the
    /// server hands out (not cached here: the caller caches it once it opened).
    func encryptedAttachment(itemID: String, attachmentID: String) async throws -> [UInt8] {
        if let cached = attachmentCache(userID: try requireSession().userID).read(attachmentID) { return cached }
        let url = try await authorized { api, token in try await api.attachmentDownloadURL(cipherID: itemID, attachmentID: attachmentID, token: token) }
        return try await authorized { api, _ in try await api.downloadAttachment(url: url) }
    }

    /// Deletes an attachment on the server and from the local copy. Needs the server.
    public func deleteAttachment(itemID: String, attachmentID: String) async throws {
        let current = try requireSession()
        let wire = try await cachedCipher(id: itemID, userID: current.userID)
        try await requireNoQueuedChange(itemID: itemID, name: (try? wire.decryptedName(with: current.keys)) ?? itemID)
        do {
            _ = try await attachmentCall {
                try await self.authorized { api, token in try await api.deleteAttachment(cipherID: itemID, attachmentID: attachmentID, token: token) }
            }
        } catch VaultError.serverRefused(404, _) {
            // Deleted already (elsewhere, or an earlier attempt whose answer was lost).
        }
        attachmentCache(userID: current.userID).remove(attachmentID)
        try await refreshCachedItem(itemID)
    }

    func attachmentCache(userID: String) -> AttachmentCache {
        AttachmentCache(profileDatabase: store.path, userID: userID, limit: configuration.attachmentCacheBytes)
    }

    func requireNoQueuedChange(itemID: String, name: String) async throws {
        if try await pendingChange(itemKind: .cipher, itemID: itemID, userID: try requireSession().userID) != nil {
            throw VaultError.attachmentNeedsServer(
                "\"\(name)\" has changes waiting for the server; run `vaultsync sync` first, then change its attachments.")
        }
    }

    /// Takes the server's current version of an item into the local copy (after an attachment change).
    func refreshCachedItem(_ itemID: String) async throws {
        let userID = try requireSession().userID
        let fresh = try await attachmentCall {
            try await self.authorized { api, token in try await api.getCipher(id: itemID, token: token) }
        }
        try await write { tx in try tx.ciphers(of: userID).store(fresh) }
        publishStatus()
    }

    /// Runs a server call of an attachment operation: these need the server, so a failure is the
    /// user's error, never a queued change.
    func attachmentCall<T: Sendable>(_ call: () async throws -> T) async throws -> T {
        do {
            return try await call()
        } catch let error as ServerCallError {
            if case .transport = error {
                await recordContact(success: false)
                throw VaultError.attachmentNeedsServer(
                    "The server could not be reached (\(error.description)); attachments are added, opened and deleted online. Nothing was changed.")
            }
            throw Self.onlineOnly(error)
        }
    }
}
