import Foundation
import Testing
import VaultCrypto
import VaultModels
@testable import VaultServer

/// Reads run beside the writer (SQLite: read-only connections in WAL mode; PostgreSQL: pooled
/// connections without a transaction), so a read could answer from an older snapshot than the write
/// its client just saw succeed. Each test writes, then reads at once, while other syncs keep the
/// read connections busy, and checks the read saw the write.
@Suite("Reads after writes: no stale answer from a read connection", .serialized)
struct ReadAfterWriteTests {
    /// Runs `body` while `syncers` tasks fetch `/api/sync` with `token` over and over.
    static func withBackgroundSyncs(_ api: APIClient, token: String, syncers: Int = 3,
                                    _ body: @Sendable () async throws -> Void) async throws {
        let done = Flag()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<syncers {
                group.addTask {
                    while !done.isSet {
                        let status = try await api.request(.get, "/api/sync", token: token).status
                        #expect(status == .ok)
                    }
                }
            }
            do {
                try await body()
            } catch {
                done.set()
                throw error
            }
            done.set()
            try await group.waitForAll()
        }
    }

    static func syncedCipher(_ api: APIClient, token: String, id: String) async throws -> JSONObject? {
        let sync = try await api.request(.get, "/api/sync", token: token)
        #expect(sync.status == .ok)
        return sync.object["ciphers"]?.arrayValue?.compactMap(\.objectValue).first { $0["id"] == .string(id) }
    }

    @Test("sync and GET after every edit, folder move, delete and restore show it", arguments: Backend.available)
    func edits(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let user = try await TestUser.register(api)
            let token = try await user.token(api)
            let created = try await api.request(.post, "/api/ciphers", token: token, json: .object(try user.loginItem(name: "v0")))
            let id = try #require(created.object["id"]?.stringValue)
            let firstRevision = try #require(created.object["revisionDate"])
            let folder = try await api.request(.post, "/api/folders", token: token,
                                               json: .object(["name": .string(try EncString.encrypt("F", key: user.userKey).serialized)]))
            let folderID = try #require(folder.object["id"]?.stringValue)
            try await Self.withBackgroundSyncs(api, token: token) {
                var revision = firstRevision
                for round in 1...8 {
                    var body = try user.loginItem(name: "v\(round)")
                    body["lastKnownRevisionDate"] = revision
                    let updated = try await api.request(.put, "/api/ciphers/\(id)", token: token, json: .object(body))
                    #expect(updated.status == .ok, "update \(round): \(updated.message ?? "")")
                    revision = try #require(updated.object["revisionDate"])
                    let synced = try #require(try await Self.syncedCipher(api, token: token, id: id))
                    #expect(synced["revisionDate"] == revision, "sync after update \(round)")
                    #expect(synced["name"] == body["name"], "sync after update \(round)")
                    let fetched = try await api.request(.get, "/api/ciphers/\(id)", token: token)
                    #expect(fetched.object["revisionDate"] == revision && fetched.object["name"] == body["name"], "GET after update \(round)")
                    let listed = try await api.request(.get, "/api/ciphers", token: token).object["data"]?.arrayValue?
                        .compactMap(\.objectValue).first { $0["id"] == .string(id) }
                    #expect(listed?["revisionDate"] == revision, "list after update \(round)")
                }

                // A folder move changes no revision: only the user's state.
                let moved = try await api.request(.put, "/api/ciphers/\(id)/partial", token: token,
                                                  json: .object(["folderId": .string(folderID), "favorite": .bool(true)]))
                #expect(moved.status == .ok)
                let afterMove = try #require(try await Self.syncedCipher(api, token: token, id: id))
                #expect(afterMove["folderId"] == .string(folderID) && afterMove["favorite"] == .bool(true))
                let renamed = try await api.request(.put, "/api/folders/\(folderID)", token: token,
                                                    json: .object(["name": .string(try EncString.encrypt("G", key: user.userKey).serialized)]))
                let folders = try await api.request(.get, "/api/sync", token: token).object["folders"]?.arrayValue?.compactMap(\.objectValue)
                #expect(folders?.first { $0["id"] == .string(folderID) }?["name"] == renamed.object["name"])

                #expect(try await api.request(.put, "/api/ciphers/\(id)/delete", token: token).status == .ok)
                #expect(try await Self.syncedCipher(api, token: token, id: id)?["deletedDate"]?.isNull == false)
                #expect(try await api.request(.put, "/api/ciphers/\(id)/restore", token: token).status == .ok)
                #expect(try await Self.syncedCipher(api, token: token, id: id)?["deletedDate"]?.isNull == true)
                #expect(try await api.request(.delete, "/api/ciphers/\(id)", token: token).status == .ok)
                #expect(try await Self.syncedCipher(api, token: token, id: id) == nil)
            }
        }
    }

    @Test("after a share, the owner's sync shows the item in the organization", arguments: Backend.available)
    func share(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let owner = try await TestUser.register(api)
            let token = try await owner.token(api)
            let (orgID, orgKey) = try await owner.createOrganization(api, token: token)
            let collectionID = try #require(try await api.request(.get, "/api/organizations/\(orgID)/collections", token: token)
                .object["data"]?.arrayValue?.first?.objectValue?["id"]?.stringValue)
            try await Self.withBackgroundSyncs(api, token: token) {
                for round in 1...3 {
                    let created = try await api.request(.post, "/api/ciphers", token: token, json: .object(try owner.loginItem(name: "s\(round)")))
                    var wire = try CipherWire(json: created.object, path: "$")
                    #expect(try await Self.syncedCipher(api, token: token, id: wire.id!)?["organizationId"]?.isNull == true)
                    let itemKey = try #require(wire.key).decryptKey(key: owner.userKey)
                    wire.key = try EncString.wrap(itemKey, with: orgKey)
                    wire.organizationId = orgID
                    wire.lastKnownRevisionDate = wire.revisionDate
                    let shared = try await api.request(.put, "/api/ciphers/\(wire.id!)/share", token: token,
                                                       json: .object(["cipher": wire.jsonValue, "collectionIds": .array([.string(collectionID)])]))
                    #expect(shared.status == .ok, "share: \(shared.message ?? "")")
                    let synced = try #require(try await Self.syncedCipher(api, token: token, id: wire.id!))
                    #expect(synced["organizationId"] == .string(orgID))
                    #expect(synced["collectionIds"] == .array([.string(collectionID)]))
                    #expect(synced["revisionDate"] == shared.object["revisionDate"])
                    #expect(synced["key"] == shared.object["key"])
                }
            }
        }
    }

    @Test("after a security-stamp change or a device's deactivation, its access token is refused at once",
          arguments: Backend.available)
    func stampAndDevice(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let user = try await TestUser.register(api)
            let bystander = try await TestUser.register(api)
            let bystanderToken = try await bystander.token(api)
            let watcher = try await SignedInDevice.login(user, api)
            try await Self.withBackgroundSyncs(api, token: bystanderToken) {
                for _ in 1...3 {
                    let device = try await SignedInDevice.login(user, api)
                    let other = try await SignedInDevice.login(user, api)
                    // Both tokens were just accepted (the check reads the stamp and the device every time).
                    #expect(try await api.request(.get, "/api/sync", token: device.access).status == .ok)
                    #expect(try await api.request(.get, "/api/accounts/revision-date", token: other.access).status == .ok)
                    let devices = try await api.request(.get, "/api/devices", token: other.access).object["data"]?.arrayValue ?? []
                    let row = try #require(devices.compactMap(\.objectValue).first { $0["identifier"] == .string(device.identifier) })
                    let rowID = try #require(row["id"]?.stringValue)
                    #expect(try await api.request(.post, "/api/devices/\(rowID)/deactivate", token: other.access).status == .ok)
                    #expect(try await api.request(.get, "/api/sync", token: device.access).status == .unauthorized)
                    #expect(try await api.request(.get, "/api/sync", token: other.access).status == .ok)
                }
                #expect(try await api.request(.get, "/api/sync", token: watcher.access).status == .ok)
                let rotated = try await api.request(.post, "/api/accounts/security-stamp", token: watcher.access,
                                                    json: .object(["masterPasswordHash": .string(try user.authorizationHash(user.password))]))
                #expect(rotated.status == .ok)
                #expect(try await api.request(.get, "/api/sync", token: watcher.access).status == .unauthorized)
                #expect(try await api.request(.get, "/api/ciphers", token: watcher.access).status == .unauthorized)
                let again = try await SignedInDevice.login(user, api)
                #expect(try await api.request(.get, "/api/sync", token: again.access).status == .ok)
            }
        }
    }
}

