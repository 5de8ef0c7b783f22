import Foundation
import HTTPTypes
import Testing
import VaultCrypto
import VaultModels
@testable import VaultServer

/// The VaultSync bulk-create extension: each entry behaves exactly like `POST /api/ciphers` with its
/// `Idempotency-Key`.
@Suite("Server: bulk create extension")
struct BulkCreateTests {
    @Test("each entry is created once: a repeated key answers with the first item, an organization entry is refused alone",
          arguments: Backend.available)
    func createsOnce(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let user = try await TestUser.register(api)
            let token = try await user.token(api)
            func entry(_ name: String, key: String, organization: String? = nil) throws -> JSONValue {
                var body = try user.loginItem(name: name)
                body["idempotencyKey"] = .string(key)
                if let organization { body["organizationId"] = .string(organization) }
                return .object(body)
            }
            let first = try await api.request(.post, "/api/vaultsync/ciphers/bulk-create", token: token, json: .object(["ciphers": .array([
                try entry("one", key: "k-1"), try entry("two", key: "k-2"),
                try entry("shared", key: "k-3", organization: UUID().uuidString.lowercased()),
                try entry("one, sent twice", key: "k-1"),
            ])]))
            #expect(first.status == .ok)
            let results = try #require(first.object["data"]?.arrayValue)
            #expect(results.map { $0.objectValue?["status"]?.intValue } == [200, 200, 400, 200])
            #expect(results.map { $0.objectValue?["idempotencyKey"]?.stringValue } == ["k-1", "k-2", "k-3", "k-1"])
            let ids = results.prefix(2).compactMap { $0.objectValue?["cipher"]?.objectValue?["id"]?.stringValue }
            #expect(ids.count == 2)
            // Each answer is its own entry's item; a key repeated within the request answers with the first item.
            let answered = try results.compactMap { try $0.objectValue?["cipher"]?.objectValue.map { try CipherWire(json: $0, path: "c") } }
            #expect(try answered.map { try $0.decrypted(with: user.keys).name } == ["one", "two", "one"])
            #expect(answered.last?.id == ids[0])

            // The same keys again (an answer that was lost), one renamed since: the first items, no new ones.
            let again = try await api.request(.post, "/api/vaultsync/ciphers/bulk-create", token: token, json: .object(["ciphers": .array([
                try entry("one, renamed offline", key: "k-1"), try entry("two", key: "k-2"),
            ])]))
            #expect(again.object["data"]?.arrayValue?.compactMap { $0.objectValue?["cipher"]?.objectValue?["id"]?.stringValue } == ids)
            // And the single create with the same key too.
            var single = try user.loginItem(name: "one")
            single["idempotencyKey"] = nil
            let byHeader = try await api.request(.post, "/api/ciphers", token: token, json: .object(single), headers: [HTTPField.Name("Idempotency-Key")!: "k-1"])
            #expect(byHeader.object["id"]?.stringValue == ids[0])

            let sync = try await api.request(.get, "/api/sync", token: token).object
            let names = try (sync["ciphers"]?.arrayValue ?? []).map { try CipherWire(json: $0.objectValue!, path: "c").decrypted(with: user.keys).name }
            #expect(names.sorted() == ["one", "two"])
        }
    }

    @Test("a request without keys, or with too many entries, is refused as a whole", arguments: Backend.available)
    func refusals(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let user = try await TestUser.register(api)
            let token = try await user.token(api)
            let noKey = try await api.request(.post, "/api/vaultsync/ciphers/bulk-create", token: token,
                                              json: .object(["ciphers": .array([.object(try user.loginItem(name: "x"))])]))
            #expect(noKey.status == .badRequest)
            let missing = try await api.request(.post, "/api/vaultsync/ciphers/bulk-create", token: token, json: .object([:]))
            #expect(missing.status == .badRequest)
            let sync = try await api.request(.get, "/api/sync", token: token).object
            #expect(sync["ciphers"]?.arrayValue?.isEmpty == true)
        }
    }
}
