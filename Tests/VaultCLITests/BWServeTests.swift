import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import Testing
import VaultModels
import VaultTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `bw serve`: bw's Vault Management API (docs/BW-COMPATIBILITY.md, "bw serve"), the built executable
/// started as a person starts it, asked over real HTTP; its answers compared with the command line's.
@Suite("bw serve: the Vault Management API")
struct BWServeTests {
    /// A running `vaultsync bw serve` on a port the system chose.
    struct Served {
        let child: KillableChild
        let base: String

        static func start(_ device: CLIDevice, _ extra: [String] = [], environment extra2: [String: String] = [:]) async throws -> Served {
            var environment = device.environment.merging(extra2) { $1 }
            environment.removeValue(forKey: "VAULTSYNC_PASSWORD")
            let child = KillableChild(executable: try vaultsyncExecutable(), arguments: ["bw", "serve", "--hostname", "127.0.0.1", "--port", "0"] + extra,
                                      environment: environment, replacingEnvironment: true)
            try child.run()
            try await child.wait(for: "Listening on 127.0.0.1:")
            guard let line = child.output.text.split(separator: "\n").first(where: { $0.hasPrefix("Listening on 127.0.0.1:") }),
                  let port = Int(line.dropFirst("Listening on 127.0.0.1:".count)) else {
                let errors = child.killAndCollect()
                throw CLIFailure(description: "bw serve did not listen: \(child.output.text) \(errors)")
            }
            return Served(child: child, base: "http://127.0.0.1:\(port)")
        }

        /// The status and the body (as JSON when it is).
        func call(_ method: HTTPMethod, _ path: String, body: String? = nil, headers: [(String, String)] = [],
                  timeout: TimeAmount = .seconds(60)) async throws -> (status: Int, json: JSONValue?, text: String) {
            var request = HTTPClientRequest(url: base + path)
            request.method = method
            for (name, value) in headers { request.headers.add(name: name, value: value) }
            if let body {
                if !headers.contains(where: { $0.0 == "Content-Type" }) { request.headers.add(name: "Content-Type", value: "application/json") }
                request.body = .bytes(ByteBuffer(string: body))
            }
            let response: HTTPClientResponse
            do {
                response = try await HTTPClient.shared.execute(request, timeout: timeout)
            } catch {
                throw CLIFailure(description: "\(method) \(path): \(error); bw serve printed \(child.output.text), running: \(child.isRunning)")
            }
            let bytes = try await response.body.collect(upTo: 16 << 20)
            let text = String(buffer: bytes)
            return (Int(response.status.code), try? JSONParser.parse(Array(text.utf8)), text)
        }

        func stop() { child.killAndCollect() }
    }

    struct CLIFailure: Error, CustomStringConvertible { let description: String }

    static func failure(_ message: String) -> JSONValue { .object(["success": .bool(false), "message": .string(message)]) }

