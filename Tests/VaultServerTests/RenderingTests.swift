import Foundation
import Testing
import VaultModels
@testable import VaultServer

/// The cipher head is written straight into bytes (no intermediate `JSONObject`): the text must be
/// byte for byte what the `JSONObject` rendering gave, which is kept here as the reference.
@Suite("Rendering")
struct RenderingTests {
    static let renderer = Renderer(baseURL: "http://127.0.0.1:8080/api",
                                   signer: AccessTokenSigner(keyBytes: Array(repeating: 7, count: 32), issuer: "vaultsync"),
                                   now: { 1_764_000_000_000_000 })

    /// The rendering this replaced (JSONObject head, payload spliced in).
    static func reference(_ record: CipherRecord, object: String = "cipherDetails") -> [UInt8] {
        var head = JSONObject()
        head["object"] = .string(object)
        head["id"] = .string(record.id)
        head["organizationId"] = record.organizationID.map(JSONValue.string) ?? .null
        head["folderId"] = record.folderID.map(JSONValue.string) ?? .null
        head["type"] = .int(record.type)
        head["favorite"] = .bool(record.favorite)
        head["edit"] = .bool(record.access.edit)
        head["viewPassword"] = .bool(record.access.viewPassword)
        head["organizationUseTotp"] = .bool(true)
        head["permissions"] = .object(["delete": .bool(record.access.canDelete), "restore": .bool(record.access.canDelete)])
        head["collectionIds"] = .array(record.collectionIDs.map(JSONValue.string))
        head["attachments"] = record.attachments.isEmpty ? .null : .array(record.attachments.map { .object(renderer.attachment($0)) })
        head["creationDate"] = Renderer.date(record.createdAt)
        head["revisionDate"] = Renderer.date(record.revisionDate)
        head["deletedDate"] = Renderer.date(record.deletedDate)
        head["archivedDate"] = Renderer.date(record.archivedDate)
        var bytes = head.serialized()
        let data = Array(record.data.utf8)
        if data.count > 2 {
            bytes.removeLast()
            bytes.append(UInt8(ascii: ","))
            bytes.append(contentsOf: data[1...])
        }
        return bytes
    }

    static func record(_ values: [String: SQLValue], access: CipherAccess = .owner) -> CipherRecord {
        let columns = Array(values.keys)
        return CipherRecord(row: SQLRow(columns: columns, values: columns.map { values[$0]! }), access: access)
    }

    @Test("a cipher renders byte for byte as the JSONObject rendering did")
    func cipherBytes() throws {
        var personal = Self.record([
            "id": .text("8d3c1a52-7a4c-4a5e-9d1b-2f0f3a1b2c3d"), "user_id": .text("u"), "type": .int(1),
            "data": .text(#"{"name":"2.abc|def|ghi","notes":null,"login":{"username":"2.x|y|z","uris":[]},"fields":"quote \" back \\ tab \t"}"#),
            "created_at": .int(1_764_000_000_123_456), "revision_date": .int(1_764_000_100_000_001),
            "folder_id": .text("f0e1d2c3-0000-4000-8000-000000000001"), "favorite": .int(1),
        ])
        #expect(Self.renderer.cipher(personal) == Self.reference(personal))
        personal.data = "{}"
        #expect(Self.renderer.cipher(personal) == Self.reference(personal))
        personal.data = #"{"a":1}"#
        #expect(Self.renderer.cipher(personal, object: "cipher") == Self.reference(personal, object: "cipher"))

        var shared = Self.record([
            "id": .text("00000000-0000-4000-8000-000000000002"), "organization_id": .text("00000000-0000-4000-8000-0000000000aa"),
            "type": .int(2), "data": .text(#"{"name":"2.n|m|o"}"#), "created_at": .int(0), "revision_date": .int(-1_500_000),
            "deleted_date": .int(253_402_300_799_999_999), "archived_date": .int(1_000),
        ], access: CipherAccess(edit: false, viewPassword: false, manage: false))
        shared.collectionIDs = ["c1", "c\"2"]
        shared.attachments = [AttachmentRecord(id: "a1", cipherID: shared.id, fileName: "2.f|n|x", key: nil, fileSize: 2048)]
        #expect(Self.renderer.cipher(shared) == Self.reference(shared))
        shared.attachments = []
        shared.deletedDate = 260_000_000_000_000_000  // past year 9999: WireDate's own fallback
        #expect(Self.renderer.cipher(shared) == Self.reference(shared))
    }

    @Test("dates are written as WireDate writes them")
    func dates() {
        var generator = SystemRandomNumberGenerator()
        var values: [Int64] = [0, -1, 1, 999_999, 1_000_000, -86_400_000_000, 951_782_400_000_000, 4_107_542_400_000_000,
                               -62_135_596_800_000_000, 253_402_300_799_999_999]
        for _ in 0..<2_000 { values.append(Int64.random(in: -62_167_219_200_000_000...253_402_300_799_999_999, using: &generator)) }
        for micros in values {
            var bytes: [UInt8] = []
            JSONBytes.date(micros, to: &bytes)
            #expect(bytes == JSONValue.string(WireDate(microsecondsSinceEpoch: micros).iso8601).serialized(), "\(micros)")
        }
        var null: [UInt8] = []
        JSONBytes.date(nil, to: &null)
        #expect(null == Array("null".utf8))
    }
}