extension ReadAfterWriteTests {
    /// Starts and uploads a 100-byte attachment on `cipherID` (key and name under `key`); returns its id.
    static func attach(_ api: APIClient, token: String, cipherID: String, key: SymmetricCryptoKey, upload: Bool = true) async throws -> String {
        let fileKey = SymmetricCryptoKey.generate()
        let file = Array(try EncString.encrypt(Array(repeating: 7, count: 100), key: fileKey).binary())
        let start = try await api.request(.post, "/api/ciphers/\(cipherID)/attachment/v2", token: token, json: .object([
            "key": .string(try EncString.wrap(fileKey, with: key).serialized),
            "fileName": .string(try EncString.encrypt("f.txt", key: key).serialized), "fileSize": .int(file.count),
        ]))
        let attachmentID = try #require(start.object["attachmentId"]?.stringValue, "start: \(start.message ?? "")")
        if upload {
            let uploaded = try await api.request(.post, "/api/ciphers/\(cipherID)/attachment/\(attachmentID)", token: token, body: file,
                                                 headers: [.contentType: "application/octet-stream"])
            #expect(uploaded.status == .ok)
        }
        return attachmentID
    }

    static func attachmentIDs(_ item: JSONObject?) -> [String]? {
        item?["attachments"]?.arrayValue.map { $0.compactMap { $0.objectValue?["id"]?.stringValue } }
    }

