#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Logging
import Testing
import VaultAPI
@testable import VaultClient
import VaultCrypto
import VaultModels
import VaultServer
import VaultStore
import VaultTestSupport

/// Finds known secrets in bytes: as plaintext, and as standard or URL-safe base64 at each of the three
/// byte alignments (a base64 substring depends on where the secret starts in the encoded data).
struct SecretScanner {
    struct Needle {
        var label: String
        var form: String
        var bytes: [UInt8]
    }

    let needles: [Needle]

    init(_ secrets: [(label: String, value: String)]) {
        var needles: [Needle] = []
        for (label, value) in secrets {
            let bytes = Array(value.utf8)
            needles.append(Needle(label: label, form: "plaintext", bytes: bytes))
            for offset in 0..<3 {
                let encoded = Data(Array(repeating: 0, count: offset) + bytes).base64EncodedString()
                // Characters fully determined by the secret's bytes: skip the group holding the prefix, drop the tail.
                let core = Array(encoded.utf8).dropFirst(offset == 0 ? 0 : 4).dropLast(4)
                guard core.count >= 8 else { continue }
                needles.append(Needle(label: label, form: "base64", bytes: Array(core)))
                let url = core.map { $0 == UInt8(ascii: "+") ? UInt8(ascii: "-") : $0 == UInt8(ascii: "/") ? UInt8(ascii: "_") : $0 }
                if url != Array(core) { needles.append(Needle(label: label, form: "base64url", bytes: url)) }
            }
            needles.append(Needle(label: label, form: "hex", bytes: Array(bytes.map { String(format: "%02x", $0) }.joined().utf8)))
        }
        self.needles = needles
    }

    /// "label (form)" for every needle found in `haystack`.
    func findings(in haystack: [UInt8]) -> [String] {
        haystack.withUnsafeBytes { hay in
            needles.filter { needle in
                needle.bytes.withUnsafeBytes { Self.contains(hay, $0) }
            }.map { "\($0.label) (\($0.form))" }
        }
    }

    static func contains(_ haystack: UnsafeRawBufferPointer, _ needle: UnsafeRawBufferPointer) -> Bool {
        byteSearch(haystack, contains: needle)
    }

    /// Every regular file under `directory`, recursively.
    static func files(under directory: String) -> [String] {
        guard let enumerator = FileManager.default.enumerator(atPath: directory) else { return [] }
        return enumerator.compactMap { $0 as? String }.map { directory + "/" + $0 }.filter { path in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && !isDirectory.boolValue
        }
    }
}

@Suite("Security: no secret at rest on the client, none in the logs", .serialized, .timeLimit(.minutes(10 * FuzzSize.scale)))
struct SecretScanTests {
    @Test("the scanner finds a secret in plaintext and in base64 at every alignment")
    func scannerWorks() {
        let scanner = SecretScanner([("pw", "hunter2-very-secret")])
        let secret = Array("hunter2-very-secret".utf8)
        #expect(scanner.findings(in: Array("xx hunter2-very-secret yy".utf8)) == ["pw (plaintext)"])
        for prefix in 0..<3 {
            let encoded = Data(Array(repeating: UInt8(7), count: prefix) + secret + [1, 2]).base64EncodedString()
            #expect(scanner.findings(in: Array(encoded.utf8)).contains("pw (base64)"), "prefix \(prefix)")
        }
        #expect(scanner.findings(in: Array("2.abc|def|ghi".utf8)).isEmpty)
    }

