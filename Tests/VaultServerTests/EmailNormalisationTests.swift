import Foundation
import HTTPTypes
import Hummingbird
import Logging
import Testing
import VaultCrypto
import VaultModels
@testable import VaultServer

/// Account emails are normalised once for every lookup, and registration refuses addresses that only
/// look like an existing one (docs/SECURITY.md, "Attack review 2026-12-01", finding 7); KDF settings
/// that are not integers are refused (finding 8c).
@Suite("Security: look-alike emails reach the existing account or are refused; KDF settings must be integers")
struct EmailNormalisationTests {
    /// A legacy registration body for `email` (the password hash derived with that exact text as salt).
    static func registerBody(email: String, password: String = "correct horse battery staple",
                             change: (inout JSONObject) -> Void = { _ in }) throws -> JSONValue {
        let master = try MasterKey.derive(password: password, salt: email, kdf: TestUser.kdf)
        var body: JSONObject = [
            "email": .string(email), "name": .string("Look-alike"),
            "masterPasswordHash": .string(master.serverAuthorizationHash(password: password)),
            "key": .string(try master.encryptUserKey(SymmetricCryptoKey.generate()).serialized),
            "kdf": .int(0), "kdfIterations": .int(100_000), "kdfMemory": .null, "kdfParallelism": .null,
        ]
        change(&body)
        return .object(body)
    }

    /// Registrations of taken emails would lock the test's address out after 10: not what is tested here.
    static func generousRegistrations(_ configuration: inout ServerConfiguration) { configuration.registrationLockoutThreshold = 1_000 }