    @Test("a sync lists the uploaded attachments of each item it shows (own and shared), and none after their deletion",
          arguments: Backend.available)
    func attachmentsInSync(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let shared = try await SharedOrganization.make(api)
            let owner = shared.owner
            let personal = try #require(try await api.request(.post, "/api/ciphers", token: shared.ownerToken,
                                                              json: .object(try owner.loginItem(name: "Mine"))).object["id"]?.stringValue)
            let plain = try #require(try await api.request(.post, "/api/ciphers", token: shared.ownerToken,
                                                           json: .object(try owner.loginItem(name: "No files"))).object["id"]?.stringValue)
            let first = try await Self.attach(api, token: shared.ownerToken, cipherID: personal, key: owner.userKey)
            let second = try await Self.attach(api, token: shared.ownerToken, cipherID: personal, key: owner.userKey)
            _ = try await Self.attach(api, token: shared.ownerToken, cipherID: plain, key: owner.userKey, upload: false)
            let onShared = try await Self.attach(api, token: shared.ownerToken, cipherID: shared.cipherID, key: shared.orgKey)

            let ownerSync = try await api.request(.get, "/api/sync", token: shared.ownerToken).object["ciphers"]?.arrayValue?.compactMap(\.objectValue) ?? []
            func item(_ list: [JSONObject], _ id: String) -> JSONObject? { list.first { $0["id"] == .string(id) } }
            #expect(Self.attachmentIDs(item(ownerSync, personal)) == [first, second])
            #expect(Self.attachmentIDs(item(ownerSync, shared.cipherID)) == [onShared])
            #expect(item(ownerSync, plain)?["attachments"] == .null, "a started, never uploaded file is not listed")
            let readerSync = try await api.request(.get, "/api/sync", token: shared.readerToken).object["ciphers"]?.arrayValue?.compactMap(\.objectValue) ?? []
            #expect(readerSync.count == 1)
            #expect(Self.attachmentIDs(item(readerSync, shared.cipherID)) == [onShared])
            // The same attachment objects as the single item's answer (download links are signed per answer).
            func withoutURLs(_ item: JSONObject?) -> [JSONObject]? {
                item?["attachments"]?.arrayValue?.compactMap(\.objectValue).map { object in
                    JSONObject(entries: object.entries.filter { $0.key != "url" })
                }
            }
            let single = try await api.request(.get, "/api/ciphers/\(personal)", token: shared.ownerToken).object
            #expect(withoutURLs(single) == withoutURLs(item(ownerSync, personal)))
            #expect(withoutURLs(single)?.count == 2)

            for (cipher, attachment) in [(personal, first), (personal, second), (shared.cipherID, onShared)] {
                #expect(try await api.request(.delete, "/api/ciphers/\(cipher)/attachment/\(attachment)", token: shared.ownerToken).status == .ok)
            }
            let after = try await api.request(.get, "/api/sync", token: shared.ownerToken).object["ciphers"]?.arrayValue?.compactMap(\.objectValue) ?? []
            #expect(after.allSatisfy { $0["attachments"] == .null })
            let readerAfter = try await api.request(.get, "/api/sync", token: shared.readerToken).object["ciphers"]?.arrayValue?.compactMap(\.objectValue)
            #expect(readerAfter?.first?["attachments"] == .null)
        }
    }
}

/// A flag set once, read from several tasks.
final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false

    var isSet: Bool {
        lock.lock()
        defer { lock.unlock() }
        return value
    }

    func set() {
        lock.lock()
        value = true
        lock.unlock()
    }
}
