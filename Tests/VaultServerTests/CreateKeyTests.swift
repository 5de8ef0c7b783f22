import Foundation
import Hummingbird
import HummingbirdTesting
import HTTPTypes
import Logging
import Testing
import VaultCrypto
import VaultModels
@testable import VaultServer

/// docs/PROTOCOL.md, "Idempotent creates": a key is kept per user with what its first attempt made, for
/// item and folder creates, and outlives the item.
@Suite("Server: idempotency keys of item and folder creates")
struct CreateKeyTests {
    static func key(_ value: String) -> HTTPFields { [HTTPField.Name("Idempotency-Key")!: value] }

    static func folderBody(_ user: TestUser, _ name: String) throws -> JSONValue {
        .object(["name": .string(try EncString.encrypt(name, key: user.userKey).serialized)])
    }

    @Test("two creates with one key sent together make one item and one folder", arguments: Backend.available)
    func concurrentCreates(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let user = try await TestUser.register(api)
            let token = try await user.token(api)
            let first = try user.loginItem(name: "first attempt")
            let second = try user.loginItem(name: "second attempt")
            async let a = api.request(.post, "/api/ciphers", token: token, json: .object(first), headers: Self.key("item-1"))
            async let b = api.request(.post, "/api/ciphers", token: token, json: .object(second), headers: Self.key("item-1"))
            let items = try await [a, b]
            #expect(items.allSatisfy { $0.status == .ok })
            #expect(items[0].object["id"] != nil && items[0].object["id"] == items[1].object["id"])

            let folderA = try Self.folderBody(user, "Work")
            let folderB = try Self.folderBody(user, "Work, renamed before the retry")
            async let c = api.request(.post, "/api/folders", token: token, json: folderA, headers: Self.key("folder-1"))
            async let d = api.request(.post, "/api/folders", token: token, json: folderB, headers: Self.key("folder-1"))
            let folders = try await [c, d]
            #expect(folders.allSatisfy { $0.status == .ok })
            #expect(folders[0].object["id"] != nil && folders[0].object["id"] == folders[1].object["id"])

            let sync = try await api.request(.get, "/api/sync", token: token).object
            #expect(sync["ciphers"]?.arrayValue?.count == 1)
            #expect(sync["folders"]?.arrayValue?.count == 1)
        }
    }

    /// PostgreSQL runs transactions side by side (SQLite has one writer, so two creates never interleave
    /// there). A transaction of the test holds the user's row: the first create claims the key and then
    /// waits on that row inside its transaction; the second, sent then, waits on the first's key. Both
    /// are in their transactions at once when the row is let go.
    @Test("on PostgreSQL, a create whose transaction runs beside another's with the same key answers with its item",
          arguments: Backend.available.filter { $0 == .postgres })
    func interleavedCreates(backend: Backend) async throws {
        try await withTestServerAndDatabase(backend) { api, database in
            let user = try await TestUser.register(api)
            let token = try await user.token(api)
            let userID = try #require(try await database.read { session in
                try await session.query("SELECT id FROM users WHERE email = ?", [.text(user.email.lowercased())]).first?.text("id")
            })
            for (path, bodies) in [("/api/ciphers", [JSONValue.object(try user.loginItem(name: "a")), .object(try user.loginItem(name: "b"))]),
                                   ("/api/folders", [try Self.folderBody(user, "a"), try Self.folderBody(user, "b")])] {
                let requests = try await database.transaction { session in
                    _ = try await session.query("SELECT id FROM users WHERE id = ? FOR UPDATE", [.text(userID)])
                    var started: [Task<APIResponse, any Error>] = []
                    for (index, body) in bodies.enumerated() {
                        started.append(Task { try await api.request(.post, path, token: token, json: body, headers: Self.key("together:\(path)")) })
                        try await waitForLockWaiters(index + 1, database)
                    }
                    return started
                }
                var answers: [APIResponse] = []
                for request in requests { answers.append(try await request.value) }
                #expect(answers.allSatisfy { $0.status == .ok }, "\(path): \(answers.map(\.status))")
                #expect(answers[0].object["id"] != nil && answers[0].object["id"] == answers[1].object["id"], "\(path)")
            }
            let sync = try await api.request(.get, "/api/sync", token: token).object
            #expect(sync["ciphers"]?.arrayValue?.count == 1)
            #expect(sync["folders"]?.arrayValue?.count == 1)
        }
    }

    @Test("a replay answers the item as it is now after a rename, an edit or a trash elsewhere, and 410 after a delete for good",
          arguments: Backend.available)
    func replaysAfterChangesElsewhere(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let user = try await TestUser.register(api)
            let token = try await user.token(api)
            let other = try await user.token(api)  // another device of the same user
            let body = try user.loginItem(name: "original", password: "one")
            let created = try await api.request(.post, "/api/ciphers", token: token, json: .object(body), headers: Self.key("k"))
            let id = try #require(created.object["id"]?.stringValue)
            // Renamed elsewhere, then its password changed elsewhere: each replay answers the item as it is.
            for (name, password) in [("renamed elsewhere", "one"), ("renamed elsewhere", "two")] {
                var edit = try user.loginItem(name: name, password: password)
                edit["lastKnownRevisionDate"] = nil
                let edited = try await api.request(.put, "/api/ciphers/\(id)", token: other, json: .object(edit))
                #expect(edited.status == .ok)
                let replay = try await api.request(.post, "/api/ciphers", token: token, json: .object(body), headers: Self.key("k"))
                #expect(replay.status == .ok && replay.object["id"]?.stringValue == id)
                #expect(replay.object["name"] == edit["name"] && replay.object["login"]?.objectValue?["password"] == edit["login"]?.objectValue?["password"])
            }
            // Trashed elsewhere: the replay answers it in the trash and does not restore it.
            #expect(try await api.request(.put, "/api/ciphers/\(id)/delete", token: other).status == .ok)
            let trashed = try await api.request(.post, "/api/ciphers", token: token, json: .object(body), headers: Self.key("k"))
            #expect(trashed.status == .ok && trashed.object["id"]?.stringValue == id)
            #expect(trashed.object["deletedDate"]?.stringValue != nil)
            // Deleted for good elsewhere: 410, never a second item.
            #expect(try await api.request(.delete, "/api/ciphers/\(id)", token: other).status == .ok)
            let gone = try await api.request(.post, "/api/ciphers", token: token, json: .object(body), headers: Self.key("k"))
            #expect(gone.status == .gone)
            #expect(gone.message?.contains("Idempotency-Key") == true, "\(gone.message ?? "")")
            #expect(gone.object["createdId"]?.stringValue == id, "the 410 names what the key made")
            // A bulk entry with that key answers the same.
            var entry = body
            entry["idempotencyKey"] = .string("k")
            let bulk = try await api.request(.post, "/api/vaultsync/ciphers/bulk-create", token: token,
                                             json: .object(["ciphers": .array([.object(entry)])]))
            #expect(bulk.object["data"]?.arrayValue?.first?.objectValue?["status"] == .int(410))
            #expect(bulk.object["data"]?.arrayValue?.first?.objectValue?["createdId"]?.stringValue == id)
            #expect(try await api.request(.get, "/api/sync", token: token).object["ciphers"]?.arrayValue?.count == 0)

            // Folders: renamed elsewhere → the folder as it is; deleted → 410.
            let folderBody = try Self.folderBody(user, "Work")
            let folder = try await api.request(.post, "/api/folders", token: token, json: folderBody, headers: Self.key("f"))
            let folderID = try #require(folder.object["id"]?.stringValue)
            let renamedBody = try Self.folderBody(user, "Work, renamed elsewhere")
            #expect(try await api.request(.put, "/api/folders/\(folderID)", token: other, json: renamedBody).status == .ok)
            let replay = try await api.request(.post, "/api/folders", token: token, json: folderBody, headers: Self.key("f"))
            #expect(replay.status == .ok && replay.object["id"]?.stringValue == folderID)
            #expect(replay.object["name"] == renamedBody.objectValue?["name"])
            #expect(try await api.request(.delete, "/api/folders/\(folderID)", token: other).status == .ok)
            let goneFolder = try await api.request(.post, "/api/folders", token: token, json: folderBody, headers: Self.key("f"))
            #expect(goneFolder.status == .gone && goneFolder.object["createdId"]?.stringValue == folderID)
            #expect(try await api.request(.get, "/api/sync", token: token).object["folders"]?.arrayValue?.count == 0)
        }
    }

    @Test("keys belong to one user and one kind of create; malformed keys are refused naming the header", arguments: Backend.available)
    func keysPerUserAndKind(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let user = try await TestUser.register(api)
            let token = try await user.token(api)
            let mine = try await api.request(.post, "/api/folders", token: token, json: try Self.folderBody(user, "mine"), headers: Self.key("shared"))
            let someone = try await TestUser.register(api)
            let theirs = try await api.request(.post, "/api/folders", token: try await someone.token(api),
                                               json: try Self.folderBody(someone, "theirs"), headers: Self.key("shared"))
            #expect(mine.status == .ok && theirs.status == .ok && mine.object["id"] != theirs.object["id"])
            // The key of a folder create, sent with an item create: refused, nothing stored.
            let reused = try await api.request(.post, "/api/ciphers", token: token, json: .object(try user.loginItem(name: "x")),
                                               headers: Self.key("shared"))
            #expect(reused.status == .unprocessableContent)
            for bad in ["", String(repeating: "k", count: 256), "with space", "naïve"] {
                for (path, body) in [("/api/folders", try Self.folderBody(user, "bad")), ("/api/ciphers", JSONValue.object(try user.loginItem(name: "bad")))] {
                    let refused = try await api.request(.post, path, token: token, json: body, headers: Self.key(bad))
                    #expect(refused.status == .badRequest, "\(path) key \(bad.prefix(10))")
                    #expect(String(decoding: refused.bytes, as: UTF8.self).contains("Idempotency-Key"), "\(path)")
                }
            }
            let sync = try await api.request(.get, "/api/sync", token: token).object
            #expect(sync["ciphers"]?.arrayValue?.count == 0)
            #expect(sync["folders"]?.arrayValue?.count == 1)
        }
    }
}

