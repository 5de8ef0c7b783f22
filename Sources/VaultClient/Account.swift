import Foundation
import GRDB
import VaultAPI
import VaultCrypto
import VaultModels
import VaultStore
import VaultSyncCore

extension VaultEngine {
    /// Creates an account on the server (keys made here: user key, RSA pair), then logs in.
    public func register(email: String, password: String, name: String? = nil,
                         kdf: KdfConfiguration = .defaultPBKDF2) async throws {
        try requireUsableServer()
        let master = try cryptoCall { try MasterKey.derive(password: password, salt: email, kdf: kdf) }
        let userKey = SymmetricCryptoKey.generate(using: random)
        let privateKey = try cryptoCall { try RSAPrivateKey.generate() }
        do {
            try await api.register(
                email: email, name: name, passwordHash: master.serverAuthorizationHash(password: password),
                protectedKey: try cryptoCall { try master.encryptUserKey(userKey, random: random) }.serialized, kdf: kdf,
                publicKey: privateKey.publicKey.spkiBase64,
                encryptedPrivateKey: try cryptoCall { try privateKey.encrypted(with: userKey, random: random) }.serialized)
        } catch let error as ServerCallError {
            throw Self.onlineOnly(error)
        }
        // The settings were chosen here a moment ago: no prelogin to trust.
        try await login(email: email, password: password, knownKdf: kdf)
    }

    /// Logs in (prelogin → KDF check → KDF → hash → token), stores the account's wrapped keys for
    /// offline unlock, and leaves the vault unlocked. Fetches the vault.
    ///
    /// The prelogin answer's KDF settings are checked before anything is derived or sent
    /// (``KdfPolicy``): they may not be weaker than those this device has seen unlock the account
    /// (``VaultError/kdfWeakened(pinned:offered:)``), and for an account new to this device they must
    /// meet Bitwarden's current minimums (``VaultError/kdfBelowMinimums(offered:)``). Either refusal
    /// is lifted only by `acceptingKdf`: the exact settings the user was shown and confirmed. After
    /// a successful login the settings that unlocked the account are pinned.
    public func login(email: String, password: String, acceptingKdf: KdfConfiguration? = nil) async throws {
        try await login(email: email, password: password, knownKdf: nil, acceptingKdf: acceptingKdf)
    }

    func login(email: String, password: String, knownKdf: KdfConfiguration?, acceptingKdf: KdfConfiguration? = nil) async throws {
        try requireUsableServer()
        let normalised = MasterKey.normaliseSalt(email)
        let existing = try await read { db in try AccountRecord.filter(Column("email") == normalised).fetchOne(db) }
        let kdf: KdfConfiguration
        if let knownKdf {
            kdf = knownKdf
        } else {
            do {
                kdf = try await api.prelogin(email: normalised)
            } catch let error as ServerCallError {
                throw Self.onlineOnly(error)
            }
            let pinned = existing.flatMap { try? $0.kdf }
            switch KdfPolicy.evaluate(offered: kdf, pinned: pinned, confirmed: acceptingKdf) {
            case .accept:
                break
            case .belowMinimums(let offered):
                logger.warning("login refused: announced KDF below the current minimums", metadata: ["kdf": "\(offered.spec)"])
                throw VaultError.kdfBelowMinimums(offered: offered)
            case .weakerThanPinned(let pinned, let offered):
                logger.warning("login refused: announced KDF weaker than the pinned one",
                               metadata: ["pinned": "\(pinned.spec)", "offered": "\(offered.spec)"])
                throw VaultError.kdfWeakened(pinned: pinned, offered: offered)
            }
        }
        let master = try cryptoCall { try MasterKey.derive(password: password, salt: normalised, kdf: kdf) }
        let deviceIdentifier = existing?.deviceIdentifier ?? UUID().uuidString.lowercased()
        let tokens: TokenResponse
        do {
            tokens = try await api.login(email: normalised, passwordHash: master.serverAuthorizationHash(password: password),
                                         deviceIdentifier: deviceIdentifier, deviceName: configuration.deviceName)
        } catch let error as ServerCallError {
            if case .http(400, let message) = error, message.lowercased().contains("username or password") { throw VaultError.wrongPassword }
            throw Self.onlineOnly(error)
        }
        guard let protectedKey = tokens.key else { throw VaultError.serverRefused(status: 200, message: "the token response has no Key") }
        let userKey = try master.decryptUserKeyMapped(try cryptoCall { try EncString(protectedKey) })
        guard let userID = Self.subject(ofJWT: tokens.accessToken) else {
            throw VaultError.serverRefused(status: 200, message: "the access token has no subject")
        }
        let sessionTokens = SessionTokens(accessToken: tokens.accessToken, refreshToken: tokens.refreshToken)
        let account = AccountRecord(
            userID: userID, email: normalised, deviceIdentifier: deviceIdentifier, kdf: kdf, protectedUserKey: protectedKey,
            localAuthorizationHash: master.localAuthorizationHash(password: password), encryptedPrivateKey: tokens.privateKey,
            publicKey: nil, sealedTokens: try Sealed.seal(sessionTokens, key: userKey), createdAt: clock.now().microsecondsSinceEpoch)
        try await write { db in
            if var current = try AccountRecord.fetchOne(db, key: userID) {
                current.kdfType = account.kdfType
                current.kdfIterations = account.kdfIterations
                current.kdfMemory = account.kdfMemory
                current.kdfParallelism = account.kdfParallelism
                current.protectedUserKey = account.protectedUserKey
                current.localAuthorizationHash = account.localAuthorizationHash
                current.encryptedPrivateKey = account.encryptedPrivateKey
                current.sealedTokens = account.sealedTokens
                try current.update(db)
            } else {
                try account.insert(db)
            }
        }
        session = UnlockedSession(userID: userID, email: normalised, keys: VaultKeys(userKey: userKey), tokens: sessionTokens)
        await recordContact(success: true)
        try await pull()
    }

