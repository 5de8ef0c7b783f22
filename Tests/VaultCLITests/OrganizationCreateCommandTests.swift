import AsyncHTTPClient
import Foundation
import Testing
import VaultAPI
import VaultCrypto
import VaultModels
import VaultTestSupport

@Suite("CLI: org create and fingerprint")
struct OrganizationCreateCommandTests {
    @Test("org create makes an organization owned and trusted here, its key wrapped with the owner's public key and its collection's name encrypted; collections added, renamed, deleted; fingerprint prints the owner's phrase; bad names are refused before anything is sent")
    func createAndFingerprint() async throws {
        let scenario = try await CLIScenario.start()
        let owner = try await scenario.device(register: true)

        try await owner.expect(["org", "create", ""], status: 64)
        let long = try await owner.expect(["org", "create", String(repeating: "x", count: 51)], status: 64)
        #expect(long.stderr.contains("the name is longer than 50 characters, the most servers accept"), "\(long.stderr)")
        try await owner.expect(["org", "create", "Family", "--collection", " "], status: 64)

        let created = try await owner.expect(["org", "create", "Family", "--collection", "Kids"])
        #expect(created.stdout.contains("Created \"Family\"") && created.stdout.contains("trusted on this device"), "\(created.stdout)")
        let listed = try await owner.json(["org", "list"])
        let id = try #require(listed[0]?["id"]?.stringValue, "\(listed)")
        #expect(listed[0]?["name"] == .string("Family") && listed[0]?["status"] == .int(2) && listed[0]?["trusted"] == .bool(true), "\(listed)")
        #expect(listed[1] == nil, "one organization: \(listed)")

        // What the server holds, read through the API as another device: the organization key wrapped with the
        // owner's public key, which the owner's private key opens, and the collection's name encrypted with it.
        let (api, tokens, privateKey) = try await OrganizationInviteCommandTests.signedIn(scenario)
        let sync = try await api.rawJSON(.GET, "/api/sync", token: tokens.accessToken)
        let membership = try #require(sync["profile"]?.objectValue?["organizations"]?.arrayValue?.first?.objectValue)
        #expect(membership["id"] == .string(id) && membership["type"] == .int(0), "the owner: \(membership)")
        let organizationKey = try privateKey.unwrapKey(EncString(try #require(membership["key"]?.stringValue)))
        let collections = try await api.rawJSON(.GET, "/api/organizations/\(id)/collections", token: tokens.accessToken)
        let sealedName = try #require(collections["data"]?.arrayValue?.first?.objectValue?["name"]?.stringValue)
        #expect(!sealedName.contains("Kids"))
        #expect(try EncString(sealedName).decryptString(key: organizationKey) == "Kids")

        // Collections: listed from the sync, added, renamed and deleted; their names never reach the server in the clear.
        let first = try await owner.json(["collection", "list", "Family"])
        #expect(first.arrayValue?.count == 1 && first[0]?["name"] == .string("Kids"), "\(first)")
        try await owner.expect(["collection", "add", "Family", "Holidays"])
        try await owner.expect(["collection", "add", "Family", " "], status: 64)
        try await owner.expect(["collection", "rename", "Family", "holidays", "Summer 2027"])
        let renamed = try await owner.json(["collection", "list", "Family"])
        #expect(Set((renamed.arrayValue ?? []).compactMap { $0["name"]?.stringValue }) == ["Kids", "Summer 2027"], "\(renamed)")
        let onServer = try await api.rawJSON(.GET, "/api/organizations/\(id)/collections", token: tokens.accessToken)
        let sealedNames = try (onServer["data"]?.arrayValue ?? []).compactMap { $0.objectValue?["name"]?.stringValue }
            .map { try EncString($0).decryptString(key: organizationKey) }
        #expect(Set(sealedNames) == ["Kids", "Summer 2027"], "\(onServer)")
        let unknown = try await owner.expect(["collection", "delete", "Family", "Winter"], status: 4)
        #expect(unknown.stderr.contains("Winter"), "\(unknown.stderr)")
        try await owner.expect(["collection", "delete", "Family", "Summer 2027"])
        #expect(try await owner.json(["collection", "list"]).arrayValue?.compactMap { $0["name"]?.stringValue } == ["Kids"])

        // The invite needs no API call any more: the organization is there for the command line.
        let invited = try await owner.expect(["org", "invite", "Family", "frank-\(UUID().uuidString.prefix(6).lowercased())@example.com"])
        #expect(invited.stdout.contains("Invited frank-"), "\(invited.stdout)")

        // The phrase: the account's id and public key, as Bitwarden computes it; offline too.
        let profile = try await api.rawJSON(.GET, "/api/accounts/profile", token: tokens.accessToken)
        let userID = try #require(profile["id"]?.stringValue)
        let expected = AccountFingerprint.phrase(material: userID, publicKeySPKI: privateKey.publicKey.spkiDER)
        #expect(expected.split(separator: "-").count == 5, "\(expected)")
        #expect(try await owner.expect(["fingerprint"]).stdout == expected + "\n")
        #expect(try await owner.json(["fingerprint"])["fingerprint"] == .string(expected))
        await scenario.server.stop()
        #expect(try await owner.expect(["fingerprint"]).stdout == expected + "\n")
        let offline = try await owner.run(["org", "create", "Team"])
        #expect(offline.status != 0 && !offline.stdout.contains("Created"), "\(offline)")
        #expect(try await owner.json(["org", "list"])[1] == nil, "nothing made offline")
        await scenario.finish([owner])
    }

    @Test("org confirm: the member's phrase from the key the server gives; a wrong --fingerprint refuses, a script without one is told how, the terminal shows it and asks (no confirms nothing), the phrase as typed confirms; the member then holds the key")
    func confirmChecksThePhrase() async throws {
        let scenario = try await CLIScenario.start()
        let owner = try await scenario.device(register: true)
        try await owner.expect(["org", "create", "Family"])
        let inviteeEmail = "frank-\(UUID().uuidString.prefix(8).lowercased())@example.com"
        let invitee = CLIDevice(password: scenario.password)
        try await invitee.expect(["config", "server", await scenario.server.url])
        try await invitee.expect(["register", inviteeEmail, "--kdf-iterations", "100000"])
        let code = try #require(try await owner.json(["org", "invite", "Family", inviteeEmail])["code"]?.stringValue)

        // Only an accepted member can be confirmed.
        let early = try await owner.run(["org", "confirm", "Family", inviteeEmail, "--fingerprint", "a-b-c-d-e"])
        #expect(early.status != 0 && early.stderr.contains("has not accepted the invitation yet"), "\(early)")
        try await invitee.expect(["org", "accept", "Family", "--code", code])
        let members = try await owner.json(["org", "members", "Family"])
        let entry = try #require(members.arrayValue?.first { $0["email"] == .string(inviteeEmail) }, "\(members)")
        #expect(entry["status"] == .string("accepted") && entry["type"] == .string("user"), "\(entry)")

        let phrase = try await invitee.expect(["fingerprint"]).stdout.trimmingCharacters(in: .newlines)
        // bw's form of the same question, by the member's user id: the phrase of the key the server gives.
        let inviteeUserID = try #require(entry["userId"]?.stringValue)
        let byBW = try await owner.run(["bw", "get", "fingerprint", inviteeUserID])
        #expect(byBW.status == 0 && byBW.stdout == phrase, "\(byBW)")
        let wrong = try await owner.expect(["org", "confirm", "Family", inviteeEmail, "--fingerprint", "wrong-words-in-this-phrase"], status: 8)
        #expect(wrong.stderr.contains("Nothing was confirmed") && wrong.stderr.contains(phrase), "\(wrong.stderr)")
        let unasked = try await owner.expect(["org", "confirm", "Family", inviteeEmail], status: 64)
        #expect(unasked.stderr.contains("--fingerprint PHRASE"), "\(unasked.stderr)")

        // On a terminal: the phrase is shown and asked about; "n" confirms nothing.
        var environment = owner.environment
        environment["TERM"] = "xterm"
        let declined = try TerminalSession(try vaultsyncExecutable(), ["org", "confirm", "Family", inviteeEmail], environment: environment)
        defer { declined.end() }
        try await declined.waitFor("[y/N] ")
        #expect(declined.text.contains(phrase), "\(declined.text)")
        declined.type("n\r")
        #expect(try await declined.exit() != 0, "\(declined.text)")
        #expect(try await owner.json(["org", "members", "Family"]).arrayValue?.first { $0["email"] == .string(inviteeEmail) }?["status"]
                == .string("accepted"))
        // The phrase as people type it (capitals, spaces between the words) confirms; a second confirm finds no one waiting.
        let confirmed = try await owner.expect(["org", "confirm", "Family", inviteeEmail,
                                                "--fingerprint", phrase.uppercased().replacingOccurrences(of: "-", with: " ")])
        #expect(confirmed.stdout.contains("Confirmed \(inviteeEmail)"), "\(confirmed.stdout)")
        let again = try await owner.run(["org", "confirm", "Family", inviteeEmail, "--fingerprint", phrase])
        #expect(again.status == 64 && again.stderr.contains("is a confirmed member already"), "\(again)")
        #expect(try await owner.json(["org", "members", "Family"]).arrayValue?.first { $0["email"] == .string(inviteeEmail) }?["status"]
                == .string("confirmed"))
        try await invitee.expect(["sync"])
        let joined = try await invitee.json(["org", "list"])
        #expect(joined[0]?["name"] == .string("Family") && joined[0]?["status"] == .int(2) && joined[0]?["keyAvailable"] == .bool(true), "\(joined)")
        await scenario.finish([owner, invitee])
    }
}