/// Waits until `count` statements of this test's PostgreSQL database wait on a lock (a condition, not a
/// time: each poll reads `pg_stat_activity`).
func waitForLockWaiters(_ count: Int, _ database: any SQLDatabase) async throws {
    for _ in 0..<10_000 {
        let waiting = try await database.read { session in
            try await session.query("""
                SELECT count(*) AS waiting FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
                """).first?.int("waiting") ?? 0
        }
        if waiting >= count { return }
        try await Task.sleep(for: .milliseconds(5))
    }
    Issue.record("\(count) statements never waited on a lock")
}

/// ``withTestServer(_:configure:_:)`` with a second handle on the server's database, for a test that
/// takes locks of its own.
func withTestServerAndDatabase(_ backend: Backend, _ body: @Sendable (APIClient, any SQLDatabase) async throws -> Void) async throws {
    let directory = NSTemporaryDirectory() + "vaultsync-test-" + UUID().uuidString
    let database = try await TestDatabase.make(backend, directory: directory)
    let app = try await buildApplication(configuration: database.configuration)
    do {
        try await app.test(.ahc(.http)) { client in
            let handle = try openDatabase(database.configuration, logger: Logger(label: "test-locks"))
            do {
                try await body(APIClient(client: client), handle)
            } catch {
                await handle.close()
                throw error
            }
            await handle.close()
        }
    } catch {
        await database.cleanup()
        throw error
    }
    await database.cleanup()
}
