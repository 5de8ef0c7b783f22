import Foundation
import Hummingbird
import VaultCrypto
import VaultModels

/// Attachments, v2 flow (spec §2.9). Bodies are stored in the database, not on disk: one source of
/// truth that is transactional with the metadata, shared by every instance on one PostgreSQL, and
/// backed up with the rest; the size limit keeps rows reasonable.
struct AttachmentsController {
    let services: ServerServices

    func addPublicRoutes(to router: Router<VaultRequestContext>) {
        // Download through the signed link handed out in `attachments[].url`.
        router.get("/api/attachments/:cipherId/:attachmentId") { request, context in
            guard let token = request.uri.queryParameters.get("token"),
                  let cipherID = context.parameters.get("cipherId"), let attachmentID = context.parameters.get("attachmentId"),
                  let claims = services.signer.verify(token, nowSeconds: services.now() / 1_000_000),
                  claims.subject == "attachment:\(cipherID.lowercased()):\(attachmentID.lowercased())",
                  let body = try await services.repository.attachmentBody(id: attachmentID.lowercased(), cipherID: cipherID.lowercased()) else {
                throw APIError.notFound
            }
            var buffer = ByteBuffer()
            buffer.writeBytes(body)
            return Response(status: .ok, headers: [.contentType: "application/octet-stream"], body: .init(byteBuffer: buffer))
        }
    }

    func addRoutes(to api: RouterGroup<VaultRequestContext>) {
        api.post("ciphers/:id/attachment/v2") { request, context in try await create(request, context) }
        api.post("ciphers/:id/attachment/:attachmentId") { request, context in try await upload(request, context) }
        api.get("ciphers/:id/attachment/:attachmentId") { request, context in
            let (record, attachment) = try await find(context)
            _ = record
            return JSONResponse.make(.object(services.renderer(for: request).attachment(attachment)))
        }
        api.delete("ciphers/:id/attachment/:attachmentId") { request, context in try await delete(request, context) }
        api.post("ciphers/:id/attachment/:attachmentId/delete") { request, context in try await delete(request, context) }
    }

    func find(_ context: VaultRequestContext) async throws -> (CipherRecord, AttachmentRecord) {
        let userID = try context.requireUser()
        let cipherID = try CiphersController.id(context)
        guard let attachmentID = context.parameters.get("attachmentId")?.lowercased(),
              let record = try await services.repository.visibleCipher(id: cipherID, userID: userID),
              let attachment = try await services.repository.attachment(id: attachmentID, cipherID: cipherID) else {
            throw APIError.notFound
        }
        return (record, attachment)
    }

    func create(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let userID = try context.requireUser()
        let cipherID = try CiphersController.id(context)
        let body = try await request.jsonObject(limit: services.configuration.maxBodyBytes)
        guard let record = try await services.repository.visibleCipher(id: cipherID, userID: userID) else { throw APIError.notFound }
        guard record.access.edit else { throw APIError(.badRequest, "You do not have permissions to edit this.") }
        guard let fileName = body["fileName"]?.stringValue, (try? EncString(fileName)) != nil else {
            throw APIError.invalidModel(["fileName": ["fileName is not a valid encrypted string."]])
        }
        let key = body["key"]?.stringValue
        if let key, (try? EncString(key)) == nil { throw APIError.invalidModel(["key": ["key is not a valid encrypted string."]]) }
        guard let size = body["fileSize"]?.intValue, size > 0 else { throw APIError.invalidModel(["fileSize": ["The FileSize field is required."]]) }
        guard size <= services.configuration.maxAttachmentBytes else {
            throw APIError(.badRequest, "Max file size is \(services.configuration.maxAttachmentBytes / 1024 / 1024) MiB.")
        }
        let attachmentID = newID()
        let updated = try await services.repository.createAttachment(
            id: attachmentID, cipherID: cipherID, userID: userID, fileName: fileName, key: key, size: Int64(size), now: services.now())
        var object = JSONObject()
        object["object"] = .string("attachment-fileUpload")
        object["attachmentId"] = .string(attachmentID)
        object["url"] = .string("/ciphers/\(cipherID)/attachment/\(attachmentID)")
        object["fileUploadType"] = .int(0)
        object["cipherResponse"] = try .object(JSONParser.parseObject(services.renderer(for: request).cipher(updated)))
        object["cipherMiniResponse"] = .null
        return JSONResponse.make(.object(object))
    }

