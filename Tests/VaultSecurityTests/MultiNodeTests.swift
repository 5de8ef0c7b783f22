import AsyncHTTPClient
import Foundation
import NIOCore
import Testing
import VaultCrypto
import VaultModels
import VaultTestSupport

/// What stateless nodes must share through PostgreSQL besides the vault (docs/OPERATIONS.md, "Several
/// nodes"): refresh-token rotation and its reuse detection, and the two-step lockout, with each request
/// of one client sent to another of three `vaultsync-server` processes.
@Suite("Several nodes: sessions and lockouts are the database's, not a node's")
struct MultiNodeTests {
    static func form(_ url: String, _ fields: [(String, String)]) async throws -> RawReply {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let body = fields.map { "\($0)=\($1.addingPercentEncoding(withAllowedCharacters: allowed) ?? $1)" }.joined(separator: "&")
        return try await rawRequest(url, .POST, "/identity/connect/token", body: Array(body.utf8), contentType: "application/x-www-form-urlencoded")
    }

    static func login(_ url: String, _ account: FuzzAccount, device: String, _ extra: [(String, String)] = []) async throws -> RawReply {
        try await form(url, [("grant_type", "password"), ("username", account.email), ("password", account.passwordHash),
                             ("scope", "api offline_access"), ("client_id", "cli"), ("deviceType", "25"),
                             ("deviceIdentifier", device), ("deviceName", "linux")] + extra)
    }

    static func refresh(_ url: String, _ token: String) async throws -> RawReply {
        try await form(url, [("grant_type", "refresh_token"), ("client_id", "cli"), ("refresh_token", token)])
    }

    @Test("three nodes: a refresh token rotated on two nodes and reused on the third revokes the chain everywhere; five wrong two-step codes over the three lock the account on each",
          .timeLimit(.minutes(5)))
    func sessionsAndLockouts() async throws {
        guard let adminURL = LoadSize.postgresURL else {
            #expect(ProcessInfo.processInfo.environment["CI"] == nil, "CI must export VAULTSYNC_TEST_POSTGRES_URL")
            return
        }
        let cluster = try await NodeCluster.start(nodes: 3, adminURL: adminURL)
        do {
            try await check(cluster.urls)
        } catch {
            await cluster.stop()
            throw error
        }
        await cluster.stop()
    }

    func check(_ nodes: [String]) async throws {
        let account = try await FuzzAccount.make(nodes[0])

        // Rotation: login on node 0, refresh on 1, then on 2; the first token, presented again on node 0, is
        // an older token of the chain: the device is revoked, on every node.
        let first = try #require(try await Self.login(nodes[0], account, device: "laptop").object?["refresh_token"]?.stringValue)
        let second = try await Self.refresh(nodes[1], first)
        let secondToken = try #require(second.object?["refresh_token"]?.stringValue, "\(String(decoding: second.body, as: UTF8.self))")
        let third = try await Self.refresh(nodes[2], secondToken)
        let thirdToken = try #require(third.object?["refresh_token"]?.stringValue)
        let access = try #require(third.object?["access_token"]?.stringValue)
        for node in nodes { #expect(try await rawRequest(node, .GET, "/api/sync", token: access).status == 200) }
        let reused = try await Self.refresh(nodes[0], first)
        #expect(reused.status == 400 && reused.object?["error"]?.stringValue == "invalid_grant")
        for node in nodes {
            #expect(try await Self.refresh(node, thirdToken).status == 400, "the chain is revoked on every node")
            #expect(try await rawRequest(node, .GET, "/api/sync", token: access).status == 401, "and its access token")
        }

        // Two-step login: the authenticator on, then five wrong codes, one node after another.
        let shown = try await rawRequest(nodes[1], .POST, "/api/two-factor/get-authenticator", token: account.token,
                                         body: JSONValue.object(["masterPasswordHash": .string(account.passwordHash)]).serialized())
        let key = try #require(shown.object?["key"]?.stringValue, "\(String(decoding: shown.body, as: UTF8.self))")
        let verification = try #require(shown.object?["userVerificationToken"]?.stringValue)
        func code(offset: Int64 = 0) throws -> String {
            try TOTP(secretOrURI: key).code(counter: UInt64((Int64(Date().timeIntervalSince1970) + offset) / 30))
        }
        let enabled = try await rawRequest(nodes[2], .PUT, "/api/two-factor/authenticator", token: account.token, body: JSONValue.object([
            "token": .string(try code()), "key": .string(key), "userVerificationToken": .string(verification),
        ]).serialized())
        #expect(enabled.status == 200, "\(String(decoding: enabled.body, as: UTF8.self))")
        let right = try code(offset: 30)
        let wrong = right == "000000" ? "111111" : "000000"
        for attempt in 0..<5 {
            let refused = try await Self.login(nodes[attempt % 3], account, device: "phone",
                                               [("twoFactorToken", wrong), ("twoFactorProvider", "0"), ("twoFactorRemember", "0")])
            #expect(refused.status == 400, "wrong code \(attempt + 1): \(String(decoding: refused.body, as: UTF8.self))")
        }
        for node in nodes {
            let locked = try await Self.login(node, account, device: "phone",
                                              [("twoFactorToken", try code()), ("twoFactorProvider", "0"), ("twoFactorRemember", "0")])
            #expect(locked.status == 429, "even the right code waits, on every node: \(String(decoding: locked.body, as: UTF8.self))")
        }
    }
}
