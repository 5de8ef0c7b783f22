import Foundation
import HTTPTypes
import Hummingbird
import VaultCrypto
import VaultModels

/// Turns a cipher request body into what the repository stores, refusing anything that would put
/// plaintext (or oversized data) on the server.
enum CipherRequests {
    /// Keys the server manages itself; never stored in the payload.
    static let managedKeys = [
        "object", "id", "organizationId", "folderId", "favorite", "edit", "viewPassword", "permissions", "collectionIds",
        "organizationUseTotp", "creationDate", "revisionDate", "deletedDate", "archivedDate", "lastKnownRevisionDate",
        "attachments", "attachments2", "type",
    ]

    /// Validates a cipher body (already parsed) and returns the write.
    static func write(from object: JSONObject, path: String = "$") throws -> CipherWrite {
        // The server keeps an item's attachments itself, so what a body says of them is never read: the official
        // clients send `attachments` as a map of id to file name (and `attachments2`), where an answer has an
        // array; read as the answer's array, every edit or clone of an item with a file was refused (RELIABILITY bug 69).
        var object = object
        for key in ["attachments", "attachments2"] { while object[key] != nil { object[key] = nil } }
        let wire: CipherWire
        do {
            wire = try CipherWire(json: object, path: path)
        } catch let error as ModelError {
            throw APIError.from(error)
        }
        guard (1...8).contains(wire.type.rawValue) else {
            throw APIError.invalidModel(["type": ["Invalid type."]])
        }
        if let dataKey = wire.type.dataKey, object[dataKey] == nil || object[dataKey]?.isNull == true {
            throw APIError.invalidModel([dataKey: ["Data missing."]])
        }
        var errors: [String: [String]] = [:]
        for violation in wire.limitViolations {
            errors[violation.path, default: []].append(
                "The field \(violation.path) exceeds the maximum encrypted value length of \(violation.limit) characters.")
        }
        if !errors.isEmpty { throw APIError.invalidModel(errors) }
        var data = wire.jsonObject()
        for key in managedKeys { data[key] = nil }
        return CipherWrite(
            type: wire.type.rawValue, data: String(decoding: data.serialized(), as: UTF8.self),
            organizationID: wire.organizationId, folderID: wire.folderId, favorite: wire.favorite ?? false,
            archivedDate: wire.archivedDate?.microsecondsSinceEpoch,
            lastKnownRevisionDate: wire.lastKnownRevisionDate?.microsecondsSinceEpoch)
    }

    /// The `Idempotency-Key` header of a create (docs/PROTOCOL.md, "Idempotent creates"): 1–255
    /// visible ASCII characters; absent: `nil`.
    static func idempotencyKey(_ request: Request) throws -> String? {
        guard let value = request.headers[HTTPField.Name("Idempotency-Key")!] else { return nil }
        return try checkedIdempotencyKey(value, field: "Idempotency-Key")
    }

    /// An idempotency key as the header and the bulk-create entries carry it: 1 to 255 visible ASCII characters.
    static func checkedIdempotencyKey(_ value: String, field: String) throws -> String {
        guard (1...255).contains(value.utf8.count), value.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw APIError.invalidModel([field: ["The idempotency key must be 1 to 255 visible ASCII characters."]])
        }
        return value
    }

    /// `{"ids": [...]}` (lowercased, at least one).
    static func ids(from object: JSONObject) throws -> [String] {
        guard let values = object["ids"]?.arrayValue else { throw APIError.invalidModel(["ids": ["The Ids field is required."]]) }
        return try RequestLimits.check(values, field: "ids", limit: RequestLimits.ids).map { value in
            guard let id = value.stringValue, UUID(uuidString: id) != nil else {
                throw APIError.invalidModel(["ids": ["Every id must be a UUID."]])
            }
            return id.lowercased()
        }
    }

    static func collectionIDs(from object: JSONObject) throws -> [String] {
        guard let values = object["collectionIds"]?.arrayValue else { return [] }
        return try RequestLimits.check(values, field: "collectionIds", limit: RequestLimits.collectionIDs).map { value in
            guard let id = value.stringValue, UUID(uuidString: id) != nil else {
                throw APIError.invalidModel(["collectionIds": ["Every collection id must be a UUID."]])
            }
            return id.lowercased()
        }
    }
}

extension CipherWriteError {
    var apiError: APIError {
        switch outcome {
        case .notFound: return .notFound
        case .outOfDate: return .outOfDate
        case .forbidden(let message): return APIError(.forbidden, message)
        case .invalid(let message): return APIError(.badRequest, message)
        case .createdSinceDeleted(let kind, let id):
            // Not 404: the client must tell "your create happened, and was deleted since" from "not found".
            // `createdId` names what the key made, so the client re-creates it under that id's key, as
            // every other device of the account does (docs/PROTOCOL.md, "Idempotent creates").
            var error = APIError(.gone, "An earlier request with this Idempotency-Key created the \(kind == .cipher ? "item" : "folder"), "
                                 + "which has since been deleted.")
            error.createdID = id
            return error
        case .keyReused(let message): return APIError(.unprocessableContent, message)
        }
    }
}
