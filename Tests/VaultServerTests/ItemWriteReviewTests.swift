import Foundation
import Hummingbird
import Testing
import VaultCrypto
import VaultModels
@testable import VaultServer

/// A read-only member cannot archive a shared item (docs/SECURITY.md, "Attack review 2026-12-01",
/// finding 5); a create with a taken id is a 400 that does not say whose it is (finding 6).
@Suite("Security: archiving needs edit rights; a taken id is a plain 400")
struct ItemWriteReviewTests {
    @Test("a read-only member's archive and unarchive are refused and leave the shared item's revision, so the owner's next edit is not out of date",
          arguments: Backend.available)
    func readerCannotArchive(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let shared = try await SharedOrganization.make(api)
            let id = shared.cipherID
            let before = try await api.request(.get, "/api/ciphers/\(id)", token: shared.ownerToken).object
            for (method, path, json) in [
                (HTTPRequest.Method.put, "/api/ciphers/\(id)/archive", nil), (.put, "/api/ciphers/\(id)/unarchive", nil),
                (.put, "/api/ciphers/archive", JSONValue.object(["ids": .array([.string(id)])])),
                (.put, "/api/ciphers/unarchive", .object(["ids": .array([.string(id)])])),
            ] as [(HTTPRequest.Method, String, JSONValue?)] {
                for token in [shared.readerToken, shared.hiderToken] {
                    let answer = try await api.request(method, path, token: token, json: json)
                    #expect(answer.status == .forbidden, "\(method) \(path): \(answer.status)")
                    #expect(answer.message == "You do not have permissions to edit this.")
                }
            }
            let after = try await api.request(.get, "/api/ciphers/\(id)", token: shared.ownerToken).object
            #expect(after["revisionDate"] == before["revisionDate"], "the shared item's revision is unchanged")
            #expect(try await api.request(.get, "/api/ciphers/\(id)", token: shared.readerToken).object["archivedDate"] == .null)

            // The owner edits from the revision they had: not out of date.
            let keys = VaultKeys(userKey: shared.owner.userKey, organizationKeys: [shared.orgID: shared.orgKey])
            var edit = try CipherWire(json: before, path: "$").decrypted(with: keys)
            edit.login?.password = "changed by the owner"
            var wire = try edit.encrypted(with: keys)
            wire.lastKnownRevisionDate = try CipherWire(json: before, path: "$").revisionDate
            let saved = try await api.request(.put, "/api/ciphers/\(id)", token: shared.ownerToken, json: wire.jsonValue)
            #expect(saved.status == .ok, "\(saved.message ?? "")")

            // A member who may edit archives it for themselves, as before.
            let archived = try await api.request(.put, "/api/ciphers/\(id)/archive", token: shared.writerToken)
            #expect(archived.status == .ok)
            #expect(archived.object["archivedDate"] != .null)
            #expect(try await api.request(.get, "/api/ciphers/\(id)", token: shared.ownerToken).object["archivedDate"] == .null)
        }
    }

    @Test("POST /api/folders with another user's folder id, or one's own, is the same 400; the folders stay as they were",
          arguments: Backend.available)
    func takenFolderID(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let alice = try await TestUser.register(api)
            let bob = try await TestUser.register(api)
            let aliceToken = try await alice.token(api)
            let bobToken = try await bob.token(api)
            let id = newID()
            let aliceName = try EncString.encrypt("Alice's", key: alice.userKey).serialized
            let made = try await api.request(.post, "/api/folders", token: aliceToken,
                                             json: .object(["name": .string(aliceName), "id": .string(id)]))
            #expect(made.status == .ok)
            #expect(made.object["id"] == .string(id))

            let bobName = try EncString.encrypt("Bob's", key: bob.userKey).serialized
            let byBob = try await api.request(.post, "/api/folders", token: bobToken, json: .object(["name": .string(bobName), "id": .string(id)]))
            let byAlice = try await api.request(.post, "/api/folders", token: aliceToken,
                                                json: .object(["name": .string(aliceName), "id": .string(id.uppercased())]))
            for answer in [byBob, byAlice] {
                #expect(answer.status == .badRequest, "\(answer.status): \(answer.message ?? "")")
                #expect(answer.message == VaultRepository.takenID)
            }
            #expect(byBob.bytes == byAlice.bytes, "the answer does not say whose the id is")
            #expect(try await api.request(.get, "/api/folders", token: bobToken).object["data"] == .array([]))
            let folders = try await api.request(.get, "/api/folders", token: aliceToken).object["data"]?.arrayValue ?? []
            #expect(folders.count == 1 && folders.first?.objectValue?["name"] == .string(aliceName))
            // With a free id (or none) Bob's create works.
            let free = newID()
            let bobsOwn = try await api.request(.post, "/api/folders", token: bobToken, json: .object(["name": .string(bobName), "id": .string(free)]))
            #expect(bobsOwn.status == .ok && bobsOwn.object["id"] == .string(free))
        }
    }
}
