import Foundation
import Logging

/// One account as an administrator sees it: who and when, never anything of the vault but counts.
public struct AccountSummary: Sendable, Equatable {
    public var id: String
    public var email: String
    public var name: String?
    /// Microseconds since the epoch.
    public var createdAt: Int64
    /// When an administrator disabled it; `nil`: enabled.
    public var disabledAt: Int64?
    /// The devices signed in now.
    public var sessions: Int
    /// The last time a device of the account signed in or refreshed its token (`nil`: never).
    public var lastSeenAt: Int64?
    /// Personal items, in the trash too.
    public var items: Int
    /// Organizations the account belongs to (in any state).
    public var organizations: Int
    /// Whether a two-step login provider is on.
    public var twoStepLogin: Bool
}

/// What ``Administration`` refuses.
public enum AdministrationError: Error, Sendable, Equatable {
    /// No account has this email.
    case noSuchAccount(String)
    /// Not an email address.
    case notAnEmail(String)
    /// The account is the only owner of these organizations (their names), which have other members.
    case soleOwner([String])
    /// An account with this email exists already: there is nobody to invite.
    case alreadyRegistered(String)
}

/// The server's administration (`vaultsync-server admin …`), on the database the server uses, while it
/// serves (docs/OPERATIONS.md, "Administration"). Every change is one transaction. Disabling or revoking
/// sessions ends the account's access tokens at once (every device is revoked, as "log out everywhere"
/// does) and, on PostgreSQL, closes its notification connections on every node.
public struct Administration: Sendable {
    let repository: VaultRepository
    let database: any SQLDatabase
    let logger: Logger
    let now: @Sendable () -> Int64

    public init(database: any SQLDatabase, logger: Logger = Logger(label: "vaultsync-server.admin"),
                now: @escaping @Sendable () -> Int64 = { Int64((Date().timeIntervalSince1970 * 1_000_000).rounded()) }) {
        self.database = database
        repository = VaultRepository(database: database)
        self.logger = logger
        self.now = now
    }

    /// Brings the schema up to date first, as a starting server does (a new database is made usable).
    public func prepare() async throws {
        try await repository.migrate()
    }

    private static let summaryColumns = """
        SELECT u.id, u.email, u.name, u.created_at, u.disabled_at,
            (SELECT COUNT(*) FROM devices d WHERE d.user_id = u.id AND d.revoked_at IS NULL) AS sessions,
            (SELECT MAX(d.updated_at) FROM devices d WHERE d.user_id = u.id) AS last_seen,
            (SELECT COUNT(*) FROM ciphers c WHERE c.user_id = u.id) AS items,
            (SELECT COUNT(*) FROM memberships m WHERE m.user_id = u.id) AS organizations,
            (SELECT COUNT(*) FROM two_factor t WHERE t.user_id = u.id AND t.enabled = 1) AS two_step
        FROM users u
        """

    private static func summary(_ row: SQLRow) -> AccountSummary {
        AccountSummary(id: row.text("id") ?? "", email: row.text("email") ?? "", name: row.text("name"),
                       createdAt: row.int("created_at") ?? 0, disabledAt: row.int("disabled_at"),
                       sessions: Int(row.int("sessions") ?? 0), lastSeenAt: row.int("last_seen"), items: Int(row.int("items") ?? 0),
                       organizations: Int(row.int("organizations") ?? 0), twoStepLogin: (row.int("two_step") ?? 0) > 0)
    }

    /// Every account, oldest first.
    public func accounts() async throws -> [AccountSummary] {
        try await database.read { session in
            try await session.query(Self.summaryColumns + " ORDER BY u.created_at, u.email").map(Self.summary)
        }
    }

    /// The account of `email` (normalised as logins are).
    public func account(email: String) async throws -> AccountSummary {
        let email = try Self.normalised(email)
        guard let summary = try await database.read({ session in
            try await session.query(Self.summaryColumns + " WHERE u.email = ?", [.text(email)]).first.map(Self.summary)
        }) else { throw AdministrationError.noSuchAccount(email) }
        return summary
    }

    /// Disables the account: it can no longer log in, and every session it has ends. Returns the account's
    /// email and how many sessions ended. Disabling a disabled account keeps its first date.
    @discardableResult
    public func disable(email: String) async throws -> (email: String, sessionsEnded: Int) {
        let account = try await account(email: email)
        let now = now()
        let ended = try await database.transaction { session in
            try await session.query("UPDATE users SET disabled_at = COALESCE(disabled_at, ?) WHERE id = ?", [.int(now), .text(account.id)])
            return try await Self.endSessions(userID: account.id, now: now, session)
        }
        await endConnections(of: account.id)
        logger.info("account disabled", metadata: ["user": "\(account.id)"])
        return (account.email, ended)
    }

