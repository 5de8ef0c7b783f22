import Foundation

/// How attachment files are stored: in the database, as rows of `attachment_chunks` (migration 10), so
/// that an upload is written and a download read one chunk at a time on SQLite and PostgreSQL alike,
/// every instance sharing one PostgreSQL sees every file, a file goes with its item (foreign keys
/// cascade from ciphers, users and organizations) and backups hold files and metadata together.
enum AttachmentChunks {
    /// Bytes per chunk row (the last chunk of a file may be shorter). 1 MiB: a few per request in memory,
    /// 500 rows for a 500 MiB file.
    static let size = 1024 * 1024
    /// An upload attempt older than this that never completed is abandoned (its process died mid-upload)
    /// and deleted by the next upload's sweep (microseconds).
    static let abandonedAfter: Int64 = 24 * 3600 * 1_000_000
}

/// What a v2 attachment create came to.
struct AttachmentCreation: Sendable {
    let attachmentID: String
    /// The item as the user sees it after the create.
    let cipher: CipherRecord
}

extension VaultRepository {
    func attachment(id: String, cipherID: String) async throws -> AttachmentRecord? {
        try await read { session in
            try await session.query(
                "SELECT id, cipher_id, file_name, akey, file_size, upload_id FROM attachments WHERE id = ? AND cipher_id = ?",
                [.text(id), .text(cipherID)]).first.map(AttachmentRecord.init(row:))
        }
    }

    /// Makes an attachment (its file not uploaded yet) and bumps the item's revision and its users' account
    /// revisions, in one transaction.
    ///
    /// - `createKey` (`USERID:KEY`, docs/PROTOCOL.md "Idempotent attachment creates"): a key made an
    ///   attachment before answers that attachment and changes nothing — checked first, so a retry whose
    ///   first attempt bumped the revision is not "out of date"; two attempts at once insert once (unique
    ///   index, `ON CONFLICT DO NOTHING`, PostgreSQL waits for the first to commit).
    /// - `lastKnownRevisionDate`: the stale-edit check of `PUT /api/ciphers/{id}`, part of the revision
    ///   bump's condition (a stale one rolls the insert back).
    func createAttachment(id: String, cipherID: String, userID: String, fileName: String, key: String?, size: Int64,
                          createKey: String?, lastKnownRevisionDate: Int64?, now: Int64) async throws -> AttachmentCreation {
        try await transaction { session in
            if let createKey, let earlier = try await Self.attachmentMade(by: createKey, userID: userID, session) { return earlier }
            let inserted = try await session.query("""
                INSERT INTO attachments (id, cipher_id, file_name, akey, file_size, body, created_at, create_key)
                VALUES (?, ?, ?, ?, ?, NULL, ?, ?) ON CONFLICT (create_key) DO NOTHING RETURNING id
                """, [.text(id), .text(cipherID), .text(fileName), .optionalText(key), .int(size), .int(now), .optionalText(createKey)])
            if inserted.isEmpty, let createKey {
                guard let earlier = try await Self.attachmentMade(by: createKey, userID: userID, session) else {
                    throw CipherWriteError(outcome: .notFound)
                }
                return earlier
            }
            // Official: adding an attachment bumps the cipher's revision date (spec §3.1) after the stale-edit check.
            try await Self.bumpCipherRevision(cipherID, lastKnownRevisionDate: lastKnownRevisionDate, now: now, session)
            return AttachmentCreation(attachmentID: id, cipher: try await Self.bumpAccounts(of: cipherID, userID: userID, now: now, session))
        }
    }

    /// The attachment an earlier create with `createKey` made, with its item as `userID` sees it now.
    static func attachmentMade(by createKey: String, userID: String, _ session: any SQLSession) async throws -> AttachmentCreation? {
        guard let row = try await session.query("SELECT id, cipher_id FROM attachments WHERE create_key = ?", [.text(createKey)]).first,
              let id = row.text("id"), let cipherID = row.text("cipher_id") else { return nil }
        guard let cipher = try await visibleCiphers(userID: userID, onlyID: cipherID, session).first else {
            throw CipherWriteError(outcome: .notFound)
        }
        return AttachmentCreation(attachmentID: id, cipher: cipher)
    }

    /// Sets the cipher's next revision date; with `lastKnownRevisionDate`, only if it is the current one
    /// (``updateCipher(id:userID:write:now:)``'s check), else ``CipherWriteOutcome/outOfDate``.
    static func bumpCipherRevision(_ cipherID: String, lastKnownRevisionDate: Int64?, now: Int64, _ session: any SQLSession) async throws {
        var condition = ""
        var binds: [SQLValue] = [.int(now), .int(now), .text(cipherID)]
        if let known = lastKnownRevisionDate {
            condition = " AND revision_date > ? AND revision_date < ?"
            binds += [.int(known - 1000), .int(known + 1000)]
        }
        guard try await !session.query("UPDATE ciphers SET revision_date = \(nextRevision) WHERE id = ?\(condition) RETURNING id", binds).isEmpty else {
            throw CipherWriteError(outcome: .outOfDate)
        }
    }

