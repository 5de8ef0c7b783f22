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
    /// The file's own size, before encryption.
    public var fileSize: FileSize?

    /// A file's size before encryption: exact when its encrypted file is on this device (added here,
    /// or downloaded and kept), else the 16 lengths its encrypted size allows (the padding is unknown
    /// until the last block is decrypted).
    public enum FileSize: Sendable, Equatable {
        case exact(Int)
        case within(ClosedRange<Int>)

        /// The largest size it can be: the size itself when exact.
        public var atMost: Int {
            switch self {
            case .exact(let size): size
            case .within(let range): range.upperBound
            }
        }
    }
}

extension VaultEngine {
    /// What Bitwarden's own clients accept for one attachment (500 MiB encrypted); a server may set
    /// less and says so when the file is announced.
    public static let attachmentSizeLimit = 500 * 1_048_576

    /// The attachments of an item, from the local copy (works offline).
    public func attachments(itemID: String) async throws -> [AttachmentSummary] {
        let itemID = try currentID(of: itemID)
        let current = try requireSession()
        let view = try await item(id: itemID)
        let record = try await pendingChange(itemKind: .cipher, itemID: itemID, userID: current.userID)
        let staged = Set((record?.metadata.attachmentAdds ?? []).map(\.id))
        let wire = try await cachedCipher(id: itemID, userID: current.userID)
        let keys = (wire.attachments ?? []).reduce(into: [String: EncString]()) { keys, attachment in
            if let id = attachment.id, let key = attachment.key { keys[id] = key }
        }
        return view.attachments.compactMap { attachment in
            guard let id = attachment.id else { return nil }
            let size = attachment.size.flatMap { Int($0) }
            return AttachmentSummary(id: id, fileName: attachment.fileName ?? id, size: size, sizeName: attachment.sizeName,
                                     pending: staged.contains(id),
                                     fileSize: size.flatMap { fileSize(id: id, encryptedSize: $0, key: keys[id], of: wire, userID: current.userID) })
        }
    }

    /// An attachment's size before encryption: read from its last block when its file is on this device
    /// (staged or kept), else the range its encrypted size allows.
    func fileSize(id: String, encryptedSize: Int, key: EncString?, of wire: CipherWire, userID: String) -> AttachmentSummary.FileSize? {
        fileSize(path: attachmentStaging(userID: userID).existing(id) ?? attachmentCache(userID: userID).path(id),
                 encryptedSize: encryptedSize, key: key, of: wire)
    }

