import Foundation

/// Every read and write of the server's data, each a complete operation in one transaction, on either
/// backend. Controllers decide what is allowed; the repository makes it atomic.
public final class VaultRepository: Sendable {
    let database: any SQLDatabase

    public init(database: any SQLDatabase) {
        self.database = database
    }

    /// Runs the schema migrations (at start).
    public func migrate() async throws {
        try await Migrations.run(on: database)
    }

    func transaction<T: Sendable>(_ body: @Sendable (any SQLSession) async throws -> T) async throws -> T {
        try await database.transaction(body)
    }

    // MARK: Users

    func user(email: String) async throws -> UserRecord? {
        try await transaction { session in try await Self.user(email: email, session) }
    }

    func user(id: String) async throws -> UserRecord? {
        try await transaction { session in try await Self.user(id: id, session) }
    }

    static func user(email: String, _ session: any SQLSession) async throws -> UserRecord? {
        try await session.query("SELECT * FROM users WHERE email = ?", [.text(email.lowercased())]).first.map(UserRecord.init(row:))
    }

    static func user(id: String, _ session: any SQLSession) async throws -> UserRecord? {
        try await session.query("SELECT * FROM users WHERE id = ?", [.text(id)]).first.map(UserRecord.init(row:))
    }

    /// Inserts a new account; `false` if the email is taken.
    func insert(user: UserRecord) async throws -> Bool {
        do {
            _ = try await transaction { session in
                try await session.query("""
                    INSERT INTO users (id, email, name, password_hash, password_salt, password_iterations, password_hint, akey,
                        private_key, public_key, kdf_type, kdf_iterations, kdf_memory, kdf_parallelism, security_stamp,
                        created_at, updated_at, revision_date)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """, [
                        .text(user.id), .text(user.email), .optionalText(user.name), .text(user.passwordHash), .text(user.passwordSalt),
                        .int(Int64(user.passwordIterations)), .optionalText(user.passwordHint), .text(user.akey),
                        .optionalText(user.privateKey), .optionalText(user.publicKey), .int(Int64(user.kdfType)),
                        .int(Int64(user.kdfIterations)), .optionalInt(user.kdfMemory.map(Int64.init)),
                        .optionalInt(user.kdfParallelism.map(Int64.init)), .text(user.securityStamp),
                        .int(user.createdAt), .int(user.updatedAt), .int(user.revisionDate),
                    ])
            }
            return true
        } catch StorageError.uniqueViolation {
            return false
        }
    }

    /// Sets the account revision date of `userIDs` to `now` (spec §3.5).
    static func bumpRevision(_ userIDs: [String], now: Int64, _ session: any SQLSession) async throws {
        let unique = Array(Set(userIDs))
        guard !unique.isEmpty else { return }
        try await session.query("UPDATE users SET revision_date = ? WHERE id IN (\(placeholders(unique.count)))",
                                [.int(now)] + unique.map(SQLValue.text))
    }

    // MARK: Devices and refresh tokens

    /// Records a login on a device and stores the hash of its new refresh token.
    func registerDevice(userID: String, identifier: String, name: String, type: Int, refreshTokenHash: String, now: Int64) async throws -> String {
        try await transaction { session in
            if let existing = try await session.query(
                "SELECT id FROM devices WHERE user_id = ? AND identifier = ?", [.text(userID), .text(identifier)]).first?.text("id") {
                try await session.query("""
                    UPDATE devices SET refresh_token_hash = ?, previous_refresh_token_hash = NULL, name = ?, type = ?, updated_at = ?
                    WHERE id = ?
                    """,
                                        [.text(refreshTokenHash), .text(name), .int(Int64(type)), .int(now), .text(existing)])
                return existing
            }
            let id = newID()
            try await session.query("""
                INSERT INTO devices (id, user_id, identifier, name, type, refresh_token_hash, created_at, updated_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """, [.text(id), .text(userID), .text(identifier), .text(name), .int(Int64(type)), .text(refreshTokenHash), .int(now), .int(now)])
            return id
        }
    }