    /// Bumps the account revision of everyone who sees the cipher and returns it as `userID` sees it.
    static func bumpAccounts(of cipherID: String, userID: String, now: Int64, _ session: any SQLSession) async throws -> CipherRecord {
        guard let record = try await visibleCiphers(userID: userID, onlyID: cipherID, session).first else {
            throw CipherWriteError(outcome: .notFound)
        }
        try await bumpRevision(try await affectedUsers(userID: record.userID, organizationID: record.organizationID, session), now: now, session)
        return record
    }

    // MARK: Uploads

    /// Starts an upload attempt of an attachment's file and returns its id. Also deletes attempts that
    /// were abandoned long ago (a process that died mid-upload), whatever their attachment.
    func beginAttachmentUpload(attachmentID: String, now: Int64) async throws -> String {
        let uploadID = newID()
        try await transaction { session in
            try await session.query("""
                DELETE FROM attachment_uploads WHERE started_at < ?
                    AND NOT EXISTS (SELECT 1 FROM attachments a WHERE a.upload_id = attachment_uploads.id)
                """, [.int(now - AttachmentChunks.abandonedAfter)])
            try await session.query("INSERT INTO attachment_uploads (id, attachment_id, started_at) VALUES (?, ?, ?)",
                                    [.text(uploadID), .text(attachmentID), .int(now)])
        }
        return uploadID
    }

    /// Stores the chunk `seq` of an upload attempt (its own short transaction: an upload never holds the
    /// SQLite writer for longer than one chunk).
    func storeAttachmentChunk(uploadID: String, seq: Int, bytes: Data) async throws {
        _ = try await transaction { session in
            try await session.query("INSERT INTO attachment_chunks (upload_id, seq, data) VALUES (?, ?, ?)",
                                    [.text(uploadID), .int(Int64(seq)), .blob(bytes)])
        }
    }

    /// Makes a fully received upload attempt the attachment's file, unless the attachment has one already
    /// (`false`: this attempt is deleted), and bumps the item's revision and its users' account revisions,
    /// in one transaction. Until this commits, no reader sees any of the attempt's chunks.
    func completeAttachmentUpload(uploadID: String, attachmentID: String, cipherID: String, userID: String, size: Int64,
                                  now: Int64) async throws -> Bool {
        let completed = try await transaction { session -> Bool in
            guard try await !session.query(
                "UPDATE attachments SET upload_id = ?, file_size = ? WHERE id = ? AND cipher_id = ? AND upload_id IS NULL RETURNING id",
                [.text(uploadID), .int(size), .text(attachmentID), .text(cipherID)]).isEmpty else { return false }
            try await Self.bumpCipherRevision(cipherID, lastKnownRevisionDate: nil, now: now, session)
            _ = try await Self.bumpAccounts(of: cipherID, userID: userID, now: now, session)
            return true
        }
        if !completed { try await abandonAttachmentUpload(uploadID: uploadID) }
        return completed
    }

    /// Deletes an attachment whose file never arrived and that no upload attempt is writing (a legacy upload
    /// that failed: its attachment was made when the file began).
    func discardUnuploadedAttachment(id: String) async throws {
        _ = try await transaction { session in
            try await session.query("""
                DELETE FROM attachments WHERE id = ? AND upload_id IS NULL
                    AND NOT EXISTS (SELECT 1 FROM attachment_uploads u WHERE u.attachment_id = attachments.id)
                """, [.text(id)])
        }
    }

    /// Deletes an upload attempt that will not complete (cut off, refused, lost to a concurrent one) and its chunks.
    func abandonAttachmentUpload(uploadID: String) async throws {
        _ = try await transaction { session in
            try await session.query("DELETE FROM attachment_uploads WHERE id = ?", [.text(uploadID)])
        }
    }

    /// The chunk `seq` of an uploaded file (`nil` past the last one, or when the attachment was deleted meanwhile).
    func attachmentChunk(uploadID: String, seq: Int) async throws -> Data? {
        try await read { session in
            try await session.query("SELECT data FROM attachment_chunks WHERE upload_id = ? AND seq = ?",
                                    [.text(uploadID), .int(Int64(seq))]).first?.blob("data")
        }
    }

    /// Deletes an attachment (its file's chunks go with it: foreign keys cascade) and bumps the item's
    /// revision and its users' account revisions, after the stale-edit check when `lastKnownRevisionDate` is given.
    func deleteAttachment(id: String, cipherID: String, userID: String, lastKnownRevisionDate: Int64?, now: Int64) async throws -> CipherRecord {
        try await transaction { session in
            try await Self.bumpCipherRevision(cipherID, lastKnownRevisionDate: lastKnownRevisionDate, now: now, session)
            try await session.query("DELETE FROM attachments WHERE id = ? AND cipher_id = ?", [.text(id), .text(cipherID)])
            return try await Self.bumpAccounts(of: cipherID, userID: userID, now: now, session)
        }
    }
}

extension AttachmentRecord {
    init(row: SQLRow) {
        self.init(id: row.text("id") ?? "", cipherID: row.text("cipher_id") ?? "", fileName: row.text("file_name") ?? "",
                  key: row.text("akey"), fileSize: row.int("file_size") ?? 0, uploadID: row.text("upload_id"))
    }
}
