import Foundation
import VaultCrypto

/// The folder the profile database at `path` is in (`.` for a bare file name): where the files that go
/// with it are kept.
func profileFolder(of path: String) -> String {
    let folder = (path as NSString).deletingLastPathComponent
    return folder.isEmpty ? "." : folder
}

/// Downloaded attachments kept on this device for reading offline (docs/PROTOCOL.md, "Attachments
/// (client)"): each file exactly as the server sent it, a binary EncString under the attachment's
/// own key (ciphertext only: never plaintext on disk), one file per attachment id in a folder per user
/// next to the profile database (0700, files 0600). An attachment's bytes never change under its id,
/// so a cached file is always current. The folder is kept under `limit` bytes by evicting the least
/// recently used files (a read touches its file's modification date).
struct AttachmentCache: Sendable {
    let folder: String
    let limit: Int

    init(profileDatabase: String, userID: String, limit: Int) {
        folder = profileFolder(of: profileDatabase) + "/attachment-cache/" + DiskName.userFolder(userID)
        self.limit = limit
    }

    func path(_ attachmentID: String) -> String? {
        // Ids are server-made; only a plain id names a file (never a path).
        DiskName.file(attachmentID).map { folder + "/" + $0 }
    }

    /// The cached encrypted file, or `nil`; a hit counts as a use.
    func read(_ attachmentID: String) -> [UInt8]? {
        guard let path = path(attachmentID), let data = FileManager.default.contents(atPath: path) else { return nil }
        try? FileManager.default.setAttributes([.modificationDate: Date()], ofItemAtPath: path)
        return Array(data)
    }

    /// The cached file's path, counting as a use; `nil` when it is not cached.
    func use(_ attachmentID: String) -> String? {
        guard let path = path(attachmentID), FileManager.default.fileExists(atPath: path) else { return nil }
        try? FileManager.default.setAttributes([.modificationDate: Date()], ofItemAtPath: path)
        return path
    }

    /// A folder for files on their way in (downloads), beside the cached ones (same file system: a rename
    /// moves one into place).
    func incomingPath(_ attachmentID: String) -> String? {
        guard let path = path(attachmentID) else { return nil }
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        return path + ".download"
    }

    /// Takes a complete encrypted file into the cache by renaming it into place (if it fits the limit;
    /// else it is removed), then evicts. Returns the cached path, or `nil` when it was not kept.
    @discardableResult
    func adopt(_ attachmentID: String, movingFrom source: String) -> String? {
        let size = AttachmentFile.size(source) ?? Int.max
        guard limit > 0, size <= limit, let path = path(attachmentID) else {
            try? FileManager.default.removeItem(atPath: source)
            return nil
        }
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        guard rename(source, path) == 0 else {
            try? FileManager.default.removeItem(atPath: source)
            return nil
        }
        try? FileManager.default.setAttributes([.modificationDate: Date()], ofItemAtPath: path)
        evict()
        return FileManager.default.fileExists(atPath: path) ? path : nil
    }

    /// Forgets one attachment (deleted).
    func remove(_ attachmentID: String) {
        guard let path = path(attachmentID) else { return }
        try? FileManager.default.removeItem(atPath: path)
    }

    /// Forgets every file of the user (logout).
    func removeAll() {
        try? FileManager.default.removeItem(atPath: folder)
    }

    /// The cached files, oldest use first, with their sizes.
    func entries() -> [(path: String, size: Int, used: Date)] {
        let manager = FileManager.default
        guard let names = try? manager.contentsOfDirectory(atPath: folder) else { return [] }
        return names.compactMap { name in
            let path = folder + "/" + name
            guard let attributes = try? manager.attributesOfItem(atPath: path) else { return nil }
            return (path, (attributes[.size] as? NSNumber)?.intValue ?? 0, attributes[.modificationDate] as? Date ?? .distantPast)
        }.sorted { $0.used < $1.used }
    }