    /// ``fileSize(id:encryptedSize:key:of:userID:)`` for the encrypted file at `path`.
    func fileSize(path: String?, encryptedSize: Int, key: EncString?, of wire: CipherWire) -> AttachmentSummary.FileSize? {
        guard let range = EncryptedFileLength.plaintextLengths(encryptedLength: encryptedSize) else { return nil }
        guard let path, AttachmentFile.size(path) == encryptedSize, let handle = FileHandle(forReadingAtPath: path),
              let keys = try? requireSession().keys,
              let itemKey = try? keys.fieldKey(itemKey: wire.key, organizationId: wire.organizationId, itemID: wire.id ?? "")
        else { return .within(range) }
        defer { try? handle.close() }
        let fileKey = key.flatMap { try? $0.decryptKey(key: itemKey) } ?? itemKey
        let tailLength = range.lowerBound == 0 ? 16 : 32
        guard let header = try? handle.read(upToCount: StreamingEncryptor.headerLength),
              (try? handle.seek(toOffset: UInt64(encryptedSize - tailLength))) != nil,
              let tail = try? handle.read(upToCount: tailLength),
              let exact = try? EncryptedFileLength.plaintextLength(key: fileKey, header: Array(header), tail: Array(tail),
                                                                   encryptedLength: encryptedSize)
        else { return .within(range) }
        return .exact(exact)
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
    /// the file name is encrypted with the item's key (docs/PROTOCOL.md, "Attachments"). The file is
    /// encrypted piece by piece straight into the profile's staging (never plaintext on disk), then sent
    /// with the v2 flow (announce, upload from the staged file: memory does not grow with its size).
    /// When the server cannot be reached, or the item has changes waiting for it, the staged file goes
    /// with the item's queue record (uploaded once the item is on the server; the result says `pending`).
    @discardableResult
    public func addAttachment(itemID: String, fileAt path: String, fileName: String,
                              progress: AttachmentProgressHandler? = nil) async throws -> AttachmentSummary {
        let (descriptor, size) = try AttachmentFile.openRegularFile(path)
        defer { close(descriptor) }
        return try await addAttachment(itemID: itemID, fileName: fileName, plaintextSize: size, progress: progress) { buffer in
            try AttachmentFile.readFully(descriptor, into: &buffer)
        }
    }

    /// ``addAttachment(itemID:fileAt:fileName:progress:)`` for contents in memory.
    @discardableResult
    public func addAttachment(itemID: String, fileName: String, contents: [UInt8]) async throws -> AttachmentSummary {
        var offset = 0
        return try await addAttachment(itemID: itemID, fileName: fileName, plaintextSize: contents.count, progress: nil) { buffer in
            let count = min(buffer.count, contents.count - offset)
            buffer.replaceSubrange(0..<count, with: contents[offset..<(offset + count)])
            offset += count
            return count
        }
    }

    /// The size of a plaintext of `length` bytes once encrypted (header, padded ciphertext).
    public static func encryptedSize(ofPlaintext length: Int) -> Int {
        StreamingEncryptor.headerLength + (length / 16 + 1) * 16
    }

    func addAttachment(itemID: String, fileName: String, plaintextSize: Int, progress: AttachmentProgressHandler?,
                       source: (inout [UInt8]) throws -> Int) async throws -> AttachmentSummary {
        let current = try requireSession()
        let itemID = try currentID(of: itemID)
        let wire = try await cachedCipher(id: itemID, userID: current.userID)
        // Checked before any work: Bitwarden's own clients accept up to 500 MiB encrypted.
        let size = Self.encryptedSize(ofPlaintext: plaintextSize)
        guard size <= Self.attachmentSizeLimit else { throw VaultError.attachmentTooLarge(size: size, limit: Self.attachmentSizeLimit) }
        let itemKey = try modelCall { try current.keys.fieldKey(itemKey: wire.key, organizationId: wire.organizationId, itemID: itemID) }
        let attachmentKey = try cryptoCall { try SymmetricCryptoKey(bytes: random.bytes(count: 64)) }
        let wrappedKey = try cryptoCall { try EncString.encrypt(attachmentKey.rawBytes, key: itemKey, random: random) }
        let encryptedName = try cryptoCall { try EncString.encrypt(fileName, key: itemKey, random: random) }
        let encryptor = try cryptoCall { try StreamingEncryptor(key: attachmentKey, random: random) }
        // The device-made id is the announce's idempotency key: every attempt (now, or from the queue) is one attachment.
        let staged = StagedAttachment(id: UUID().uuidString.lowercased(), fileName: encryptedName.serialized, key: wrappedKey.serialized, size: size)
        let encrypting = progress.map { report in { @Sendable (done: Int) in report(AttachmentProgress(phase: .encrypting, done: done, total: plaintextSize)) } }
        let staging = attachmentStaging(userID: current.userID)
        return try await sendOrQueue(staged, to: wire, fileName: fileName, fileSize: .exact(plaintextSize), name: encryptedName,
                                     key: wrappedKey, progress: progress) {
            try staging.writeEncrypting(staged.id, encryptor: encryptor, progress: encrypting, source: source)
        }
    }

    /// An attachment goes to the server now, or (offline, or the item has changes waiting) with the item's
    /// queue record. Online, it is announced first, so the server's own size limit refuses it before any
    /// work; then `stage` writes the encrypted file into the profile and it is uploaded from there. A
    /// refusal is the user's error and leaves nothing staged.
    func sendOrQueue(_ staged: StagedAttachment, to wire: CipherWire, fileName: String, fileSize: AttachmentSummary.FileSize?,
                     name: EncString, key: EncString, progress: AttachmentProgressHandler?,
                     stage: () throws -> Void) async throws -> AttachmentSummary {
        let current = try requireSession()
        let staging = attachmentStaging(userID: current.userID)
        var staged = staged
        var written = false
        if try await pendingChange(itemKind: .cipher, itemID: wire.id ?? "", userID: current.userID) == nil {
            do {
                let upload = try await announce(staged, on: wire, name: name, key: key)
                staged.serverID = upload?.attachmentID
                try stage()
                written = true
                let attachmentID = try await uploadStaged(staged, upload: upload, itemID: wire.id ?? "", name: name, progress: progress)
                return AttachmentSummary(id: attachmentID, fileName: fileName, size: staged.size, sizeName: nil, fileSize: fileSize)
            } catch let error as ServerCallError where error.isOutOfDate && !written {
                // Another device changed the item since this one read it: the file waits with the item's record, and
                // the next sync attaches it to the item as it is then, as an edit in that case is queued (it was
                // refused, exit 6, nothing kept: RELIABILITY bug 72).
                await recordContact(success: true)
                logger.info("server copy changed meanwhile; attachment queued", metadata: ["item": "\(wire.id ?? "")"])
            } catch let error as ServerCallError where !error.isOutOfDate {
                do {
                    try await acceptOffline(error, isOrganization: wire.organizationId != nil)
                } catch {
                    staging.remove(staged.id)
                    throw error
                }
            }
        } else if wire.organizationId != nil {
            throw VaultError.organizationItemOffline
        }
        if !written { try stage() }
        var local = wire
        local.attachments = (wire.attachments ?? []) + [AttachmentWire(id: staged.id, fileName: name, key: key, size: "\(staged.size)")]
        try await queueAttachmentChange(.attachmentAdded(staged), local: local, previous: wire)
        return AttachmentSummary(id: staged.id, fileName: fileName, size: staged.size, sizeName: nil, pending: true, fileSize: fileSize)
    }

    /// Renames an attachment. Bitwarden's API sets a file's name when it is announced and has no rename,
    /// so the file (the same encrypted bytes under its own key, the key wrapped as before) is attached
    /// again under the new name and then the old one is removed: online at once, offline through the
    /// item's record like any add and delete. The file must be on this device (added here or opened
    /// before) or the server reachable.
    @discardableResult
    public func renameAttachment(itemID: String, attachmentID: String, to newName: String) async throws -> AttachmentSummary {
        let current = try requireSession()
        let itemID = try currentID(of: itemID)
        let wire = try await cachedCipher(id: itemID, userID: current.userID)
        guard let attachment = (wire.attachments ?? []).first(where: { $0.id == attachmentID }), let key = attachment.key else {
            throw VaultError.attachmentNotFound(item: (try? wire.decryptedName(with: current.keys)) ?? itemID, reference: attachmentID)
        }
        let itemKey = try modelCall { try current.keys.fieldKey(itemKey: wire.key, organizationId: wire.organizationId, itemID: itemID) }
        let encryptedName = try cryptoCall { try EncString.encrypt(newName, key: itemKey, random: random) }
        let file: (path: String, temporary: Bool)
        do {
            file = try await attachmentCall {
                try await self.encryptedFile(itemID: itemID, attachmentID: attachmentID, size: attachment.size.flatMap { Int($0) } ?? 0, progress: nil)
            }
        } catch VaultError.attachmentNeedsServer {
            // A rename attaches the same encrypted file again: offline, only a file this device holds can be.
            let name = (try? wire.decrypted(with: current.keys).attachments.first { $0.id == attachmentID }?.fileName) ?? nil
            throw VaultError.attachmentNeedsServer(
                "The server could not be reached, and \"\(name ?? attachmentID)\" was never downloaded on this device: a rename attaches its file "
                + "again, so it needs the file. Open it once online (or rename it online). Nothing was changed.")
        }
        defer { if file.temporary { unlink(file.path) } }
        let staged = StagedAttachment(id: UUID().uuidString.lowercased(), fileName: encryptedName.serialized, key: key.serialized,
                                      size: AttachmentFile.size(file.path) ?? 0)
        let staging = attachmentStaging(userID: current.userID)
        let fileSize = fileSize(path: file.path, encryptedSize: staged.size, key: key, of: wire)
        let renamed = try await sendOrQueue(staged, to: wire, fileName: newName, fileSize: fileSize, name: encryptedName, key: key,
                                            progress: nil) {
            try staging.copy(file.path, to: staged.id)
        }
        try await deleteAttachment(itemID: itemID, attachmentID: attachmentID)
        return renamed
    }

    /// Step one of the v2 flow, with the staged id as the idempotency key; `nil` from a server without the
    /// v2 flow (``ServerCallError/isMissingRoute``: the file then goes up with the legacy upload).
    func announce(_ staged: StagedAttachment, on itemID: String, name: EncString, key: EncString,
                  lastKnownRevisionDate: WireDate?, idempotencyKey: String) async throws -> AttachmentUpload? {
        do {
            return try await authorized { api, token in
                try await api.createAttachment(cipherID: itemID, fileName: name, key: key, encryptedSize: staged.size,
                                               lastKnownRevisionDate: lastKnownRevisionDate, idempotencyKey: idempotencyKey, token: token)
            }
        } catch let error as ServerCallError where error.isMissingRoute {
            return nil
        }
    }

    func announce(_ staged: StagedAttachment, on wire: CipherWire, name: EncString, key: EncString) async throws -> AttachmentUpload? {
        try await announce(staged, on: wire.id ?? "", name: name, key: key, lastKnownRevisionDate: wire.revisionDate,
                           idempotencyKey: Self.announceKey(staged))
    }

    /// Step two: the staged file up (`upload` `nil`: with the legacy upload), then into the read cache.
    /// Returns the attachment's id.
    func uploadStaged(_ staged: StagedAttachment, upload: AttachmentUpload?, itemID: String, name: EncString,
                      progress: AttachmentProgressHandler?) async throws -> String {
        let current = try requireSession()
        guard let path = attachmentStaging(userID: current.userID).existing(staged.id) else { throw VaultError.storage("the staged attachment is gone") }
        let size = staged.size
        let report = progress.map { report in { @Sendable (done: Int) in report(AttachmentProgress(phase: .uploading, done: done, total: size)) } }
        let attachmentID: String
        if let upload {
            try await authorized { api, token in
                try await api.uploadAttachment(upload, cipherID: itemID, fileName: name, filePath: path, fileSize: size, progress: report, token: token)
            }
            attachmentID = upload.attachmentID
        } else {
            attachmentID = try await uploadLegacy(staged, file: path, to: itemID, mayHaveArrived: false, progress: report)
        }
        await recordContact(success: true)
        attachmentCache(userID: current.userID).adopt(attachmentID, movingFrom: path)
        try? await refreshCachedItem(itemID)
        return attachmentID
    }

    /// The legacy one-step upload, for servers without the v2 flow. They hand out no id before the file has
    /// arrived, so an earlier attempt whose answer was lost (`mayHaveArrived`) is looked for on the item by the
    /// attachment's wrapped key and encrypted name (both unique: their IVs; a rename re-wraps nothing but
    /// encrypts its name afresh): a file is never attached twice. Returns the attachment's id.
    func uploadLegacy(_ staged: StagedAttachment, file: String, to itemID: String, mayHaveArrived: Bool,
                      progress: (@Sendable (Int) -> Void)?) async throws -> String {
        let (name, key) = (try EncString(staged.fileName), try EncString(staged.key))
        let isThisOne = { (attachment: AttachmentWire) in
            attachment.key?.serialized == staged.key && attachment.fileName?.serialized == staged.fileName
        }
        if mayHaveArrived, let earlier = try await authorized({ api, token in try await api.getCipher(id: itemID, token: token) })
            .attachments?.first(where: isThisOne)?.id {
            return earlier
        }
        let cipher = try await authorized { api, token in
            try await api.uploadAttachmentLegacy(cipherID: itemID, fileName: name, key: key, filePath: file, fileSize: staged.size,
                                                 idempotencyKey: Self.announceKey(staged), progress: progress, token: token)
        }
        guard let attachmentID = cipher.attachments?.first(where: isThisOne)?.id else {
            throw ServerCallError.invalidResponse("the item the server answered does not list the uploaded attachment")
        }
        return attachmentID
    }

    static func announceKey(_ staged: StagedAttachment) -> String { "attachment-\(staged.id)" }

    /// Folds an attachment change into the item's queue record with the local copy that shows it.
    func queueAttachmentChange(_ operation: OfflineOperation, local: CipherWire, previous: CipherWire) async throws {
        let current = try requireSession()
        let itemID = try local.id ?? { throw VaultError.itemNotFound(previous.id ?? "") }()
        let existing = try await pendingChange(itemKind: .cipher, itemID: itemID, userID: current.userID)
        _ = try queue(itemID: itemID, SaveInput(operation: operation, local: local, previous: previous, isOrganization: false), existing: existing, reason: .offline)
    }

    /// The decrypted contents of an attachment (in memory: for small files; see ``saveAttachment``).
    public func attachmentContents(itemID: String, attachmentID: String) async throws -> [UInt8] {
        let contents = Collected()
        _ = try await saveAttachment(itemID: itemID, attachmentID: attachmentID) { contents.append($0) }
        return contents.bytes
    }

    /// Decrypts an attachment piece by piece into `sink` (memory does not grow with its size); returns the
    /// plaintext length. The encrypted file comes from staging (added here), the read cache, or the link
    /// the server hands out (which may be another host), downloaded into the cache folder as it arrives;
    /// its MAC is verified over the whole file before anything is decrypted, and a damaged file is dropped.
    @discardableResult
    public func saveAttachment(itemID: String, attachmentID: String, progress: AttachmentProgressHandler? = nil,
                               to sink: @Sendable (ArraySlice<UInt8>) throws -> Void) async throws -> Int {
        let current = try requireSession()
        let itemID = try currentID(of: itemID)
        let wire = try await cachedCipher(id: itemID, userID: current.userID)
        guard let attachment = (wire.attachments ?? []).first(where: { $0.id == attachmentID }) else {
            throw VaultError.attachmentNotFound(item: (try? wire.decryptedName(with: current.keys)) ?? itemID, reference: attachmentID)
        }
        let itemKey = try modelCall { try current.keys.fieldKey(itemKey: wire.key, organizationId: wire.organizationId, itemID: itemID) }
        // Attachments made before attachment keys existed are encrypted with the item's key itself.
        let fileKey = try attachment.key.map { wrapped in try cryptoCall { try wrapped.decryptKey(key: itemKey) } } ?? itemKey
        let file: (path: String, temporary: Bool)
        do {
            file = try await attachmentCall {
                try await self.encryptedFile(itemID: itemID, attachmentID: attachmentID, size: attachment.size.flatMap { Int($0) } ?? 0,
                                             progress: progress)
            }
        } catch VaultError.attachmentNeedsServer {
            let name = (try? wire.decrypted(with: current.keys).attachments.first { $0.id == attachmentID }?.fileName) ?? nil
            let limit = configuration.attachmentCacheBytes
            let cache = ByteSize.readable(limit, binaryUnits: true)
            // Not "never downloaded" when it was, and was not kept (RELIABILITY bug 72).
            let unreachable = "The server could not be reached, and \"\(name ?? attachmentID)\""
            if limit == 0 {
                throw VaultError.attachmentNeedsServer(unreachable + " is not on this device: downloaded attachments are not kept here "
                    + "(`vaultsync config attachment-cache SIZE` keeps them for reading offline).")
            }
            throw VaultError.attachmentNeedsServer((attachment.size.flatMap { Int($0) } ?? 0) > limit
                ? "The server could not be reached, and \"\(name ?? attachmentID)\" is not kept on this device: it is larger than the attachment "
                    + "cache (\(cache)). `vaultsync config attachment-cache SIZE` raises it; the file is kept from its next download."
                : "The server could not be reached, and \"\(name ?? attachmentID)\" is not on this device (never opened here, or let go to keep the "
                    + "attachment cache under \(cache)); it can be read offline once it has been opened online.")
        }
        defer { if file.temporary { unlink(file.path) } }
        do {
            return try AttachmentFile.decrypt(file.path, key: fileKey, progress: progress, into: sink)
        } catch let error as CryptoError {
            // A damaged file is never kept (the next read downloads it again).
            attachmentCache(userID: current.userID).remove(attachmentID)
            throw VaultError.crypto(error)
        }
    }

    /// An attachment's encrypted file: staged here, cached, or downloaded into the cache folder (kept when
    /// it fits the cache; else `temporary`, for the caller to remove).
    func encryptedFile(itemID: String, attachmentID: String, size: Int,
                       progress: AttachmentProgressHandler?) async throws -> (path: String, temporary: Bool) {
        let userID = try requireSession().userID
        if let staged = attachmentStaging(userID: userID).existing(attachmentID) { return (staged, false) }
        let cache = attachmentCache(userID: userID)
        if let cached = cache.use(attachmentID) { return (cached, false) }
        guard let incoming = cache.incomingPath(attachmentID) else { throw VaultError.storage("an attachment id is not a file name") }
        let url = try await authorized { api, token in try await api.attachmentDownloadURL(cipherID: itemID, attachmentID: attachmentID, token: token) }
        let report = progress.map { report in { @Sendable (done: Int) in report(AttachmentProgress(phase: .downloading, done: done, total: size)) } }
        do {
            try await authorized { api, _ in try await api.downloadAttachment(url: url, to: incoming, expectedSize: size, progress: report) }
        } catch {
            unlink(incoming)
            throw error
        }
        let downloaded = AttachmentFile.size(incoming) ?? 0
        if downloaded <= cache.limit, let kept = cache.adopt(attachmentID, movingFrom: incoming) { return (kept, false) }
        return (incoming, true)
    }

    /// Deletes an attachment on the server and from the local copy. When the server cannot be reached,
    /// or the item has changes waiting for it, the delete goes with the item's queue record (an attachment
    /// still staged here is simply dropped). Returns whether the delete waits for the server (queued).
    @discardableResult
    public func deleteAttachment(itemID: String, attachmentID: String) async throws -> Bool {
        let current = try requireSession()
        let itemID = try currentID(of: itemID)
        let wire = try await cachedCipher(id: itemID, userID: current.userID)
        let existing = try await pendingChange(itemKind: .cipher, itemID: itemID, userID: current.userID)
        let staged = existing?.metadata.attachmentAdds?.contains { $0.id == attachmentID } == true
        if existing == nil {
            do {
                _ = try await authorized { api, token in try await api.deleteAttachment(cipherID: itemID, attachmentID: attachmentID, token: token) }
                try await forgetAttachment(attachmentID, of: itemID)
                return false
            } catch let error as ServerCallError where error.isGone {
                // Deleted already (elsewhere, or an earlier attempt whose answer was lost).
                try await forgetAttachment(attachmentID, of: itemID)
                return false
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
        return true
    }

    func forgetAttachment(_ attachmentID: String, of itemID: String) async throws {
        await recordContact(success: true)
        attachmentCache(userID: try requireSession().userID).remove(attachmentID)
        try? await refreshCachedItem(itemID)
    }

    /// Keeps the profile's attachment caches under `limit` bytes now (a lowered `config attachment-cache`).
    public nonisolated func trimAttachmentCaches(to limit: Int) {
        AttachmentCache.trimAll(profileDatabase: store.path, limit: limit)
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
                    "The server could not be reached (\(error.description)); this needs the server (adding and deleting attachments work offline). Nothing was changed.")
            }
            throw Self.onlineOnly(error)
        }
    }
}

/// Bytes gathered from a sink (``VaultEngine/attachmentContents(itemID:attachmentID:)``).
final class Collected: @unchecked Sendable {
    private let lock = NSLock()
    private var gathered: [UInt8] = []

    func append(_ piece: ArraySlice<UInt8>) { lock.withLock { gathered += piece } }
    var bytes: [UInt8] { lock.withLock { gathered } }
}
