import Foundation

/// An account's two-step login as stored.
struct TwoFactorState: Sendable {
    /// The authenticator's Base32 key, when one is set up.
    var authenticatorKey: String?
    var authenticatorEnabled: Bool
    /// The time step of the last authenticator code accepted.
    var lastUsedStep: Int64
    var recoveryCode: String?
    /// Every provider type that is set up and enabled, in order.
    var enabledTypes: [Int]

    var isEnabled: Bool { !enabledTypes.isEmpty }
}

extension VaultRepository {
    static func twoFactorState(userID: String, _ session: any SQLSession) async throws -> TwoFactorState {
        let rows = try await session.query("SELECT * FROM two_factor WHERE user_id = ? ORDER BY type", [.text(userID)])
        let recovery = try await session.query("SELECT two_factor_recovery_code FROM users WHERE id = ?", [.text(userID)])
            .first?.text("two_factor_recovery_code")
        let authenticator = rows.first { $0.int("type") == Int64(TwoFactorProvider.authenticator) }
        return TwoFactorState(
            authenticatorKey: authenticator?.text("data"), authenticatorEnabled: authenticator?.bool("enabled") ?? false,
            lastUsedStep: authenticator?.int("last_used_step") ?? 0, recoveryCode: recovery,
            enabledTypes: rows.filter { $0.bool("enabled") }.compactMap { $0.int("type").map(Int.init) })
    }

    /// Whether any provider is on (the profile's `twoFactorEnabled`): one query, on every sync's path.
    static func twoFactorEnabled(userID: String, _ session: any SQLSession) async throws -> Bool {
        try await session.query("SELECT enabled FROM two_factor WHERE user_id = ?", [.text(userID)]).contains { $0.bool("enabled") }
    }

    func twoFactorState(userID: String) async throws -> TwoFactorState {
        try await transaction { session in try await Self.twoFactorState(userID: userID, session) }
    }

    /// Sets up (or replaces) the authenticator with `key`, whose code for `step` was just shown, and makes
    /// the recovery code if the account has none.
    func enableAuthenticator(userID: String, key: String, step: Int64, now: Int64) async throws {
        try await transaction { session in
            try await session.query("""
                INSERT INTO two_factor (user_id, type, enabled, data, last_used_step, created_at, updated_at) VALUES (?, ?, 1, ?, ?, ?, ?)
                ON CONFLICT (user_id, type) DO UPDATE SET enabled = 1, data = excluded.data, last_used_step = excluded.last_used_step,
                    updated_at = excluded.updated_at
                """, [.text(userID), .int(Int64(TwoFactorProvider.authenticator)), .text(key), .int(step), .int(now), .int(now)])
            try await session.query("UPDATE users SET two_factor_recovery_code = ? WHERE id = ? AND two_factor_recovery_code IS NULL",
                                    [.text(AccountSecrets.recoveryCode()), .text(userID)])
        }
    }

    /// Records that the authenticator's code for `step` was used; `false` if that step (or a later one)
    /// already was, for example by a concurrent login with the same code.
    func useAuthenticatorStep(userID: String, step: Int64) async throws -> Bool {
        try await transaction { session in
            !(try await session.query("""
                UPDATE two_factor SET last_used_step = ? WHERE user_id = ? AND type = ? AND enabled = 1 AND last_used_step < ?
                RETURNING user_id
                """, [.int(step), .text(userID), .int(Int64(TwoFactorProvider.authenticator)), .int(step)]).isEmpty)
        }
    }

    /// Removes one provider; when none is left, every remembered device of the account must log in with
    /// a code again once two-step login is set up anew.
    func disableTwoFactor(userID: String, type: Int) async throws {
        try await transaction { session in
            try await session.query("DELETE FROM two_factor WHERE user_id = ? AND type = ?", [.text(userID), .int(Int64(type))])
            if try await Self.twoFactorState(userID: userID, session).enabledTypes.isEmpty {
                try await Self.forgetRememberedDevices(userID: userID, session)
            }
        }
    }

    /// Recovery: if `code` is still the account's recovery code, removes every provider, forgets the
    /// remembered devices and stores a new recovery code; `false` if the code does not match.
    func recoverTwoFactor(userID: String, code: String) async throws -> Bool {
        try await transaction { session in
            guard let stored = try await session.query("SELECT two_factor_recovery_code FROM users WHERE id = ?", [.text(userID)])
                .first?.text("two_factor_recovery_code"), constantTimeEqual(stored, code) else { return false }
            let changed = try await session.query("""
                UPDATE users SET two_factor_recovery_code = ? WHERE id = ? AND two_factor_recovery_code = ? RETURNING id
                """, [.text(AccountSecrets.recoveryCode()), .text(userID), .text(stored)])
            guard !changed.isEmpty else { return false }
            try await session.query("DELETE FROM two_factor WHERE user_id = ?", [.text(userID)])
            try await Self.forgetRememberedDevices(userID: userID, session)
            return true
        }
    }

    static func forgetRememberedDevices(userID: String, _ session: any SQLSession) async throws {
        try await session.query("""
            UPDATE devices SET two_factor_remember_hash = NULL, two_factor_remember_expires_at = NULL, two_factor_remember_stamp = NULL
            WHERE user_id = ?
            """, [.text(userID)])
    }

    /// Stores a device's remember token (its hash), replacing the device's earlier one.
    func rememberDevice(userID: String, identifier: String, tokenHash: String, expires: Int64, stamp: String) async throws {
        _ = try await transaction { session in
            try await session.query("""
                UPDATE devices SET two_factor_remember_hash = ?, two_factor_remember_expires_at = ?, two_factor_remember_stamp = ?
                WHERE user_id = ? AND identifier = ?
                """, [.text(tokenHash), .int(expires), .text(stamp), .text(userID), .text(identifier)])
        }
    }

    /// Whether `tokenHash` is the device's unexpired remember token, issued under the account's current
    /// security stamp.
    func isRemembered(userID: String, identifier: String, tokenHash: String, stamp: String, now: Int64) async throws -> Bool {
        try await transaction { session in
            guard let row = try await session.query("""
                SELECT two_factor_remember_hash, two_factor_remember_expires_at, two_factor_remember_stamp FROM devices
                WHERE user_id = ? AND identifier = ?
                """, [.text(userID), .text(identifier)]).first,
                let stored = row.text("two_factor_remember_hash"), let expires = row.int("two_factor_remember_expires_at") else {
                return false
            }
            return constantTimeEqual(stored, tokenHash) && now < expires && row.text("two_factor_remember_stamp") == stamp
        }
    }

    /// The account's recovery code, if it has one (made when two-step login is first set up).
    func recoveryCode(userID: String) async throws -> String? {
        try await transaction { session in
            try await session.query("SELECT two_factor_recovery_code FROM users WHERE id = ?", [.text(userID)])
                .first?.text("two_factor_recovery_code")
        }
    }
}
