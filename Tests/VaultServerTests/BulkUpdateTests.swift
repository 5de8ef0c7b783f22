import Foundation
import HTTPTypes
import Testing
import VaultCrypto
import VaultModels
@testable import VaultServer

/// The VaultSync bulk-update extension: each entry behaves exactly like `PUT /api/ciphers/{id}`.
@Suite("Server: bulk update extension")
struct BulkUpdateTests {
    @Test("each entry is applied or refused on its own: updated, out of date, not found (another user's)", arguments: Backend.available)
    func perEntryOutcomes(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let user = try await TestUser.register(api)
            let token = try await user.token(api)
            let other = try await TestUser.register(api)
            let otherToken = try await other.token(api)
            var created: [JSONObject] = []
            for index in 0..<3 {
                let response = try await api.request(.post, "/api/ciphers", token: token, json: .object(try user.loginItem(name: "item \(index)")))
                created.append(response.object)
            }
            let foreign = try await api.request(.post, "/api/ciphers", token: otherToken, json: .object(try other.loginItem(name: "theirs"))).object
            func entry(_ original: JSONObject, name: String, lastKnown: JSONValue?) throws -> JSONValue {
                var body = try user.loginItem(name: name)
                body["id"] = original["id"]
                body["lastKnownRevisionDate"] = lastKnown ?? original["revisionDate"]
                return .object(body)
            }
            let entries: [JSONValue] = [
                try entry(created[0], name: "renamed 0", lastKnown: nil),
                try entry(created[1], name: "stale 1", lastKnown: .string("2020-01-01T00:00:00.000Z")),
                try entry(foreign, name: "not mine", lastKnown: nil),
                try entry(created[2], name: "renamed 2", lastKnown: nil),
            ]
            let answer = try await api.request(.post, "/api/vaultsync/ciphers/bulk-update", token: token, json: .object(["ciphers": .array(entries)]))
            #expect(answer.status == .ok)
            let results = try #require(answer.object["data"]?.arrayValue)
            #expect(results.map { $0.objectValue?["status"]?.intValue } == [200, 400, 404, 200])
            #expect(results[1].objectValue?["message"]?.stringValue?.contains("out of date") == true)
            let updated = try #require(results[0].objectValue?["cipher"]?.objectValue)
            #expect(try CipherWire(json: updated, path: "cipher").decrypted(with: user.keys).name == "renamed 0")
            #expect(updated["revisionDate"] != created[0]["revisionDate"])

            // The server state: 0 and 2 renamed, 1 untouched, the other user's item untouched.
            let sync = try await api.request(.get, "/api/sync", token: token).object
            let names = try (sync["ciphers"]?.arrayValue ?? []).map { try CipherWire(json: $0.objectValue!, path: "c").decrypted(with: user.keys).name }
            #expect(Set(names) == ["renamed 0", "item 1", "renamed 2"])
            let theirs = try await api.request(.get, "/api/ciphers/\(foreign["id"]!.stringValue!)", token: otherToken).object
            #expect(try CipherWire(json: theirs, path: "c").decrypted(with: other.keys).name == "theirs")
        }
    }

    @Test("answer \"revision\": each stored entry gets its new revision date, folder and favorite, not the cipher",
          arguments: Backend.available)
    func leanAnswer(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let user = try await TestUser.register(api)
            let token = try await user.token(api)
            let created = try await api.request(.post, "/api/ciphers", token: token, json: .object(try user.loginItem(name: "lean"))).object
            var body = try user.loginItem(name: "lean, renamed")
            body["id"] = created["id"]
            body["favorite"] = .bool(true)
            body["folderId"] = .string(UUID().uuidString.lowercased())
            body["lastKnownRevisionDate"] = created["revisionDate"]
            var stale = body
            stale["lastKnownRevisionDate"] = .string("2020-01-01T00:00:00.000Z")
            let answer = try await api.request(.post, "/api/vaultsync/ciphers/bulk-update", token: token,
                                               json: .object(["answer": .string("revision"), "ciphers": .array([.object(body)])]))
            let result = try #require(answer.object["data"]?.arrayValue?.first?.objectValue)
            #expect(result["status"]?.intValue == 200 && result["cipher"] == nil)
            let stored = try await api.request(.get, "/api/ciphers/\(created["id"]!.stringValue!)", token: token).object
            #expect(result["revisionDate"] == stored["revisionDate"] && result["revisionDate"] != created["revisionDate"])
            #expect(result["favorite"] == .bool(true))
            // A folder that is not the user's is dropped, and the answer says so.
            #expect(result["folderId"] == .null && stored["folderId"] == .null)
            let refused = try await api.request(.post, "/api/vaultsync/ciphers/bulk-update", token: token,
                                                json: .object(["answer": .string("revision"), "ciphers": .array([.object(stale)])]))
            #expect(refused.object["data"]?.arrayValue?.first?.objectValue?["status"]?.intValue == 400)
        }
    }

    @Test("a bad entry refuses the whole request before anything is written; limits hold", arguments: Backend.available)
    func validation(backend: Backend) async throws {
        try await withTestServer(backend, configure: { $0.bulkUpdateLimit = 2 }) { api in
            let user = try await TestUser.register(api)
            let token = try await user.token(api)
            let item = try await api.request(.post, "/api/ciphers", token: token, json: .object(try user.loginItem(name: "kept"))).object
            var good = try user.loginItem(name: "changed")
            good["id"] = item["id"]
            var plaintext = try user.loginItem(name: "x")
            plaintext["id"] = item["id"]
            plaintext["notes"] = .string("plain secret")
            let refused = try await api.request(.post, "/api/vaultsync/ciphers/bulk-update", token: token,
                                                json: .object(["ciphers": .array([.object(good), .object(plaintext)])]))
            #expect(refused.status == .badRequest)
            #expect(refused.object["validationErrors"]?.objectValue?["ciphers[1].notes"] != nil
                || refused.object["validationErrors"]?.objectValue?.entries.contains { $0.key.contains("notes") } == true)
            let tooMany = try await api.request(.post, "/api/vaultsync/ciphers/bulk-update", token: token,
                                                json: .object(["ciphers": .array([.object(good), .object(good), .object(good)])]))
            #expect(tooMany.status == .badRequest)
            var noID = good
            noID["id"] = nil
            #expect(try await api.request(.post, "/api/vaultsync/ciphers/bulk-update", token: token,
                                          json: .object(["ciphers": .array([.object(noID)])])).status == .badRequest)
            #expect(try await api.request(.post, "/api/vaultsync/ciphers/bulk-update", json: .object(["ciphers": .array([])])).status == .unauthorized)
            let current = try await api.request(.get, "/api/ciphers/\(item["id"]!.stringValue!)", token: token).object
            #expect(try CipherWire(json: current, path: "c").decrypted(with: user.keys).name == "kept")
        }
    }

    @Test("switched off, the route does not exist (clients fall back to PUT)")
    func switchedOff() async throws {
        try await withTestServer(.sqlite, configure: { $0.bulkUpdateEnabled = false }) { api in
            let user = try await TestUser.register(api)
            let token = try await user.token(api)
            let answer = try await api.request(.post, "/api/vaultsync/ciphers/bulk-update", token: token, json: .object(["ciphers": .array([])]))
            #expect(answer.status == .notFound)
        }
    }

    /// A bulk request reads its entries by their keys, not by walking every cipher of the user: each
    /// request of 500 read the whole vault's rows once (10,000 in P2) before it was written this way.
    @Test("the ciphers of a bulk request are looked up by id, not found by walking the user's ciphers (SQLite's plan)")
    func bulkLookupByKey() async throws {
        let directory = NSTemporaryDirectory() + "vaultsync-plan-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = try SQLiteDatabase(path: directory + "/vaultsync.sqlite")
        try await Migrations.run(on: database)
        func plan(_ idCount: Int?) async throws -> String {
            let binds = [SQLValue.text("u"), .text("u")] + (0..<(idCount ?? 0)).map { SQLValue.text("id\($0)") }
            return try await database.read { session in
                try await session.query("EXPLAIN QUERY PLAN " + VaultRepository.ownCiphersQuery(idCount: idCount), binds)
                    .compactMap { $0.text("detail") }.joined(separator: "; ")
            }
        }
        for count in [1, 2, 500] {
            let detail = try await plan(count)
            #expect(detail.contains("SEARCH c USING INDEX sqlite_autoindex_ciphers_1 (id=?)"), "\(count) ids: \(detail)")
        }
        // The whole vault: the creation-order index, no sort.
        let all = try await plan(nil)
        #expect(all.contains("ciphers_user_created") && !all.contains("TEMP B-TREE"), "\(all)")
        await database.close()
    }
}