    /// `POST /api/ciphers/{id}/attachment/{attachmentId}`: the file of an attachment made by the v2 flow.
    /// Needs edit rights on the item (seeing it is not enough: a read-only member could otherwise replace
    /// a shared file), the attachment must belong to that item, and each attachment's file is uploaded
    /// once; the upload bumps the item's revision date like any other change to it.
    func upload(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let userID = try context.requireUser()
        let (record, attachment) = try await find(context)
        guard record.access.edit else { throw APIError(.badRequest, "You do not have permissions to edit this.") }
        let raw = try await request.readBody(limit: services.configuration.maxAttachmentBytes + 64 * 1024)
        let contentType = request.headers[.contentType] ?? ""
        let body: [UInt8]
        if contentType.lowercased().hasPrefix("multipart/form-data") {
            guard let part = Multipart.filePart(named: "data", in: raw, contentType: contentType) else {
                throw APIError(.badRequest, "The upload needs a multipart part named 'data'.")
            }
            body = part
        } else {
            body = raw
        }
        guard (try? EncString(binary: body)) != nil else {
            throw APIError(.badRequest, "The attachment body is not an encrypted file.")
        }
        guard abs(Int64(body.count) - attachment.fileSize) <= 1024 * 1024 else {
            throw APIError(.badRequest, "The uploaded size does not match the declared file size.")
        }
        guard try await services.repository.storeAttachmentBody(
            id: attachment.id, cipherID: record.id, userID: userID, body: Data(body), size: Int64(body.count), now: services.now()) else {
            throw APIError(.badRequest, "This attachment's file has already been uploaded. Delete the attachment and add it again to replace it.")
        }
        return JSONResponse.empty()
    }

    func delete(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let userID = try context.requireUser()
        let (record, attachment) = try await find(context)
        guard record.access.edit else { throw APIError(.badRequest, "You do not have permissions to edit this.") }
        let updated = try await services.repository.deleteAttachment(id: attachment.id, cipherID: record.id, userID: userID, now: services.now())
        return JSONResponse.make(.object(["cipher": .object(try JSONParser.parseObject(services.renderer(for: request).cipher(updated)))]))
    }
}

/// The one multipart feature uploads need: the bytes of a named file part.
enum Multipart {
    static func filePart(named name: String, in body: [UInt8], contentType: String) -> [UInt8]? {
        guard let range = contentType.range(of: "boundary=") else { return nil }
        var boundary = String(contentType[range.upperBound...])
        if let semicolon = boundary.firstIndex(of: ";") { boundary = String(boundary[..<semicolon]) }
        boundary = boundary.trimmingCharacters(in: CharacterSet(charactersIn: "\" "))
        let delimiter = Array("--\(boundary)".utf8)
        var parts: [Range<Int>] = []
        var start: Int?
        var index = 0
        while index + delimiter.count <= body.count {
            if body[index] == delimiter[0], Array(body[index..<index + delimiter.count]) == delimiter {
                if let start { parts.append(start..<max(start, index - 2)) }  // drop the CRLF before the delimiter
                index += delimiter.count
                // skip CRLF after the delimiter
                if index + 1 < body.count, body[index] == 13, body[index + 1] == 10 { index += 2 }
                start = index
                continue
            }
            index += 1
        }
        for part in parts {
            let bytes = Array(body[part])
            guard let split = headerEnd(bytes) else { continue }
            let headers = String(decoding: bytes[0..<split], as: UTF8.self).lowercased()
            if headers.contains("name=\"\(name)\"") { return Array(bytes[(split + 4)...]) }
        }
        return nil
    }

