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

    /// A read-only operation (see ``SQLDatabase/read(_:)``): beside other reads and the writer on SQLite.
    func read<T: Sendable>(_ body: @Sendable (any SQLSession) async throws -> T) async throws -> T {
        try await database.read(body)
    }

    // MARK: Users

    func user(email: String) async throws -> UserRecord? {
        try await transaction { session in try await Self.user(email: email, session) }
    }

    /// Whether the device `identifier` has signed in to the account of `email` and is not revoked.
    func isKnownDevice(email: String, identifier: String) async throws -> Bool {
        try await read { session in
            guard let user = try await Self.user(email: email, session) else { return false }
            return try await !session.query("SELECT id FROM devices WHERE user_id = ? AND identifier = ? AND revoked_at IS NULL",
                                             [.text(user.id), .text(identifier)]).isEmpty
        }
    }

    func user(id: String) async throws -> UserRecord? {
        try await read { session in try await Self.user(id: id, session) }
    }

    /// The account of `email` in its normalised form (``EmailAddress/normalise(_:)``), or else in a form
    /// accounts were stored in before: trimmed of spaces and lower-cased, in the composition the client
    /// sent (a non-ASCII address in NFC or NFD).
    static func user(email: String, _ session: any SQLSession) async throws -> UserRecord? {
        let normalised = EmailAddress.normalise(email)
        let legacy = EmailAddress.legacyForm(email)
        var forms = [normalised]
        for form in [legacy, legacy.precomposedStringWithCanonicalMapping, legacy.decomposedStringWithCanonicalMapping]
            where !forms.contains(where: { Array($0.utf8) == Array(form.utf8) }) {
            forms.append(form)
        }
        let rows = try await session.query("SELECT * FROM users WHERE email IN (\(placeholders(forms.count)))", forms.map(SQLValue.text))
        let users = rows.map(UserRecord.init(row:))
        // The normalised form first; otherwise the legacy forms in the order above.
        for form in forms {
            if let user = users.first(where: { Array($0.email.utf8) == Array(form.utf8) }) { return user }
        }
        return nil
    }

    static func user(id: String, _ session: any SQLSession) async throws -> UserRecord? {
        try await session.query("SELECT * FROM users WHERE id = ?", [.text(id)]).first.map(UserRecord.init(row:))
    }

    /// Inserts a new account; `false` if the email is taken.
    /// Stores a new account; `false` when the email is taken or, with `requiringInvitation`, was not invited
    /// (an invitation is used up by the account it made).
    func insert(user: UserRecord, requiringInvitation: Bool = false) async throws -> Bool {
        do {
            return try await transaction { session in
                if requiringInvitation {
                    let used = try await session.query("UPDATE registration_invites SET used_at = ? WHERE email = ? AND used_at IS NULL RETURNING email",
                                                       [.int(user.createdAt), .text(user.email)])
                    guard !used.isEmpty else { return false }
                }
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
                return true
            }
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

    /// Records a password login on a device and starts its refresh-token chain: `makeToken` gets the
    /// device's row id (the chain) and returns the first token, whose hash is stored. Any earlier refresh
    /// token of the device stops working, and a revoked device is active again; access tokens issued
    /// before a revocation stay refused (the device's `generation`, returned for the new access token).
    func registerDevice(userID: String, identifier: String, name: String, type: Int, now: Int64,
                        makeToken: @Sendable (String) -> String) async throws -> (deviceID: String, refreshToken: String, generation: Int64) {
        try await transaction { session in
            if let row = try await session.query(
                "SELECT id, generation FROM devices WHERE user_id = ? AND identifier = ?", [.text(userID), .text(identifier)]).first,
               let existing = row.text("id") {
                let token = makeToken(existing)
                try await session.query("""
                    UPDATE devices SET refresh_token_hash = ?, previous_refresh_token_hash = NULL, previous_refresh_expires_at = NULL,
                        refresh_issued_at = ?, revoked_at = NULL, name = ?, type = ?, updated_at = ?
                    WHERE id = ?
                    """, [.text(RefreshTokens.hash(token)), .int(now), .text(name), .int(Int64(type)), .int(now), .text(existing)])
                return (existing, token, row.int("generation") ?? 0)
            }
            let id = newID()
            let token = makeToken(id)
            try await session.query("""
                INSERT INTO devices (id, user_id, identifier, name, type, refresh_token_hash, refresh_issued_at, created_at, updated_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, [.text(id), .text(userID), .text(identifier), .text(name), .int(Int64(type)), .text(RefreshTokens.hash(token)),
                      .int(now), .int(now), .int(now)])
            return (id, token, 0)
        }
    }

    /// What a refresh with a presented token comes to.
    enum RefreshOutcome: Sendable {
        /// The successor of the presented token is the device's current token: answer it.
        case issued(user: UserRecord, identifier: String, type: Int, generation: Int64)
        /// Not a token of any live chain (made up, from a revoked device, or from before a new login).
        case invalid
        /// The chain is older than its absolute lifetime.
        case expired
        /// A token older than the device's previous one, or the previous one after its grace period: someone
        /// else holds the chain. The device has been revoked (its user and identifier: its hub
        /// connections are closed too).
        case reused(userID: String, identifier: String)
    }

    /// The rules of a refresh (docs/PROTOCOL.md, "Refresh tokens"), in one transaction:
    /// - the device's **current** token rotates: it becomes the previous one, valid for `grace` more
    ///   microseconds, and the successor becomes current;
    /// - the **previous** token within its grace answers the same successor and changes nothing (the
    ///   answer to the refresh that rotated it was lost, or the request was a late duplicate);
    /// - the previous token after its grace, or any **older** token of the chain, revokes the device: its
    ///   holder and whoever refreshed past it share the chain, and neither can be told from the thief;
    /// - a chain started more than `lifetime` microseconds ago is expired.
    func refresh(token: String, tokens: RefreshTokens, now: Int64, lifetime: Int64, grace: Int64) async throws -> RefreshOutcome {
        let presented = RefreshTokens.hash(token)
        let successor = RefreshTokens.hash(tokens.successor(of: token))
        let known: RefreshOutcome? = try await transaction { session in
            guard let device = try await session.query("""
                SELECT * FROM devices WHERE (refresh_token_hash = ? OR previous_refresh_token_hash = ?) AND revoked_at IS NULL
                """, [.text(presented), .text(presented)]).first else { return nil }
            let id = device.text("id") ?? ""
            guard now < (device.int("refresh_issued_at") ?? device.int("updated_at") ?? 0) + lifetime else { return .expired }
            if device.text("refresh_token_hash") == presented {
                // Conditional: a concurrent refresh with the same token may rotate first (PostgreSQL re-checks
                // the condition after it commits); its successor is this one's too.
                try await session.query("""
                    UPDATE devices SET previous_refresh_token_hash = ?, previous_refresh_expires_at = ?, refresh_token_hash = ?, updated_at = ?
                    WHERE id = ? AND refresh_token_hash = ?
                    """, [.text(presented), .int(now + grace), .text(successor), .int(now), .text(id), .text(presented)])
            } else if let until = device.int("previous_refresh_expires_at"), now <= until,
                      device.text("refresh_token_hash") == successor {
                // The previous token within its grace: the same answer again.
            } else {
                try await Self.revokeDevice(id: id, now: now, session)
                return .reused(userID: device.text("user_id") ?? "", identifier: device.text("identifier") ?? "")
            }
            guard let userID = device.text("user_id"), let user = try await Self.user(id: userID, session) else { return .invalid }
            return .issued(user: user, identifier: device.text("identifier") ?? "", type: Int(device.int("type") ?? 0),
                           generation: device.int("generation") ?? 0)
        }
        if let known { return known }
        // Unknown: an older token of a live chain, or made up. Only a token whose successors reach the
        // chain's current or previous token is older; a made-up one naming a device revokes nothing. The
        // successors are derived outside any transaction and off the request threads, like a password hash
        // (thousands of hashes, tens of milliseconds, must hold neither the database nor other requests).
        guard let chain = RefreshTokens.chain(of: token)?.lowercased(),
              let device = try await transaction({ session in
                  try await session.query("SELECT * FROM devices WHERE id = ? AND revoked_at IS NULL", [.text(chain)]).first
              }),
              let current = device.text("refresh_token_hash") else { return .invalid }
        let hashes = Set([current] + (device.text("previous_refresh_token_hash").map { [$0] } ?? []))
        guard try await slowHash({ tokens.leads(from: token, toOneOf: hashes) }) else { return .invalid }
        try await transaction { session in try await Self.revokeDevice(id: chain, now: now, session) }
        return .reused(userID: device.text("user_id") ?? "", identifier: device.text("identifier") ?? "")
    }

    /// Ends a device's refresh-token chain and every access token issued to it so far, for good: the
    /// generation moves on, so a later login of the device does not bring them back.
    static func revokeDevice(id: String, now: Int64, _ session: any SQLSession) async throws {
        // The column is unique and required: a value no token hashes to.
        try await session.query("""
            UPDATE devices SET refresh_token_hash = ?, previous_refresh_token_hash = NULL, previous_refresh_expires_at = NULL,
                revoked_at = ?, updated_at = ?, generation = generation + 1
            WHERE id = ?
            """, [.text("revoked:" + newID()), .int(now), .int(now), .text(id)])
    }

    // MARK: Folders

    func folders(userID: String) async throws -> [FolderRecord] {
        try await read { session in
            try await session.query("SELECT * FROM folders WHERE user_id = ? ORDER BY created_at", [.text(userID)]).map(FolderRecord.init(row:))
        }
    }

    func folder(id: String, userID: String) async throws -> FolderRecord? {
        try await read { session in
            try await session.query("SELECT * FROM folders WHERE id = ? AND user_id = ?", [.text(id), .text(userID)]).first.map(FolderRecord.init(row:))
        }
    }

    /// Creates a folder. With an idempotency key (docs/PROTOCOL.md, "Idempotent creates") a repeat of
    /// an earlier create answers with the folder it made, as it is now, and changes nothing; `410`
    /// (``CipherWriteOutcome/createdSinceDeleted(_:id:)``) if that folder was deleted since.
    ///
    /// A client-chosen `id` that any folder has (this user's or another's) is refused as
    /// ``CipherWriteOutcome/invalid(_:)`` with the same words either way: the answer tells nothing about
    /// whose it is (it was a 500 from the unique index, which told that the id existed).
    func createFolder(userID: String, id: String?, name: String, createKey key: String?, now: Int64) async throws -> FolderRecord {
        do {
            return try await insertFolder(userID: userID, id: id, name: name, createKey: key, now: now)
        } catch StorageError.uniqueViolation {
            // Another create with this id committed between the check and the insert.
            throw CipherWriteError(outcome: .invalid(Self.takenID))
        }
    }

    static let takenID = "The id is already in use: leave it out and the server chooses one."

    private func insertFolder(userID: String, id: String?, name: String, createKey key: String?, now: Int64) async throws -> FolderRecord {
        try await transaction { session in
            let createKey = key.map { CreateKey(userID: userID, key: $0, kind: .folder) }
            if let createKey, let earlier = try await Self.earlierCreate(createKey, session) {
                return try await Self.earlierFolder(id: earlier, userID: userID, session)
            }
            if let id, try await !session.query("SELECT id FROM folders WHERE id = ?", [.text(id)]).isEmpty {
                throw CipherWriteError(outcome: .invalid(Self.takenID))
            }
            let id = id ?? newID()
            if let createKey, try await !Self.claim(createKey, itemID: id, now: now, session) {
                // Another attempt with the same key committed first: answer with its folder.
                guard let earlier = try await Self.earlierCreate(createKey, session) else { throw CipherWriteError(outcome: .notFound) }
                return try await Self.earlierFolder(id: earlier, userID: userID, session)
            }
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
        try await read { session in
            try await session.query("SELECT revision_date FROM users WHERE id = ?", [.text(userID)]).first?.int("revision_date")
        }
    }
}
