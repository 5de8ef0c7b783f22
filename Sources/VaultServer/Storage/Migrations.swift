import Foundation

/// The server schema, as named, append-only migrations: never edit one that has shipped; add a new one.
///
/// Conventions that keep one SQL text valid on SQLite and PostgreSQL: ids are lowercase UUID text,
/// dates are microseconds since the epoch (`INTEGER`/`BIGINT`), booleans are 0/1 integers, encrypted
/// payloads are JSON text, attachment files are chunks of `BLOB`/`BYTEA` (migration 10).
enum Migrations {
    struct Migration: Sendable {
        let version: Int
        let name: String
        let statements: @Sendable (SQLDialect) -> [String]
    }

    static let all: [Migration] = [
        Migration(version: 1, name: "accounts, ciphers, folders, attachments, organizations") { d in
            let int = d.integer
            return [
                """
                CREATE TABLE users (
                    id TEXT PRIMARY KEY,
                    email TEXT NOT NULL UNIQUE,
                    name TEXT,
                    password_hash TEXT NOT NULL,
                    password_salt TEXT NOT NULL,
                    password_iterations \(int) NOT NULL,
                    password_hint TEXT,
                    akey TEXT NOT NULL,
                    private_key TEXT,
                    public_key TEXT,
                    kdf_type \(int) NOT NULL,
                    kdf_iterations \(int) NOT NULL,
                    kdf_memory \(int),
                    kdf_parallelism \(int),
                    security_stamp TEXT NOT NULL,
                    created_at \(int) NOT NULL,
                    updated_at \(int) NOT NULL,
                    revision_date \(int) NOT NULL
                )
                """,
                """
                CREATE TABLE devices (
                    id TEXT PRIMARY KEY,
                    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                    identifier TEXT NOT NULL,
                    name TEXT NOT NULL,
                    type \(int) NOT NULL,
                    refresh_token_hash TEXT NOT NULL UNIQUE,
                    created_at \(int) NOT NULL,
                    updated_at \(int) NOT NULL
                )
                """,
                "CREATE INDEX devices_user ON devices(user_id, identifier)",
                """
                CREATE TABLE organizations (
                    id TEXT PRIMARY KEY,
                    name TEXT NOT NULL,
                    billing_email TEXT NOT NULL,
                    created_at \(int) NOT NULL
                )
                """,
                """
                CREATE TABLE memberships (
                    id TEXT PRIMARY KEY,
                    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
                    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                    type \(int) NOT NULL,
                    status \(int) NOT NULL,
                    akey TEXT,
                    UNIQUE (organization_id, user_id)
                )
                """,
                "CREATE INDEX memberships_user ON memberships(user_id)",
                """
                CREATE TABLE collections (
                    id TEXT PRIMARY KEY,
                    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
                    name TEXT NOT NULL,
                    external_id TEXT
                )
                """,
                """
                CREATE TABLE collection_members (
                    collection_id TEXT NOT NULL REFERENCES collections(id) ON DELETE CASCADE,
                    membership_id TEXT NOT NULL REFERENCES memberships(id) ON DELETE CASCADE,
                    read_only \(int) NOT NULL,
                    hide_passwords \(int) NOT NULL,
                    manage \(int) NOT NULL,
                    PRIMARY KEY (collection_id, membership_id)
                )
                """,
                """
                CREATE TABLE ciphers (
                    id TEXT PRIMARY KEY,
                    user_id TEXT REFERENCES users(id) ON DELETE CASCADE,
                    organization_id TEXT REFERENCES organizations(id) ON DELETE CASCADE,
                    type \(int) NOT NULL,
                    data TEXT NOT NULL,
                    created_at \(int) NOT NULL,
                    revision_date \(int) NOT NULL,
                    deleted_date \(int)
                )
                """,
                "CREATE INDEX ciphers_user ON ciphers(user_id)",
                "CREATE INDEX ciphers_organization ON ciphers(organization_id)",
                """
                CREATE TABLE collection_ciphers (
                    collection_id TEXT NOT NULL REFERENCES collections(id) ON DELETE CASCADE,
                    cipher_id TEXT NOT NULL REFERENCES ciphers(id) ON DELETE CASCADE,
                    PRIMARY KEY (collection_id, cipher_id)
                )
                """,
                "CREATE INDEX collection_ciphers_cipher ON collection_ciphers(cipher_id)",
                """
                CREATE TABLE folders (
                    id TEXT PRIMARY KEY,
                    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                    name TEXT NOT NULL,
                    created_at \(int) NOT NULL,
                    revision_date \(int) NOT NULL
                )
                """,
                "CREATE INDEX folders_user ON folders(user_id)",
                """
                CREATE TABLE cipher_user_state (
                    cipher_id TEXT NOT NULL REFERENCES ciphers(id) ON DELETE CASCADE,
                    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                    folder_id TEXT REFERENCES folders(id) ON DELETE SET NULL,
                    favorite \(int) NOT NULL DEFAULT 0,
                    archived_date \(int),
                    PRIMARY KEY (cipher_id, user_id)
                )
                """,
                "CREATE INDEX cipher_user_state_user ON cipher_user_state(user_id)",
                """
                CREATE TABLE attachments (
                    id TEXT PRIMARY KEY,
                    cipher_id TEXT NOT NULL REFERENCES ciphers(id) ON DELETE CASCADE,
                    file_name TEXT NOT NULL,
                    akey TEXT,
                    file_size \(int) NOT NULL,
                    body \(d.blob),
                    created_at \(int) NOT NULL
                )
                """,
                "CREATE INDEX attachments_cipher ON attachments(cipher_id)",
            ]
        },
        Migration(version: 2, name: "ciphers remember the encrypted name they were created with") { _ in
            [
                // A create retried after its answer was lost, or delayed past the client's timeout and
                // overtaken by the retry, carries the same IV-unique encrypted name as the first attempt.
                "ALTER TABLE ciphers ADD COLUMN create_name TEXT",
                "CREATE INDEX ciphers_user_create_name ON ciphers(user_id, create_name)",
                "CREATE INDEX ciphers_org_create_name ON ciphers(organization_id, create_name)",
            ]
        },
        Migration(version: 3, name: "devices keep their previous refresh token until the new one is used") { _ in
            [
                // A refresh whose answer was lost left the device holding the token before it; that
                // token stays valid until the device shows it received a newer one.
                "ALTER TABLE devices ADD COLUMN previous_refresh_token_hash TEXT",
                "CREATE INDEX devices_previous_refresh ON devices(previous_refresh_token_hash)",
            ]
        },
        Migration(version: 4, name: "creates carry an idempotency key") { _ in
            [
                // `Idempotency-Key` of the create that made the item, prefixed with the creating user's id:
                // every attempt at one create carries the same key, whatever the item was renamed to in
                // between. Unique, so two attempts that arrive together cannot both insert.
                "ALTER TABLE ciphers ADD COLUMN create_key TEXT",
                "CREATE UNIQUE INDEX ciphers_create_key ON ciphers(create_key)",
            ]
        },
        Migration(version: 5, name: "refresh-token chains end, the previous token has a grace period, devices can be revoked") { d in
            [
                // When the password login that started the device's chain happened (the chain's absolute
                // lifetime counts from it), until when the token before the current one still answers,
                // and when the device was revoked (its tokens stop; a password login starts it again).
                "ALTER TABLE devices ADD COLUMN refresh_issued_at \(d.integer)",
                "ALTER TABLE devices ADD COLUMN previous_refresh_expires_at \(d.integer)",
                "ALTER TABLE devices ADD COLUMN revoked_at \(d.integer)",
                "UPDATE devices SET refresh_issued_at = updated_at",
            ]
        },
        Migration(version: 6, name: "organization invites wait for the invitee") { d in
            [
                // An invite is no membership: it names an email, and becomes a membership (with the same
                // id) only when the account with that email accepts it. Collections are the access the
                // admin chose, as JSON `[{"id", "readOnly", "hidePasswords", "manage"}]`.
                """
                CREATE TABLE organization_invites (
                    id TEXT PRIMARY KEY,
                    organization_id TEXT NOT NULL REFERENCES organizations(id) ON DELETE CASCADE,
                    email TEXT NOT NULL,
                    type \(d.integer) NOT NULL,
                    collections TEXT NOT NULL,
                    created_at \(d.integer) NOT NULL,
                    UNIQUE (organization_id, email)
                )
                """,
                "CREATE INDEX organization_invites_email ON organization_invites(email)",
            ]
        },
        Migration(version: 7, name: "two-step login, remembered devices, personal API keys") { d in
            [
                // One row per provider an account has set up (0: authenticator, whose data is the Base32 key).
                // last_used_step: the time step of the last code accepted; that code and older ones are refused.
                """
                CREATE TABLE two_factor (
                    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                    type \(d.integer) NOT NULL,
                    enabled \(d.integer) NOT NULL,
                    data TEXT NOT NULL,
                    last_used_step \(d.integer) NOT NULL DEFAULT 0,
                    created_at \(d.integer) NOT NULL,
                    updated_at \(d.integer) NOT NULL,
                    PRIMARY KEY (user_id, type)
                )
                """,
                // The recovery code (shown to the user again by get-recover) and the personal API key, sealed.
                "ALTER TABLE users ADD COLUMN two_factor_recovery_code TEXT",
                "ALTER TABLE users ADD COLUMN api_key TEXT",
                // A device's remember token: its hash, expiry, and the security stamp it was issued under.
                "ALTER TABLE devices ADD COLUMN two_factor_remember_hash TEXT",
                "ALTER TABLE devices ADD COLUMN two_factor_remember_expires_at \(d.integer)",
                "ALTER TABLE devices ADD COLUMN two_factor_remember_stamp TEXT",
            ]
        },
        Migration(version: 8, name: "a user's ciphers in creation order without a sort") { _ in
            [
                // A sync lists the user's ciphers ORDER BY created_at, id: with only ciphers(user_id), SQLite
                // copied every row, payload included, into a temporary B-tree to sort it.
                "CREATE INDEX ciphers_user_created ON ciphers(user_id, created_at, id)",
            ]
        },
        Migration(version: 9, name: "idempotency keys of item and folder creates, kept after the item is deleted") { d in
            [
                // One row per create a user sent with `Idempotency-Key` (docs/PROTOCOL.md, "Idempotent creates"):
                // what it made (kind: cipher or folder) and its id. The primary key makes two attempts that
                // arrive together insert once. No foreign key to the item: the row outlives it, so a replay
                // after the item was deleted for good answers "created, deleted since" and never creates it again.
                """
                CREATE TABLE create_keys (
                    user_id TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                    idempotency_key TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    item_id TEXT NOT NULL,
                    created_at \(d.integer) NOT NULL,
                    PRIMARY KEY (user_id, idempotency_key)
                )
                """,
                // The keys version 4 kept on the ciphers (`USERID:KEY`; user ids are 36-character UUIDs).
                """
                INSERT INTO create_keys (user_id, idempotency_key, kind, item_id, created_at)
                SELECT substr(create_key, 1, 36), substr(create_key, 38), 'cipher', id, created_at FROM ciphers
                WHERE create_key IS NOT NULL AND substr(create_key, 1, 36) IN (SELECT id FROM users)
                """,
            ]
        },
        Migration(version: 10, name: "attachment files stream in chunks; attachment creates carry an idempotency key") { d in
            let int = d.integer
            var statements = [
                // One attempt at uploading an attachment's file. Each attempt writes its own chunks, so two
                // attempts at once never mix; the first to complete becomes the file (`attachments.upload_id`),
                // the others are deleted. An attempt cut off by a crash is deleted by a later upload's sweep.
                """
                CREATE TABLE attachment_uploads (
                    id TEXT PRIMARY KEY,
                    attachment_id TEXT NOT NULL REFERENCES attachments(id) ON DELETE CASCADE,
                    started_at \(int) NOT NULL
                )
                """,
                "CREATE INDEX attachment_uploads_attachment ON attachment_uploads(attachment_id)",
                "CREATE INDEX attachment_uploads_started ON attachment_uploads(started_at)",
                // The file in order, `AttachmentChunks.size` bytes a row (the last one may be shorter): an upload is
                // written and a download read one chunk at a time, in bounded memory on both backends.
                """
                CREATE TABLE attachment_chunks (
                    upload_id TEXT NOT NULL REFERENCES attachment_uploads(id) ON DELETE CASCADE,
                    seq \(int) NOT NULL,
                    data \(d.blob) NOT NULL,
                    PRIMARY KEY (upload_id, seq)
                )
                """,
                // The completed upload whose chunks are the file (NULL: not uploaded yet; replaces `body IS NOT NULL`).
                "ALTER TABLE attachments ADD COLUMN upload_id TEXT",
                "CREATE INDEX attachments_upload ON attachments(upload_id)",
                // `Idempotency-Key` of the v2 create that made the attachment, as `USERID:KEY` (docs/PROTOCOL.md).
                "ALTER TABLE attachments ADD COLUMN create_key TEXT",
                "CREATE UNIQUE INDEX attachments_create_key ON attachments(create_key)",
                // Bodies stored whole by earlier versions move into chunks: one upload per attachment, with the
                // attachment's id as the upload's id, cut into 1 MiB chunks by a recursive sequence (both dialects
                // have it). The chunk size is fixed here as shipped; readers take chunks of any size in order.
                "INSERT INTO attachment_uploads (id, attachment_id, started_at) SELECT id, id, created_at FROM attachments WHERE body IS NOT NULL",
                """
                WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < (SELECT COALESCE(MAX(length(body)), 0) FROM attachments) / 1048576)
                INSERT INTO attachment_chunks (upload_id, seq, data)
                SELECT a.id, n.i, substr(a.body, n.i * 1048576 + 1, 1048576)
                FROM attachments a JOIN n ON n.i * 1048576 < length(a.body)
                WHERE a.body IS NOT NULL
                """,
                "UPDATE attachments SET upload_id = id, file_size = length(body), body = NULL WHERE body IS NOT NULL",
            ]
            if d == .postgres {
                // Ciphertext does not compress: store chunks out of line without trying.
                statements.insert("ALTER TABLE attachment_chunks ALTER COLUMN data SET STORAGE EXTERNAL", at: 4)
            }
            return statements
        },
        Migration(version: 11, name: "profile settings: avatar colour, equivalent domains; devices' push tokens") { _ in
            [
                // `#rrggbb`, or NULL for the clients' default (docs/PROTOCOL.md, "Account settings").
                "ALTER TABLE users ADD COLUMN avatar_color TEXT",
                // The user's own equivalent domains as JSON `[["a.example", "b.example"], …]`, and the global
                // groups they turned off as JSON `[type, …]`; NULL for none.
                "ALTER TABLE users ADD COLUMN equivalent_domains TEXT",
                "ALTER TABLE users ADD COLUMN excluded_global_domains TEXT",
                // What a phone app registered for push notifications; kept, never used (this server has no push relay).
                "ALTER TABLE devices ADD COLUMN push_token TEXT",
                // The anonymous clear-token route finds devices by identifier alone.
                "CREATE INDEX devices_identifier ON devices(identifier)",
            ]
        },
        Migration(version: 12, name: "revocation lasts: devices count their revocations, access tokens carry the count") { d in
            [
                // Incremented by every revocation of the device (logout, deactivation, refresh-token reuse, a new
                // security stamp) and never reset: an access token carries the value it was issued under, so one
                // issued before a revocation stays refused after the device signs in again.
                "ALTER TABLE devices ADD COLUMN generation \(d.integer) NOT NULL DEFAULT 0",
                // Tokens issued before this migration carry no generation (read as 0): a device revoked before it
                // starts at 1, so they stay refused when it signs in again.
                "UPDATE devices SET generation = 1 WHERE revoked_at IS NOT NULL",
            ]
        },
        Migration(version: 13, name: "organization invites are accepted with a one-time code") { d in
            [
                // The SHA-256 (hex) of the invite's one-time code, which only the inviter was shown
                // (docs/PROTOCOL.md, "Organization invites"). NULL for invites recorded before: they cannot
                // be accepted; inviting the email again gives them a code.
                "ALTER TABLE organization_invites ADD COLUMN code_hash TEXT",
                // Accept attempts with a wrong (or no) code; at `InviteCodes.maximumFailures` the invite is dead.
                "ALTER TABLE organization_invites ADD COLUMN failed_attempts \(d.integer) NOT NULL DEFAULT 0",
                // 1: the member accepted their invite with its code (memberships made before, and owners, 0).
                "ALTER TABLE memberships ADD COLUMN accepted_with_code \(d.integer) NOT NULL DEFAULT 0",
            ]
        },
        Migration(version: 14, name: "login limits shared by the nodes of one database") { d in
            let int = d.integer
            return [
                // One row per limiter entry (Storage/LoginLimitsStore.swift): `kind` is `pair` (an account's
                // failures from one address), `address-failures`, `account` or `address` (buckets). Times are
                // microseconds; a bucket's tokens are text (an unlimited bucket's count is beyond an integer).
                """
                CREATE TABLE login_limits (
                    scope TEXT NOT NULL,
                    kind TEXT NOT NULL,
                    key TEXT NOT NULL,
                    count \(int),
                    last_at \(int),
                    locked_until \(int),
                    tokens TEXT,
                    updated_at \(int),
                    PRIMARY KEY (scope, kind, key)
                )
                """,
            ]
        },
        Migration(version: 15, name: "accounts an administrator disabled; addresses invited to register") { d in
            [
                // When an administrator disabled the account (NULL: enabled): it cannot log in, and its
                // devices were revoked when it was disabled (docs/OPERATIONS.md, "Administration").
                "ALTER TABLE users ADD COLUMN disabled_at \(d.integer)",
                // Addresses an administrator invited: with sign-ups closed to others, only these may register.
                """
                CREATE TABLE registration_invites (
                    email TEXT PRIMARY KEY,
                    invited_at \(d.integer) NOT NULL,
                    used_at \(d.integer)
                )
                """,
            ]
        },
    ]