    /// How many devices were signed in, then ``VaultRepository/rotateSecurityStamp(userID:now:_:)``, in
    /// the caller's transaction (the count and the revocation see the same rows).
    private static func endSessions(userID: String, now: Int64, _ session: any SQLSession) async throws -> Int {
        let live = try await session.query("SELECT COUNT(*) AS n FROM devices WHERE user_id = ? AND revoked_at IS NULL",
                                           [.text(userID)]).first?.int("n") ?? 0
        try await VaultRepository.rotateSecurityStamp(userID: userID, now: now, session)
        return Int(live)
    }

    /// Enables a disabled account: it logs in again (its old sessions stay ended).
    @discardableResult
    public func enable(email: String) async throws -> AccountSummary {
        let account = try await account(email: email)
        _ = try await database.transaction { session in
            try await session.query("UPDATE users SET disabled_at = NULL WHERE id = ?", [.text(account.id)])
        }
        logger.info("account enabled", metadata: ["user": "\(account.id)"])
        return try await self.account(email: email)
    }

    /// Deletes the account and everything of it, as the account's own deletion does: refused when it is
    /// the only owner of an organization with other members. Returns the organizations it was alone in
    /// (deleted with it).
    public func delete(email: String) async throws -> Int {
        let account = try await account(email: email)
        switch try await repository.deleteAccount(userID: account.id) {
        case .soleOwner(let names): throw AdministrationError.soleOwner(names)
        case .deleted(let organizations):
            await endConnections(of: account.id)
            logger.info("account deleted by the administrator", metadata: ["user": "\(account.id)"])
            return organizations
        }
    }

    /// Ends every session of the account (its devices sign in again); returns its email and how many there were.
    public func revokeSessions(email: String) async throws -> (email: String, sessionsEnded: Int) {
        let account = try await account(email: email)
        let now = now()
        let ended = try await database.transaction { session in try await Self.endSessions(userID: account.id, now: now, session) }
        await endConnections(of: account.id)
        logger.info("sessions revoked by the administrator", metadata: ["user": "\(account.id)", "sessions": "\(ended)"])
        return (account.email, ended)
    }

    /// Lets `email` register when sign-ups are closed (`--signups-allowed false`); returns the address as
    /// stored. Inviting again renews the invitation; an address with an account is refused.
    @discardableResult
    public func invite(email: String) async throws -> String {
        let email = try Self.normalised(email)
        let now = now()
        try await database.transaction { session in
            guard try await VaultRepository.user(email: email, session) == nil else { throw AdministrationError.alreadyRegistered(email) }
            try await session.query("""
                INSERT INTO registration_invites (email, invited_at) VALUES (?, ?)
                ON CONFLICT (email) DO UPDATE SET invited_at = excluded.invited_at, used_at = NULL
                """, [.text(email), .int(now)])
        }
        logger.info("registration invited")
        return email
    }

    /// The addresses invited and not registered yet, oldest first.
    public func invitations() async throws -> [(email: String, invitedAt: Int64)] {
        try await database.read { session in
            try await session.query("SELECT email, invited_at FROM registration_invites WHERE used_at IS NULL ORDER BY invited_at")
                .map { ($0.text("email") ?? "", $0.int("invited_at") ?? 0) }
        }
    }

    /// On PostgreSQL every node closes the account's notification connections (through the same `NOTIFY`
    /// the nodes use); one SQLite server's connections close when their clients next reconnect, refused.
    private func endConnections(of userID: String) async {
        guard let postgres = database as? PostgresDatabase else { return }
        let delivery = HubDelivery(userIDs: [userID], notification: .user(.logOut, userID: userID, date: now(), contextID: nil),
                                   close: .init(error: "The session has ended.", allowReconnect: false))
        do {
            try await postgres.notify(channel: PostgresNotificationTransport.channel, payload: String(decoding: delivery.json.serialized(), as: UTF8.self))
        } catch {
            logger.warning("the nodes were not told to close the account's connections", metadata: ["error": "\(error)"])
        }
    }

    static func normalised(_ email: String) throws -> String {
        let email = EmailAddress.normalise(email)
        guard IdentityController.isEmailAddress(email) else { throw AdministrationError.notAnEmail(email) }
        return email
    }
}

extension VaultRepository {
    /// Whether `email` was invited to register and has not used the invitation.
    static func isInvited(email: String, _ session: any SQLSession) async throws -> Bool {
        try await !session.query("SELECT 1 FROM registration_invites WHERE email = ? AND used_at IS NULL", [.text(email)]).isEmpty
    }
}
