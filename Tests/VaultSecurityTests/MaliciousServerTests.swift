import AsyncHTTPClient
import Crypto
import _CryptoExtras
import Foundation
import Testing
import VaultAPI
import VaultClient
import VaultCrypto
import VaultModels
import VaultServer
import VaultStore
import VaultTestSupport

/// A malicious server: the real server behind a proxy that rewrites its answers field by field (the
/// attacks of docs/SECURITY.md, each with the refusal that answers it). Nothing here is a mock: the
/// account, the keys and the items are real; only what the server says is changed on the wire.
@Suite("Security: a malicious server gets nothing", .serialized, .timeLimit(.minutes(5)))
struct MaliciousServerTests {
    /// The real server, a tampering proxy in front of it, and an account registered through the proxy.
    struct Setup {
        let server: LiveServer
        let proxy: FaultProxy
        let email = uniqueEmail("malice")
        let password = "correct horse battery staple"

        static func start() async throws -> Setup {
            let server = LiveServer()
            try await server.start()
            let proxy = FaultProxy(upstream: await server.url)
            try await proxy.start()
            return Setup(server: server, proxy: proxy)
        }

        func device(register kdf: KdfConfiguration? = nil) async throws -> SecureDevice {
            let device = try SecureDevice.make(url: await proxy.url)
            if let kdf { try await device.engine.register(email: email, password: password, kdf: kdf) }
            return device
        }

        /// What the client sent after the `index`-th request.
        func requests(after index: Int) async -> [String] { Array(await proxy.requestLog.dropFirst(index)) }

        func stop() async {
            await proxy.stop()
            await server.destroy()
        }
    }

    /// Rewrites the prelogin answer's KDF settings.
    static func prelogin(_ kdf: KdfConfiguration) -> FaultProxy.Tamper {
        { method, path, _ in
            guard method == "POST", path.hasSuffix("/accounts/prelogin") else { return nil }
            var object: JSONObject = ["kdf": .int(kdf.typeCode), "kdfIterations": .int(kdf.iterations)]
            object["kdfMemory"] = kdf.memoryMiB.map(JSONValue.int) ?? .null
            object["kdfParallelism"] = kdf.parallelism.map(JSONValue.int) ?? .null
            return JSONValue.object(object).serialized()
        }
    }

    /// Rewrites `/api/sync`'s JSON.
    static func sync(_ rewrite: @escaping @Sendable (inout JSONObject) -> Void) -> FaultProxy.Tamper {
        { method, path, body in
            guard method == "GET", path.hasPrefix("/api/sync"), var object = try? JSONParser.parseObject(body) else { return nil }
            rewrite(&object)
            return JSONValue.object(object).serialized()
        }
    }

    /// Rewrites one item of `/api/sync`.
    static func cipher(_ id: String, _ rewrite: @escaping @Sendable (inout JSONObject) -> Void) -> FaultProxy.Tamper {
        sync { object in
            object["ciphers"] = .array((object["ciphers"]?.arrayValue ?? []).map { entry in
                guard var cipher = entry.objectValue, cipher["id"]?.stringValue == id else { return entry }
                rewrite(&cipher)
                return .object(cipher)
            })
        }
    }

    // MARK: KDF downgrade (BW07)

