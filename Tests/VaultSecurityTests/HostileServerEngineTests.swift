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
}