    private static func headerEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4) where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index
        }
        return nil
    }
}

extension VaultRepository {
    func attachment(id: String, cipherID: String) async throws -> AttachmentRecord? {
        try await transaction { session in
            try await session.query("SELECT id, cipher_id, file_name, akey, file_size FROM attachments WHERE id = ? AND cipher_id = ?",
                                    [.text(id), .text(cipherID)]).first.map { row in
                AttachmentRecord(id: row.text("id") ?? "", cipherID: row.text("cipher_id") ?? "", fileName: row.text("file_name") ?? "",
                                 key: row.text("akey"), fileSize: row.int("file_size") ?? 0)
            }
        }
    }

    func attachmentBody(id: String, cipherID: String) async throws -> Data? {
        try await transaction { session in
            try await session.query("SELECT body FROM attachments WHERE id = ? AND cipher_id = ?", [.text(id), .text(cipherID)]).first?.blob("body")
        }
    }

    func createAttachment(id: String, cipherID: String, userID: String, fileName: String, key: String?, size: Int64, now: Int64) async throws -> CipherRecord {
        try await transaction { session in
            try await session.query("""
                INSERT INTO attachments (id, cipher_id, file_name, akey, file_size, body, created_at) VALUES (?, ?, ?, ?, ?, NULL, ?)
                """, [.text(id), .text(cipherID), .text(fileName), .optionalText(key), .int(size), .int(now)])
            // Official: adding an attachment bumps the cipher's revision date (spec §3.1).
            try await session.query("UPDATE ciphers SET revision_date = \(Self.nextRevision) WHERE id = ?", [.int(now), .int(now), .text(cipherID)])
            guard let record = try await Self.visibleCiphers(userID: userID, onlyID: cipherID, session).first else {
                throw APIError.notFound
            }
            try await Self.bumpRevision(try await Self.affectedUsers(userID: record.userID, organizationID: record.organizationID, session),
                                        now: now, session)
            return record
        }
    }

    /// Stores an attachment's file unless it has one already (`false` then), and bumps the item's revision
    /// and its users' account revisions, in one transaction.
    func storeAttachmentBody(id: String, cipherID: String, userID: String, body: Data, size: Int64, now: Int64) async throws -> Bool {
        try await transaction { session in
            guard try await !session.query(
                "UPDATE attachments SET body = ?, file_size = ? WHERE id = ? AND cipher_id = ? AND body IS NULL RETURNING id",
                [.blob(body), .int(size), .text(id), .text(cipherID)]).isEmpty else { return false }
            try await session.query("UPDATE ciphers SET revision_date = \(Self.nextRevision) WHERE id = ?", [.int(now), .int(now), .text(cipherID)])
            guard let record = try await Self.visibleCiphers(userID: userID, onlyID: cipherID, session).first else {
                throw APIError.notFound
            }
            try await Self.bumpRevision(try await Self.affectedUsers(userID: record.userID, organizationID: record.organizationID, session),
                                        now: now, session)
            return true
        }
    }

    func deleteAttachment(id: String, cipherID: String, userID: String, now: Int64) async throws -> CipherRecord {
        try await transaction { session in
            try await session.query("DELETE FROM attachments WHERE id = ? AND cipher_id = ?", [.text(id), .text(cipherID)])
            try await session.query("UPDATE ciphers SET revision_date = \(Self.nextRevision) WHERE id = ?", [.int(now), .int(now), .text(cipherID)])
            guard let record = try await Self.visibleCiphers(userID: userID, onlyID: cipherID, session).first else {
                throw APIError.notFound
            }
            try await Self.bumpRevision(try await Self.affectedUsers(userID: record.userID, organizationID: record.organizationID, session),
                                        now: now, session)
            return record
        }
    }
}
