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
    /// Added or deleted here and waiting for the server (uploaded, or deleted there, at the next sync).
    public var pending: Bool = false
}

extension VaultEngine {
    /// What Bitwarden's own clients accept for one attachment (500 MiB encrypted); a server may set
    /// less and says so when the file is announced.
    public static let attachmentSizeLimit = 500 * 1_048_576

    /// The attachments of an item, from the local copy (works offline).
    public func attachments(itemID: String) async throws -> [AttachmentSummary] {
        let view = try await item(id: itemID)
        let record = try await pendingChange(itemKind: .cipher, itemID: itemID, userID: try requireSession().userID)
        let staged = Set((record?.metadata.attachmentAdds ?? []).map(\.id))
        return view.attachments.compactMap { attachment in
            guard let id = attachment.id else { return nil }
            return AttachmentSummary(id: id, fileName: attachment.fileName ?? id, size: attachment.size.flatMap { Int($0) },
                                     sizeName: attachment.sizeName, pending: staged.contains(id))
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
    /// announce, then upload. When the server cannot be reached, or the item has changes waiting for it,
    /// the encrypted file is staged in the profile and goes with the item's queue record (uploaded once
    /// the item is on the server; the result says `pending`).
    @discardableResult
    public func addAttachment(itemID: String, fileName: String, contents: [UInt8]) async throws -> AttachmentSummary {
        let current = try requireSession()
        let wire = try await cachedCipher(id: itemID, userID: current.userID)
        let itemKey = try modelCall { try current.keys.fieldKey(itemKey: wire.key, organizationId: wire.organizationId, itemID: itemID) }
        let attachmentKey = try cryptoCall { try SymmetricCryptoKey(bytes: random.bytes(count: 64)) }
        let body = try cryptoCall { try Array(EncString.encrypt(contents, key: attachmentKey, random: random).binary()) }
        guard body.count <= Self.attachmentSizeLimit else { throw VaultError.attachmentTooLarge(size: body.count, limit: Self.attachmentSizeLimit) }
        let wrappedKey = try cryptoCall { try EncString.encrypt(attachmentKey.rawBytes, key: itemKey, random: random) }
        let encryptedName = try cryptoCall { try EncString.encrypt(fileName, key: itemKey, random: random) }
        // The device-made id is the announce's idempotency key: every attempt (now, or from the queue) is one attachment.
        var staged = StagedAttachment(id: UUID().uuidString.lowercased(), fileName: encryptedName.serialized, key: wrappedKey.serialized,
                                      size: body.count)
        if try await pendingChange(itemKind: .cipher, itemID: itemID, userID: current.userID) == nil {
            do {
                let announceKey = Self.announceKey(staged)
                let upload = try await authorized { api, token in
                    try await api.createAttachment(cipherID: itemID, fileName: encryptedName, key: wrappedKey, encryptedSize: body.count,
                                                   lastKnownRevisionDate: wire.revisionDate, idempotencyKey: announceKey, token: token)
                }
                staged.serverID = upload.attachmentID
                try await authorized { api, token in
                    try await api.uploadAttachment(upload, cipherID: itemID, fileName: encryptedName, body: body, token: token)
                }
                await recordContact(success: true)
                attachmentCache(userID: current.userID).store(upload.attachmentID, encrypted: body)
                try? await refreshCachedItem(itemID)
                return AttachmentSummary(id: upload.attachmentID, fileName: fileName, size: body.count, sizeName: nil)
            } catch let error as ServerCallError where !error.isOutOfDate {
                try await acceptOffline(error, isOrganization: wire.organizationId != nil)
            }
        } else if wire.organizationId != nil {
            throw VaultError.organizationItemOffline
        }
        try attachmentStaging(userID: current.userID).write(staged.id, encrypted: body)
        var local = wire
        local.attachments = (wire.attachments ?? []) + [AttachmentWire(id: staged.id, fileName: encryptedName, key: wrappedKey, size: "\(body.count)")]
        try await queueAttachmentChange(.attachmentAdded(staged), local: local, previous: wire)
        return AttachmentSummary(id: staged.id, fileName: fileName, size: body.count, sizeName: nil, pending: true)
    }

    static func announceKey(_ staged: StagedAttachment) -> String { "attachment-\(staged.id)" }

    /// Folds an attachment change into the item's queue record with the local copy that shows it.
    func queueAttachmentChange(_ operation: OfflineOperation, local: CipherWire, previous: CipherWire) async throws {
        let current = try requireSession()
        let itemID = try local.id ?? { throw VaultError.itemNotFound(previous.id ?? "") }()
        let existing = try await pendingChange(itemKind: .cipher, itemID: itemID, userID: current.userID)
        _ = try await queue(itemID: itemID, operation: operation, local: local, previous: previous, existing: existing, session: current)
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
        let userID = try requireSession().userID
        if let staged = attachmentStaging(userID: userID).read(attachmentID) { return staged }
        if let cached = attachmentCache(userID: userID).read(attachmentID) { return cached }
        let url = try await authorized { api, token in try await api.attachmentDownloadURL(cipherID: itemID, attachmentID: attachmentID, token: token) }
        return try await authorized { api, _ in try await api.downloadAttachment(url: url) }
    }

    /// Deletes an attachment on the server and from the local copy. When the server cannot be reached,
    /// or the item has changes waiting for it, the delete goes with the item's queue record (an attachment
    /// still staged here is simply dropped).
    public func deleteAttachment(itemID: String, attachmentID: String) async throws {
        let current = try requireSession()
        let wire = try await cachedCipher(id: itemID, userID: current.userID)
        let existing = try await pendingChange(itemKind: .cipher, itemID: itemID, userID: current.userID)
        let staged = existing?.metadata.attachmentAdds?.contains { $0.id == attachmentID } == true
        if existing == nil {
            do {
                _ = try await authorized { api, token in try await api.deleteAttachment(cipherID: itemID, attachmentID: attachmentID, token: token) }
                return try await forgetAttachment(attachmentID, of: itemID)
            } catch let error as ServerCallError where error.isGone {
                // Deleted already (elsewhere, or an earlier attempt whose answer was lost).
                return try await forgetAttachment(attachmentID, of: itemID)
            } catch let error as ServerCallError where !error.isOutOfDate {
                try await acceptOffline(error, isOrganization: wire.organizationId != nil)
            }
        } else if wire.organizationId != nil {
            throw VaultError.organizationItemOffline
        }
        var local = wire
        local.attachments = (wire.attachments ?? []).filter { $0.id != attachmentID }
        try await queueAttachmentChange(.attachmentDeleted(id: attachmentID), local: local, previous: wire)
        if staged { attachmentStaging(userID: current.userID).remove(attachmentID) }
        attachmentCache(userID: current.userID).remove(attachmentID)
    }

    func forgetAttachment(_ attachmentID: String, of itemID: String) async throws {
        await recordContact(success: true)
        attachmentCache(userID: try requireSession().userID).remove(attachmentID)
        try? await refreshCachedItem(itemID)
    }

    func attachmentCache(userID: String) -> AttachmentCache {
        AttachmentCache(profileDatabase: store.path, userID: userID, limit: configuration.attachmentCacheBytes)
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
