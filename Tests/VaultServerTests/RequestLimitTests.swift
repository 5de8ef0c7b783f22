import Foundation
import Hummingbird
import Testing
import VaultCrypto
import VaultModels
@testable import VaultServer

@Suite("Request limits: every list in a request body has a maximum; one entry more is a 400 before any work", .serialized)
struct RequestLimitTests {
    static func uuids(_ count: Int) -> JSONValue { .array((0..<count).map { _ in .string(UUID().uuidString.lowercased()) }) }

    @Test("one entry over each list's limit is refused with a message naming the field and the limit; at the limit it is not",
          arguments: Backend.available)
    func overLongLists(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let user = try await TestUser.register(api)
            let token = try await user.token(api)
            let (orgID, orgKey) = try await user.createOrganization(api, token: token)
            let collectionID = try #require(try await api.request(.get, "/api/organizations/\(orgID)/collections", token: token)
                .object["data"]?.arrayValue?.first?.objectValue?["id"]?.stringValue)
            let created = try await api.request(.post, "/api/ciphers", token: token, json: .object(try user.loginItem(name: "kept")))
            let kept = try CipherWire(json: created.object, path: "$")
            let keptID = try #require(kept.id)
            let ids = RequestLimits.ids
            // Entries that pass the count and then fail on their own (an empty object is no item), so the
            // bodies stay small (40,001 real items would be 60 MB) and a request at the limit does nothing.
            let item = JSONValue.object([:])
            let orgItem = item
            let access = { (count: Int) -> JSONValue in
                .array((0..<count).map { _ in .object(["id": .string(UUID().uuidString.lowercased()), "readOnly": .bool(false)]) })
            }
            let someIDs = { (count: Int) -> JSONValue in Self.uuids(count) }
            let collectionName = try EncString.encrypt("c", key: orgKey).serialized
            let cases: [(HTTPRequest.Method, String, String, Int, (Int) -> JSONValue)] = [
                (.put, "/api/ciphers/delete", "ids", ids, { .object(["ids": someIDs($0)]) }),
                (.post, "/api/ciphers/delete", "ids", ids, { .object(["ids": someIDs($0)]) }),
                (.delete, "/api/ciphers", "ids", ids, { .object(["ids": someIDs($0)]) }),
                (.put, "/api/ciphers/restore", "ids", ids, { .object(["ids": someIDs($0)]) }),
                (.put, "/api/ciphers/archive", "ids", ids, { .object(["ids": someIDs($0)]) }),
                (.put, "/api/ciphers/unarchive", "ids", ids, { .object(["ids": someIDs($0)]) }),
                (.put, "/api/ciphers/move", "ids", ids, { .object(["ids": someIDs($0), "folderId": .null]) }),
                (.post, "/api/organizations/\(orgID)/users/public-keys", "ids", ids, { .object(["ids": Self.uuids($0)]) }),
                (.put, "/api/ciphers/share", "ciphers", RequestLimits.sharedCiphers, {
                    .object(["ciphers": .array(Array(repeating: item, count: $0)), "collectionIds": .array([.string(collectionID)])]) }),
                (.put, "/api/ciphers/\(keptID)/collections", "collectionIds", RequestLimits.collectionIDs, {
                    .object(["collectionIds": Self.uuids($0)]) }),
                (.post, "/api/ciphers/create", "collectionIds", RequestLimits.collectionIDs, {
                    .object(["cipher": item, "collectionIds": Self.uuids($0)]) }),
                (.post, "/api/organizations/\(orgID)/users/invite", "emails", RequestLimits.inviteEmails, { count in
                    .object(["emails": .array((0..<count).map { .string("invitee-\($0)@example.com") }), "type": .int(2)]) }),
                (.post, "/api/organizations/\(orgID)/users/invite", "collections", RequestLimits.accessEntries, {
                    .object(["emails": .array([.string("x@example.com")]), "type": .int(2), "collections": access($0)]) }),
                (.post, "/api/organizations/\(orgID)/collections", "users", RequestLimits.accessEntries, {
                    .object(["name": .string(collectionName), "users": access($0)]) }),
                (.post, "/api/ciphers/import", "ciphers", RequestLimits.importCiphers, {
                    .object(["ciphers": .array(Array(repeating: orgItem, count: $0)), "folders": .array([]), "folderRelationships": .array([])]) }),
                (.post, "/api/ciphers/import", "folders", RequestLimits.importFolders, {
                    .object(["ciphers": .array([]), "folders": .array(Array(repeating: .object(["name": .string("not encrypted")]), count: $0)),
                             "folderRelationships": .array([])]) }),
                (.post, "/api/ciphers/import", "folderRelationships", RequestLimits.importFolderRelationships, {
                    .object(["ciphers": .array([]), "folders": .array([]),
                             "folderRelationships": .array(Array(repeating: .object(["key": .int(0), "value": .int(0)]), count: $0))]) }),
            ]
            for (method, path, field, limit, body) in cases {
                let over = try await api.request(method, path, token: token, json: body(limit + 1))
                #expect(over.status == .badRequest, "\(method) \(path) \(field): \(over.status)")
                let expected = "At most \(limit) entries in \(field) per request; this one has \(limit + 1)."
                #expect(over.object["validationErrors"]?.objectValue?[field] == .array([.string(expected)]),
                        "\(method) \(path): \(String(decoding: over.bytes.prefix(300), as: UTF8.self))")
                // At the limit the count is not what refuses it (it may fail for another reason: unknown ids…).
                let at = try await api.request(method, path, token: token, json: body(limit))
                #expect(at.object["validationErrors"]?.objectValue?[field]?.arrayValue?.first?.stringValue?.hasPrefix("At most") != true,
                        "\(method) \(path) at the limit")
            }
        }
    }

    @Test("an over-long list changes nothing: the item it names is untouched", arguments: Backend.available)
    func nothingDone(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let user = try await TestUser.register(api)
            let token = try await user.token(api)
            let created = try await api.request(.post, "/api/ciphers", token: token, json: .object(try user.loginItem(name: "kept")))
            let id = try #require(created.object["id"]?.stringValue)
            let ids = JSONValue.array([.string(id)] + (Self.uuids(RequestLimits.ids).arrayValue ?? []))
            #expect(try await api.request(.put, "/api/ciphers/delete", token: token, json: .object(["ids": ids])).status == .badRequest)
            #expect(try await api.request(.delete, "/api/ciphers", token: token, json: .object(["ids": ids])).status == .badRequest)
            let after = try await api.request(.get, "/api/ciphers/\(id)", token: token)
            #expect(after.status == .ok && after.object["deletedDate"] == .null && after.object["revisionDate"] == created.object["revisionDate"])
        }
    }
}