    /// Unlocks with the master password, without the server (seed 000 §4: the 2-iteration local hash).
    public func unlock(email: String, password: String) async throws {
        let normalised = MasterKey.normaliseSalt(email)
        guard let account = try await read({ db in try AccountRecord.filter(Column("email") == normalised).fetchOne(db) }) else {
            throw VaultError.accountNotFound(normalised)
        }
        let kdf = try cryptoCall { try account.kdf }
        let master = try cryptoCall { try MasterKey.derive(password: password, salt: normalised, kdf: kdf) }
        guard ConstantTime.equals(Array(master.localAuthorizationHash(password: password).utf8), Array(account.localAuthorizationHash.utf8)) else {
            throw VaultError.wrongPassword
        }
        let userKey = try master.decryptUserKeyMapped(try cryptoCall { try EncString(account.protectedUserKey) })
        try await finishUnlock(account: account, userKey: userKey)
    }

    /// A copy of the unlocked user key sealed with a one-time session key, valid until `expiresAt`:
    /// lets a command-line client stay unlocked across processes without the key on disk in the clear
    /// (like `bw`'s BW_SESSION). Whoever holds both the sealed copy and the session key can unlock.
    public func sealSession(with sessionKey: SymmetricCryptoKey, expiresAt: WireDate) throws -> String {
        let current = try requireSession()
        let payload = SealedSessionPayload(email: current.email, userKey: current.keys.userKey.base64,
                                           expiresAt: expiresAt.microsecondsSinceEpoch)
        do {
            return try Sealed.seal(payload, key: sessionKey)
        } catch {
            throw VaultError.storage("the session could not be sealed: \(error)")
        }
    }

    /// Unlocks with a session sealed by ``sealSession(with:expiresAt:)``. A wrong key, a tampered copy or
    /// an expired session is refused with ``VaultError/sessionInvalid``.
    public func unlock(sealedSession: String, sessionKey: SymmetricCryptoKey) async throws {
        guard let payload = try? Sealed.open(SealedSessionPayload.self, from: sealedSession, key: sessionKey),
              let userKey = try? SymmetricCryptoKey(base64: payload.userKey) else {
            throw VaultError.sessionInvalid
        }
        guard clock.now().microsecondsSinceEpoch < payload.expiresAt else { throw VaultError.sessionInvalid }
        guard let account = try await read({ db in try AccountRecord.filter(Column("email") == payload.email).fetchOne(db) }) else {
            throw VaultError.accountNotFound(payload.email)
        }
        // The sealed key must open this account's data (a session of an older login is refused).
        if let sealedTokens = account.sealedTokens, (try? Sealed.open(SessionTokens.self, from: sealedTokens, key: userKey)) == nil {
            throw VaultError.sessionInvalid
        }
        try await finishUnlock(account: account, userKey: userKey)
    }

    /// The rest of an unlock once the user key is known: organization keys, clock offset, old drafts.
    func finishUnlock(account: AccountRecord, userKey: SymmetricCryptoKey) async throws {
        let normalised = account.email
        let tokens = account.sealedTokens.flatMap { try? Sealed.open(SessionTokens.self, from: $0, key: userKey) }
        var keys = VaultKeys(userKey: userKey)
        keys.organizationKeys = try await organizationKeys(userID: account.userID, account: account, userKey: userKey)
        session = UnlockedSession(userID: account.userID, email: normalised, keys: keys, tokens: tokens)
        if let offset = try await read({ db in try SyncStateRow.fetchOne(db, key: account.userID)?.clockOffset }),
           let value = try? JSONDecoder().decode(ServerClockOffset.self, from: Data(offset.utf8)) {
            clockOffsetBox.restore(value)
        }
        try await purgeDrafts()
    }

