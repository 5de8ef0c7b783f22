import Foundation
import Logging
import Testing
import VaultModels
@testable import VaultServer
import VaultTestSupport

/// Where a sharing scenario's server keeps its data.
enum SharingBackend: String, CaseIterable, CustomStringConvertible, Sendable {
    case sqlite, postgres
    var description: String { rawValue }

    static var adminURL: String? { ProcessInfo.processInfo.environment["VAULTSYNC_TEST_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 } }
    static var available: [SharingBackend] { adminURL == nil ? [.sqlite] : [.sqlite, .postgres] }

    /// A server on this backend (PostgreSQL: a database of its own on the test cluster).
    func scenario() async throws -> CLIScenario {
        guard self == .postgres, let adminURL = Self.adminURL else { return try await CLIScenario.start() }
        let name = "vs_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let admin = try PostgresDatabase(url: adminURL, logger: Logger(label: "test-admin"))
        try await admin.executeOutsideTransaction("CREATE DATABASE \(name)")
        var components = try #require(URLComponents(string: adminURL))
        components.path = "/\(name)"
        let url = try #require(components.url).absoluteString
        return try await CLIScenario.start { $0.databaseURL = url }
    }
}

@Suite("CLI: sharing through an organization, with three accounts")
struct SharingCommandTests {
    /// A device of a new account on the scenario's server.
    static func account(_ scenario: CLIScenario, _ name: String) async throws -> (CLIDevice, String) {
        let email = "\(name)-\(UUID().uuidString.prefix(8).lowercased())@example.com"
        let device = CLIDevice(password: scenario.password)
        try await device.expect(["config", "server", await scenario.server.url])
        try await device.expect(["register", email, "--kdf-iterations", "100000"])
        return (device, email)
    }

    /// Invites, accepts and confirms (after checking the phrase) a member with `grant` (`NAME:ACCESS`).
    static func join(_ owner: CLIDevice, _ member: CLIDevice, _ email: String, _ grant: String) async throws {
        let code = try #require(try await owner.json(["org", "invite", "Family", email, "--role", "user", "--collection", grant])["code"]?.stringValue)
        let invites = try await member.json(["org", "invites"])
        #expect(invites.count == 1 && invites[0]?["organizationName"] == .string("Family") && invites[0]?["type"] == .string("user"), "\(invites)")
        try await member.expect(["org", "accept", "Family", "--code", code])
        let phrase = try await member.expect(["fingerprint"]).stdout.trimmingCharacters(in: .newlines)
        try await owner.expect(["org", "confirm", "Family", email, "--fingerprint", phrase])
        try await member.expect(["sync"])
        try await member.expect(["org", "trust", "Family"])
    }

    @Test("owner creates, invites with per-collection access, confirms after the phrase; an item shared into a collection is read by a read-only member (online and offline), whose edit and attachment are refused; a hide-passwords member never gets the password; collections and access change; a removed member's next sync drops the items; the last owner cannot leave",
          arguments: SharingBackend.available)
    func sharing(backend: SharingBackend) async throws {
        let scenario = try await backend.scenario()
        let (owner, _) = try await Self.account(scenario, "owner")
        let (alice, aliceEmail) = try await Self.account(scenario, "alice")
        let (bob, bobEmail) = try await Self.account(scenario, "bob")
        try await owner.expect(["org", "create", "Family", "--collection", "Everyone"])
        try await owner.expect(["collection", "add", "Family", "Kids"])
        let bogus = try await owner.expect(["org", "invite", "Family", aliceEmail, "--collection", "Nowhere:read-only"], status: 4)
        #expect(bogus.stderr.contains("Nowhere"), "\(bogus.stderr)")
        let badAccess = try await owner.expect(["org", "invite", "Family", aliceEmail, "--collection", "Everyone:bogus"], status: 64)
        #expect(badAccess.stderr.contains("\"bogus\" in --collection Everyone:bogus is not an access"), "\(badAccess.stderr)")
        try await Self.join(owner, alice, aliceEmail, "Everyone:read-only")
        try await Self.join(owner, bob, bobEmail, "Everyone:hide-passwords")
        let members = try await owner.json(["org", "members", "Family"])
        let aliceEntry = try #require(members.arrayValue?.first { $0["email"] == .string(aliceEmail) }, "\(members)")
        #expect(aliceEntry["status"] == .string("confirmed"), "\(aliceEntry)")
        #expect(aliceEntry["collections"]?[0]?["access"] == .string("read-only"), "\(aliceEntry)")

        // The owner shares a personal item (with an attachment) into a collection.
        try await owner.expect(["add", "login", "--name", "Home wifi", "--username", "guest", "--password", "-"], stdin: "wifi-Secret-1\n")
        let folder = NSTemporaryDirectory() + "vaultsync-share-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try Data("router admin: 1234\n".utf8).write(to: URL(fileURLWithPath: folder + "/router.txt"))
        try await owner.expect(["attachment", "add", "Home wifi", folder + "/router.txt"])
        try await owner.expect(["share", "Home wifi", "Family"], status: 64)
        let shared = try await owner.expect(["share", "Home wifi", "Family", "--collection", "Everyone"])
        #expect(shared.stdout.contains("Shared \"Home wifi\" with \"Family\", in \"Everyone\""), "\(shared.stdout)")
        let again = try await owner.run(["share", "Home wifi", "Family", "--collection", "Everyone"])
        #expect(again.status == 64 && again.stderr.contains("in an organization already"), "\(again)")
        let ownerList = try await owner.json(["list", "--organization", "Family", "--collection", "Everyone"])
        #expect(ownerList.count == 1 && ownerList[0]?["name"] == .string("Home wifi"), "\(ownerList)")
        #expect(try await owner.json(["list", "--organization", "none"]).count == 0, "nothing personal left")

        // Alice (read-only) reads it, its attachment too; her changes are refused by the server.
        try await alice.expect(["sync"])
        #expect(try await alice.expect(["get", "Home wifi", "--field", "password"]).stdout == "wifi-Secret-1\n")
        let aliceList = try await alice.json(["list", "--organization", "Family", "--collection", "Everyone"])
        #expect(aliceList.count == 1, "\(aliceList)")
        let opened = try await alice.expect(["attachment", "get", "Home wifi", "router.txt", "--output", folder + "/copy.txt"])
        #expect(FileManager.default.contents(atPath: folder + "/copy.txt") == Data("router admin: 1234\n".utf8), "\(opened)")
        let edit = try await alice.run(["edit", "Home wifi", "--username", "alice"])
        #expect(edit.status == 6 && edit.stderr.contains("You do not have permissions to edit this"), "\(edit)")
        let attach = try await alice.run(["attachment", "add", "Home wifi", folder + "/router.txt"])
        #expect(attach.status == 6 && attach.stderr.contains("permissions to edit"), "\(attach)")
        #expect(try await alice.expect(["get", "Home wifi", "--field", "username"]).stdout == "guest\n")

        // Bob (hide passwords) sees the item without its password: the server never sent it.
        try await bob.expect(["sync"])
        let hidden = try await bob.run(["get", "Home wifi", "--field", "password"])
        #expect(hidden.status != 0 && hidden.stderr.contains("hides the passwords"), "\(hidden)")
        let bobItem = try await bob.json(["get", "Home wifi"])
        #expect(bobItem["login"]?["password"] == nil || bobItem["login"]?["password"] == .null, "\(bobItem)")
        #expect(bobItem["login"]?["username"] == .string("guest") && bobItem["viewPassword"] == .bool(false), "\(bobItem)")
        // A member may not administer the organization: said as such.
        let notAdmin = try await bob.run(["org", "members", "Family"])
        #expect(notAdmin.status == 6 && notAdmin.stderr.contains("only the organization's owners and admins"), "\(notAdmin)")
        #expect(try await bob.expect(["get", "Home wifi"]).stdout.contains("hidden by the organization"))

        // Collections and access: the item moves to Kids, where Bob has no access and Alice gets it.
        try await owner.expect(["edit", "Home wifi", "--collection", "Kids"])
        try await owner.expect(["collection", "access", "Family", "Kids", aliceEmail, "read-only"])
        let access = try await owner.json(["collection", "access", "Family", "Kids"])
        #expect(access.count == 1 && access[0]?["email"] == .string(aliceEmail) && access[0]?["access"] == .string("read-only"), "\(access)")
        try await bob.expect(["sync"])
        #expect(try await bob.json(["list"]).count == 0, "bob no longer sees it")
        try await alice.expect(["sync"])
        #expect(try await alice.json(["list", "--organization", "Family", "--collection", "Kids"]).count == 1)

        // bw's surface: create straight into a collection, move a personal item, change collections, list the organization's.
        let organizationID = try #require(try await owner.json(["org", "list"])[0]?["id"]?.stringValue)
        let collectionsByName = Dictionary(uniqueKeysWithValues: (try await owner.json(["collection", "list", "Family"]).arrayValue ?? [])
            .compactMap { entry in entry["name"]?.stringValue.flatMap { name in entry["id"]?.stringValue.map { (name, $0) } } })
        let everyoneID = try #require(collectionsByName["Everyone"]), kidsID = try #require(collectionsByName["Kids"])
        func encoded(_ value: JSONValue) -> String { Data(value.serialized()).base64EncodedString() }
        let orgCollections = try JSONParser.parse(Array(try await owner.expect(["bw", "list", "org-collections", "--organizationid", organizationID]).stdout.utf8))
        #expect(Set((orgCollections.arrayValue ?? []).compactMap { $0["id"]?.stringValue }) == [everyoneID, kidsID], "\(orgCollections)")
        #expect(orgCollections[0]?["object"] == .string("org-collection"))
        let createdInOrg = try await owner.expect(["bw", "create", "item", encoded(.object([
            "type": .int(1), "name": .string("Router"), "organizationId": .string(organizationID), "collectionIds": .array([.string(kidsID)]),
            "login": .object(["username": .string("admin"), "password": .string("router-Secret-2")]),
        ]))])
        let router = try JSONParser.parse(Array(createdInOrg.stdout.utf8))
        #expect(router["organizationId"] == .string(organizationID) && router["collectionIds"] == .array([.string(kidsID)]), "\(router)")
        try await owner.expect(["add", "login", "--name", "Printer", "--username", "office"])
        let printerID = try #require(itemID(try await owner.json(["list"]), named: "Printer"))
        let moved = try JSONParser.parse(Array(try await owner.expect(["bw", "move", printerID, organizationID,
                                                                       encoded(.array([.string(everyoneID)]))]).stdout.utf8))
        #expect(moved["organizationId"] == .string(organizationID) && moved["collectionIds"] == .array([.string(everyoneID)]), "\(moved)")
        let recollected = try JSONParser.parse(Array(try await owner.expect(["bw", "edit", "item-collections", printerID,
                                                                             encoded(.array([.string(everyoneID), .string(kidsID)]))]).stdout.utf8))
        #expect(Set((recollected["collectionIds"]?.arrayValue ?? []).compactMap(\.stringValue)) == [everyoneID, kidsID], "\(recollected)")
        try await alice.expect(["sync"])
        #expect(Set((try await alice.json(["list", "--organization", "Family", "--collection", "Kids"]).arrayValue ?? [])
            .compactMap { $0["name"]?.stringValue }) == ["Home wifi", "Router", "Printer"])
        try await owner.expect(["delete", "Router", "--permanent"])
        try await owner.expect(["delete", "Printer", "--permanent"])

        // Removal: Alice's next sync drops the item and the organization.
        try await owner.expect(["org", "remove", "Family", aliceEmail])
        try await alice.expect(["sync"])
        #expect(try await alice.json(["list"]).count == 0)
        #expect(try await alice.json(["org", "list"]).count == 0)

        // Leaving: the last owner cannot; Bob can.
        let lastOwner = try await owner.run(["org", "leave", "Family", "--yes"])
        #expect(lastOwner.status == 6 && lastOwner.stderr.contains("at least one confirmed owner"), "\(lastOwner)")
        // Roles: Bob becomes an admin (the member list says so), then a user again; a member cannot change roles.
        let byMember = try await bob.run(["org", "role", "Family", bobEmail, "owner"])
        #expect(byMember.status == 6, "\(byMember)")
        try await owner.expect(["org", "role", "Family", bobEmail, "admin"])
        #expect(try await owner.json(["org", "members", "Family"]).arrayValue?.first { $0["email"] == .string(bobEmail) }?["type"] == .string("admin"))
        try await owner.expect(["org", "role", "Family", bobEmail, "user"])
        try await owner.expect(["collection", "access", "Family", "Everyone", bobEmail, "edit"])
        try await bob.expect(["sync"])

        // Offline: shared items stay readable; sharing, collection moves and edits of them are refused at once, nothing queued.
        try await owner.expect(["add", "login", "--name", "Streaming", "--username", "family"])
        try await owner.expect(["edit", "Home wifi", "--collection", "Everyone"])
        try await bob.expect(["sync"])
        await scenario.server.stop()
        #expect(try await bob.expect(["get", "Home wifi", "--field", "username"]).stdout == "guest\n")
        let offlineEdit = try await bob.run(["edit", "Home wifi", "--username", "bob"])
        #expect(offlineEdit.status == 7 && offlineEdit.stderr.contains("cannot be edited while offline"), "\(offlineEdit)")
        let offlineShare = try await owner.run(["share", "Streaming", "Family", "--collection", "Everyone"])
        #expect(offlineShare.status == 7 && offlineShare.stderr.contains("need the server, which could not be reached"), "\(offlineShare)")
        let offlineMove = try await owner.run(["edit", "Home wifi", "--collection", "Kids"])
        #expect(offlineMove.status == 7, "\(offlineMove)")
        #expect(try await owner.json(["pending"]).count == 0, "nothing about sharing is queued")
        #expect(try await bob.json(["pending"]).count == 0)

        // Back online: Bob leaves (asked first at a terminal: "n" keeps him in), then the owner deletes the
        // organization (the password asked again); its items leave every member.
        try await scenario.server.start()
        var environment = bob.environment
        environment["TERM"] = "xterm"
        let asked = try TerminalSession(try vaultsyncExecutable(), ["org", "leave", "Family"], environment: environment)
        defer { asked.end() }
        try await asked.waitFor("[y/N] ")
        asked.type("n\r")
        #expect(try await asked.exit() != 0, "\(asked.text)")
        #expect(try await bob.json(["org", "list"]).count == 1, "still a member")
        try await bob.expect(["org", "leave", "Family", "--yes"])
        #expect(try await bob.json(["list"]).count == 0)
        #expect(try await bob.json(["org", "list"]).count == 0)
        let wrongPassword = try await owner.run(["org", "delete", "Family", "--yes"], environment: ["VAULTSYNC_PASSWORD": "not the password"])
        #expect(wrongPassword.status != 0, "\(wrongPassword)")
        let unasked = try await owner.expect(["org", "delete", "Family"], status: 64)
        #expect(unasked.stderr.contains("give --yes"), "\(unasked.stderr)")
        try await owner.expect(["org", "delete", "Family", "--yes"])
        #expect(try await owner.json(["org", "list"]).count == 0)
        #expect(try await owner.json(["list"]).arrayValue?.compactMap { $0["name"]?.stringValue } == ["Streaming"], "only the personal item is left")
        await scenario.finish([owner, alice, bob])
    }
}
