import Foundation
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
        try await login(email: email, password: password, options: LoginOptions(acceptingKdf: acceptingKdf))
    }

    /// Logs in with what a login may need beyond the password (docs/PROTOCOL.md, "Two-step login"):
    ///
    /// - An account with two-step login is refused with ``VaultError/twoFactorRequired(_:)``, which
    ///   lists the account's providers; log in again with `options.secondFactor` (for an email code,
    ///   call ``requestEmailCode(email:password:options:)`` first). With `remember`, the server's
    ///   "remember this device" token is kept for this email across logouts, sealed with a key derived
    ///   from the master key, and sent instead of a code by the next login here; when the server no
    ///   longer accepts it, that login is refused with ``VaultError/twoFactorRequired(_:)`` again.
    /// - The official server asks a device it does not know for an emailed code:
    ///   ``VaultError/newDeviceVerificationRequired(email:)``; log in again with
    ///   `options.newDeviceCode` (``resendNewDeviceCode(email:password:options:)`` mails another).
    public func login(email: String, password: String, options: LoginOptions) async throws {
        try await login(email: email, password: password, knownKdf: nil, options: options)
    }

    /// Asks the server to mail the two-step login code of `email` (its answer to
    /// ``VaultError/twoFactorRequired(_:)`` listed email). Needs the password: the request proves it.
    public func requestEmailCode(email: String, password: String, options: LoginOptions = LoginOptions()) async throws {
        let prepared = try await prepareLogin(email: email, password: password, knownKdf: nil, options: options)
        do {
            try await api.sendEmailLoginCode(email: prepared.email, passwordHash: prepared.master.serverAuthorizationHash(password: password),
                                             deviceIdentifier: prepared.deviceIdentifier,
                                             sessionToken: options.emailSessionToken)
        } catch let error as ServerCallError {
            throw Self.onlineOnly(error)
        }
    }

    /// Asks the official server to mail another new-device code for `email`.
    public func resendNewDeviceCode(email: String, password: String, options: LoginOptions = LoginOptions()) async throws {
        let prepared = try await prepareLogin(email: email, password: password, knownKdf: nil, options: options)
        do {
            try await api.resendNewDeviceCode(email: prepared.email, passwordHash: prepared.master.serverAuthorizationHash(password: password))
        } catch let error as ServerCallError {
            throw Self.onlineOnly(error)
        }
    }

    /// Logs in with a personal API key (as `bw login --apikey`), then unlocks with the master
    /// password, which never leaves the device: it only opens the user key the server returned.
    /// The server asks no second factor for an API key. The key is kept (sealed with the user key)
    /// to renew the session, which has no refresh token.
    ///
    /// The KDF settings come with the server's answer. They are not checked against ``KdfPolicy``:
    /// nothing derived from the password is sent, and settings other than the account's real ones
    /// cannot open the user key (the login then fails as a wrong password).
    public func login(apiKey: APIKeyCredentials, password: String) async throws {
        try requireUsableServer()
        guard let keyUserID = apiKey.userID else {
            throw VaultError.apiKeyRefused("the client id must have the form user.<user id> (it is shown with the API key)")
        }
        let existing = try await read { tx in try tx.accounts.find(userID: keyUserID) }
        let deviceIdentifier = existing?.deviceIdentifier ?? UUID().uuidString.lowercased()
        let outcome: LoginOutcome
        do {
            outcome = try await api.login(clientID: apiKey.clientID, clientSecret: apiKey.clientSecret,
                                          deviceIdentifier: deviceIdentifier, deviceName: configuration.deviceName)
        } catch let error as ServerCallError {
            throw Self.onlineOnly(error)
        }
        let tokens: TokenResponse
        switch outcome {
        case .tokens(let answer): tokens = answer
        case .invalidClient: throw VaultError.apiKeyRefused("the server does not accept this client id and secret")
        case .wrongPassword, .invalidTwoFactorCode, .invalidNewDeviceCode, .twoFactorRequired, .newDeviceVerificationRequired:
            throw VaultError.apiKeyRefused("the server answered an API-key login as if it were a password login")
        }
        guard let kdf = tokens.kdf else { throw VaultError.serverAnswerInvalid("the API-key login's answer has no KDF settings") }
        guard let userID = Self.claim("sub", ofJWT: tokens.accessToken)?.lowercased(), userID == keyUserID else {
            throw VaultError.serverAnswerInvalid("the access token is not for the API key's user")
        }
        guard let salt = tokens.salt ?? Self.claim("email", ofJWT: tokens.accessToken) else {
            throw VaultError.serverAnswerInvalid("the API-key login's answer names no email")
        }
        let email = MasterKey.normaliseSalt(salt)
        let master = try cryptoCall { try MasterKey.derive(password: password, salt: email, kdf: kdf) }
        try await finishLogin(email: email, password: password, kdf: kdf, master: master, deviceIdentifier: deviceIdentifier,
                              tokens: tokens, apiKey: apiKey)
    }

    /// What a password login has worked out before it sends anything.
    struct PreparedLogin {
        var email: String
        var kdf: KdfConfiguration
        var master: MasterKey
        var deviceIdentifier: String
        var remembered: RememberedLoginRow?
    }

    /// Prelogin, the KDF check and the key derivation; the device identifier this device uses for
    /// the account (kept across logout, so a remembered two-step login stays valid).
    func prepareLogin(email: String, password: String, knownKdf: KdfConfiguration?, options: LoginOptions) async throws -> PreparedLogin {
        try requireUsableServer()
        let normalised = MasterKey.normaliseSalt(email)
        let (existing, remembered) = try await read { tx in
            (try tx.accounts.find(email: normalised), try tx.rememberedLogins.find(email: normalised))
        }
        let kdf: KdfConfiguration
        if let knownKdf {
            kdf = knownKdf
        } else {
            do {
                kdf = try await api.prelogin(email: normalised)
            } catch let error as ServerCallError {
                throw Self.onlineOnly(error)
            } catch let refused as BitwardenAPI.KdfSettingsRefused {
                throw VaultError.kdfUnusable(refused.reason)
            }
            let pinned = existing.flatMap { try? $0.kdf }
            switch KdfPolicy.evaluate(offered: kdf, pinned: pinned, confirmed: options.acceptingKdf) {
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
        var deviceIdentifier = existing?.deviceIdentifier ?? remembered?.deviceIdentifier
        if deviceIdentifier == nil {
            let made = UUID().uuidString.lowercased()
            let now = clock.now().microsecondsSinceEpoch
            try await write { tx in
                try tx.rememberedLogins.addIfMissing(RememberedLoginRow(email: normalised, deviceIdentifier: made, sealedTwoFactorToken: nil,
                                                                        updatedAt: now))
            }
            deviceIdentifier = made
        }
        return PreparedLogin(email: normalised, kdf: kdf, master: master, deviceIdentifier: deviceIdentifier!, remembered: remembered)
    }

    /// The key that seals the remembered two-step token: derived from the master key, so a copy of
    /// the profile without the master password cannot use it.
    static let rememberPurpose = "two-factor-remember"

    func login(email: String, password: String, knownKdf: KdfConfiguration?, options: LoginOptions = LoginOptions()) async throws {
        let prepared = try await prepareLogin(email: email, password: password, knownKdf: knownKdf, options: options)
        let normalised = prepared.email
        let rememberKey = prepared.master.purposeKey(Self.rememberPurpose)
        var secondFactor = options.secondFactor.map {
            SecondFactor(provider: $0.provider, code: TwoFactorRules.normalisedCode($0.code, provider: $0.provider), remember: $0.remember)
        }
        var sentRemembered = false
        if secondFactor == nil, let sealed = prepared.remembered?.sealedTwoFactorToken,
           let token = try? EncString(sealed).decrypt(key: rememberKey) {
            secondFactor = SecondFactor(provider: .remember, code: String(decoding: token, as: UTF8.self), remember: false)
            sentRemembered = true
        }
        let outcome: LoginOutcome
        do {
            outcome = try await api.login(email: normalised, passwordHash: prepared.master.serverAuthorizationHash(password: password),
                                          deviceIdentifier: prepared.deviceIdentifier, deviceName: configuration.deviceName,
                                          secondFactor: secondFactor, newDeviceCode: options.newDeviceCode?.filter { !$0.isWhitespace })
        } catch let error as ServerCallError {
            throw Self.onlineOnly(error)
        }
        switch outcome {
        case .tokens(let tokens):
            if let token = tokens.twoFactorToken, secondFactor?.provider != .remember {
                let sealed = try cryptoCall { try EncString.encrypt(Array(token.utf8), key: rememberKey, random: random).serialized }
                try await updateRemembered(email: normalised, sealedToken: sealed)
            }
            try await finishLogin(email: normalised, password: password, kdf: prepared.kdf, master: prepared.master,
                                  deviceIdentifier: prepared.deviceIdentifier, tokens: tokens, apiKey: nil)
        case .twoFactorRequired(let challenge):
            if sentRemembered {
                // The server no longer accepts the remembered token (expired, revoked, password
                // changed): forget it, and ask for a code as if it had never been there.
                logger.info("the remembered two-step login was not accepted; asking for a code")
                try await updateRemembered(email: normalised, sealedToken: nil)
            }
            throw VaultError.twoFactorRequired(challenge)
        case .invalidTwoFactorCode(let message):
            throw VaultError.twoFactorCodeInvalid(provider: secondFactor?.provider ?? .authenticator, message: message)
        case .newDeviceVerificationRequired:
            throw VaultError.newDeviceVerificationRequired(email: normalised)
        case .invalidNewDeviceCode:
            throw VaultError.newDeviceCodeInvalid
        case .wrongPassword:
            throw VaultError.loginRefused
        case .invalidClient:
            throw VaultError.serverRefused(status: 400, message: "invalid_client")
        }
    }

    /// Replaces (or with `nil` forgets) the remembered two-step token of `email`.
    func updateRemembered(email: String, sealedToken: String?) async throws {
        let now = clock.now().microsecondsSinceEpoch
        try await write { tx in try tx.rememberedLogins.setSealedTwoFactorToken(sealedToken, email: email, at: now) }
    }

    /// Stores what a successful login returned (the wrapped keys for offline unlock, the sealed
    /// tokens, the pinned KDF) and leaves the vault unlocked; then fetches the vault.
    func finishLogin(email normalised: String, password: String, kdf: KdfConfiguration, master: MasterKey, deviceIdentifier: String,
                     tokens: TokenResponse, apiKey: APIKeyCredentials?) async throws {
        guard let protectedKey = tokens.key else { throw VaultError.serverRefused(status: 200, message: "the token response has no Key") }
        let userKey: SymmetricCryptoKey
        do {
            userKey = try master.decryptUserKeyMapped(try cryptoCall { try EncString(protectedKey) })
        } catch VaultError.wrongPassword where apiKey == nil {
            // The server accepted this password's hash, so the key it sent should open with it: the answer is at
            // fault, not the password (RELIABILITY bug 66: "Invalid master password" for a password that was right).
            throw VaultError.serverAnswerInvalid("the account key in the login's answer does not open with this password, which the server accepted")
        }
        guard let userID = Self.subject(ofJWT: tokens.accessToken) else {
            throw VaultError.serverRefused(status: 200, message: "the access token has no subject")
        }
        // The subject names the user's folders in the profile (attachment cache and staging): a server
        // that sends anything but a user id is refused here, before any of it is kept.
        guard DiskName.isUUID(userID) else {
            throw VaultError.serverAnswerInvalid("the access token's subject is not a user id")
        }
        guard tokens.refreshToken != nil || apiKey != nil else {
            throw VaultError.serverAnswerInvalid("the token response has no refresh token")
        }
        let sessionTokens = SessionTokens(accessToken: tokens.accessToken, refreshToken: tokens.refreshToken, apiKey: apiKey)
        let account = AccountRecord(
            userID: userID, email: normalised, deviceIdentifier: deviceIdentifier, kdf: kdf, protectedUserKey: protectedKey,
            localAuthorizationHash: master.localAuthorizationHash(password: password), encryptedPrivateKey: tokens.privateKey,
            publicKey: nil, sealedTokens: try Sealed.seal(sessionTokens, key: userKey), createdAt: clock.now().microsecondsSinceEpoch)
        let now = clock.now().microsecondsSinceEpoch
        try await write { tx in
            try tx.accounts.storeLogin(account)
            try tx.rememberedLogins.addIfMissing(RememberedLoginRow(email: normalised, deviceIdentifier: deviceIdentifier,
                                                                    sealedTwoFactorToken: nil, updatedAt: now))
        }
        session = UnlockedSession(userID: userID, email: normalised, keys: VaultKeys(userKey: userKey), tokens: sessionTokens)
        await recordContact(success: true)
        try await pull()
    }

    /// Unlocks with the master password, without the server (seed 000 §4: the 2-iteration local hash).
    public func unlock(email: String, password: String) async throws {
        let normalised = MasterKey.normaliseSalt(email)
        guard let account = try await read({ tx in try tx.accounts.find(email: normalised) }) else {
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
        // The reads of an unlock are point reads on this thread: each hop to the store's queue and back is a
        // thread wake-up, which on a busy machine costs more than the read (every command of the CLI unlocks).
        guard let account = try readNow({ tx in try tx.accounts.find(email: payload.email) }) else {
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
        keys.organizationKeys = try organizationKeys(userID: account.userID, account: account, userKey: userKey)
        session = UnlockedSession(userID: account.userID, email: normalised, keys: keys, tokens: tokens)
        if let offset = try readNow({ tx in try tx.syncState(of: account.userID).current()?.clockOffset }),
           let value = try? JSONDecoder().decode(ServerClockOffset.self, from: Data(offset.utf8)) {
            clockOffsetBox.restore(value)
        }
        try await purgeDrafts()
    }

    /// The email of the unlocked account.
    public var currentEmail: String? { session?.email }

    /// Whether no keys are held (locked, or never unlocked).
    public var isLocked: Bool { session == nil }

    /// Forgets the keys (and tokens) held in memory.
    public func lock() async {
        if nameIndexSealing != nil { await sealNameIndexInMemory() }
        session = nil
        nameIndexInMemory = nil
        liveTask?.cancel()
    }

    /// Removes the account and everything of it on this device: cache, queue, drafts (seed 001 §10.3).
    /// When the vault is unlocked, the server is first asked to end this device's session (token
    /// revocation), so a copy of the refresh token taken from this device stops working too. Returns
    /// whether the server confirmed that; logging out never waits on it to succeed.
    ///
    /// What this device keeps of the account across logouts (its device identifier and a remembered
    /// two-step login, sealed) stays unless `forgetDevice`: then the next login here is a new device
    /// that must give a code again.
    @discardableResult
    public func logout(email: String, forgetDevice: Bool = false) async throws -> Bool {
        let normalised = MasterKey.normaliseSalt(email)
        var revoked = false
        if (try? requireUsableServer()) != nil, let current = session, current.email == normalised, let refreshToken = current.tokens?.refreshToken {
            do {
                try await api.revoke(token: refreshToken)
                revoked = true
            } catch {
                logger.info("the server was not told about the logout", metadata: ["reason": "\(error)"])
            }
        }
        if let account = try await read({ tx in try tx.accounts.find(email: normalised) }) {
            attachmentCache(userID: account.userID).removeAll()
        }
        try await write { tx in
            try tx.accounts.remove(email: normalised)
            if forgetDevice { try tx.rememberedLogins.remove(email: normalised) }
        }
        if session?.email == normalised {
            session = nil
            nameIndexInMemory = nil
        }
        return revoked
    }

    /// How many changes of an account wait for the server (readable while locked: the count is not secret).
    public func queuedChangeCount(email: String) async throws -> Int {
        let normalised = MasterKey.normaliseSalt(email)
        return try await read { tx in try tx.accounts.queuedChangeCount(email: normalised) }
    }

    /// Whether this device keeps a remembered two-step login for `email` (the token itself stays
    /// sealed; this only tells that one is there).
    public func hasRememberedTwoFactor(email: String) async throws -> Bool {
        let normalised = MasterKey.normaliseSalt(email)
        return try await read { tx in try tx.rememberedLogins.find(email: normalised)?.sealedTwoFactorToken != nil }
    }

    /// The accounts on this device.
    public func accounts() async throws -> [String] {
        try await read { tx in try tx.accounts.emails() }
    }

    /// Unwraps the organization keys of the profile's confirmed memberships; one bad key only costs
    /// that organization (organizations.md §1.4).
    func organizationKeys(userID: String, account: AccountRecord, userKey: SymmetricCryptoKey) throws -> [String: SymmetricCryptoKey] {
        let rows = try readNow { tx in try tx.organizations(of: userID).all() }
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
        claim("sub", ofJWT: token)?.lowercased()
    }

    /// A string claim of a JWT (decoded without verifying, as clients do).
    static func claim(_ name: String, ofJWT token: String) -> String? {
        let parts = token.split(separator: ".")
        guard parts.count == 3 else { return nil }
        var base64 = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.utf8.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64), let object = try? JSONParser.parseObject(data) else { return nil }
        return object[name]?.stringValue
    }

    /// Errors of calls that only make sense online (login, register).
    static func onlineOnly(_ error: ServerCallError) -> VaultError {
        switch error {
        case .http(let status, let message) where !(400..<500).contains(status):
            // A 5xx (or a stray redirect) says "not now", not "no" (docs/RELIABILITY.md, "What a failed call means").
            // A 408 or 429 is also "not now" to the queue, but to a person it is the server's answer, reason and all.
            return .serverUnreachable("it answered \(status) (\(message)); try again later")
        case .http(let status, let message): return .serverRefused(status: status, message: message)
        case .createdSinceDeleted(_, let message): return .serverRefused(status: 410, message: message)
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
