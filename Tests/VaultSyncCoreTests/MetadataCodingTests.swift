import Foundation
import Testing
import VaultModels
@testable import VaultSyncCore

@Suite("Queue metadata JSON (hand-written, readable by and from Codable)")
struct MetadataCodingTests {
    static let full: PendingChangeMetadata = {
        var metadata = PendingChangeMetadata(
            kind: .softDelete, originalRevisionDate: WireDate(microsecondsSinceEpoch: 1_690_000_000_123_456), passwordChangeCount: 4,
            contentChanged: true, createdDate: WireDate(microsecondsSinceEpoch: 1_700_000_000_000_001),
            updatedDate: WireDate(microsecondsSinceEpoch: 1_700_000_100_000_000), attempts: 3, lastError: "the server \"said\" no\n",
            nextAttemptDate: WireDate(microsecondsSinceEpoch: 1_700_000_200_000_000), state: .needsAttention)
        metadata.originalState = ItemState(deleted: false, archived: true, folderID: "0f2b1c3d-aaaa-bbbb-cccc-000000000001", favorite: true)
        metadata.progress = ResolutionProgress(
            backups: [BackedUpVersion(version: .server, date: WireDate(microsecondsSinceEpoch: 1_690_000_000_123_456), backupID: "b-1")],
            inFlight: BackupInFlight(version: .local, date: WireDate(microsecondsSinceEpoch: 1_700_000_100_000_000), originalID: "item-1",
                                     idempotencyKey: "backup-r-local:1700000100000000", body: #"{"name":"2.x|y|z"}"#),
            pushedMerge: PushedMerge(body: #"{"name":"2.m|e|rge"}"#, local: #"{"name":"2.lo|c|al"}"#))
        metadata.earlierNames = ["2.AbC+/x==|Yz==|Qq==", "2.dEf=|gh=|ij="]
        metadata.createSent = true
        metadata.itemKey = "2.KeY+/=|Iv==|Mac="
        metadata.contentUpdatedDate = WireDate(microsecondsSinceEpoch: 1_700_000_050_000_000)
        return metadata
    }()

    static let sparse = PendingChangeMetadata(
        kind: .create, originalRevisionDate: nil, createdDate: WireDate(microsecondsSinceEpoch: 0), updatedDate: WireDate(microsecondsSinceEpoch: 1))

    @Test("records written by Codable (every record before this format) read back the same", arguments: [full, sparse])
    func readsCodable(metadata: PendingChangeMetadata) throws {
        let old = try JSONEncoder().encode(metadata)
        #expect(try PendingChangeMetadata(jsonBytes: old) == metadata)
    }

    @Test("what it writes, Codable reads (a downgrade still opens the queue), and nil is left out", arguments: [full, sparse])
    func writesCodable(metadata: PendingChangeMetadata) throws {
        let bytes = metadata.jsonBytes()
        #expect(try JSONDecoder().decode(PendingChangeMetadata.self, from: Data(bytes)) == metadata)
        #expect(try PendingChangeMetadata(jsonBytes: bytes) == metadata)
        #expect(!String(decoding: bytes, as: UTF8.self).contains("null"))
    }

    @Test("the text written without the tree is the tree's text, byte for byte", arguments: [full, sparse])
    func textIsTheTreesText(metadata: PendingChangeMetadata) throws {
        var metadata = metadata
        #expect(metadata.jsonBytes() == metadata.jsonObject().serialized())
        metadata.baseVersion = #"{"name":"2.a|b|c","notes":"line\nbreak \"quoted\" \\ é 🔐"}"#
        metadata.attachmentAdds = [StagedAttachment(id: "a-1", fileName: "2.f|i|le", key: "2.k|e|y", size: 12, serverID: nil),
                                   StagedAttachment(id: "a-2", fileName: "2.g|h|i", key: "2.l|m|n", size: 0, serverID: "s-2")]
        metadata.attachmentDeletes = ["d-1"]
        metadata.mergedPushRevision = WireDate(microsecondsSinceEpoch: 1_700_000_300_000_000)
        metadata.mergedContentDate = WireDate(microsecondsSinceEpoch: 1_700_000_250_000_000)
        #expect(metadata.jsonBytes() == metadata.jsonObject().serialized())
        #expect(try PendingChangeMetadata(jsonBytes: metadata.jsonBytes()) == metadata)
    }

    @Test("a missing field or an unknown kind is an error, not a guess")
    func refusesDamage() throws {
        var object = Self.full.jsonObject()
        object["attempts"] = nil
        #expect(throws: ModelError.missingField(path: "$.attempts")) { try PendingChangeMetadata(json: object, path: "$") }
        object = Self.full.jsonObject()
        object["kind"] = .string("rename")
        #expect(throws: ModelError.self) { try PendingChangeMetadata(json: object, path: "$") }
        object = Self.full.jsonObject()
        object["originalState"] = .object(["deleted": .bool(true)])
        #expect(throws: ModelError.self) { try PendingChangeMetadata(json: object, path: "$") }
    }

    @Test("a record of the earlier progress format (\"server:µs\" markers and a body) opens with its progress typed")
    func readsLegacyProgress() throws {
        var object = Self.sparse.jsonObject()
        object["backupDoneFor"] = .string("server:1690000000123456")
        var metadata = try PendingChangeMetadata(json: object, path: "$")
        #expect(metadata.progress.backups == [BackedUpVersion(version: .server, date: WireDate(microsecondsSinceEpoch: 1_690_000_000_123_456), backupID: "")])
        #expect(metadata.progress.inFlight == nil)
        object["pendingBackup"] = .string(#"{"name":"2.x|y|z"}"#)
        metadata = try PendingChangeMetadata(json: object, path: "$")
        #expect(metadata.progress.backups.isEmpty)
        #expect(metadata.progress.inFlight?.version == .server && metadata.progress.inFlight?.body == #"{"name":"2.x|y|z"}"#)
        // Written again, it is in the typed format only.
        let written = metadata.jsonObject()
        #expect(written["backupDoneFor"] == nil && written["pendingBackup"] == nil && written["backupInFlight"] != nil)
    }

    @Test("settling forgets a pushed merge (the record that stays holds a newer save)")
    func settlingForgetsPushedMerge() {
        var metadata = Self.full
        #expect(metadata.progress.pushedMerge?.body == #"{"name":"2.m|e|rge"}"#)
        metadata.keep(afterSettling: SettledVersion(revision: nil, creationDate: nil, body: "{}", state: nil, created: false), baseline: .keepBaseline)
        #expect(metadata.progress.pushedMerge == nil)
    }
}
