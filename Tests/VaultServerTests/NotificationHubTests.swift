import Foundation
import Hummingbird
import HummingbirdWSClient
import Logging
import ServiceLifecycle
import Testing
import VaultCrypto
import VaultModels
@testable import VaultServer

/// `/notifications/hub` on a real server over real WebSockets: each change reaches exactly the
/// connections that may know of it, with Bitwarden's push type, the ids, and the acting device as
/// ContextId; ended sessions are closed.
@Suite("Notifications hub", .serialized)
struct NotificationHubTests {
    static let protocols: [HubProtocol] = [.json, .messagePack]

    static func port(_ api: APIClient) throws -> Int { try #require(api.client.port) }

    /// A client whose handshake was answered.
    static func connect(_ api: APIClient, _ device: SignedInDevice, _ hubProtocol: HubProtocol, tokenInHeader: Bool = false) async throws
        -> HubTestClient {
        let client = HubTestClient(port: try port(api), token: device.access, protocol: hubProtocol, tokenInHeader: tokenInHeader)
        #expect(try await client.next() == .handshake(error: nil))
        return client
    }

    static func expect(_ argument: JSONObject, type: PushType, context: String?, _ payload: [String: JSONValue],
                       sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(argument["Type"] == .int(type.rawValue), "type", sourceLocation: sourceLocation)
        #expect(argument["ContextId"] == (context.map(JSONValue.string) ?? .null), "context", sourceLocation: sourceLocation)
        let body = argument["Payload"]?.objectValue ?? JSONObject()
        for (key, value) in payload {
            #expect(body[key] == value, "\(key) of \(type)", sourceLocation: sourceLocation)
        }
        // Ids and dates only: never more than the payload classes carry.
        let allowed: Set<String> = ["Id", "UserId", "OrganizationId", "CollectionIds", "RevisionDate", "Date"]
        #expect(Set(body.map(\.key)).isSubset(of: allowed), "payload keys \(body.map(\.key))", sourceLocation: sourceLocation)
        for date in ["RevisionDate", "Date"] {
            if let text = body[date]?.stringValue { #expect(WireDate(iso8601: text) != nil, sourceLocation: sourceLocation) }
        }
    }

    static func userID(_ token: String) throws -> String {
        let payload = try #require(AccessTokenSigner.decodeBase64URL(token.split(separator: ".")[1]))
        return try #require(try JSONParser.parseObject(payload)["sub"]?.stringValue)
    }

    @Test("a user's changes reach their other device, typed and with the acting device as ContextId, and no one else",
          arguments: Backend.available, protocols)
    func personalChanges(backend: Backend, hubProtocol: HubProtocol) async throws {
        try await withTestServer(backend) { api in
            let user = try await TestUser.register(api)
            let listening = try await SignedInDevice.login(user, api)
            let acting = try await SignedInDevice.login(user, api)
            let other = try await TestUser.register(api)
            let otherDevice = try await SignedInDevice.login(other, api)
            let userID = try Self.userID(acting.access)
            let mine = try await Self.connect(api, listening, hubProtocol)
            // The token may come as a bearer header too.
            let theirs = try await Self.connect(api, otherDevice, hubProtocol, tokenInHeader: true)
            defer { mine.disconnect(); theirs.disconnect() }
            let token = acting.access
            let context = acting.identifier

            let folder = try await api.request(.post, "/api/folders", token: token,
                                               json: .object(["name": .string(try EncString.encrypt("Work", key: user.userKey).serialized)]))
            let folderID = try #require(folder.object["id"]?.stringValue)
            Self.expect(try await mine.nextNotification(), type: .syncFolderCreate, context: context,
                        ["Id": .string(folderID), "UserId": .string(userID), "RevisionDate": try #require(folder.object["revisionDate"])])
            let renamed = try await api.request(.put, "/api/folders/\(folderID)", token: token,
                                                json: .object(["name": .string(try EncString.encrypt("Job", key: user.userKey).serialized)]))
            Self.expect(try await mine.nextNotification(), type: .syncFolderUpdate, context: context,
                        ["Id": .string(folderID), "RevisionDate": try #require(renamed.object["revisionDate"])])

            let created = try await api.request(.post, "/api/ciphers", token: token, json: .object(try user.loginItem(name: "Mail")))
            let cipherID = try #require(created.object["id"]?.stringValue)
            Self.expect(try await mine.nextNotification(), type: .syncCipherCreate, context: context, [
                "Id": .string(cipherID), "UserId": .string(userID), "OrganizationId": .null, "CollectionIds": .null,
                "RevisionDate": try #require(created.object["revisionDate"]),
            ])
            var edit = created.object
            edit["lastKnownRevisionDate"] = created.object["revisionDate"]
            let updated = try await api.request(.put, "/api/ciphers/\(cipherID)", token: token, json: .object(edit))
            #expect(updated.status == .ok)
            Self.expect(try await mine.nextNotification(), type: .syncCipherUpdate, context: context,
                        ["Id": .string(cipherID), "RevisionDate": try #require(updated.object["revisionDate"])])
            // A soft delete and a restore are updates; a delete for good is SyncLoginDelete.
            #expect(try await api.request(.put, "/api/ciphers/\(cipherID)/delete", token: token).status == .ok)
            Self.expect(try await mine.nextNotification(), type: .syncCipherUpdate, context: context, ["Id": .string(cipherID)])
            #expect(try await api.request(.put, "/api/ciphers/\(cipherID)/restore", token: token).status == .ok)
            Self.expect(try await mine.nextNotification(), type: .syncCipherUpdate, context: context, ["Id": .string(cipherID)])
            #expect(try await api.request(.delete, "/api/ciphers/\(cipherID)", token: token).status == .ok)
            Self.expect(try await mine.nextNotification(), type: .syncLoginDelete, context: context,
                        ["Id": .string(cipherID), "UserId": .string(userID)])
            #expect(try await api.request(.delete, "/api/folders/\(folderID)", token: token).status == .ok)
            Self.expect(try await mine.nextNotification(), type: .syncFolderDelete, context: context, ["Id": .string(folderID)])

            let imported = try await api.request(.post, "/api/ciphers/import", token: token, json: .object([
                "ciphers": .array([.object(try user.loginItem(name: "Imported"))]), "folders": .array([]), "folderRelationships": .array([]),
            ]))
            #expect(imported.status == .ok)
            Self.expect(try await mine.nextNotification(), type: .syncVault, context: context, ["UserId": .string(userID)])
            #expect(try await api.request(.put, "/api/settings/domains", token: token, json: .object([
                "equivalentDomains": .array([.array([.string("example.com"), .string("example.net")])]),
            ])).status == .ok)
            Self.expect(try await mine.nextNotification(), type: .syncSettings, context: context, ["UserId": .string(userID)])

            // Pings and invocations from the client are taken and ignored: the connection carries on.
            mine.send(hubProtocol.encode(.ping))
            mine.send(hubProtocol == .json
                ? Array(#"{"type":1,"target":"Anything","arguments":[1]}"#.utf8) + [0x1e]
                : Self.framed(MessagePackValue.array([.int(1), .map([]), .nil, .string("Anything"), .array([])])))

            // The other account heard none of it: its first message is its own change.
            let otherFolder = try await api.request(.post, "/api/folders", token: otherDevice.access,
                                                    json: .object(["name": .string(try EncString.encrypt("Mine", key: other.userKey).serialized)]))
            Self.expect(try await theirs.nextNotification(), type: .syncFolderCreate, context: otherDevice.identifier,
                        ["Id": try #require(otherFolder.object["id"]), "UserId": .string(try Self.userID(otherDevice.access))])
            // And the first user's connection gets nothing of theirs: its next message is the next own change.
            let last = try await api.request(.post, "/api/ciphers", token: token, json: .object(try user.loginItem(name: "Last")))
            Self.expect(try await mine.nextNotification(), type: .syncCipherCreate, context: context, ["Id": try #require(last.object["id"])])
        }
    }

    @Test("an organization item reaches the confirmed members who see its collections, and no other member",
          arguments: Backend.available, protocols)
    func organizationAudience(backend: Backend, hubProtocol: HubProtocol) async throws {
        try await withTestServer(backend) { api in
            let shared = try await SharedOrganization.make(api)
            let owner = try await SignedInDevice.login(shared.owner, api)
            let reader = try await SignedInDevice.login(shared.reader, api)
            let outsider = try await SignedInDevice.login(try await TestUser.register(api), api)
            // A collection nobody but the owners is assigned to.
            let privateCollection = try await api.request(.post, "/api/organizations/\(shared.orgID)/collections", token: owner.access,
                                                          json: .object(["name": .string(try EncString.encrypt("Board", key: shared.orgKey).serialized),
                                                                         "users": .array([]), "groups": .array([])]))
            let privateID = try #require(privateCollection.object["id"]?.stringValue, "\(privateCollection.message ?? "")")
            let ownerHub = try await Self.connect(api, owner, hubProtocol)
            let readerHub = try await Self.connect(api, reader, hubProtocol)
            let outsiderHub = try await Self.connect(api, outsider, hubProtocol)
            defer { ownerHub.disconnect(); readerHub.disconnect(); outsiderHub.disconnect() }

            let keys = VaultKeys(userKey: shared.owner.userKey, organizationKeys: [shared.orgID: shared.orgKey])
            let board = try keys.newItem(type: .login, name: "Board minutes", organizationId: shared.orgID)
            let hidden = try await api.request(.post, "/api/ciphers/create", token: owner.access, json: .object([
                "cipher": try board.encrypted(with: keys).jsonValue, "collectionIds": .array([.string(privateID)]),
            ]))
            let hiddenID = try #require(hidden.object["id"]?.stringValue, "\(hidden.message ?? "")")
            Self.expect(try await ownerHub.nextNotification(), type: .syncCipherCreate, context: owner.identifier, [
                "Id": .string(hiddenID), "UserId": .null, "OrganizationId": .string(shared.orgID),
                "CollectionIds": .array([.string(privateID)]),
            ])

            // The writer changes the item of the default collection: every member who sees it hears of it.
            var edit = shared.cipher
            edit["lastKnownRevisionDate"] = shared.cipher["revisionDate"]
            let updated = try await api.request(.put, "/api/ciphers/\(shared.cipherID)", token: shared.writerToken, json: .object(edit))
            #expect(updated.status == .ok, "\(updated.message ?? "")")
            let writerDevice = try #require(AccessTokenSigner(keyBytes: [], issuer: "").claimsUnverified(shared.writerToken)?.device)
            let expected: [String: JSONValue] = [
                "Id": .string(shared.cipherID), "UserId": .null, "OrganizationId": .string(shared.orgID),
                "CollectionIds": .array([.string(shared.collectionID)]), "RevisionDate": try #require(updated.object["revisionDate"]),
            ]
            // The reader's first message is this one: the hidden item never reached them.
            Self.expect(try await readerHub.nextNotification(), type: .syncCipherUpdate, context: writerDevice, expected)
            Self.expect(try await ownerHub.nextNotification(), type: .syncCipherUpdate, context: writerDevice, expected)

            // A member's own folder for the shared item is theirs alone.
            #expect(try await api.request(.put, "/api/ciphers/\(shared.cipherID)/partial", token: reader.access,
                                          json: .object(["favorite": .bool(true)])).status == .ok)
            Self.expect(try await readerHub.nextNotification(), type: .syncCipherUpdate, context: reader.identifier, ["Id": .string(shared.cipherID)])

            // Deleting the hidden item for good: the owner hears it, the reader does not.
            #expect(try await api.request(.delete, "/api/ciphers/\(hiddenID)", token: owner.access).status == .ok)
            Self.expect(try await ownerHub.nextNotification(), type: .syncLoginDelete, context: owner.identifier,
                        ["Id": .string(hiddenID), "CollectionIds": .array([.string(privateID)])])
            #expect(try await api.request(.delete, "/api/ciphers/\(shared.cipherID)", token: owner.access).status == .ok)
            Self.expect(try await readerHub.nextNotification(), type: .syncLoginDelete, context: owner.identifier, ["Id": .string(shared.cipherID)])
            Self.expect(try await ownerHub.nextNotification(), type: .syncLoginDelete, context: owner.identifier, ["Id": .string(shared.cipherID)])

            // A member confirmed now is told to fetch the organization's keys.
            let newcomer = try await TestUser.register(api)
            let invite = try await api.request(.post, "/api/organizations/\(shared.orgID)/users/invite", token: owner.access, json: .object([
                "emails": .array([.string(newcomer.email)]), "type": .int(2), "collections": .array([]),
            ]))
            #expect(invite.status == .ok)
            try await newcomer.acceptInvite(api, organizationID: shared.orgID, invite: invite)
            let newcomerDevice = try await SignedInDevice.login(newcomer, api)
            let newcomerHub = try await Self.connect(api, newcomerDevice, hubProtocol)
            defer { newcomerHub.disconnect() }
            let members = try await api.request(.get, "/api/organizations/\(shared.orgID)/users", token: owner.access).object["data"]?.arrayValue ?? []
            let entry = try #require(members.compactMap(\.objectValue).first { $0["status"] == .int(1) })
            let publicKey = try await api.request(.get, "/api/users/\(try #require(entry["userId"]?.stringValue))/public-key", token: owner.access).object
            let wrapped = try RSAPublicKey(spkiBase64: try #require(publicKey["publicKey"]?.stringValue)).wrap(shared.orgKey)
            #expect(try await api.request(.post, "/api/organizations/\(shared.orgID)/users/\(try #require(entry["id"]?.stringValue))/confirm",
                                          token: owner.access, json: .object(["key": .string(wrapped.serialized)])).status == .ok)
            Self.expect(try await newcomerHub.nextNotification(), type: .syncOrgKeys, context: owner.identifier,
                        ["UserId": .string(try Self.userID(newcomerDevice.access))])

            // The outsider heard nothing at all: its first message is its own change.
            let own = try await api.request(.post, "/api/ciphers", token: outsider.access, json: .object(try shared.owner.loginItem(name: "x")))
            Self.expect(try await outsiderHub.nextNotification(), type: .syncCipherCreate, context: outsider.identifier,
                        ["Id": try #require(own.object["id"])])
        }
    }

    /// How long a revoked session's connection may stay open after the request that ended it returned.
    static let closeBound: Duration = .seconds(1)

    @Test("ending every session (log out everywhere, password change) sends LogOut and closes each connection within a second",
          arguments: ["security-stamp", "password"], protocols)
    func revokedSessionsClose(route: String, hubProtocol: HubProtocol) async throws {
        try await withTestServer(.sqlite) { api in
            let user = try await TestUser.register(api)
            let first = try await SignedInDevice.login(user, api)
            let second = try await SignedInDevice.login(user, api)
            let bystander = try await SignedInDevice.login(try await TestUser.register(api), api)
            let firstHub = try await Self.connect(api, first, hubProtocol)
            let secondHub = try await Self.connect(api, second, hubProtocol)
            let bystanderHub = try await Self.connect(api, bystander, hubProtocol)
            defer { bystanderHub.disconnect() }
            var body: JSONObject = ["masterPasswordHash": .string(try user.authorizationHash(user.password))]
            if route == "password" {
                let newPassword = "a much longer new master password"
                let newMaster = try MasterKey.derive(password: newPassword, salt: user.email, kdf: TestUser.kdf)
                body["newMasterPasswordHash"] = .string(newMaster.serverAuthorizationHash(password: newPassword))
                body["key"] = .string(try newMaster.encryptUserKey(user.userKey).serialized)
            }
            let ended = try await api.request(.post, "/api/accounts/\(route)", token: first.access, json: .object(body))
            #expect(ended.status == .ok, "\(ended.message ?? "")")
            for hub in [firstHub, secondHub] {
                Self.expect(try await hub.nextNotification(), type: .logOut, context: first.identifier,
                            ["UserId": .string(try Self.userID(first.access))])
                #expect(try await hub.next(deadline: Self.closeBound) == .close(error: "The session has ended.", allowReconnect: false))
                _ = try await hub.closed(deadline: Self.closeBound)
            }
            // The ended token is refused a new connection, as on every route.
            let refused = HubTestClient(port: try Self.port(api), token: first.access, protocol: hubProtocol)
            await #expect(throws: WebSocketClientError.webSocketUpgradeFailed) { _ = try await refused.closed() }
            #expect(try await api.request(.get, "/notifications/hub", token: first.access).status == .unauthorized)
            // Another account's connection is untouched: it still gets its own notifications.
            _ = try await api.request(.post, "/api/ciphers", token: bystander.access, json: .object(try user.loginItem(name: "x")))
            #expect(try await bystanderHub.nextNotification()["Type"] == .int(PushType.syncCipherCreate.rawValue))
        }
    }

    @Test("deactivating one device closes that device's connections only")
    func deviceDeactivated() async throws {
        try await withTestServer(.sqlite) { api in
            let user = try await TestUser.register(api)
            let kept = try await SignedInDevice.login(user, api)
            let dropped = try await SignedInDevice.login(user, api)
            let keptHub = try await Self.connect(api, kept, .messagePack)
            let droppedHub = try await Self.connect(api, dropped, .json)
            defer { keptHub.disconnect() }
            let devices = try await api.request(.get, "/api/devices", token: kept.access).object["data"]?.arrayValue ?? []
            let droppedID = try #require(devices.compactMap(\.objectValue).first { $0["identifier"] == .string(dropped.identifier) }?["id"]?.stringValue)
            #expect(try await api.request(.delete, "/api/devices/\(droppedID)", token: kept.access).status == .ok)
            #expect(try await droppedHub.next(deadline: Self.closeBound) == .close(error: "The session has ended.", allowReconnect: false))
            _ = try await droppedHub.closed(deadline: Self.closeBound)
            _ = try await api.request(.post, "/api/ciphers", token: kept.access, json: .object(try user.loginItem(name: "still here")))
            #expect(try await keptHub.nextNotification()["Type"] == .int(PushType.syncCipherCreate.rawValue))
        }
    }

    @Test("a reused refresh token revokes its device, and the device's hub connection closes within a second")
    func reusedRefreshTokenCloses() async throws {
        try await withTestServer(.sqlite) { api in
            let user = try await TestUser.register(api)
            let device = try await SignedInDevice.login(user, api)
            let first = try await api.refresh(device.refresh)
            let second = try await api.refresh(try #require(first.refresh))
            #expect(second.ok)
            let hub = try await Self.connect(api, SignedInDevice(identifier: device.identifier, access: try #require(second.access),
                                                                  refresh: try #require(second.refresh)), .json)
            // The login's token again: older than the chain's previous one, so someone else holds the chain.
            #expect(try await api.refresh(device.refresh).refusedAsInvalidGrant)
            #expect(try await hub.next(deadline: Self.closeBound) == .close(error: "The session has ended.", allowReconnect: false))
            _ = try await hub.closed(deadline: Self.closeBound)
        }
    }

    @Test("refusals: no token, a bad handshake, too many connections, a frame over the limit; the server pings and closes the silent")
    func refusalsAndLimits() async throws {
        try await withTestServer(.sqlite, configure: {
            $0.hubConnectionsPerUser = 2
            $0.hubPingInterval = .milliseconds(50)
            $0.hubIdleTimeout = .milliseconds(400)
        }) { api in
            let user = try await TestUser.register(api)
            let device = try await SignedInDevice.login(user, api)
            // Not upgraded: 401 without a valid token, 400 with one.
            #expect(try await api.request(.get, "/notifications/hub").status == .unauthorized)
            #expect(try await api.request(.get, "/notifications/hub?access_token=nonsense").status == .unauthorized)
            #expect(try await api.request(.get, "/notifications/hub", token: device.access).status == .badRequest)
            let anonymous = HubTestClient(port: try Self.port(api), token: "nonsense", protocol: .json)
            await #expect(throws: WebSocketClientError.webSocketUpgradeFailed) { _ = try await anonymous.closed() }

            // A protocol the hub does not speak: the handshake answer says so and the connection ends.
            let xml = HubTestClient(port: try Self.port(api), token: device.access, protocol: .json, handshake: #"{"protocol":"xml","version":1}"#)
            #expect(try await xml.next() == .handshake(error: "Requested protocol 'xml' is not available."))
            try await Self.ends(xml)

            // Pings come from the server; a client that says nothing is closed (and may reconnect).
            let silent = try await Self.connect(api, device, .messagePack)
            #expect(try await silent.next(skippingPings: false) == .ping)
            #expect(try await silent.next() == .close(error: "The connection was idle too long.", allowReconnect: true))
            _ = try await silent.closed()

            // Two connections per account here; the third is refused (429 over plain HTTP).
            let one = try await Self.connect(api, device, .json)
            let two = try await Self.connect(api, device, .json)
            defer { one.disconnect(); two.disconnect() }
            #expect(try await api.request(.get, "/notifications/hub", token: device.access).status == .tooManyRequests)
            let third = HubTestClient(port: try Self.port(api), token: device.access, protocol: .json)
            await #expect(throws: WebSocketClientError.webSocketUpgradeFailed) { _ = try await third.closed() }
            two.disconnect()
            _ = try await two.closed()
            try await Self.waitUntil { try await api.request(.get, "/notifications/hub", token: device.access).status == .badRequest }

            // A frame over 64 KiB closes the connection.
            let big = try await Self.connect(api, device, .json)
            big.send(Array(repeating: UInt8(ascii: " "), count: 70 * 1024) + Array(#"{"type":6}"#.utf8) + [0x1e])
            try await Self.ends(big)
        }
    }

    @Test("two nodes on one PostgreSQL: a change made through one reaches the hub connections of the other, and so does a log-out",
          arguments: protocols)
    func twoNodes(hubProtocol: HubProtocol) async throws {
        guard Backend.postgresAdminURL != nil else { return }
        let directory = NSTemporaryDirectory() + "vaultsync-hub-nodes-" + UUID().uuidString
        let database = try await TestDatabase.make(.postgres, directory: directory)
        var configuration = database.configuration
        configuration.tokenKey = SystemRandomSource().bytes(count: 64)
        let first = try await buildApplication(configuration: configuration)
        let second = try await buildApplication(configuration: configuration)
        do {
            try await first.test(.ahc(.http)) { firstClient in
                try await second.test(.ahc(.http)) { secondClient in
                    let a = APIClient(client: firstClient)
                    let b = APIClient(client: secondClient)
                    let user = try await TestUser.register(a)
                    let listening = try await SignedInDevice.login(user, a)
                    let acting = try await SignedInDevice.login(user, b)
                    let hub = try await Self.connect(a, listening, hubProtocol)
                    defer { hub.disconnect() }
                    let created = try await b.request(.post, "/api/ciphers", token: acting.access, json: .object(try user.loginItem(name: "far")))
                    Self.expect(try await hub.nextNotification(), type: .syncCipherCreate, context: acting.identifier,
                                ["Id": try #require(created.object["id"]), "UserId": .string(try Self.userID(acting.access))])
                    let ended = try await b.request(.post, "/api/accounts/security-stamp", token: acting.access,
                                                    json: .object(["masterPasswordHash": .string(try user.authorizationHash(user.password))]))
                    #expect(ended.status == .ok)
                    Self.expect(try await hub.nextNotification(), type: .logOut, context: acting.identifier, [:])
                    #expect(try await hub.next(deadline: Self.closeBound) == .close(error: "The session has ended.", allowReconnect: false))
                    _ = try await hub.closed(deadline: Self.closeBound)
                }
            }
        } catch {
            await database.cleanup()
            throw error
        }
        await database.cleanup()
    }

    @Test("a graceful shutdown sends every connection a close message that invites a reconnect", arguments: protocols)
    func gracefulShutdown(hubProtocol: HubProtocol) async throws {
        let directory = NSTemporaryDirectory() + "vaultsync-hub-shutdown-" + UUID().uuidString
        let database = try await TestDatabase.make(.sqlite, directory: directory)
        defer { Task { await database.cleanup() } }
        let (ports, portSink) = AsyncStream.makeStream(of: Int.self)
        var configuration = database.configuration
        configuration.tokenKey = SystemRandomSource().bytes(count: 64)
        // The account is made through a second instance on the same database (the test client drives that one).
        let registrar = try await buildApplication(configuration: configuration)
        let device = try await registrar.test(.ahc(.http)) { client in
            let api = APIClient(client: client)
            return try await SignedInDevice.login(try await TestUser.register(api), api)
        }
        let app = try await buildApplication(configuration: configuration, onServerRunning: { portSink.yield($0) })
        let group = ServiceGroup(configuration: .init(services: [app], logger: Logger(label: "hub-shutdown")))
        let running = Task { try await group.run() }
        var port = 0
        for await bound in ports {
            port = bound
            break
        }
        let hub = HubTestClient(port: port, token: device.access, protocol: hubProtocol)
        #expect(try await hub.next() == .handshake(error: nil))
        await group.triggerGracefulShutdown()
        #expect(try await hub.next() == .close(error: "Server is shutting down.", allowReconnect: true))
        _ = try await hub.closed()
        try await running.value
    }

    static func framed(_ value: MessagePackValue) -> [UInt8] {
        let body = value.encoded()
        return VarInt.encode(body.count) + body
    }

    /// Waits for the server to end the connection, however it does (a close handshake, or the socket shut).
    static func ends(_ client: HubTestClient, sourceLocation: SourceLocation = #_sourceLocation) async throws {
        do {
            _ = try await client.closed()
        } catch HubTestError.deadline {
            Issue.record("the connection is still open", sourceLocation: sourceLocation)
        } catch {}
    }

    /// Polls `condition` until it holds (the hub forgets a connection a moment after its socket closes).
    static func waitUntil(deadline: Duration = .seconds(10), _ condition: @escaping @Sendable () async throws -> Bool) async throws {
        try await HubTestClient.within(deadline) {
            while try await !condition() { await Task.yield() }
        }
    }
}

extension AccessTokenSigner {
    /// A token's claims without checking its signature (tests read their own tokens).
    func claimsUnverified(_ token: String) -> AccessClaims? {
        let parts = token.split(separator: ".")
        guard parts.count == 3, let payload = Self.decodeBase64URL(parts[1]), let object = try? JSONParser.parseObject(payload) else { return nil }
        return AccessClaims(subject: object["sub"]?.stringValue ?? "", email: "", name: "", securityStamp: "",
                            device: object["device"]?.stringValue ?? "", deviceType: 0, clientID: "", notBefore: 0, expires: 0)
    }
}
