import Foundation
import GRDB
import Testing
import VaultClient
import VaultCrypto
import VaultModels
import VaultStore
import VaultTestSupport

/// What the user has on the device: items, folders, queued changes.
struct LocalState: Equatable {
    var items: [String: CipherView]
    var damaged: [String]
    var folders: [String: String]
    var pending: [String]

    /// Counts, for failure messages.
    var summary: String { "\(items.count) items, \(damaged.count) damaged, \(folders.count) folders, \(pending.count) pending" }

    static func of(_ engine: VaultEngine) async throws -> LocalState {
        var items: [String: CipherView] = [:]
        var damaged: [String] = []
        for item in try await engine.items() {
            switch item.result {
            case .success(let view): items[item.id] = view
            case .failure: damaged.append(item.id)
            }
        }
        let folders = Dictionary(uniqueKeysWithValues: try await engine.folders().map { ($0.id ?? "", $0.name) })
        let pending = try await engine.pendingChanges().map { "\($0.itemKind):\($0.itemID)" }.sorted()
        return LocalState(items: items, damaged: damaged.sorted(), folders: folders, pending: pending)
    }
}

@Suite("Bad input: a hostile server cannot make the client lose its local data", .serialized, .timeLimit(.minutes(10 * FuzzSize.scale)))
struct HostileServerEngineTests {
    @Test("wrong types, huge arrays, missing fields, HTML pages, tampered items: typed errors or reports, local data kept")
    func hostileSync() async throws {
        let server = LiveServer()
        try await server.start()
        let email = uniqueEmail("hostile")
        let password = "correct horse battery staple"
        let device = try SecureDevice.make(url: await server.url)
        try await device.engine.register(email: email, password: password, kdf: securityKDF)
        let folder = try await device.engine.createFolder(name: "Work").value
        var ids: [String] = []
        for index in 0..<4 {
            var view = CipherView(type: .login, name: "item \(index)")
            view.login = LoginView(username: "user \(index)", password: "password \(index)")
            view.folderId = index == 0 ? folder.id : nil
            ids.append(try #require(try await device.engine.addItem(view).value.id))
        }
        // One queued offline edit, whose data must survive too.
        await server.stop()
        var edited = try await device.engine.item(id: ids[1])
        edited.notes = "edited offline"
        #expect(try await device.engine.updateItem(edited).outcome.isOffline)
        await server.destroy()

        // The real snapshot's parts, from the local cache: the raw material of the hostile answers.
        let (cipherJSON, folderJSON) = try await device.engine.localStore.readDatabase { db in
            (try CipherRow.fetchAll(db).map { try JSONParser.parseObject(Array($0.json.utf8)) },
             try FolderRow.fetchAll(db).map { try JSONParser.parseObject(Array($0.json.utf8)) })
        }
        let profile: JSONValue = .object(["id": .string(UUID().uuidString.lowercased()), "email": .string(email), "object": .string("profile")])
        func sync(ciphers: JSONValue, folders: JSONValue = .array(folderJSON.map(JSONValue.object)), profile: JSONValue? = profile) -> [UInt8] {
            var object: JSONObject = ["object": .string("sync"), "folders": folders, "collections": .array([]), "ciphers": ciphers]
            if let profile { object["profile"] = profile }
            return object.serialized()
        }
        var tampered = cipherJSON.first { $0["id"]?.stringValue == ids[2] }!
        let name = try EncString(tampered["name"]!.stringValue!)
        var mac = try #require(name.mac)
        mac[0] ^= 0xFF
        tampered["name"] = .string(try EncString(type: name.type, iv: name.iv, ciphertext: name.ciphertext, mac: mac).serialized)
        let withTampered = cipherJSON.map { $0["id"]?.stringValue == ids[2] ? tampered : $0 }
        let fullSync = sync(ciphers: .array(cipherJSON.map(JSONValue.object)))
        let wrongTypedItems = cipherJSON.map { object -> JSONValue in
            var copy = object
            copy["name"] = .int(5)
            copy["login"] = .string("not an object")
            return .object(copy)
        }
        let missingFields = cipherJSON.map { object -> JSONValue in
            var copy = object
            copy["name"] = nil
            copy["type"] = nil
            return .object(copy)
        }

        let cases: [(String, HostileServer.Reply)] = [
            ("an HTML login page", HostileServer.Reply(status: 200, contentType: "text/html", body: Array("<html><form>Wi-Fi login</form></html>".utf8))),
            ("a 502 HTML error page", HostileServer.Reply(status: 502, contentType: "text/html", body: Array("<h1>502 Bad Gateway</h1>".utf8))),
            ("an empty answer", HostileServer.Reply(status: 200, body: [])),
            ("wrong types everywhere", .json(#"{"object":"sync","profile":[],"ciphers":"x","folders":{}}"#)),
            ("ciphers as an object", HostileServer.Reply(body: sync(ciphers: .object(["a": .int(1)])))),
            // Missing or null would read as every item (or folder) deleted elsewhere (RELIABILITY bug 64).
            ("ciphers as null", HostileServer.Reply(body: sync(ciphers: .null))),
            ("folders as null", HostileServer.Reply(body: sync(ciphers: .array(cipherJSON.map(JSONValue.object)), folders: .null))),
            ("no profile", HostileServer.Reply(body: sync(ciphers: .array(cipherJSON.map(JSONValue.object)), profile: nil))),
            ("a huge array of junk items", HostileServer.Reply(body: sync(ciphers: .array(Array(repeating: .object(["object": .string("cipherDetails")]), count: 50_000))))),
            ("a huge array of non-objects", HostileServer.Reply(body: sync(ciphers: .array(Array(repeating: .number("1"), count: 50_000))))),
            ("items with wrong field types", HostileServer.Reply(body: sync(ciphers: .array(wrongTypedItems)))),
            ("items missing required fields", HostileServer.Reply(body: sync(ciphers: .array(missingFields)))),
            ("folders with wrong types", HostileServer.Reply(body: sync(ciphers: .array(cipherJSON.map(JSONValue.object)),
                                                                         folders: .array([.object(["id": .string(folder.id!), "name": .int(1)])])))),
            ("an item whose MAC fails", HostileServer.Reply(body: sync(ciphers: .array(withTampered.map(JSONValue.object))))),
            ("deep nesting", HostileServer.Reply(body: Array(repeating: UInt8(ascii: "["), count: 100_000))),
            ("a truncated snapshot", HostileServer.Reply(body: Array(fullSync.prefix(fullSync.count / 2)))),
        ]

        // Answers that are not a sync response at all: the engine must say so.
        let notProtocolAnswers: Set<String> = ["an HTML login page", "an empty answer", "wrong types everywhere", "ciphers as an object",
                                               "ciphers as null", "folders as null",
                                               "no profile", "a huge array of non-objects", "deep nesting", "a truncated snapshot"]
        let hostile = HostileServer()
        try await hostile.start()
        let reopened = try device.reopen(url: await hostile.url)
        try await reopened.engine.unlock(email: email, password: password)
        let before = try await LocalState.of(reopened.engine)
        #expect(before.items.count == 4 && before.folders.count == 1 && before.pending.count == 1 && before.damaged.isEmpty)
        var outcomes: [String] = []
        for (label, reply) in cases {
            hostile.respond { method, path in
                method == "GET" && path.hasPrefix("/api/sync") ? reply : HostileServer.Reply(status: 503, body: Array("busy".utf8))
            }
            do {
                let report = try await reopened.engine.sync()
                outcomes.append("\(label): sync finished, messages \(report.messages)")
                #expect(!notProtocolAnswers.contains(label), "\(label): a sync on an answer that is not a sync response cannot finish")
                if label == "an item whose MAC fails" {
                    #expect(report.messages.contains { $0.contains("could not be read") }, "the damaged item is reported: \(report.messages)")
                }
            } catch let error as VaultError {
                outcomes.append("\(label): \(error.description)")
                #expect(!error.description.isEmpty)
                if notProtocolAnswers.contains(label) {
                    // Said as what it is: the server answered, but not in the protocol (not "could not be reached").
                    if case .serverAnswerInvalid = error {} else {
                        Issue.record("\(label): reported as \(error), not as an answer that could not be understood")
                    }
                }
            } catch {
                Issue.record("\(label): untyped error \(type(of: error)) \(error)")
            }
            let after = try await LocalState.of(reopened.engine)
            let unchanged = after == before
            #expect(unchanged, "\(label): local data changed: \(before.summary) → \(after.summary)")
        }
        print("hostile sync outcomes:\n" + outcomes.joined(separator: "\n"))
        await hostile.stop()
        await device.engine.shutdown()
        await reopened.engine.shutdown()
        try? FileManager.default.removeItem(atPath: device.profile)
    }

    /// RELIABILITY bug 62: a server that answered the token request with a redirect to another host had the login's
    /// password hash posted there (over plain HTTP too), and a refresh's token the same way.
    @Test("a redirect is never followed: nothing reaches the host it names, and the login fails as 'not now'")
    func redirectsNotFollowed() async throws {
        let seen = Tally()
        let elsewhere = HostileServer { _, _ in
            seen.add()
            return .json("{}")
        }
        try await elsewhere.start()
        let target = await elsewhere.url
        let redirecting = HostileServer { _, path in HostileServer.Reply(status: 307, body: [], location: target + path) }
        try await redirecting.start()
        let device = try SecureDevice.make(url: await redirecting.url)
        await #expect {
            try await device.engine.login(email: uniqueEmail("redirect"), password: "correct horse battery staple", acceptingKdf: securityKDF)
        } throws: { error in
            guard case VaultError.serverUnreachable(let detail) = error else { return false }
            return detail.contains("307")
        }
        #expect(seen.count == 0, "the host the redirect names got \(seen.count) request(s)")
        await redirecting.stop()
        await elsewhere.stop()
        try? FileManager.default.removeItem(atPath: device.profile)
    }
}

extension HostileServerEngineTests {
    /// RELIABILITY bug 65: an answer whose body trickled in (a byte every few seconds) held `sync` for good: the
    /// request's deadline covers the answer's head only.
    @Test("an answer that trickles in gives up after the request timeout, as 'not now', with the local data kept")
    func slowAnswer() async throws {
        let hostile = HostileServer { _, _ in HostileServer.Reply(body: Array(String(repeating: " ", count: 4096).utf8), trickle: .milliseconds(200)) }
        try await hostile.start()
        var configuration = EngineConfiguration(serverURL: await hostile.url)
        configuration.api.requestTimeout = .seconds(2)
        let profile = temporaryDirectory("vaultsync-slow")
        let engine = try VaultEngine(databasePath: profile + "/vault.sqlite", configuration: configuration)
        let started = ContinuousClock.now
        await #expect {
            try await engine.login(email: uniqueEmail("slow"), password: "correct horse battery staple", acceptingKdf: securityKDF)
        } throws: { error in
            guard case VaultError.serverUnreachable(let detail) = error else { return false }
            return detail.contains("came too slowly")
        }
        // 4,096 bytes at five a second would take 14 minutes.
        #expect(ContinuousClock.now - started < .seconds(60))
        await hostile.stop()
        try? FileManager.default.removeItem(atPath: profile)
    }
}

/// A count the servers' handlers add to.
final class Tally: @unchecked Sendable {
    private let lock = NSLock()
    private var value = 0

    func add() { lock.withLock { value += 1 } }
    var count: Int { lock.withLock { value } }
}