    /// Swaps a refresh token for its successor (rotation). Returns the user and device, or `nil` if
    /// the token is neither the device's current one nor its previous one.
    ///
    /// The previous token stays valid until the current one is used: a refresh whose answer was lost
    /// (the server rotated, the device never heard) leaves the device holding the previous token, and
    /// sending it again gets the same successor (``RefreshTokens``) instead of ending the session.
    /// Presenting the current token proves the device received it, so it becomes the previous one.
    /// One statement, so concurrent refreshes of one device cannot interleave between check and swap.
    func rotateRefreshToken(oldHash: String, newHash: String, now: Int64) async throws -> (user: UserRecord, identifier: String, type: Int)? {
        try await transaction { session in
            guard let device = try await session.query("""
                UPDATE devices SET
                    previous_refresh_token_hash = CASE WHEN refresh_token_hash = ? THEN refresh_token_hash ELSE previous_refresh_token_hash END,
                    refresh_token_hash = ?, updated_at = ?
                WHERE refresh_token_hash = ? OR previous_refresh_token_hash = ?
                RETURNING user_id, identifier, type
                """, [.text(oldHash), .text(newHash), .int(now), .text(oldHash), .text(oldHash)]).first,
                let userID = device.text("user_id"), let user = try await Self.user(id: userID, session) else { return nil }
            return (user, device.text("identifier") ?? "", Int(device.int("type") ?? 0))
        }
    }

    // MARK: Folders

    func folders(userID: String) async throws -> [FolderRecord] {
        try await transaction { session in
            try await session.query("SELECT * FROM folders WHERE user_id = ? ORDER BY created_at", [.text(userID)]).map(FolderRecord.init(row:))
        }
    }

    func folder(id: String, userID: String) async throws -> FolderRecord? {
        try await transaction { session in
            try await session.query("SELECT * FROM folders WHERE id = ? AND user_id = ?", [.text(id), .text(userID)]).first.map(FolderRecord.init(row:))
        }
    }

    func createFolder(userID: String, id: String?, name: String, now: Int64) async throws -> FolderRecord {
        try await transaction { session in
            let id = id ?? newID()
            let row = try await session.query("""
                INSERT INTO folders (id, user_id, name, created_at, revision_date) VALUES (?, ?, ?, ?, ?) RETURNING *
                """, [.text(id), .text(userID), .text(name), .int(now), .int(now)])
            try await Self.bumpRevision([userID], now: now, session)
            return FolderRecord(row: row[0])
        }
    }

    func renameFolder(id: String, userID: String, name: String, now: Int64) async throws -> FolderRecord? {
        try await transaction { session in
            guard let row = try await session.query(
                "UPDATE folders SET name = ?, revision_date = ? WHERE id = ? AND user_id = ? RETURNING *",
                [.text(name), .int(now), .text(id), .text(userID)]).first else { return nil }
            try await Self.bumpRevision([userID], now: now, session)
            return FolderRecord(row: row)
        }
    }

    /// Deletes a folder; its items lose the assignment without a revision bump (spec §3.6).
    func deleteFolders(ids: [String], userID: String, now: Int64) async throws -> Int {
        try await transaction { session in
            guard !ids.isEmpty else { return 0 }
            try await session.query(
                "UPDATE cipher_user_state SET folder_id = NULL WHERE user_id = ? AND folder_id IN (\(placeholders(ids.count)))",
                [.text(userID)] + ids.map(SQLValue.text))
            let deleted = try await session.query(
                "DELETE FROM folders WHERE user_id = ? AND id IN (\(placeholders(ids.count))) RETURNING id",
                [.text(userID)] + ids.map(SQLValue.text)).count
            if deleted > 0 { try await Self.bumpRevision([userID], now: now, session) }
            return deleted
        }
    }

    func accountRevision(userID: String) async throws -> Int64? {
        try await transaction { session in
            try await session.query("SELECT revision_date FROM users WHERE id = ?", [.text(userID)]).first?.int("revision_date")
        }
    }
}
