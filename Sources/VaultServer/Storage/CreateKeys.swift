import Foundation

/// What a create with an `Idempotency-Key` made.
enum CreateKind: String, Sendable {
    case cipher, folder
}

/// A create's `Idempotency-Key` as the server keeps it: per user, with what the first attempt made
/// (docs/PROTOCOL.md, "Idempotent creates"). The row outlives the item.
struct CreateKey: Sendable {
    var userID: String
    var key: String
    var kind: CreateKind
}

extension VaultRepository {
    /// The id of what an earlier create with this key made, or `nil` if the key is new. A key the user
    /// sent with a create of another kind is refused (`422`): one key names one request.
    static func earlierCreate(_ key: CreateKey, _ session: any SQLSession) async throws -> String? {
        guard let row = try await session.query("SELECT kind, item_id FROM create_keys WHERE user_id = ? AND idempotency_key = ?",
                                                [.text(key.userID), .text(key.key)]).first else { return nil }
        guard row.text("kind") == key.kind.rawValue else {
            throw CipherWriteError(outcome: .keyReused("This Idempotency-Key was used by an earlier request of another kind."))
        }
        return row.text("item_id")
    }

    /// Claims `key` for `itemID` inside the create's transaction. `false`: another attempt with the same
    /// key claimed it first (PostgreSQL waits for that attempt's transaction to end; SQLite runs one
    /// writer at a time); the caller answers with ``earlierCreate(_:_:)`` instead of inserting.
    static func claim(_ key: CreateKey, itemID: String, now: Int64, _ session: any SQLSession) async throws -> Bool {
        try await !session.query("""
            INSERT INTO create_keys (user_id, idempotency_key, kind, item_id, created_at) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (user_id, idempotency_key) DO NOTHING RETURNING item_id
            """, [.text(key.userID), .text(key.key), .text(key.kind.rawValue), .text(itemID), .int(now)]).isEmpty
    }

    /// The answer to a repeated cipher create: the item the first attempt made, as it is now (in the
    /// trash if trashed); `410` if it was deleted for good or is no longer visible to the user.
    static func earlierCipher(id: String, userID: String, _ session: any SQLSession) async throws -> CipherRecord {
        guard let record = try await visibleCiphers(userID: userID, onlyID: id, session).first else {
            throw CipherWriteError(outcome: .createdSinceDeleted(.cipher, id: id))
        }
        return record
    }

    /// The answer to a repeated folder create: the folder the first attempt made, as it is now; `410`
    /// if it was deleted since.
    static func earlierFolder(id: String, userID: String, _ session: any SQLSession) async throws -> FolderRecord {
        guard let row = try await session.query("SELECT * FROM folders WHERE id = ? AND user_id = ?", [.text(id), .text(userID)]).first else {
            throw CipherWriteError(outcome: .createdSinceDeleted(.folder, id: id))
        }
        return FolderRecord(row: row)
    }
}