@Suite("Server: idempotent creates")
struct IdempotentCreateTests {
    @Test("without a key, the same create body twice stores two items: nothing is matched by name", arguments: Backend.available)
    func noKeyNoMatching(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let user = try await TestUser.register(api)
            let token = try await user.token(api)
            let body = try user.loginItem(name: "twice")
            let first = try await api.request(.post, "/api/ciphers", token: token, json: .object(body))
            let second = try await api.request(.post, "/api/ciphers", token: token, json: .object(body))
            #expect(first.status == .ok && second.status == .ok)
            #expect(first.object["id"] != nil && first.object["id"] != second.object["id"])
            let sync = try await api.request(.get, "/api/sync", token: token).object
            #expect(sync["ciphers"]?.arrayValue?.count == 2)
        }
    }

    @Test("an Idempotency-Key makes every attempt one create, renamed or not, arriving together or late; keys are per user",
          arguments: Backend.available)
    func idempotencyKey(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let user = try await TestUser.register(api)
            let token = try await user.token(api)
            let key: HTTPFields = [HTTPField.Name("Idempotency-Key")!: "0f8fad5b-d9cb-469f-a165-70867728950e"]
            // The retry was renamed offline before it was sent (a new encrypted name, a new key for its fields):
            // only the idempotency key says it is the same create. It lands first; the first attempt arrives late.
            let renamed = try await api.request(.post, "/api/ciphers", token: token, json: .object(try user.loginItem(name: "renamed")), headers: key)
            let late = try await api.request(.post, "/api/ciphers", token: token, json: .object(try user.loginItem(name: "first")), headers: key)
            #expect(renamed.status == .ok && late.status == .ok)
            #expect(late.object["id"] == renamed.object["id"])
            #expect(late.object["name"] == renamed.object["name"], "the late attempt changed nothing")
            // Five attempts at once with another key: one item (the unique index decides on PostgreSQL too).
            let other: HTTPFields = [HTTPField.Name("Idempotency-Key")!: "together"]
            let ids = try await withThrowingTaskGroup(of: JSONValue?.self) { group in
                for index in 0..<5 {
                    let body = try user.loginItem(name: "together \(index)")
                    group.addTask { try await api.request(.post, "/api/ciphers", token: token, json: .object(body), headers: other).object["id"] }
                }
                return try await group.reduce(into: Set<String>()) { $0.insert($1?.stringValue ?? "none") }
            }
            #expect(ids.count == 1 && !ids.contains("none"), "\(ids)")
            let sync = try await api.request(.get, "/api/sync", token: token).object
            #expect(sync["ciphers"]?.arrayValue?.count == 2)
            // Another user's create with the same key is their own.
            let someoneElse = try await TestUser.register(api)
            let theirs = try await api.request(.post, "/api/ciphers", token: try await someoneElse.token(api),
                                               json: .object(try someoneElse.loginItem(name: "theirs")), headers: key)
            #expect(theirs.status == .ok && theirs.object["id"] != renamed.object["id"])
            // A key that is not 1-255 visible ASCII characters is refused, naming the header.
            for bad in ["", String(repeating: "k", count: 256), "with space"] {
                let refused = try await api.request(.post, "/api/ciphers", token: token, json: .object(try user.loginItem(name: "bad")),
                                                    headers: [HTTPField.Name("Idempotency-Key")!: bad])
                #expect(refused.status == .badRequest, "key \(bad.prefix(10))")
            }
        }
    }
}
