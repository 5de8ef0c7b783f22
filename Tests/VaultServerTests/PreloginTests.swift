import Foundation
import Hummingbird
import Testing
import VaultCrypto
import VaultModels
@testable import VaultServer

@Suite("Prelogin for unknown emails: keyed, stable, realistic, shaped like a real answer", .serialized)
struct PreloginTests {
    static func prelogin(_ api: APIClient, _ email: String) async throws -> APIResponse {
        try await api.request(.post, "/identity/accounts/prelogin", json: .object(["email": .string(email)]))
    }

    /// The answer's settings.
    static func settings(_ response: APIResponse) -> DecoyKdf.Settings {
        let object = response.object
        return DecoyKdf.Settings(type: object["kdf"]?.intValue ?? -1, iterations: object["kdfIterations"]?.intValue ?? -1,
                                 memory: object["kdfMemory"]?.intValue, parallelism: object["kdfParallelism"]?.intValue)
    }

    /// The answer's keys, nested ones as `parent.child`.
    static func shape(_ response: APIResponse) -> Set<String> {
        var keys: Set<String> = []
        for entry in response.object {
            keys.insert(entry.key)
            for nested in entry.value.objectValue ?? [:] { keys.insert("\(entry.key).\(nested.key)") }
        }
        return keys
    }

    @Test("unknown emails get one of several real settings, chosen by the server's key; stable per email; same JSON shape",
          arguments: Backend.available)
    func unknownEmails(backend: Backend) async throws {
        let key = Array(repeating: UInt8(0x42), count: 64)
        try await withTestServer(backend, configure: { $0.tokenKey = key }) { api in
            let real = try await Self.prelogin(api, try await TestUser.register(api).email)
            var counts: [Int: Int] = [:]
            for index in 0..<200 {
                let email = "nobody-\(index)@example.com"
                let answer = try await Self.prelogin(api, email)
                #expect(answer.status == .ok && answer.headers[.contentType] == real.headers[.contentType])
                #expect(Self.shape(answer) == Self.shape(real), "\(email)")
                #expect(answer.object["salt"] == .null)
                let settings = Self.settings(answer)
                let choice = try #require(DecoyKdf.choices.firstIndex(of: settings), "\(email): \(settings)")
                counts[choice == 1 ? 0 : choice, default: 0] += 1
                #expect(answer.object["kdfSettings"]?.objectValue?["iterations"] == answer.object["kdfIterations"])
                // Stable: the same email, however written, gets the same answer; another instance sharing the key too.
                let again = try await Self.prelogin(api, "  \(email.uppercased()) ")
                #expect(again.bytes == answer.bytes)
                #expect(DecoyKdf(tokenKey: key).settings(for: email) == settings)
            }
            // Realistic: PBKDF2 600,000 most often, Argon2id present (this key's 200 answers).
            #expect(counts[0, default: 0] > counts[2, default: 0] && counts[2, default: 0] > 0, "\(counts)")
        }
    }

    @Test("an Argon2id account's answer has the same shape as an unknown email's Argon2id answer", arguments: Backend.available)
    func argonShape(backend: Backend) async throws {
        let key = Array(repeating: UInt8(0x42), count: 64)
        try await withTestServer(backend, configure: { $0.tokenKey = key }) { api in
            let email = "argon-\(UUID().uuidString.prefix(8).lowercased())@example.com"
            let master = try MasterKey.derive(password: "pw", salt: email, kdf: TestUser.kdf)
            let registered = try await api.request(.post, "/identity/accounts/register", json: .object([
                "email": .string(email), "masterPasswordHash": .string(master.serverAuthorizationHash(password: "pw")),
                "key": .string(try master.encryptUserKey(.generate()).serialized),
                "kdf": .int(1), "kdfIterations": .int(3), "kdfMemory": .int(64), "kdfParallelism": .int(4),
            ]))
            #expect(registered.status == .ok)
            let real = try await Self.prelogin(api, email)
            let decoyEmail = try #require((0..<100).map { "decoy-\($0)@example.com" }.first {
                DecoyKdf(tokenKey: key).settings(for: $0).type == 1 })
            let decoy = try await Self.prelogin(api, decoyEmail)
            #expect(Self.settings(real) == Self.settings(decoy))
            #expect(real.bytes == decoy.bytes, "byte for byte: nothing in an Argon2id answer tells a real account")
        }
    }

    @Test("another server key chooses differently")
    func keyed() {
        let emails = (0..<64).map { "someone-\($0)@example.com" }
        let first = emails.map(DecoyKdf(tokenKey: Array(repeating: 1, count: 64)).settings(for:))
        let second = emails.map(DecoyKdf(tokenKey: Array(repeating: 2, count: 64)).settings(for:))
        #expect(first != second)
    }
}