    @Test("a device that has unlocked the account refuses weaker KDF settings before deriving or sending anything")
    func pinnedKdfIsNeverWeakened() async throws {
        let setup = try await Setup.start()
        defer { Task { await setup.stop() } }
        // An Argon2id account (small settings above the current minimums, to keep the test quick), registered here: pinned.
        let pinned = KdfConfiguration.argon2id(iterations: 3, memoryMiB: 32, parallelism: 1)
        let device = try await setup.device(register: pinned)
        let attacks: [KdfConfiguration] = [
            // Still Argon2id and still above the current minimums, but cheaper than this account's.
            .argon2id(iterations: 2, memoryMiB: 16, parallelism: 1),
            .argon2id(iterations: 3, memoryMiB: 16, parallelism: 4),
            .pbkdf2(iterations: 5_000),
            // More PBKDF2 iterations than any real account still lose Argon2id's memory-hardness.
            .pbkdf2(iterations: 2_000_000),
        ]
        for attack in attacks {
            await setup.proxy.setTamper(Self.prelogin(attack))
            let before = await setup.proxy.requestLog.count
            await #expect(throws: VaultError.kdfWeakened(pinned: pinned, offered: attack)) {
                try await device.engine.login(email: setup.email, password: setup.password)
            }
            // The prelogin was asked; the password hash never left.
            #expect(await setup.requests(after: before) == ["POST /identity/accounts/prelogin"], "\(attack.spec)")
        }
        // The honest answer still logs in.
        await setup.proxy.setTamper(nil)
        try await device.engine.login(email: setup.email, password: setup.password)
    }

    @Test("a first login on a device refuses settings below the current minimums unless the user confirms exactly them")
    func firstLoginBelowMinimums() async throws {
        let setup = try await Setup.start()
        defer { Task { await setup.stop() } }
        _ = try await setup.device(register: .defaultPBKDF2)
        // The account really has 600,000 iterations; the server says 5,000 to a new device.
        await setup.proxy.setTamper(Self.prelogin(.pbkdf2(iterations: 5_000)))
        let newDevice = try await setup.device()
        let before = await setup.proxy.requestLog.count
        await #expect(throws: VaultError.kdfBelowMinimums(offered: .pbkdf2(iterations: 5_000))) {
            try await newDevice.engine.login(email: setup.email, password: setup.password)
        }
        #expect(await setup.requests(after: before) == ["POST /identity/accounts/prelogin"])
        // A confirmation of other settings than those announced lifts nothing.
        await #expect(throws: VaultError.kdfBelowMinimums(offered: .pbkdf2(iterations: 5_000))) {
            try await newDevice.engine.login(email: setup.email, password: setup.password, acceptingKdf: .pbkdf2(iterations: 100_000))
        }
        // Settings no account can have (1 iteration) are the same refusal, not an answer "not understood"
        // (RELIABILITY bug 66: exit 7, which a script takes for "offline, try later"), and nothing is sent either.
        await setup.proxy.setTamper { method, path, _ in
            guard method == "POST", path.hasSuffix("/accounts/prelogin") else { return nil }
            return Array(#"{"kdf":0,"kdfIterations":1,"kdfMemory":null,"kdfParallelism":null}"#.utf8)
        }
        let beforeUnusable = await setup.proxy.requestLog.count
        await #expect {
            try await newDevice.engine.login(email: setup.email, password: setup.password)
        } throws: { error in
            guard case VaultError.kdfUnusable(let reason) = error else { return false }
            return reason.contains("PBKDF2 iterations is 1")
        }
        #expect(await setup.requests(after: beforeUnusable) == ["POST /identity/accounts/prelogin"])
        // The message names the settings and how to confirm them.
        let message = VaultError.kdfBelowMinimums(offered: .pbkdf2(iterations: 5_000)).description
        #expect(message.contains("PBKDF2-SHA256 with 5,000 iterations") && message.contains("pbkdf2:5000"))
        // With the true answer the new device logs in, and pins it.
        await setup.proxy.setTamper(nil)
        try await newDevice.engine.login(email: setup.email, password: setup.password)
        #expect(try await newDevice.engine.accountKdf() == .defaultPBKDF2)
    }

    @Test("a legacy account below the minimums logs in once the user confirms its exact settings, and is pinned")
    func confirmedLegacySettings() async throws {
        let setup = try await Setup.start()
        defer { Task { await setup.stop() } }
        _ = try await setup.device(register: securityKDF)
        let device = try await setup.device()
        await #expect(throws: VaultError.kdfBelowMinimums(offered: securityKDF)) {
            try await device.engine.login(email: setup.email, password: setup.password)
        }
        try await device.engine.login(email: setup.email, password: setup.password, acceptingKdf: securityKDF)
        // Pinned now: the next login needs no confirmation, a weaker one is refused.
        try await device.engine.login(email: setup.email, password: setup.password)
        await setup.proxy.setTamper(Self.prelogin(.pbkdf2(iterations: 50_000)))
        await #expect(throws: VaultError.kdfWeakened(pinned: securityKDF, offered: .pbkdf2(iterations: 50_000))) {
            try await device.engine.login(email: setup.email, password: setup.password)
        }
    }

    // MARK: Plain HTTP

    @Test("plain HTTP to another machine is refused before any request; loopback and https are allowed")
    func plainHTTPRefused() async throws {
        // `.invalid` never resolves (RFC 2606): nothing could be sent even if the check were missing.
        let device = try SecureDevice.make(url: "http://vault.vaultsync-test.invalid")
        await #expect(throws: VaultError.self) { try await device.engine.login(email: "a@example.com", password: "x") }
        do {
            try await device.engine.login(email: "a@example.com", password: "x")
        } catch VaultError.insecureServer(let reason) {
            #expect(reason.contains("plain HTTP"))
        }
        await #expect(throws: VaultError.self) {
            try await device.engine.register(email: "a@example.com", password: "x", kdf: securityKDF)
        }
    }

    // MARK: Injected organizations (BW08)

    @Test("an organization the server announces is reported and never encrypts the user's data until trusted")
    func injectedOrganization() async throws {
        let setup = try await Setup.start()
        defer { Task { await setup.stop() } }
        let device = try await setup.device(register: securityKDF)
        // The attacker knows the user's public key (it is public) and wraps an organization key it chose.
        let publicKey = try await Self.publicKey(url: await setup.server.url, email: setup.email, password: setup.password)
        let attackerKey = SymmetricCryptoKey.generate()
        let wrapped = try publicKey.wrap(attackerKey).serialized
        let fakeID = UUID().uuidString.lowercased()
        await setup.proxy.setTamper(Self.sync { object in
            var profile = object["profile"]?.objectValue ?? [:]
            profile["organizations"] = .array([.object([
                "id": .string(fakeID), "name": .string("IT Department"), "status": .int(2), "type": .int(2),
                "enabled": .bool(true), "key": .string(wrapped), "object": .string("profileOrganization"),
            ])])
            object["profile"] = .object(profile)
        })
        let report = try await device.engine.sync()
        #expect(report.messages.contains { $0.contains("New organization membership") && $0.contains(fakeID) }, "\(report.messages)")
        let listed = try await device.engine.organizations()
        #expect(listed.map(\.id) == [fakeID] && listed.first?.keyAvailable == true && listed.first?.trusted == false)
        // A new item for it is refused before anything is stored or sent.
        let before = await setup.proxy.requestLog.count
        var item = CipherView(type: .login, name: "VPN")
        item.organizationId = fakeID
        item.login = LoginView(username: "alice", password: "the real VPN password")
        await #expect(throws: VaultError.self) { try await device.engine.addItem(item) }
        do {
            _ = try await device.engine.addItem(item)
        } catch VaultError.organizationNotTrusted(let label) {
            #expect(label.contains("IT Department") && label.contains(fakeID))
        }
        #expect(await setup.requests(after: before).isEmpty)
        let items = try await device.engine.items()
        let pending = try await device.engine.pendingCount()
        #expect(items.isEmpty && pending == 0)
        // The next sync does not report it again.
        let again = try await device.engine.sync()
        #expect(!again.messages.contains { $0.contains("New organization membership") })
    }

    @Test("a trusted organization whose key the server swaps is refused again, with a notice")
    func swappedOrganizationKey() async throws {
        let setup = try await Setup.start()
        defer { Task { await setup.stop() } }
        let device = try await setup.device(register: securityKDF)
        let organizationID = try await Self.createOrganization(url: await setup.server.url, email: setup.email, password: setup.password)
        try await device.engine.pull()
        try await device.engine.trustOrganization(id: organizationID)
        var shared = CipherView(type: .login, name: "Shared wifi")
        shared.organizationId = organizationID
        shared.login = LoginView(username: "guest", password: "first")
        shared.collectionIds = try await Self.collectionIDs(url: await setup.server.url, email: setup.email, password: setup.password)
        let saved = try await device.engine.addItem(shared).value
        #expect(try await device.engine.organizations().first?.trusted == true)

        // The server now hands out another organization key, wrapped to the user's public key.
        let publicKey = try await Self.publicKey(url: await setup.server.url, email: setup.email, password: setup.password)
        let swapped = try publicKey.wrap(SymmetricCryptoKey.generate()).serialized
        await setup.proxy.setTamper(Self.sync { object in
            var profile = object["profile"]?.objectValue ?? [:]
            profile["organizations"] = .array((profile["organizations"]?.arrayValue ?? []).map { entry in
                var organization = entry.objectValue ?? [:]
                organization["key"] = .string(swapped)
                return .object(organization)
            })
            object["profile"] = .object(profile)
        })
        let report = try await device.engine.sync()
        #expect(report.messages.contains { $0.contains("another key") && $0.contains(organizationID) }, "\(report.messages)")
        #expect(try await device.engine.organizations().first?.keyChanged == true)
        // A new item for it would be encrypted under the server's key: refused before anything is sent.
        var another = CipherView(type: .login, name: "Shared alarm code")
        another.organizationId = organizationID
        another.collectionIds = shared.collectionIds
        another.login = LoginView(username: "guest", password: "4711")
        let before = await setup.proxy.requestLog.count
        await #expect(throws: VaultError.organizationKeyChanged("\"Family\" (\(organizationID))")) {
            try await device.engine.addItem(another)
        }
        #expect(await setup.requests(after: before).isEmpty)
        // The item saved under the trusted key no longer opens with the swapped one: it is reported, not shown.
        let stored = try #require(try await device.engine.items().first { $0.id == saved.id })
        if case .success = stored.result { Issue.record("an item opened with a swapped organization key") }
    }

    // MARK: Item-key downgrade and swapped items (BW10, BW04/05)

    @Test("a server version that drops an item's key (here: another item's fields pasted in) does not replace the local copy")
    func droppedItemKey() async throws {
        let setup = try await Setup.start()
        defer { Task { await setup.stop() } }
        let device = try await setup.device(register: securityKDF)
        var bank = CipherView(type: .login, name: "Bank")
        bank.login = LoginView(username: "alice", password: "bank password")
        let saved = try await device.engine.addItem(bank).value
        // A legacy item without an item key (fields under the user key), as older clients wrote them.
        let legacyFields = try await Self.legacyItemFields(url: await setup.server.url, email: setup.email, password: setup.password,
                                                           name: "Decoy", password: "attacker-chosen")
        try await device.engine.pull()
        let bankID = try #require(saved.id)
        // The server serves Bank without its key, with the legacy item's ciphertexts: they decrypt.
        await setup.proxy.setTamper(Self.cipher(bankID) { cipher in
            cipher["key"] = .null
            for (field, value) in legacyFields { cipher[field] = value }
            cipher["revisionDate"] = .string("2099-01-01T00:00:00.000000Z")
        })
        let report = try await device.engine.sync()
        #expect(report.messages.contains { $0.contains("lost their item key") }, "\(report.messages)")
        let bankNow = try #require(try await device.engine.items().compactMap { try? $0.result.get() }.first { $0.id == bankID })
        #expect(bankNow.name == "Bank" && bankNow.login?.password == "bank password" && bankNow.itemKey != nil)
    }

    /// A device with an item "Bank" whose password went from "old password" to "new password", and the
    /// server's answer for the old version, as an attacker who kept it would serve it again.
    static func bankWithOldVersion(_ setup: Setup) async throws -> (device: SecureDevice, bankID: String, oldJSON: JSONObject) {
        let device = try await setup.device(register: securityKDF)
        var bank = CipherView(type: .login, name: "Bank")
        bank.login = LoginView(username: "alice", password: "old password")
        let saved = try await device.engine.addItem(bank).value
        let bankID = try #require(saved.id)
        let session = try await rawSession(url: await setup.server.url, email: setup.email, password: setup.password)
        let oldJSON = try JSONParser.parseObject(try await session.api.getCipher(id: bankID, token: session.tokens.accessToken).jsonBytes())
        var changed = saved
        changed.login?.password = "new password"
        _ = try await device.engine.updateItem(changed)
        return (device, bankID, oldJSON)
    }

    @Test("an older version of an item served again (a rollback) does not replace the newer local copy")
    func rolledBackItem() async throws {
        let setup = try await Setup.start()
        defer { Task { await setup.stop() } }
        let (device, bankID, oldJSON) = try await Self.bankWithOldVersion(setup)
        // The server now serves the old version (as it was: a valid, authenticated old ciphertext).
        await setup.proxy.setTamper(Self.cipher(bankID) { cipher in
            let object = cipher["object"]
            cipher = oldJSON
            cipher["object"] = object
        })
        let report = try await device.engine.sync()
        #expect(report.messages.contains { $0.contains("older versions") }, "\(report.messages)")
        let bankNow = try #require(try await device.engine.items().compactMap { try? $0.result.get() }.first { $0.id == bankID })
        #expect(bankNow.login?.password == "new password")
    }

    /// RELIABILITY bug 66: a token answer whose account key did not open said "Invalid master password", for a
    /// password the server had just accepted.
    @Test("a login answer whose account key does not open with the accepted password is the answer's fault, not the password's")
    func tamperedAccountKey() async throws {
        let setup = try await Setup.start()
        defer { Task { await setup.stop() } }
        _ = try await setup.device(register: securityKDF)
        await setup.proxy.setTamper { method, path, body in
            guard method == "POST", path.hasSuffix("/connect/token"), var object = try? JSONParser.parseObject(body),
                  let text = object["Key"]?.stringValue ?? object["key"]?.stringValue, let key = try? EncString(text), var mac = key.mac else { return nil }
            mac[0] ^= 0xFF
            let tampered = (try? EncString(type: key.type, iv: key.iv, ciphertext: key.ciphertext, mac: mac).serialized) ?? text
            object[object["Key"] != nil ? "Key" : "key"] = .string(tampered)
            return object.serialized()
        }
        let device = try await setup.device()
        await #expect {
            try await device.engine.login(email: setup.email, password: setup.password, acceptingKdf: securityKDF)
        } throws: { error in
            guard case VaultError.serverAnswerInvalid(let reason) = error else { return false }
            return reason.contains("does not open with this password")
        }
        #expect(await device.engine.isUnlocked == false)
    }

    /// RELIABILITY bug 66: one answer dating an item 9999-12-31 was stored, and every genuine update after it was
    /// then refused as "older" for good.
    @Test("an item a server once dated far in the future does not refuse the genuine versions after it")
    func farFutureDateHeals() async throws {
        let setup = try await Setup.start()
        defer { Task { await setup.stop() } }
        let (device, bankID, _) = try await Self.bankWithOldVersion(setup)
        await setup.proxy.setTamper(Self.cipher(bankID) { cipher in cipher["revisionDate"] = .string("9999-12-31T00:00:00.000000Z") })
        _ = try await device.engine.sync()
        await setup.proxy.setTamper(nil)
        // Another device changes it, honestly: the device takes that version, not refusing it as older.
        let other = try await setup.device()
        try await other.engine.login(email: setup.email, password: setup.password, acceptingKdf: securityKDF)
        var fromOther = try #require(try await other.engine.items().compactMap { try? $0.result.get() }.first { $0.id == bankID })
        fromOther.login?.password = "changed elsewhere"
        _ = try await other.engine.updateItem(fromOther)
        let report = try await device.engine.sync()
        #expect(!report.messages.contains { $0.contains("older versions") }, "\(report.messages)")
        let bankNow = try #require(try await device.engine.items().compactMap { try? $0.result.get() }.first { $0.id == bankID })
        #expect(bankNow.login?.password == "changed elsewhere")
    }

    @Test("a fresh device's first answer that lists an item twice, the older copy second, keeps the newer one")
    func repeatedItemOnFreshDevice() async throws {
        let setup = try await Setup.start()
        defer { Task { await setup.stop() } }
        let (_, bankID, oldJSON) = try await Self.bankWithOldVersion(setup)
        // The answer lists the current version, then the old one again under the same id. A device with nothing
        // cached skips the comparison with its cache (there is nothing to compare with), but not for an id the
        // same answer has already given it.
        await setup.proxy.setTamper(Self.sync { object in
            var ciphers = object["ciphers"]?.arrayValue ?? []
            guard let current = ciphers.first?.objectValue else { return }
            var old = oldJSON
            old["object"] = current["object"]
            ciphers.append(.object(old))
            object["ciphers"] = .array(ciphers)
        })
        let fresh = try await setup.device()
        try await fresh.engine.login(email: setup.email, password: setup.password, acceptingKdf: securityKDF)
        let bankNow = try #require(try await fresh.engine.items().compactMap { try? $0.result.get() }.first { $0.id == bankID })
        #expect(bankNow.login?.password == "new password")
    }

    @Test("an answer damaged after more than two of the pull's batches of items stores none of them")
    func damagedAfterBatches() async throws {
        let setup = try await Setup.start()
        defer { Task { await setup.stop() } }
        let device = try await setup.device(register: securityKDF)
        let bank = try await device.engine.addItem(CipherView(type: .login, name: "Bank")).value
        // Another client imports 1,300 items: more than two batches of the pull's pipeline (500 each).
        let session = try await Self.rawSession(url: await setup.server.url, email: setup.email, password: setup.password)
        let keys = VaultKeys(userKey: session.userKey)
        for start in stride(from: 0, to: 1_300, by: 325) {
            let ciphers = try (start..<(start + 325)).map { index in
                JSONValue.object(try keys.newItem(type: .secureNote, name: "Imported \(index)").encrypted(with: keys).requestObject())
            }
            _ = try await session.api.rawJSON(.POST, "/api/ciphers/import", token: session.tokens.accessToken,
                                              body: .object(["ciphers": .array(ciphers), "folders": .array([]), "folderRelationships": .array([])]))
        }
        // The answer ends in an entry that is not an item: the pull fails, and the items stored before the entry
        // was reached go with the transaction.
        await setup.proxy.setTamper(Self.sync { object in
            object["ciphers"] = .array((object["ciphers"]?.arrayValue ?? []) + [.number("7")])
        })
        await #expect(throws: VaultError.serverAnswerInvalid("sync.ciphers[1301] is not an object")) { try await device.engine.pull() }
        #expect(try await device.engine.items().map(\.id) == [bank.id])
        // The same answer undamaged stores them all.
        await setup.proxy.setTamper(nil)
        try await device.engine.pull()
        let items = try await device.engine.items().compactMap { try? $0.result.get() }
        #expect(items.count == 1_301)
        #expect(Set(items.map(\.name)).count == 1_301)
    }

    @Test("an item key of 32 bytes (no MAC half) is refused: its type 0 fields are never shown")
    func shortItemKey() async throws {
        let setup = try await Setup.start()
        defer { Task { await setup.stop() } }
        let device = try await setup.device(register: securityKDF)
        let userKey = try await Self.userKey(url: await setup.server.url, email: setup.email, password: setup.password)
        // The attacker cannot forge under the user key, but a server that once saw a type-2 wrap of a
        // 32-byte key (or any legacy client's) could serve an item whose fields need no MAC.
        let shortKey = try SymmetricCryptoKey(bytes: [UInt8](repeating: 7, count: 32))
        let wrappedShort = try shortKey.withUnsafeBytes { try EncString.encrypt($0, key: userKey) }
        let type0Name = try Self.type0(Array("Injected".utf8), key: [UInt8](repeating: 7, count: 32))
        let injectedID = UUID().uuidString.lowercased()
        await setup.proxy.setTamper(Self.sync { object in
            var ciphers = object["ciphers"]?.arrayValue ?? []
            ciphers.append(.object([
                "id": .string(injectedID), "object": .string("cipherDetails"), "type": .int(2), "name": .string(type0Name),
                "key": .string(wrappedShort.serialized), "secureNote": .object(["type": .int(0)]),
                "revisionDate": .string("2026-01-01T00:00:00.000000Z"), "creationDate": .string("2026-01-01T00:00:00.000000Z"),
                "reprompt": .int(0), "favorite": .bool(false), "edit": .bool(true), "viewPassword": .bool(true),
            ]))
            object["ciphers"] = .array(ciphers)
        })
        _ = try await device.engine.sync()
        let injected = try #require(try await device.engine.items().first { $0.id == injectedID })
        switch injected.result {
        case .success(let view): Issue.record("an item under a 32-byte key was shown: \(view.name)")
        case .failure: break
        }
    }

    // MARK: Helpers (a second, raw API session of the same user: what an attacker or an admin knows)

    static func rawSession(url: String, email: String, password: String) async throws -> (api: BitwardenAPI, tokens: TokenResponse, userKey: SymmetricCryptoKey) {
        let api = BitwardenAPI(baseURL: url, httpClient: HTTPClient.shared)
        let kdf = try await api.prelogin(email: email)
        let master = try MasterKey.derive(password: password, salt: email, kdf: kdf)
        let tokens = try await api.login(email: email, passwordHash: master.serverAuthorizationHash(password: password),
                                         deviceIdentifier: UUID().uuidString, deviceName: "attacker-view").tokens()
        return (api, tokens, try master.decryptUserKey(EncString(tokens.key!)))
    }

    static func userKey(url: String, email: String, password: String) async throws -> SymmetricCryptoKey {
        try await rawSession(url: url, email: email, password: password).userKey
    }

    static func publicKey(url: String, email: String, password: String) async throws -> RSAPublicKey {
        let session = try await rawSession(url: url, email: email, password: password)
        return try RSAPrivateKey.decrypt(EncString(session.tokens.privateKey!), userKey: session.userKey).publicKey
    }

    static func createOrganization(url: String, email: String, password: String) async throws -> String {
        let session = try await rawSession(url: url, email: email, password: password)
        let publicKey = try RSAPrivateKey.decrypt(EncString(session.tokens.privateKey!), userKey: session.userKey).publicKey
        let orgKey = SymmetricCryptoKey.generate()
        let body: JSONObject = [
            "name": .string("Family"), "billingEmail": .string(email), "planType": .int(0),
            "key": .string(try publicKey.wrap(orgKey).serialized),
            "collectionName": .string(try EncString.encrypt("Default", key: orgKey).serialized),
        ]
        let org = try await session.api.rawJSON(.POST, "/api/organizations", token: session.tokens.accessToken, body: .object(body))
        return try #require(org["id"]?.stringValue?.lowercased())
    }

    static func collectionIDs(url: String, email: String, password: String) async throws -> [String] {
        let session = try await rawSession(url: url, email: email, password: password)
        return try await session.api.sync(token: session.tokens.accessToken).collections.compactMap { $0["id"]?.stringValue }
    }

    /// Creates a legacy item (no item key) through the API and returns its encrypted fields.
    static func legacyItemFields(url: String, email: String, password: String, name: String,
                                 password itemPassword: String) async throws -> [String: JSONValue] {
        let session = try await rawSession(url: url, email: email, password: password)
        var view = CipherView(type: .login, name: name)
        view.login = LoginView(username: "mallory", password: itemPassword)
        let wire = try view.encrypted(with: VaultKeys(userKey: session.userKey))
        let created = try await session.api.createCipher(wire, token: session.tokens.accessToken)
        let object = try JSONParser.parseObject(created.jsonBytes())
        return ["name": object["name"] ?? .null, "login": object["login"] ?? .null]
    }

    /// An unauthenticated type 0 EncString (AES-256-CBC, no MAC), made with swift-crypto's AES-CBC.
    static func type0(_ plaintext: [UInt8], key: [UInt8]) throws -> String {
        let iv = [UInt8](repeating: 1, count: 16)
        let ciphertext = try AES._CBC.encrypt(plaintext, using: SymmetricKey(data: key), iv: AES._CBC.IV(ivBytes: iv))
        return "0." + Data(iv).base64EncodedString() + "|" + Data(ciphertext).base64EncodedString()
    }
}