    /// The email of the unlocked account.
    public var currentEmail: String? { session?.email }

    /// Forgets the keys (and tokens) held in memory.
    public func lock() {
        session = nil
    }

    /// Removes the account and everything of it on this device: cache, queue, drafts (seed 001 §10.3).
    /// When the vault is unlocked, the server is first asked to end this device's session (token
    /// revocation), so a copy of the refresh token taken from this device stops working too. Returns
    /// whether the server confirmed that; logging out never waits on it to succeed.
    @discardableResult
    public func logout(email: String) async throws -> Bool {
        let normalised = MasterKey.normaliseSalt(email)
        var revoked = false
        if (try? requireUsableServer()) != nil, let current = session, current.email == normalised, let tokens = current.tokens {
            do {
                try await api.revoke(token: tokens.refreshToken)
                revoked = true
            } catch {
                logger.info("the server was not told about the logout", metadata: ["reason": "\(error)"])
            }
        }
        try await write { db in
            _ = try AccountRecord.filter(Column("email") == normalised).deleteAll(db)
        }
        if session?.email == normalised { session = nil }
        return revoked
    }

    /// How many changes of an account wait for the server (readable while locked: the count is not secret).
    public func queuedChangeCount(email: String) async throws -> Int {
        let normalised = MasterKey.normaliseSalt(email)
        return try await read { db in
            try Int.fetchOne(db, sql: """
                SELECT COALESCE(SUM(n), 0) FROM pendingChangeCount WHERE userID IN (SELECT userID FROM account WHERE email = ?)
                """, arguments: [normalised]) ?? 0
        }
    }

    /// The accounts on this device.
    public func accounts() async throws -> [String] {
        try await read { db in try AccountRecord.order(Column("email")).fetchAll(db).map(\.email) }
    }

    /// Unwraps the organization keys of the profile's confirmed memberships; one bad key only costs
    /// that organization (organizations.md §1.4).
    func organizationKeys(userID: String, account: AccountRecord, userKey: SymmetricCryptoKey) async throws -> [String: SymmetricCryptoKey] {
        let rows = try await read { db in try OrganizationRow.filter(Column("userID") == userID).fetchAll(db) }
        // No memberships (most vaults): the private key is not opened (RSA key parsing on every pull).
        guard !rows.isEmpty else { return [:] }
        guard let encryptedPrivate = account.encryptedPrivateKey,
              let privateKey = try? RSAPrivateKey.decrypt(EncString(encryptedPrivate), userKey: userKey) else { return [:] }
        var keys: [String: SymmetricCryptoKey] = [:]
        for row in rows {
            guard let object = try? JSONParser.parseObject(Array(row.json.utf8)), object["status"]?.intValue == 2,
                  let wrapped = object["key"]?.stringValue, let encString = try? EncString(wrapped),
                  let key = try? privateKey.unwrapKey(encString) else {
                logger.warning("organization key unavailable", metadata: ["organization": "\(row.id)"])
                continue
            }
            keys[row.id] = key
        }
        return keys
    }

    /// The `sub` claim of a JWT (decoded without verifying, as clients do).
    static func subject(ofJWT token: String) -> String? {
        let parts = token.split(separator: ".")
        guard parts.count == 3 else { return nil }
        var base64 = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.utf8.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64), let object = try? JSONParser.parseObject(data) else { return nil }
        return object["sub"]?.stringValue?.lowercased()
    }

    /// Errors of calls that only make sense online (login, register).
    static func onlineOnly(_ error: ServerCallError) -> VaultError {
        switch error {
        case .http(let status, let message): return .serverRefused(status: status, message: message)
        case .authenticationExpired: return .sessionExpired
        case .transport(_, let detail): return .serverUnreachable(detail)
        case .invalidResponse(let reason): return .serverAnswerInvalid(reason)
        case .certificate(let problem): return .untrustedCertificate(problem)
        }
    }

    func cryptoCall<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as CryptoError {
            throw VaultError.crypto(error)
        } catch let error as ModelError {
            throw VaultError.model(error)
        }
    }
}

extension MasterKey {
    func decryptUserKeyMapped(_ protectedKey: EncString) throws -> SymmetricCryptoKey {
        do {
            return try decryptUserKey(protectedKey)
        } catch CryptoError.wrongPassword {
            throw VaultError.wrongPassword
        } catch let error as CryptoError {
            throw VaultError.crypto(error)
        }
    }
}

/// What a sealed session holds.
struct SealedSessionPayload: Codable, Sendable {
    var email: String
    var userKey: String
    var expiresAt: Int64
}