    /// Evicts every user's cached files of the profile at `profileDatabase` down to `limit` bytes each (none
    /// at 0): a lowered limit holds at once, not from the next download (RELIABILITY bug 72: set to 0, every file
    /// stayed readable offline).
    static func trimAll(profileDatabase: String, limit: Int) {
        let root = profileFolder(of: profileDatabase) + "/attachment-cache"
        for user in (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [] {
            let cache = AttachmentCache(profileDatabase: profileDatabase, userID: user, limit: limit)
            cache.evict()
        }
    }

    func evict() {
        var entries = entries()
        var total = entries.reduce(0) { $0 + $1.size }
        while total > limit, !entries.isEmpty {
            let oldest = entries.removeFirst()
            try? FileManager.default.removeItem(atPath: oldest.path)
            total -= oldest.size
        }
    }
}

/// Attachments added while the server could not be reached, waiting in the profile for their upload
/// (issue 23; docs/PROTOCOL.md, "Attachments (client)"): each file encrypted at once, the binary
/// EncString the upload sends, never plaintext (also not in a temporary file), one file per staged id in
/// a folder per user beside the profile database (0700, files 0600). Written and synced to disk before
/// the queue record that names it commits, so a record never names a file a crash lost; removed once the
/// upload is settled. Never evicted.
struct AttachmentStaging: Sendable {
    let folder: String

    init(profileDatabase: String, userID: String) {
        folder = profileFolder(of: profileDatabase) + "/attachment-staging/" + DiskName.userFolder(userID)
    }

    func path(_ id: String) -> String? {
        DiskName.file(id).map { folder + "/" + $0 }
    }

    /// The staged file's path, when there is one.
    func existing(_ id: String) -> String? {
        guard let path = path(id), FileManager.default.fileExists(atPath: path) else { return nil }
        return path
    }

    /// Encrypts what `source` yields piece by piece (it fills the buffer and returns the count, 0 at the
    /// end) straight into the staged file: the header's room first, the ciphertext as it comes, then the
    /// header with the MAC. Memory stays at one piece.
    func writeEncrypting(_ id: String, encryptor: StreamingEncryptor, progress: (@Sendable (Int) -> Void)?,
                         source: (inout [UInt8]) throws -> Int) throws {
        var encryptor = encryptor
        try writeInPlace(id) { put in
            try put([UInt8](repeating: 0, count: StreamingEncryptor.headerLength)[...], nil)
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            var read = 0
            while true {
                let count = try source(&buffer)
                guard count > 0 else { break }
                read += count
                try put(try cryptoPiece { try encryptor.update(buffer[0..<count]) }[...], nil)
                progress?(read)
            }
            let (last, mac) = try cryptoPiece { try encryptor.finish() }
            try put(last[...], nil)
            try put(encryptor.header(mac: mac)[...], 0)
        }
    }

    /// Stages a copy of an encrypted file (a rename attaches the same bytes again).
    func copy(_ source: String, to id: String) throws {
        let (descriptor, _) = try AttachmentFile.openRegularFile(source)
        defer { close(descriptor) }
        try writeInPlace(id) { put in
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            while true {
                let count = try AttachmentFile.readFully(descriptor, into: &buffer)
                guard count > 0 else { break }
                try put(buffer[0..<count], nil)
            }
        }
    }

    /// Writes a staged file beside its place (`put`: bytes at the end, or at an offset), syncs it and
    /// renames it into place, then syncs the folder: a record never names a file a crash lost.
    private func writeInPlace(_ id: String, _ fill: ((ArraySlice<UInt8>, off_t?) throws -> Void) throws -> Void) throws {
        guard let path = path(id) else { throw VaultError.storage("an attachment id is not a file name") }
        let failed = { VaultError.storage("the attachment could not be kept in the profile (errno \(errno))") }
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw VaultError.storage("the attachment could not be kept in the profile: \(error)")
        }
        let temporary = path + ".partial"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw failed() }
        var ok = false
        defer {
            close(descriptor)
            if !ok { unlink(temporary) }
        }
        try fill { bytes, offset in
            var done = 0
            while done < bytes.count {
                let count = bytes[(bytes.startIndex + done)...].withUnsafeBytes { raw in
                    offset.map { pwrite(descriptor, raw.baseAddress, raw.count, $0 + off_t(done)) } ?? Foundation.write(descriptor, raw.baseAddress, raw.count)
                }
                guard count > 0 else { throw failed() }
                done += count
            }
        }
        guard fsync(descriptor) == 0, rename(temporary, path) == 0 else { throw failed() }
        ok = true
        let directory = open(folder, O_RDONLY | O_CLOEXEC)
        if directory >= 0 {
            fsync(directory)
            close(directory)
        }
    }

    private func cryptoPiece<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch let error as CryptoError { throw VaultError.crypto(error) }
    }

    func remove(_ id: String) {
        guard let path = path(id) else { return }
        try? FileManager.default.removeItem(atPath: path)
    }
}