    @Test("after a scripted session no client file holds a secret or its metadata, in any form")
    func clientFiles() async throws {
        let temporary = NSTemporaryDirectory()
        let before = Set((try? FileManager.default.contentsOfDirectory(atPath: temporary)) ?? [])
        let session = try await ScriptedSession.started()
        let scanner = SecretScanner(session.secrets + [("master password", session.password)])
        #expect(scanner.needles.count > session.secrets.count * 4)
        let serverDirectory = (await session.server.dataDirectory as NSString).lastPathComponent
        var scanned: [String: Int] = [:]
        func scanAll(_ moment: String) {
            // The profiles (database, WAL, shared memory, anything else) and any new temporary file.
            var files = session.devices.flatMap { SecretScanner.files(under: $0.profile) }
            let created = Set((try? FileManager.default.contentsOfDirectory(atPath: temporary)) ?? []).subtracting(before)
            // Servers' data directories (this test's and other processes') are not client files.
            for entry in created where entry != serverDirectory && !entry.hasPrefix("vaultsync-live-") && !entry.hasPrefix("vaultsync-test-") {
                let path = temporary + entry
                let inProfiles = session.devices.contains { $0.profile.hasSuffix(entry) }
                if inProfiles { continue }
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { continue }
                files += isDirectory.boolValue ? SecretScanner.files(under: path) : [path]
            }
            for file in files {
                guard let data = readFileKeepingLocks(file) else { continue }
                scanned[(file as NSString).lastPathComponent, default: 0] += data.count
                let found = scanner.findings(in: Array(data))
                #expect(found.isEmpty, "\(moment): \(file) holds \(found)")
            }
        }
        scanAll("with the WAL in use")
        #expect(scanned.keys.contains { $0.hasSuffix("-wal") }, "the WAL was scanned: \(scanned.keys.sorted())")
        for device in session.devices { try device.engine.localStore.checkpoint() }
        scanAll("after a checkpoint")
        // Positive control: the account's email is stored in plaintext (it names the account), and the scan sees it.
        let database = try #require(readFileKeepingLocks(session.devices[0].databasePath))
        #expect(SecretScanner([("email", session.email)]).findings(in: Array(database)).contains("email (plaintext)"))
        // The items really are there (the scan looked at a real vault, not an empty one).
        let items = try await session.devices[0].engine.items().compactMap { try? $0.result.get() }
        #expect(items.count >= 6)
        print("secret scan: \(session.secrets.count) secrets × \(scanner.needles.count / max(1, session.secrets.count + 1)) forms in \(scanned.count) files, \(scanned.values.reduce(0, +)) bytes: \(scanned.keys.sorted())")
        await session.finish()
    }

    @Test("server and client logs at trace level hold no password, hash, token or plaintext value")
    func logs() async throws {
        let session = try await ScriptedSession.started()
        // A raw API client with the captured logger: its tokens are known here, so the logs can be searched for them.
        let master = try MasterKey.derive(password: session.password, salt: session.email, kdf: securityKDF)
        let passwordHash = master.serverAuthorizationHash(password: session.password)
        let api = BitwardenAPI(baseURL: await session.server.url, httpClient: SecurityHTTP.client, logger: session.logs.logger("vaultsync.api"))
        let tokens = try await api.login(email: session.email, passwordHash: passwordHash, deviceIdentifier: UUID().uuidString, deviceName: "log test").tokens()
        _ = try await api.sync(token: tokens.accessToken)
        let refreshToken = try #require(tokens.refreshToken)
        let refreshed = try await api.refresh(refreshToken: refreshToken)
        let rotated = try #require(refreshed.refreshToken)
        _ = try? await api.login(email: session.email, passwordHash: "d3JvbmcgaGFzaA==", deviceIdentifier: "x", deviceName: "wrong password")

        let signature = String(tokens.accessToken.split(separator: ".").last ?? "")
        let scanner = SecretScanner(session.secrets + [
            ("master password", session.password), ("master password hash", passwordHash),
            ("local authorization hash", master.localAuthorizationHash(password: session.password)),
            ("access token", tokens.accessToken), ("access token signature", signature), ("refresh token", refreshToken),
            ("refreshed access token", refreshed.accessToken), ("rotated refresh token", rotated),
        ])
        let lines = session.logs.all
        #expect(lines.count > 10, "the logs were captured: \(lines.count) lines")
        #expect(lines.contains { $0.contains("vaultsync-server") }, "server lines")
        #expect(lines.contains { $0.contains("vaultsync.engine") }, "engine lines")
        var leaks: [String] = []
        for line in lines {
            let found = scanner.findings(in: Array(line.utf8))
            if !found.isEmpty { leaks.append("\(found): \(line.prefix(300))") }
        }
        #expect(leaks.isEmpty, "secrets in logs:\n\(leaks.joined(separator: "\n"))")
        print("log scan: \(lines.count) lines at trace level, \(scanner.needles.count) needles, \(leaks.count) leaks")
        await session.finish()
    }

