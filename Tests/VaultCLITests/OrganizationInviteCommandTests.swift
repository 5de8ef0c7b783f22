import AsyncHTTPClient
import Foundation
import Testing
import VaultAPI
import VaultCrypto
import VaultModels
import VaultTestSupport

@Suite("CLI: org invite prints a one-time code, org accept --code takes it", .timeLimit(.minutes(3)))
struct OrganizationInviteCommandTests {
    /// The owner's organization "Family", made through the API (the command line creates none), and the
    /// owner's access token for looking at its member list.
    static func createOrganization(_ scenario: CLIScenario) async throws -> (id: String, ownerToken: String, api: BitwardenAPI) {
        let (api, tokens, privateKey) = try await signedIn(scenario)
        let orgKey = SymmetricCryptoKey.generate()
        let org = try await api.rawJSON(.POST, "/api/organizations", token: tokens.accessToken, body: .object([
            "name": .string("Family"), "billingEmail": .string(scenario.email), "planType": .int(0),
            "key": .string(try privateKey.publicKey.wrap(orgKey).serialized),
            "collectionName": .string(try EncString.encrypt("Default", key: orgKey).serialized),
        ]))
        return (try #require(org["id"]?.stringValue), tokens.accessToken, api)
    }

    /// The scenario's account signed in through the API (as another device): its tokens and private key.
    static func signedIn(_ scenario: CLIScenario) async throws -> (api: BitwardenAPI, tokens: TokenResponse, privateKey: RSAPrivateKey) {
        let api = BitwardenAPI(baseURL: await scenario.server.url, httpClient: HTTPClient.shared)
        let kdf = try await api.prelogin(email: scenario.email)
        let master = try MasterKey.derive(password: scenario.password, salt: scenario.email, kdf: kdf)
        let tokens = try await api.login(email: scenario.email, passwordHash: master.serverAuthorizationHash(password: scenario.password),
                                         deviceIdentifier: UUID().uuidString, deviceName: "setup").tokens()
        let userKey = try master.decryptUserKey(EncString(try #require(tokens.key)))
        return (api, tokens, try RSAPrivateKey.decrypt(EncString(try #require(tokens.privateKey)), userKey: userKey))
    }

    @Test("the owner invites and is shown a code; the invitee sees the invitation, a wrong or replaced code is refused with a clear message, the right one accepts once")
    func inviteAndAccept() async throws {
        let scenario = try await CLIScenario.start()
        let owner = try await scenario.device(register: true)
        let (orgID, ownerToken, api) = try await Self.createOrganization(scenario)
        try await owner.expect(["sync"])

        let inviteeEmail = "cli-invitee-\(UUID().uuidString.prefix(8).lowercased())@example.com"
        let invitee = CLIDevice(password: scenario.password)
        try await invitee.expect(["config", "server", await scenario.server.url])
        try await invitee.expect(["register", inviteeEmail, "--kdf-iterations", "100000"])

        // Bad input is a usage error before anything is sent; an unknown organization is named.
        try await owner.expect(["org", "invite", "Family", "not-an-email"], status: 64)
        try await owner.expect(["org", "invite", "Family", inviteeEmail, "--type", "admin", "--read-only"], status: 64)
        try await owner.expect(["org", "invite", "Family", inviteeEmail, "--type", "boss"], status: 64)
        let unknown = try await owner.expect(["org", "invite", "Nobody", inviteeEmail], status: 4)
        #expect(unknown.stderr.contains("No organization matches \"Nobody\""))

        // The text answer: the code on a line of its own, and what to do with it.
        let text = try await owner.expect(["org", "invite", "Family", inviteeEmail])
        let lines = text.stdout.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        let firstCode = try #require(lines.first { InvitationCode.normalised($0) != nil && $0.count == 34 }, "\(text.stdout)")
        #expect(text.stdout.contains("Invited \(inviteeEmail) to \"Family\" as user"))
        #expect(text.stdout.contains("over another channel than this server"))
        #expect(text.stdout.contains("vaultsync org accept \(orgID) --code CODE"))

        // Inviting again (as a read-only manager, in JSON) makes a new code; the first one stops working.
        let json = try await owner.json(["org", "invite", "family", inviteeEmail, "--type", "manager", "--read-only"])
        let code = try #require(json["code"]?.stringValue)
        #expect(code != firstCode && InvitationCode.normalised(code) != nil)
        #expect(json["email"] == .string(inviteeEmail) && json["organizationId"] == .string(orgID) && json["type"] == .string("manager"))
        #expect(json["readOnly"] == .bool(true) && json["expirationDate"]?.stringValue != nil)

        // The invitee finds the invitation.
        let listed = try await invitee.expect(["org", "list"])
        #expect(listed.stdout.contains("\(orgID)\tFamily\tinvited"))
        let listedJSON = try await invitee.json(["org", "list"])
        #expect(listedJSON[0]?["id"] == .string(orgID) && listedJSON[0]?["invited"] == .bool(true) && listedJSON[0]?["status"] == .int(0))

        // Wrong codes: malformed is a usage error; a replaced or wrong one is refused by the server, said clearly.
        try await invitee.expect(["org", "accept", "Family", "--code", "1234"], status: 64)
        let replaced = try await invitee.expect(["org", "accept", "Family", "--code", firstCode], status: 6)
        #expect(replaced.stderr.contains("The invitation to \"Family\" (\(orgID)) was not accepted"))
        #expect(replaced.stderr.contains("wrong, used already or expired"))
        let wrong = String(code.first == "A" ? "B" : "A") + code.dropFirst()
        try await invitee.expect(["org", "accept", "Family", "--code", wrong], status: 6)
        let noInvite = try await invitee.expect(["org", "accept", "Nobody", "--code", code], status: 4)
        #expect(noInvite.stderr.contains("No pending invitation to \"Nobody\""))
        // The owner is not the invitee: nothing to accept.
        try await owner.expect(["org", "accept", "Family", "--code", code], status: 4)

        // The right code, typed loosely, accepts; the owner sees the member as accepted with the code.
        let accepted = try await invitee.expect(["org", "accept", orgID, "--code", code.lowercased().replacingOccurrences(of: "-", with: " ")])
        #expect(accepted.stdout.contains("Accepted the invitation to \"Family\""))
        let members = try await api.rawJSON(.GET, "/api/organizations/\(orgID)/users", token: ownerToken)
        let member = members["data"]?.arrayValue?.compactMap(\.objectValue).first { $0["email"] == .string(inviteeEmail) }
        #expect(member?["status"] == .int(1) && member?["acceptedWithCode"] == .bool(true) && member?["type"] == .int(3))
        // Once: the invitation is gone.
        try await invitee.expect(["org", "accept", "Family", "--code", code], status: 4)
        #expect(try await invitee.json(["org", "list"]) == .array([]))
        await scenario.finish([owner, invitee])
    }
}
