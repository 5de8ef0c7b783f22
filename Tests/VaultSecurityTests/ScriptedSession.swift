import Foundation
import Logging
import Testing
import VaultAPI
import VaultClient
import VaultCrypto
import VaultModels
import VaultServer
import VaultTestSupport

/// A scripted client session touching every kind of secret the client handles: register, items of
/// every type, a folder, a draft, offline edits and creates, a conflict with another device, sync,
/// lock and unlock. Every secret value is unique, so finding one anywhere is unambiguous.
struct ScriptedSession {
    let email = uniqueEmail("scripted")
    let password = "Master-\(UUID().uuidString.prefix(12))-password"
    /// Known plaintext values and metadata, labelled.
    var secrets: [(label: String, value: String)] = []
    let logs = CapturedLogs()
    var devices: [SecureDevice] = []
    let server: LiveServer

    init() {
        let logs = self.logs
        server = LiveServer(logger: logs.logger("vaultsync-server")) { $0.logLevel = .trace }
    }

    mutating func secret(_ label: String) -> String {
        let value = "\(label)-\(UUID().uuidString.prefix(8))-s3cr3t"
        secrets.append((label, value))
        return value
    }

    /// Runs the session; leaves the server running and the devices open (callers stop them).
    mutating func run() async throws {
        try await server.start()
        let url = await server.url
        let deviceA = try SecureDevice.make(url: url, logger: logs.logger("vaultsync.engine.a"))
        let deviceB = try SecureDevice.make(url: url, logger: logs.logger("vaultsync.engine.b"))
        devices = [deviceA, deviceB]
        let a = deviceA.engine
        try await a.register(email: email, password: password, name: secret("account name"), kdf: securityKDF)

        let folder = try await a.createFolder(name: secret("folder name")).value
        var login = CipherView(type: .login, name: secret("login name"))
        login.folderId = folder.id
        login.notes = secret("login notes")
        login.login = LoginView(uris: [LoginURIView(uri: "https://\(secret("uri host")).example/login")],
                                username: secret("username"), password: secret("password"), totp: "otpauth://totp/x?secret=\(secret("TOTP"))")
        login.fields = [FieldView(type: .hidden, name: secret("field name"), value: secret("hidden field value"))]
        let savedLogin = try await a.addItem(login).value
        var card = CipherView(type: .card, name: secret("card name"))
        card.card = CardView(values: [.cardholderName: secret("cardholder"), .number: "4111\(Int.random(in: 100_000_000_000...999_999_999_999))",
                                      .code: secret("card code")])
        secrets.append(("card number", card.card![.number]!))
        _ = try await a.addItem(card)
        var identity = CipherView(type: .identity, name: secret("identity name"))
        identity.identity = IdentityView(values: [.ssn: secret("ssn"), .passportNumber: secret("passport"), .address1: secret("address")])
        _ = try await a.addItem(identity)
        var note = CipherView(type: .secureNote, name: secret("note name"))
        note.notes = secret("secure note body")
        _ = try await a.addItem(note)
        var ssh = CipherView(type: .sshKey, name: secret("ssh name"))
        ssh.sshKey = SSHKeyView(values: [.privateKey: "-----BEGIN OPENSSH PRIVATE KEY-----\n\(secret("ssh private key"))\n-----END OPENSSH PRIVATE KEY-----",
                                         .publicKey: "ssh-ed25519 AAAA", .keyFingerprint: "SHA256:fp"])
        _ = try await a.addItem(ssh)

        // A draft of an edit in progress.
        var draft = savedLogin
        draft.notes = secret("draft notes")
        try await a.saveDraft(draft)

        // Device B edits the login online while A is about to go offline: a conflict.
        let b = deviceB.engine
        try await b.login(email: email, password: password, acceptingKdf: securityKDF)
        var fromB = try #require(try await b.items().compactMap { try? $0.result.get() }.first { $0.id == savedLogin.id })
        fromB.login?.password = secret("password from device B")
        _ = try await b.updateItem(fromB)

        // A goes offline: edits, creates, trashes, a new folder.
        await server.stop()
        var offline = savedLogin
        offline.login?.password = secret("offline password")
        offline.notes = secret("offline notes")
        #expect(try await a.updateItem(offline).outcome.isOffline)
        var created = CipherView(type: .login, name: secret("offline item name"))
        created.login = LoginView(username: secret("offline username"), password: secret("offline item password"))
        #expect(try await a.addItem(created).outcome.isOffline)
        _ = try await a.createFolder(name: secret("offline folder name"))
        let noteID = try #require(try await a.items().compactMap { try? $0.result.get() }.first { $0.type == .secureNote }?.id)
        _ = try await a.softDeleteItem(id: noteID)

        // Lock and unlock while offline, then reconnect and sync (the conflict makes a backup).
        await a.lock()
        try await a.unlock(email: email, password: password)
        try await server.start()
        let report = try await a.sync()
        #expect(report.backups.count == 1, "the conflicting edit is kept as a backup: \(report)")
        _ = try await b.sync()
    }

    /// A session that has run (cleaned up if it fails).
    static func started() async throws -> ScriptedSession {
        var session = ScriptedSession()
        do {
            try await session.run()
        } catch {
            await session.finish()
            throw error
        }
        return session
    }

    func finish() async {
        for device in devices {
            await device.engine.shutdown()
            try? FileManager.default.removeItem(atPath: device.profile)
        }
        await server.destroy()
    }
}
