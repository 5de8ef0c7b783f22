import Foundation
import LocalHTTP
import Testing
import VaultCrypto
import VaultModels
import VaultTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// `bw …`: Bitwarden's CLI surface (docs/BW-COMPATIBILITY.md), run as scripts run it, through a link
/// named `bw` and as `vaultsync bw`, against the real server; the JSON compared key by key with bw's shapes.
@Suite("bw: the drop-in surface")
struct BWSurfaceTests {
    /// bw's key orders (its CLI's response models, docs/BW-COMPATIBILITY.md).
    static let itemKeys = ["passwordHistory", "revisionDate", "creationDate", "deletedDate", "object", "id", "organizationId", "folderId",
                           "type", "reprompt", "name", "notes", "favorite"]
    static let loginKeys = ["fido2Credentials", "uris", "username", "password", "totp", "passwordRevisionDate"]
    static let cardKeys = ["cardholderName", "brand", "number", "expMonth", "expYear", "code"]
    static let identityKeys = ["title", "firstName", "middleName", "lastName", "address1", "address2", "address3", "city", "state", "postalCode",
                               "country", "company", "email", "phone", "ssn", "username", "passportNumber", "licenseNumber"]

    /// A device with one item of each kind, and a `bw` link to the executable in a folder of its own.
    static func device() async throws -> (CLIScenario, CLIDevice, URL) {
        let scenario = try await CLIScenario.start()
        let device = try await scenario.device(register: true)
        try await device.expect(["folder", "add", "Work"])
        try await device.expect(["add", "login", "--name", "GitHub", "--username", "alice", "--password", "-", "--uri", "https://github.com/login",
                                 "--folder", "Work", "--notes", "the work account"], stdin: "gh-Pa55\n")
        try await device.expect(["add", "login", "--name", "GitHub Personal", "--username", "al", "--password", "-"], stdin: "gh-two\n")
        try await device.expect(["add", "card", "--name", "Visa", "--cardholder", "Alice A", "--number", "-", "--exp-month", "4", "--exp-year", "2031"],
                                stdin: "4111111111111111\n")
        try await device.expect(["add", "identity", "--name", "Me", "--first-name", "Alice", "--email", "alice@example.com"])
        try await device.expect(["add", "note", "--name", "Recovery", "--notes", "codes here"])
        let folder = temporaryDirectory("vaultsync-bw-link")
        let link = URL(fileURLWithPath: folder + "/bw")
        try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: try vaultsyncExecutable().path)
        return (scenario, device, link)
    }

    /// Runs `bw ARGS` through the link.
    static func bw(_ link: URL, _ device: CLIDevice, _ arguments: [String], stdin: String? = nil,
                   environment extra: [String: String] = [:], removing: [String] = []) async throws -> CLIResult {
        var environment = device.environment.merging(extra) { _, new in new }
        for key in removing { environment.removeValue(forKey: key) }
        let finished = try await runProcess(link, arguments, environment: environment, stdin: stdin)
        return CLIResult(status: finished.status, stdout: finished.stdout, stderr: finished.stderr)
    }

    static func keys(_ value: JSONValue?) -> [String] { value?.objectValue?.entries.map(\.key) ?? [] }

    @Test("status, unlock --raw, list and get print bw's JSON in bw's key order, piped without a line end; a link named bw and `vaultsync bw` agree")
    func shapes() async throws {
        let (scenario, device, link) = try await Self.device()
        defer { Task { await scenario.finish([device]) } }
        let password = ["VAULTSYNC_PASSWORD"]
        let locked = try await Self.bw(link, device, ["status"], removing: password)
        #expect(try locked.status == 0 && Self.keys(try locked.json()) == ["serverUrl", "lastSync", "userEmail", "status"], "\(locked)")
        #expect(try locked.json()["status"] == .string("locked") && !locked.stdout.hasSuffix("\n"))

        let unlocked = try await Self.bw(link, device, ["unlock", "--raw"], stdin: scenario.password + "\n", removing: password)
        #expect(unlocked.status == 0 && unlocked.stdout.count == 88 && !unlocked.stdout.contains("\n"), "\(unlocked)")
        let session = ["BW_SESSION": unlocked.stdout]
        let status = try await Self.bw(link, device, ["status"], environment: session, removing: password)
        #expect(Self.keys(try status.json()) == ["serverUrl", "lastSync", "userEmail", "userId", "status"], "\(status)")
        #expect(try status.json()["status"] == .string("unlocked") && (try status.json()["userEmail"]?.stringValue) == scenario.email)

        let listed = try await Self.bw(link, device, ["list", "items"], environment: session, removing: password)
        let items = try #require(try listed.json().arrayValue)
        #expect(items.map { $0["name"]?.stringValue ?? "" } == ["GitHub", "GitHub Personal", "Me", "Recovery", "Visa"], "bw's order: by name")
        for item in items {
            let type = item["type"]?.intValue
            let body = type == 1 ? "login" : type == 2 ? "secureNote" : type == 3 ? "card" : "identity"
            #expect(Self.keys(item) == Self.itemKeys + [body, "collectionIds"], "\(item)")
            #expect(item["object"] == .string("item") && item["passwordHistory"] == .null && item["collectionIds"] == .array([]))
            #expect(item["revisionDate"]?.stringValue?.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/) != nil, "\(item)")
        }
        let github = try #require(items.first { $0["name"] == .string("GitHub") })
        #expect(Self.keys(github["login"]) == Self.loginKeys)
        #expect(github["login"]?["uris"] == .array([.object(JSONObject(entries: [.init(key: "match", value: .null),
                                                                                   .init(key: "uri", value: .string("https://github.com/login"))]))]))
        #expect(github["notes"] == .string("the work account") && github["folderId"]?.stringValue != nil)
        #expect(Self.keys(items.first { $0["name"] == .string("Visa") }?["card"]) == Self.cardKeys)
        #expect(Self.keys(items.first { $0["name"] == .string("Me") }?["identity"]) == Self.identityKeys)
        #expect(items.first { $0["name"] == .string("Recovery") }?["secureNote"] == .object(["type": .int(0)]))

        // Fields by search, as bw finds them: one match; several narrowed by the field asked for.
        let id = try #require(github["id"]?.stringValue)
        for (arguments, expected) in [(["get", "password", id], "gh-Pa55"), (["get", "username", "github.com"], "alice"),
                                      (["get", "uri", id], "https://github.com/login"), (["get", "notes", "github"], "the work account"),
                                      (["get", "password", "personal"], "gh-two")] {
            let got = try await Self.bw(link, device, arguments, environment: session, removing: password)
            #expect(got.status == 0 && got.stdout == expected, "\(arguments): \(got)")
            // The same through `vaultsync bw`.
            let same = try await device.run(["bw"] + arguments, environment: session, removing: password)
            #expect(same.stdout == got.stdout && same.status == got.status, "\(arguments): \(same)")
        }
        let item = try await Self.bw(link, device, ["get", "item", id], environment: session, removing: password)
        #expect(try item.json() == github)
        let pretty = try await Self.bw(link, device, ["get", "item", id, "--pretty"], environment: session, removing: password)
        #expect(pretty.stdout.hasPrefix("{\n  \"passwordHistory\": null,\n  \"revisionDate\": "), "\(pretty)")
        let folders = try await Self.bw(link, device, ["list", "folders"], environment: session, removing: password)
        #expect(try folders.json().arrayValue?.map { Self.keys($0) } == [["object", "id", "name"], ["object", "id", "name"]])
        #expect(try folders.json().arrayValue?.last == .object(JSONObject(entries: [.init(key: "object", value: .string("folder")),
                                                                                 .init(key: "id", value: .null), .init(key: "name", value: .string("No Folder"))])))
        let searched = try await Self.bw(link, device, ["list", "items", "--search", "git", "--folderid", "null"], environment: session, removing: password)
        #expect(try searched.json().arrayValue?.map { $0["name"]?.stringValue ?? "" } == ["GitHub Personal"], "search AND filter: \(searched)")
        let envelope = try await Self.bw(link, device, ["get", "password", id, "--response"], environment: session, removing: password)
        #expect(try envelope.json() == .object(["success": .bool(true), "data": .object(["object": .string("string"), "data": .string("gh-Pa55")])]))
    }

    @Test("with the profile's agent running, bw's commands run in it: the same answers, and no password or session needed")
    func throughTheAgent() async throws {
        let (scenario, device, pid) = try await AgentForwardingTests.deviceWithAgent()
        defer {
            kill(pid, SIGKILL)
            Task { await scenario.finish([device]) }
        }
        let commands: [[String]] = [
            ["bw", "list", "items"], ["bw", "list", "items", "--search", "git"], ["bw", "get", "password", "bank"], ["bw", "get", "item", "Bank", "--pretty"],
            ["bw", "get", "password", "github"], ["bw", "list", "folders"], ["bw", "get", "planet", "x"], ["bw", "get", "item", "nothing", "--response"],
        ]
        for command in commands {
            let direct = try await device.run(command, environment: ["VAULTSYNC_AGENT": "off"])
            let agent = try await device.run(command, removing: ["VAULTSYNC_PASSWORD"])
            #expect(agent.status == direct.status && agent.stdout == direct.stdout && agent.stderr == direct.stderr,
                    "\(command): through the agent\n\(agent)\nwithout it\n\(direct)")
        }
        let created = try await device.run(["bw", "create", "item", Data(#"{"type":2,"name":"Via agent","secureNote":{"type":0}}"#.utf8).base64EncodedString()],
                                           removing: ["VAULTSYNC_PASSWORD"])
        #expect(try created.status == 0 && created.json()["name"] == .string("Via agent"), "\(created)")
        #expect(try await device.expect(["list"], environment: ["VAULTSYNC_AGENT": "off"]).stdout.contains("Via agent"))
        // Without the agent and without a password or session, bw says the vault is locked: the answers above were the agent's.
        let locked = try await device.run(["bw", "list", "items", "--nointeraction"], environment: ["VAULTSYNC_AGENT": "off"], removing: ["VAULTSYNC_PASSWORD"])
        #expect(locked.status == 1 && locked.stderr == "Vault is locked.", "\(locked)")
    }

    @Test("bad input as bw answers it, exit 1 and nothing saved: no match, several matches (their ids listed), a locked vault with --nointeraction, bad base64, malformed JSON")
    func errors() async throws {
        let (scenario, device, link) = try await Self.device()
        defer { Task { await scenario.finish([device]) } }
        let before = try await device.json(["list", "--json"])
        let notFound = try await Self.bw(link, device, ["get", "item", "no such thing"])
        #expect(notFound.status == 1 && notFound.stderr == "Not found." && notFound.stdout.isEmpty, "\(notFound)")
        let several = try await Self.bw(link, device, ["get", "item", "github"])
        let ids = Set(try #require(before.arrayValue).filter { $0["name"]?.stringValue?.hasPrefix("GitHub") == true }.compactMap { $0["id"]?.stringValue })
        #expect(several.status == 1 && several.stderr.hasPrefix("More than one result was found. Try getting a specific object by `id` instead. The following objects were found:\n"))
        #expect(Set(several.stderr.split(separator: "\n").dropFirst().map(String.init)) == ids, "\(several)")
        let lockedVault = try await Self.bw(link, device, ["list", "items", "--nointeraction"], removing: ["VAULTSYNC_PASSWORD"])
        #expect(lockedVault.status == 1 && lockedVault.stderr == "Vault is locked." && lockedVault.stdout.isEmpty, "\(lockedVault)")
        let wrongSession = try await Self.bw(link, device, ["list", "items", "--nointeraction", "--session", "bm90IGEga2V5"], removing: ["VAULTSYNC_PASSWORD"])
        #expect(wrongSession.status == 1 && wrongSession.stderr == "Vault is locked.", "\(wrongSession)")
        for input in ["not base64 at all!", Data("{\"type\": 1, \"name\": ".utf8).base64EncodedString(), Data("[1, 2]".utf8).base64EncodedString()] {
            let created = try await Self.bw(link, device, ["create", "item", input])
            #expect(created.status == 1 && created.stderr == "Error parsing the encoded request data.", "\(input): \(created)")
        }
        let noType = try await Self.bw(link, device, ["create", "item", Data("{\"name\":\"x\"}".utf8).base64EncodedString()])
        #expect(noType.status == 1 && noType.stderr.contains("\"type\""), "\(noType)")
        let enveloped = try await Self.bw(link, device, ["get", "item", "no such thing", "--response"])
        #expect(try enveloped.status == 1 && (try enveloped.json()) == .object(["success": .bool(false), "message": .string("Not found.")]), "\(enveloped)")
        let unknown = try await Self.bw(link, device, ["get", "planet", "x"])
        #expect(unknown.status == 1 && unknown.stderr == "Unknown object.", "\(unknown)")
        #expect(try await device.json(["list", "--json"]) == before, "nothing saved")
    }

    @Test("create from bw encode, edit, delete and restore: the same items for every other command; with the server gone a create is kept and queued, and answered with the item")
    func changes() async throws {
        let (scenario, device, link) = try await Self.device()
        defer { Task { await scenario.finish([device]) } }
        let encoded = try await Self.bw(link, device, ["encode"], stdin: #"{"type":1,"name":"Created","notes":null,"login":{"username":"me","password":"cr-Pa55","uris":[{"match":3,"uri":"https://created.example"}]}}"# + "\n")
        #expect(encoded.status == 0 && Data(base64Encoded: encoded.stdout) != nil, "\(encoded)")
        let created = try await Self.bw(link, device, ["create", "item"], stdin: encoded.stdout)
        let item = try created.json()
        #expect(created.status == 0 && item["name"] == .string("Created") && item["login"]?["uris"]?.arrayValue?.first?["match"] == .int(3), "\(created)")
        let id = try #require(item["id"]?.stringValue)
        #expect(try await device.expect(["get", id, "--field", "password"]).stdout == "cr-Pa55\n")

        var changed = try #require(item.objectValue)
        changed["name"] = .string("Renamed")
        let edited = try await Self.bw(link, device, ["edit", "item", id, Data(JSONValue.object(changed).serialized()).base64EncodedString()])
        #expect(try edited.status == 0 && (try edited.json())["name"] == .string("Renamed"), "\(edited)")
        #expect(try await device.expect(["get", id, "--field", "name"]).stdout == "Renamed\n")

        let deleted = try await Self.bw(link, device, ["delete", "item", id])
        #expect(deleted.status == 0 && deleted.stdout.isEmpty, "\(deleted)")
        let trash = try await Self.bw(link, device, ["list", "items", "--trash"])
        #expect(try trash.json().arrayValue?.compactMap { $0["id"]?.stringValue } == [id])
        let restored = try await Self.bw(link, device, ["restore", "item", id])
        #expect(restored.status == 0, "\(restored)")
        #expect(try await Self.bw(link, device, ["get", "username", id]).stdout == "me")

        await scenario.server.stop()
        let offline = try await Self.bw(link, device, ["create", "item", Data(#"{"type":2,"name":"Offline note","notes":"kept","secureNote":{"type":0}}"#.utf8).base64EncodedString()])
        #expect(try offline.status == 0 && (try offline.json())["name"] == .string("Offline note"), "\(offline)")
        #expect(try await device.expect(["pending"]).stdout.contains("Offline note"))
    }

    @Test("config server, login (--passwordenv, --raw, a password argument with its warning), already logged in, --check, a refused password, logout (refused while a change waits), not logged in: bw's messages and exit codes")
    func account() async throws {
        let scenario = try await CLIScenario.start()
        let device = CLIDevice(password: scenario.password)
        defer { Task { await scenario.finish([device]) } }
        let url = await scenario.server.url
        let noPassword = ["VAULTSYNC_PASSWORD"]
        let set = try await device.run(["bw", "config", "server", url + "/"])
        #expect(set.status == 0 && set.stdout == "Saved setting `config`.", "\(set)")
        #expect(try await device.run(["bw", "config", "server"]).stdout == url)
        let notYet = try await device.run(["bw", "logout"])
        #expect(notYet.status == 1 && notYet.stderr == "You are not logged in.", "\(notYet)")
        try await device.expect(["register", scenario.email, "--kdf-iterations", "600000"])
        let loggedOut = try await device.run(["bw", "logout"])
        #expect(loggedOut.status == 0 && loggedOut.stdout == "You have logged out.", "\(loggedOut)")
        #expect(try await device.run(["bw", "status"]).json()["status"] == .string("unauthenticated"))

        let refused = try await device.run(["bw", "login", scenario.email, "--passwordenv", "PW", "--nointeraction"],
                                           environment: ["PW": "not the password"], removing: noPassword)
        #expect(refused.status == 1 && refused.stderr == "Username or password is incorrect. Try again.", "\(refused)")
        let missing = try await device.run(["bw", "login", scenario.email, "--nointeraction"], removing: noPassword)
        #expect(missing.status == 1 && missing.stderr == "Master password is required.", "\(missing)")
        let raw = try await device.run(["bw", "login", scenario.email.uppercased(), "--passwordenv", "PW", "--raw"],
                                       environment: ["PW": scenario.password], removing: noPassword)
        #expect(raw.status == 0 && raw.stdout.count == 88 && !raw.stdout.contains("\n"), "\(raw)")
        let listed = try await device.run(["bw", "list", "items", "--session", raw.stdout, "--nointeraction"], removing: noPassword)
        #expect(listed.status == 0 && listed.stdout == "[]", "\(listed)")
        let again = try await device.run(["bw", "login", scenario.email, "--passwordenv", "PW"], environment: ["PW": scenario.password])
        #expect(again.status == 1 && again.stderr == "You are already logged in as \(scenario.email).", "\(again)")
        let check = try await device.run(["bw", "login", "--check"])
        #expect(check.status == 0 && check.stdout == "You are logged in!", "\(check)")
        let moved = try await device.run(["bw", "config", "server", "https://vault.example.com"])
        #expect(moved.status == 1 && moved.stderr == "Logout required before server config update.", "\(moved)")
        #expect(try await device.run(["bw", "config", "server"]).stdout == url)

        // A change waiting for the server would be lost: logout refuses and the account stays.
        #expect(try await device.run(["bw", "logout"]).stdout == "You have logged out.")
        let argument = try await device.run(["bw", "login", scenario.email, scenario.password], removing: noPassword)
        #expect(argument.status == 0 && argument.stdout.hasPrefix("You are logged in!\n\nTo unlock your vault, set your session key to the `BW_SESSION` environment variable."), "\(argument)")
        #expect(argument.stderr.contains("--passwordenv"), "the safer form is named: \(argument)")
        await scenario.server.stop()
        try await device.expect(["add", "note", "--name", "Waiting", "--notes", "kept"])
        let kept = try await device.run(["bw", "logout"])
        #expect(kept.status == 1 && kept.stderr.contains("still waiting for the server"), "\(kept)")
        #expect(try await device.expect(["list"]).stdout.contains("Waiting"))
    }

    @Test("create attachment --file --itemid answers the item with it; get attachment writes it (a folder, a path, --raw the path, - standard output) and finds it by id or name; delete attachment; bad input as bw answers it")
    func attachments() async throws {
        let (scenario, device, link) = try await Self.device()
        defer { Task { await scenario.finish([device]) } }
        let folder = temporaryDirectory("vaultsync-bw-attachments")
        let text = (0..<300).map { "line \($0) of the scan\n" }.joined()
        let contents = Data(text.utf8)
        let file = folder + "/scan copy.pdf"
        try contents.write(to: URL(fileURLWithPath: file))
        let missing = try await Self.bw(link, device, ["create", "attachment", "--file", file])
        #expect(missing.status == 1 && missing.stderr == "`itemid` option is required.", "\(missing)")
        let unreadable = try await Self.bw(link, device, ["create", "attachment", "--file", folder + "/nothing", "--itemid", "Recovery"])
        #expect(unreadable.status == 1 && unreadable.stderr.hasPrefix("Cannot read the file"), "\(unreadable)")
        let created = try await Self.bw(link, device, ["create", "attachment", "--file", file, "--itemid", "Recovery"])
        let item = try created.json()
        let attachment = try #require(item["attachments"]?.arrayValue?.first, "\(created)")
        #expect(created.status == 0 && attachment["fileName"] == .string("scan copy.pdf"), "\(created)")
        #expect(Self.keys(attachment) == ["id", "fileName", "size", "sizeName", "url"], "\(attachment)")
        let attachmentID = try #require(attachment["id"]?.stringValue)
        let itemID = try #require(item["id"]?.stringValue)

        let saved = try await Self.bw(link, device, ["get", "attachment", "scan", "--itemid", itemID, "--output", folder + "/out/"])
        #expect(saved.status == 0 && saved.stdout == "Saved \(folder)/out/scan copy.pdf", "\(saved)")
        #expect(FileManager.default.contents(atPath: folder + "/out/scan copy.pdf") == contents)
        let raw = try await Self.bw(link, device, ["get", "attachment", attachmentID, "--itemid", itemID, "--output", folder + "/named.pdf", "--raw"])
        #expect(raw.status == 0 && raw.stdout == folder + "/named.pdf", "\(raw)")
        #expect(FileManager.default.contents(atPath: folder + "/named.pdf") == contents)
        let piped = try await runProcess(link, ["get", "attachment", "SCAN COPY", "--itemid", itemID, "--output", "-"], environment: device.environment)
        #expect(piped.status == 0 && piped.stdout == text, "\(piped.stderr)")
        let notThere = try await Self.bw(link, device, ["get", "attachment", "nothing", "--itemid", itemID])
        #expect(notThere.status == 1 && notThere.stderr == "Attachment `nothing` was not found.", "\(notThere)")

        let deleted = try await Self.bw(link, device, ["delete", "attachment", attachmentID, "--itemid", itemID])
        #expect(deleted.status == 0 && deleted.stdout.isEmpty, "\(deleted)")
        #expect(try await Self.bw(link, device, ["get", "item", itemID]).json()["attachments"] == nil)
    }

    @Test("get exposed: the login's password looked up in a Pwned Passwords range service (one on loopback here) by five hex digits of its SHA-1; the count, 0 when absent; no service, an error")
    func exposed() async throws {
        let (scenario, device, link) = try await Self.device()
        defer { Task { await scenario.finish([device]) } }
        try await device.expect(["add", "login", "--name", "Weak", "--username", "w", "--password", "-"], stdin: "password\n")
        actor Asked {
            var paths: [String] = []
            func add(_ path: String) { paths.append(path) }
        }
        let asked = Asked()
        let service = try await LocalHTTPServer.bind(host: "127.0.0.1", port: 0)
        let serving = Task {
            await service.serve { request in
                await asked.add(request.path)
                let body = request.path == "/range/5BAA6"
                    ? "0018A45C4D1DEF81644B54AB7F969B88D65:1\r\n1E4C9B93F3F0682250B6CF8331B7EE68FD8:9659365\r\n"
                    : "0018A45C4D1DEF81644B54AB7F969B88D65:1\r\n"
                return LocalHTTPResponse(status: 200, headers: [("Content-Type", "text/plain")], body: Array(body.utf8))
            }
        }
        defer {
            service.close()
            serving.cancel()
        }
        let environment = ["VAULTSYNC_PWNED_PASSWORDS_URL": "http://127.0.0.1:\(service.port)"]
        let weak = try await Self.bw(link, device, ["get", "exposed", "Weak"], environment: environment)
        #expect(weak.status == 0 && weak.stdout == "9659365", "\(weak)")
        let unknown = try await Self.bw(link, device, ["get", "exposed", "GitHub Personal"], environment: environment)
        #expect(unknown.status == 0 && unknown.stdout == "0", "\(unknown)")
        let paths = await asked.paths
        #expect(paths == ["/range/5BAA6", "/range/CDC8E"], "only the prefixes left the device: \(paths)")
        let noPassword = try await Self.bw(link, device, ["get", "exposed", "Recovery"], environment: environment)
        #expect(noPassword.status == 1 && noPassword.stderr == "Not a login.", "\(noPassword)")
        service.close()
        let gone = try await Self.bw(link, device, ["get", "exposed", "Weak"], environment: ["VAULTSYNC_PWNED_PASSWORDS_URL": "http://127.0.0.1:1"])
        #expect(gone.status == 1 && !gone.stderr.isEmpty && gone.stdout.isEmpty, "\(gone)")
    }

    @Test("list organizations, collections and org-members, get organization and collection: bw's objects and key order, names decrypted with the organization's key, offline too (members online); the lookups' errors")
    func organizations() async throws {
        let (scenario, device, link) = try await Self.device()
        defer { Task { await scenario.finish([device]) } }
        let (orgID, _, _) = try await OrganizationInviteCommandTests.createOrganization(scenario)
        try await device.expect(["sync"])
        let organizations = try await Self.bw(link, device, ["list", "organizations"])
        let organization = try #require(try organizations.json().arrayValue?.first, "\(organizations)")
        #expect(Self.keys(organization) == ["object", "id", "name", "status"] && organization["name"] == .string("Family"), "\(organization)")
        let collections = try await Self.bw(link, device, ["list", "collections"])
        let collection = try #require(try collections.json().arrayValue?.first, "\(collections)")
        #expect(Self.keys(collection) == ["object", "id", "organizationId", "name", "externalId"], "\(collection)")
        #expect(collection["object"] == .string("collection") && collection["name"] == .string("Default") && collection["organizationId"] == .string(orgID))
        let collectionID = try #require(collection["id"]?.stringValue)
        #expect(try await Self.bw(link, device, ["list", "collections", "--organizationid", orgID]).json() == (try collections.json()))
        #expect(try await Self.bw(link, device, ["list", "collections", "--search", "nothing"]).stdout == "[]")
        // org-members: asked of the server, in bw's shape; the owner alone, confirmed.
        let members = try await Self.bw(link, device, ["list", "org-members", "--organizationid", orgID])
        let owner = try #require(try members.json().arrayValue?.first, "\(members)")
        #expect(try members.json().arrayValue?.count == 1, "\(members)")
        #expect(Self.keys(owner) == ["object", "email", "name", "id", "status", "type", "twoFactorEnabled"], "\(owner)")
        #expect(owner["object"] == .string("org-member") && owner["email"] == .string(scenario.email) && owner["status"] == .int(2)
                && owner["type"] == .int(0), "\(owner)")
        let noOrganization = try await Self.bw(link, device, ["list", "org-members"])
        #expect(noOrganization.status == 1 && noOrganization.stderr == "--organizationid <organizationid> required.", "\(noOrganization)")

        await scenario.server.stop()
        let byID = try await Self.bw(link, device, ["get", "collection", collectionID])
        #expect(try byID.status == 0 && byID.json() == collection, "offline, from the last sync: \(byID)")
        let byName = try await Self.bw(link, device, ["get", "organization", "fam"])
        #expect(try byName.status == 0 && byName.json() == organization, "\(byName)")
        let missing = try await Self.bw(link, device, ["get", "collection", "00000000-0000-0000-0000-000000000000"])
        #expect(missing.status == 1 && missing.stderr == "Not found.", "\(missing)")
        let offlineMembers = try await Self.bw(link, device, ["list", "org-members", "--organizationid", orgID])
        #expect(offlineMembers.status == 1 && offlineMembers.stderr.contains("could not be reached"), "\(offlineMembers)")
    }

    @Test("get template: bw's request shapes, printed locked too; a filled-in item template creates the item, as bw's documented recipe does")
    func templates() async throws {
        let (scenario, device, link) = try await Self.device()
        defer { Task { await scenario.finish([device]) } }
        let locked = ["VAULTSYNC_PASSWORD"]
        let item = try await Self.bw(link, device, ["get", "template", "item", "--nointeraction"], removing: locked)
        #expect(try item.status == 0 && Self.keys(try item.json()) == [
            "organizationId", "collectionIds", "folderId", "type", "name", "notes", "favorite", "fields", "login", "secureNote", "card",
            "identity", "sshKey", "reprompt", "passwordHistory", "creationDate", "revisionDate", "deletedDate",
        ], "\(item)")
        let login = try await Self.bw(link, device, ["get", "template", "item.login"], removing: locked)
        #expect(Self.keys(try login.json()) == ["uris", "username", "password", "totp", "fido2Credentials"], "\(login)")
        #expect(Self.keys(try await Self.bw(link, device, ["get", "template", "item.identity"], removing: locked).json()) == Self.identityKeys)
        #expect(Self.keys(try await Self.bw(link, device, ["get", "template", "item.card"], removing: locked).json()) == Self.cardKeys)
        #expect(try await Self.bw(link, device, ["get", "template", "item.login.uri"], removing: locked).stdout == #"{"uri":"https://google.com","match":null}"#)
        #expect(try await Self.bw(link, device, ["get", "template", "folder", "--response"], removing: locked).json()
                == .object(["success": .bool(true), "data": .object(["object": .string("template"), "template": .object(["name": .string("Folder name")])])]))
        let unknown = try await Self.bw(link, device, ["get", "template", "planet"], removing: locked)
        #expect(unknown.status == 1 && unknown.stderr == "Unknown template object.", "\(unknown)")

        // The recipe: the item template with a login template in it, encoded, created.
        var request = try #require(try item.json().objectValue)
        var loginObject = try #require(try login.json().objectValue)
        loginObject["username"] = .string("templated")
        request["name"] = .string("From the template")
        request["login"] = .object(loginObject)
        let created = try await Self.bw(link, device, ["create", "item", Data(JSONValue.object(request).serialized()).base64EncodedString()])
        #expect(try created.status == 0 && (try created.json())["login"]?["username"] == .string("templated"), "\(created)")
        #expect(try await device.expect(["get", "From the template", "--field", "password"]).stdout == "myp@ssword123\n")
    }

    @Test("get fingerprint me: the phrase Bitwarden's clients compute from this account's public key (as the server holds it) and user id, offline too; another user's needs the server")
    func fingerprint() async throws {
        let (scenario, device, link) = try await Self.device()
        defer { Task { await scenario.finish([device]) } }
        let privateKey = try await OrganizationInviteCommandTests.signedIn(scenario).privateKey
        let userID = try #require(try await Self.bw(link, device, ["status"]).json()["userId"]?.stringValue)
        let expected = AccountFingerprint.phrase(material: userID, publicKeySPKI: privateKey.publicKey.spkiDER)
        await scenario.server.stop()
        let phrase = try await Self.bw(link, device, ["get", "fingerprint", "me"])
        #expect(phrase.status == 0 && phrase.stdout == expected && phrase.stdout.split(separator: "-").count == 5, "\(phrase)")
        let byID = try await Self.bw(link, device, ["get", "fingerprint", userID])
        #expect(byID.stdout == expected, "\(byID)")
        // Another user's phrase needs their public key from the server (OrganizationCreateCommandTests reads one).
        let other = try await Self.bw(link, device, ["get", "fingerprint", "00000000-0000-0000-0000-000000000000"])
        #expect(other.status == 1 && !other.stderr.isEmpty && other.stdout.isEmpty, "\(other)")
        let notAnID = try await Self.bw(link, device, ["get", "fingerprint", "frank"])
        #expect(notAnID.status == 1 && notAnID.stderr.contains("A user id is a GUID, or `me`."), "\(notAnID)")
    }
}