    @Test("after two-step, remembered and API-key logins no client file and no log holds a code, remember token, authenticator key, recovery code or API secret")
    func signInSecrets() async throws {
        let logs = CapturedLogs()
        let clock = SteppedServerClock()
        let server = LiveServer(logger: logs.logger("vaultsync-server")) { configuration in
            configuration.logLevel = .trace
            configuration.now = { clock.now }
        }
        try await server.start()
        let url = await server.url
        let email = uniqueEmail("signin")
        let password = "Master-\(UUID().uuidString.prefix(12))-password"
        let first = try SecureDevice.make(url: url, logger: logs.logger("vaultsync.engine.first"))
        try await first.engine.register(email: email, password: password, kdf: securityKDF)
        let setup = try await first.engine.authenticatorSetup(password: password)
        let enableCode = try clock.code(setup.key)
        let recovery = try #require(try await first.engine.enableAuthenticator(setup: setup, code: enableCode, password: password))
        let apiKey = try await first.engine.personalAPIKey(password: password)
        clock.nextStep()

        // A second device: two-step login remembered, logout, a login with the remembered token, an API-key login.
        let second = try SecureDevice.make(url: url, logger: logs.logger("vaultsync.engine.second"))
        let loginCode = try clock.code(setup.key)
        try await second.engine.login(email: email, password: password, options: LoginOptions(
            acceptingKdf: securityKDF, secondFactor: SecondFactor(provider: .authenticator, code: loginCode, remember: true)))
        try await second.engine.logout(email: email)
        try await second.engine.login(email: email, password: password, options: LoginOptions(acceptingKdf: securityKDF))
        // The remember token's value, opened the only way there is: with a key from the master password.
        let sealed = try #require(try await second.engine.localStore.readDatabase { db in
            try RememberedLoginRow.fetchOne(db, key: email)?.sealedTwoFactorToken
        })
        let master = try MasterKey.derive(password: password, salt: email, kdf: securityKDF)
        let remember = String(decoding: try EncString(sealed).decrypt(key: master.purposeKey("two-factor-remember")), as: UTF8.self)
        let third = try SecureDevice.make(url: url, logger: logs.logger("vaultsync.engine.third"))
        try await third.engine.login(apiKey: apiKey, password: password)
        await third.engine.invalidateAccessToken()
        _ = try await third.engine.sync()

        let scanner = SecretScanner([
            ("master password", password), ("authenticator key", setup.key), ("recovery code", recovery),
            ("API key secret", apiKey.clientSecret), ("remember token", remember),
        ])
        // Six-digit codes are too short to search for as bytes without false hits; they are looked for
        // as whole words in the logs, next to the fields that carry them.
        let devices = [first, second, third]
        for device in devices { try device.engine.localStore.checkpoint() }
        for file in devices.flatMap({ SecretScanner.files(under: $0.profile) }) {
            guard let data = readFileKeepingLocks(file) else { continue }
            let found = scanner.findings(in: Array(data))
            #expect(found.isEmpty, "\(file) holds \(found)")
        }
        let lines = logs.all
        #expect(lines.count > 10)
        var leaks: [String] = []
        for line in lines {
            let found = scanner.findings(in: Array(line.utf8))
            if !found.isEmpty { leaks.append("\(found): \(line.prefix(300))") }
            for code in [enableCode, loginCode] where line.split(whereSeparator: { !$0.isNumber }).contains(Substring(code)) {
                leaks.append("two-step code: \(line.prefix(300))")
            }
        }
        #expect(leaks.isEmpty, "secrets in logs:\n\(leaks.joined(separator: "\n"))")
        print("sign-in scan: \(lines.count) log lines, \(scanner.needles.count) needles, \(leaks.count) leaks")
        for device in devices {
            await device.engine.shutdown()
            try? FileManager.default.removeItem(atPath: device.profile)
        }
        await server.destroy()
    }
}