    /// Applies every migration not applied yet (up to `lastVersion`: tests build an older schema to migrate
    /// data from), in one transaction per migration. On PostgreSQL an advisory lock serialises instances
    /// that start together.
    static func run(on database: any SQLDatabase, through lastVersion: Int = .max) async throws {
        let dialect = database.dialect
        try await database.transaction { session in
            if dialect == .postgres { try await session.query("SELECT pg_advisory_xact_lock(872634)") }
            try await session.query("""
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    version \(dialect.integer) PRIMARY KEY, name TEXT NOT NULL, applied_at \(dialect.integer) NOT NULL)
                """)
            let applied = Set(try await session.query("SELECT version FROM schema_migrations").compactMap { $0.int("version") })
            // A database a newer server has migrated holds what this one does not know (columns it would not
            // write, rules it would not keep): refused before anything is served or changed.
            let known = Set(all.map { Int64($0.version) })
            if let unknown = applied.subtracting(known).max() {
                throw StorageError.newerSchema(version: Int(unknown), newestKnown: all.map(\.version).max() ?? 0)
            }
            for migration in all where !applied.contains(Int64(migration.version)) && migration.version <= lastVersion {
                for statement in migration.statements(dialect) {
                    try await session.query(statement)
                }
                try await session.query("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                                        [.int(Int64(migration.version)), .text(migration.name), .int(Clock.microsNow())])
            }
        }
    }
}

/// Wall-clock time in microseconds (the server's only notion of "now").
enum Clock {
    static func microsNow() -> Int64 { Int64((Date().timeIntervalSince1970 * 1_000_000).rounded()) }
}