    @Test("locked until POST /unlock; then every route answers what the bw command answers, in bw's envelope; bad input is a 400 with bw's message and saves nothing")
    func routes() async throws {
        let (scenario, device, link) = try await BWSurfaceTests.device()
        let served = try await Served.start(device)
        defer {
            served.stop()
            Task { await scenario.finish([device]) }
        }
        let status = try await served.call(.GET, "/status")
        #expect(status.status == 200 && status.json?["success"] == .bool(true), "\(status)")
        #expect(status.json?["data"]?["object"] == .string("template") && status.json?["data"]?["template"]?["status"] == .string("locked"), "\(status)")
        let locked = try await served.call(.GET, "/list/object/items")
        #expect(locked.status == 400 && locked.json == Self.failure("Vault is locked."), "\(locked)")
        let wrong = try await served.call(.POST, "/unlock", body: #"{"password":"not it"}"#)
        #expect(wrong.status == 400 && wrong.json == Self.failure("Invalid master password."), "\(wrong)")
        let unlocked = try await served.call(.POST, "/unlock", body: JSONValue.object(["password": .string(scenario.password)]).jsonText)
        #expect(unlocked.status == 200 && unlocked.json?["data"]?["title"] == .string("Your vault is now unlocked!"), "\(unlocked)")
        #expect(unlocked.json?["data"]?["raw"]?.stringValue?.count == 88, "\(unlocked)")
        #expect(try await served.call(.GET, "/status").json?["data"]?["template"]?["status"] == .string("unlocked"))

        // The same JSON as the command line's, for lists, items and fields.
        func same(_ path: String, _ arguments: [String]) async throws {
            let answer = try await served.call(.GET, path)
            let command = try await BWSurfaceTests.bw(link, device, arguments + ["--response"])
            #expect(answer.json == (try command.json()), "\(path): \(answer.text)\n\(arguments): \(command)")
            #expect(answer.status == (command.status == 0 ? 200 : 400), "\(path): \(answer.status)")
        }
        try await same("/list/object/items", ["list", "items"])
        try await same("/list/object/items?search=git", ["list", "items", "--search", "git"])
        try await same("/list/object/folders", ["list", "folders"])
        try await same("/object/password/GitHub%20Personal", ["get", "password", "GitHub Personal"])
        try await same("/object/item/github", ["get", "item", "github"])
        try await same("/object/item/no%20such%20thing", ["get", "item", "no such thing"])
        let items = try #require(try await served.call(.GET, "/list/object/items").json?["data"]?["data"]?.arrayValue)
        let visa = try #require(items.first { $0["name"] == .string("Visa") }?["id"]?.stringValue)
        try await same("/object/item/\(visa)", ["get", "item", visa])
        let folders = try #require(try await served.call(.GET, "/list/object/folders").json?["data"]?["data"]?.arrayValue)
        let work = try #require(folders.first { $0["name"] == .string("Work") }?["id"]?.stringValue)
        try await same("/list/object/items?folderid=\(work)", ["list", "items", "--folderid", work])
        let password = try await served.call(.GET, "/object/password/GitHub%20Personal")
        #expect(password.json?["data"] == .object(["object": .string("string"), "data": .string("gh-two")]), "\(password)")

        // Changes: the request's JSON itself (not base64), seen by every other command.
        let before = try await device.json(["list", "--json"])
        for body in ["{\"type\": 1, \"name\": ", "[1, 2]", ""] {
            let refused = try await served.call(.POST, "/object/item", body: body)
            #expect(refused.status == 400 && refused.json?["success"] == .bool(false), "\(body): \(refused)")
        }
        #expect(try await device.json(["list", "--json"]) == before, "nothing saved")
        let created = try await served.call(.POST, "/object/item", body: #"{"type":1,"name":"Served","login":{"username":"srv","password":"sv-Pa55","uris":[{"match":null,"uri":"https://served.example"}]}}"#)
        #expect(created.status == 200 && created.json?["data"]?["name"] == .string("Served"), "\(created)")
        let id = try #require(created.json?["data"]?["id"]?.stringValue)
        #expect(try await device.expect(["get", id, "--field", "password"]).stdout == "sv-Pa55\n")
        var changed = try #require(created.json?["data"]?.objectValue)
        changed["name"] = .string("Served again")
        let edited = try await served.call(.PUT, "/object/item/\(id)", body: JSONValue.object(changed).jsonText)
        #expect(edited.status == 200 && edited.json?["data"]?["name"] == .string("Served again"), "\(edited)")
        #expect(try await device.expect(["get", id, "--field", "name"]).stdout == "Served again\n")
        let deleted = try await served.call(.DELETE, "/object/item/\(id)")
        #expect(deleted.status == 200 && deleted.json?["success"] == .bool(true), "\(deleted)")
        #expect(try await served.call(.GET, "/list/object/items?trash").json?["data"]?["data"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == [id])
        let restored = try await served.call(.POST, "/restore/item/\(id)")
        #expect(restored.status == 200, "\(restored)")
        #expect(try await BWSurfaceTests.bw(link, device, ["get", "username", id]).stdout == "srv")
        let folder = try await served.call(.POST, "/object/folder", body: #"{"name":"Served folder"}"#)
        #expect(folder.json?["data"]?["object"] == .string("folder") && folder.json?["data"]?["name"] == .string("Served folder"), "\(folder)")

        // Attachments: a multipart upload answers the item with it; the file comes back as itself.
        let boundary = "----vaultsync-test-boundary"
        let fileText = (0..<200).map { "served line \($0)\r\n" }.joined()
        let multipart = "--\(boundary)\r\nContent-Disposition: form-data; name=\"file\"; filename=\"notes.txt\"\r\nContent-Type: text/plain\r\n\r\n"
            + fileText + "\r\n--\(boundary)--\r\n"
        let uploaded = try await served.call(.POST, "/attachment?itemid=\(id)", body: multipart,
                                             headers: [("Content-Type", "multipart/form-data; boundary=\(boundary)")])
        let attachment = uploaded.json?["data"]?["attachments"]?.arrayValue?.first
        #expect(uploaded.status == 200 && attachment?["fileName"] == .string("notes.txt"), "\(uploaded)")
        let attachmentID = try #require(attachment?["id"]?.stringValue)
        let downloaded = try await served.call(.GET, "/object/attachment/\(attachmentID)?itemid=\(id)")
        #expect(downloaded.status == 200 && downloaded.text == fileText, "\(downloaded.status) \(downloaded.text.prefix(200))")
        let noFile = try await served.call(.POST, "/attachment?itemid=\(id)", body: "{}")
        #expect(noFile.status == 400 && noFile.json == Self.failure("`file` is required."), "\(noFile)")

        let generated = try await served.call(.GET, "/generate?length=24&special")
        #expect(generated.json?["data"]?["data"]?.stringValue?.count == 24, "\(generated)")
        let phrase = try await served.call(.GET, "/generate?passphrase&words=5&separator=space")
        #expect(phrase.json?["data"]?["data"]?.stringValue?.split(separator: " ").count == 5, "\(phrase)")
        let nowhere = try await served.call(.GET, "/no/such/route")
        #expect(nowhere.status == 404, "\(nowhere)")

        // Offline: the server gone, a create is saved on this device, queued and answered with the item.
        await scenario.server.stop()
        let offline = try await served.call(.POST, "/object/item", body: #"{"type":2,"name":"Offline served","secureNote":{"type":0}}"#)
        #expect(offline.status == 200 && offline.json?["data"]?["name"] == .string("Offline served"), "\(offline)")
        #expect(try await device.expect(["pending"]).stdout.contains("Offline served"))

        let lock = try await served.call(.POST, "/lock")
        #expect(lock.status == 200 && lock.json?["data"]?["title"] == .string("Your vault is locked."), "\(lock)")
        let afterLock = try await served.call(.GET, "/object/item/\(id)")
        #expect(afterLock.status == 400 && afterLock.json == Self.failure("Vault is locked."), "\(afterLock)")
    }

    @Test("a request with an Origin header (a web page's) is refused with 403 and changes nothing, unless --disable-origin-protection; a session unlocks from the start")
    func origin() async throws {
        let (scenario, device, link) = try await BWSurfaceTests.device()
        let session = try await BWSurfaceTests.bw(link, device, ["unlock", "--raw"])
        let guarded = try await Served.start(device, environment: ["BW_SESSION": session.stdout])
        let open = try await Served.start(device, ["--disable-origin-protection"], environment: ["BW_SESSION": session.stdout])
        defer {
            guarded.stop()
            open.stop()
            Task { await scenario.finish([device]) }
        }
        let origin = [("Origin", "https://attacker.example")]
        let before = try await device.json(["list", "--json"])
        let refused = try await guarded.call(.GET, "/list/object/items", headers: origin)
        #expect(refused.status == 403 && refused.text.isEmpty, "\(refused)")
        let refusedCreate = try await guarded.call(.POST, "/object/item", body: #"{"type":2,"name":"From a page","secureNote":{"type":0}}"#, headers: origin)
        #expect(refusedCreate.status == 403, "\(refusedCreate)")
        #expect(try await device.json(["list", "--json"]) == before, "nothing saved")
        let allowed = try await guarded.call(.GET, "/list/object/items")
        #expect(allowed.status == 200 && allowed.json?["data"]?["data"]?.arrayValue?.count == 5, "unlocked by the session: \(allowed)")
        let opened = try await open.call(.GET, "/list/object/items", headers: origin)
        #expect(opened.status == 200 && opened.json?["data"]?["data"]?.arrayValue?.count == 5, "\(opened)")
    }

    @Test("Ctrl-C (SIGINT) or SIGTERM stops serve with exit 0 and frees the port; a port in use is a clear error")
    func stopping() async throws {
        let (scenario, device, _) = try await BWSurfaceTests.device()
        defer { Task { await scenario.finish([device]) } }
        for signalNumber in [SIGINT, SIGTERM] {
            let served = try await Served.start(device)
            defer { served.stop() }
            #expect(try await served.call(.GET, "/status").status == 200)
            let port = try #require(Int(served.base.split(separator: ":").last ?? ""))
            // Another serve on the same port is refused at once, saying so.
            let taken = try await runProcess(try vaultsyncExecutable(), ["bw", "serve", "--hostname", "127.0.0.1", "--port", String(port)],
                                             environment: device.environment)
            #expect(taken.status != 0 && taken.stderr.contains("Cannot listen on 127.0.0.1:\(port)"), "\(taken.stderr)")
            kill(served.child.pid, signalNumber)
            try await served.child.wait(for: "never printed", seconds: 30)
            #expect(!served.child.isRunning && served.child.exitedCleanly, "signal \(signalNumber): \(served.child.output.text)")
            // Nothing answers any more (the client retries connecting until its deadline: a short one here).
            await #expect(throws: (any Error).self) { _ = try await served.call(.GET, "/status", timeout: .seconds(2)) }
        }
    }
}