    @Test("a trailing newline, NFD, fullwidth letters, Turkish İ and Cyrillic look-alikes are the existing account; invisible characters are refused",
          arguments: Backend.available)
    func lookAlikesRefused(backend: Backend) async throws {
        try await withTestServer(backend, configure: Self.generousRegistrations) { api in
            let tag = UUID().uuidString.prefix(6).lowercased()
            let ascii = "alice-\(tag)@example.com"
            let accented = "jos\u{E9}-\(tag)@example.com"   // é, precomposed (NFC)
            let dotted = "ilse-\(tag)@example.com"
            for email in [ascii, accented, dotted] {
                #expect(try await api.request(.post, "/identity/accounts/register", json: Self.registerBody(email: email)).status == .ok, "\(email)")
            }
            let taken: [(String, String)] = [
                (ascii + "\n", "a trailing newline"),
                ("\t" + ascii + "\r\n", "tabs and CR LF"),
                ("jose\u{301}-\(tag)@example.com", "NFD of an NFC account"),
                ("\u{FF41}lice-\(tag)@example.com", "a fullwidth a"),
                ("ALICE-\(tag)@EXAMPLE.COM", "upper case"),
                ("\u{130}lse-\(tag)@example.com", "Turkish dotted capital I"),
                ("\u{430}lice-\(tag)@example.com", "a Cyrillic a"),
                ("al\u{131}ce-\(tag)@example.com", "a dotless i"),
                ("\u{E1}lice-\(tag)@example.com", "an accented a"),
            ]
            for (email, what) in taken {
                let answer = try await api.request(.post, "/identity/accounts/register", json: Self.registerBody(email: email))
                #expect(answer.status == .badRequest, "\(what): \(answer.message ?? "")")
                #expect(answer.message == "Registration not allowed or user already exists", "\(what)")
            }
            let invisible: [(String, String)] = [
                ("alice\u{200B}-\(tag)@example.com", "a zero-width space"),
                ("alice-\(tag)\u{200D}@example.com", "a zero-width joiner"),
                ("\u{202E}alice-\(tag)@example.com", "a right-to-left override"),
                ("alice-\(tag)@exam\u{FEFF}ple.com", "a byte-order mark"),
                ("alice-\(tag)@exam\u{2066}ple.com", "a bidi isolate"),
                ("alice-\(tag)@exam\u{00AD}ple.com", "a soft hyphen"),
                ("alice \(tag)@example.com", "a space inside"),
            ]
            for (email, what) in invisible {
                let answer = try await api.request(.post, "/identity/accounts/register", json: Self.registerBody(email: email))
                #expect(answer.status == .badRequest, "\(what): \(answer.message ?? "")")
                #expect(answer.object["validationErrors"]?.objectValue?["email"] != nil, "\(what) is named as the email's fault")
            }
            // The first step of the newer sign-up refuses them too.
            let started = try await api.request(.post, "/identity/accounts/register/send-verification-email",
                                                json: .object(["email": .string("alice\u{200B}-\(tag)@example.com")]))
            #expect(started.status == .badRequest)
            // Nothing above made an account: a new, different address still registers.
            #expect(try await api.request(.post, "/identity/accounts/register",
                                          json: Self.registerBody(email: "bob-\(tag)@example.com")).status == .ok)
        }
    }

    @Test("login, prelogin and the known-device question find the account under any look-alike spelling NFKC and case folding join",
          arguments: Backend.available)
    func lookupsNormalised(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let user = try await TestUser.register(api, email: "carol-\(UUID().uuidString.prefix(6).lowercased())@example.com")
            let hash = user.masterKey.serverAuthorizationHash(password: user.password)
            let fullwidth = String(String.UnicodeScalarView(user.email.unicodeScalars.map { scalar in
                ("a"..."z").contains(scalar) ? Unicode.Scalar(scalar.value - 0x61 + 0xFF41)! : scalar
            }))
            for spelling in [user.email + "\n", fullwidth, user.email.uppercased() + " \r\n"] {
                let login = try await api.form("/identity/connect/token", [
                    ("grant_type", "password"), ("username", spelling), ("password", hash), ("scope", "api offline_access"),
                    ("client_id", "cli"), ("deviceType", "25"), ("deviceIdentifier", "device-1"), ("deviceName", "linux"),
                ])
                #expect(login.status == .ok, "login as \(spelling.debugDescription): \(login.message ?? "")")
                // The account's own settings (PBKDF2 100,000 is never a decoy's).
                let prelogin = try await api.request(.post, "/identity/accounts/prelogin", json: .object(["email": .string(spelling)]))
                #expect(prelogin.object["kdfIterations"] == .int(100_000), "prelogin as \(spelling.debugDescription)")
            }
            let known = try await api.request(.get, "/api/devices/knowndevice", headers: [
                HTTPField.Name("X-Request-Email")!: AccessTokenSigner.base64URL(Data(fullwidth.utf8)),
                HTTPField.Name("X-Device-Identifier")!: "device-1",
            ])
            #expect(known.json == .bool(true))
        }
    }

    @Test("an account stored lower-cased before emails were normalised (a non-ASCII address in NFD) is still found")
    func legacyAccountsStillMatch() async throws {
        let directory = NSTemporaryDirectory() + "vaultsync-test-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let repository = VaultRepository(database: try SQLiteDatabase(path: directory + "/vaultsync.sqlite"))
        try await repository.migrate()
        let stored = "jose\u{301}@example.com".lowercased()  // NFD, as the old registration kept it
        // Swift's String equality is canonical equivalence, so the stored bytes are compared.
        #expect(Array(EmailAddress.normalise(stored).utf8) != Array(stored.utf8))
        let user = UserRecord(id: newID(), email: stored, name: nil, passwordHash: "x", passwordSalt: "x", passwordIterations: 1,
                              passwordHint: nil, akey: "x", privateKey: nil, publicKey: nil, kdfType: 0, kdfIterations: 100_000,
                              kdfMemory: nil, kdfParallelism: nil, securityStamp: newID(), now: 1)
        #expect(try await repository.insert(user: user))
        #expect(try await repository.user(email: "JOSE\u{301}@example.com ")?.id == user.id, "the spelling it was stored in")
        #expect(try await repository.user(email: "jos\u{E9}@example.com")?.id == user.id, "its NFC spelling")
    }

    @Test("normalising is stable and ASCII is only lower-cased and trimmed")
    func normaliseRules() {
        for email in ["A@B.C", " x@y.z\n", "\u{FF21}@b.c", "\u{130}@b.c", "Stra\u{DF}e@b.c", "jose\u{301}@b.c"] {
            let once = EmailAddress.normalise(email)
            #expect(EmailAddress.normalise(once) == once, "\(email.debugDescription)")
        }
        #expect(EmailAddress.normalise(" Alice@Example.COM\n") == "alice@example.com")
        #expect(EmailAddress.normalise("\u{FF21}lice@example.com") == "alice@example.com")
        #expect(EmailAddress.normalise("jose\u{301}@b.c") == EmailAddress.normalise("jos\u{E9}@b.c"))
        #expect(EmailAddress.skeleton(EmailAddress.normalise("\u{130}lse@b.c")) == "ilse@b.c")
        #expect(EmailAddress.skeleton("\u{440}\u{430}y\u{440}\u{430}l@b.c") == "paypal@b.c")
        #expect(EmailAddress.invisibleCharacter(in: "plain@example.com") == nil)
        #expect(EmailAddress.invisibleCharacter(in: "caf\u{E9}@example.com") == nil)
    }

    @Test("a KDF setting that is not an integer is refused with 400 naming it, in both registration bodies", arguments: Backend.available)
    func kdfMustBeIntegers(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let bad: [(String, JSONValue)] = [
                ("kdfIterations", .string("600000")), ("kdfIterations", .number("600000.5")), ("kdfIterations", .bool(true)),
                ("kdf", .string("0")), ("kdfMemory", .string("64")), ("kdfParallelism", .number("4.5")),
            ]
            for (field, value) in bad {
                let email = "kdf-\(UUID().uuidString.prefix(8).lowercased())@example.com"
                let answer = try await api.request(.post, "/identity/accounts/register",
                                                   json: Self.registerBody(email: email) { $0[field] = value })
                #expect(answer.status == .badRequest, "\(field) = \(value)")
                #expect(answer.object["validationErrors"]?.objectValue?[field] != nil, "\(field) is named")
                let prelogin = try await api.request(.post, "/identity/accounts/prelogin", json: .object(["email": .string(email)]))
                #expect(prelogin.status == .ok)
            }
            // The newer body's nested settings alike.
            let email = "kdf-\(UUID().uuidString.prefix(8).lowercased())@example.com"
            let master = try MasterKey.derive(password: "pw", salt: email, kdf: TestUser.kdf)
            let finish = try await api.request(.post, "/identity/accounts/register/finish", json: .object([
                "email": .string(email), "userSymmetricKey": .string(try master.encryptUserKey(.generate()).serialized),
                "masterPasswordAuthentication": .object([
                    "masterPasswordAuthenticationHash": .string(master.serverAuthorizationHash(password: "pw")), "salt": .string(email),
                    "kdf": .object(["kdfType": .int(0), "iterations": .string("600000"), "memory": .null, "parallelism": .null]),
                ]),
            ]))
            #expect(finish.status == .badRequest)
            #expect(finish.object["validationErrors"]?.objectValue?["masterPasswordAuthentication.kdf.iterations"] != nil)
            // An integer is still taken as before.
            #expect(try await api.request(.post, "/identity/accounts/register",
                                          json: Self.registerBody(email: "kdf-ok-\(UUID().uuidString.prefix(6).lowercased())@example.com"))
                .status == .ok)
        }
    }
}
