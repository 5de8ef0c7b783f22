import Foundation
import Hummingbird
import VaultCrypto
import VaultModels

/// Attachments, v2 flow (spec §2.9; docs/PROTOCOL.md, "Attachments (VaultSync server)"). Files stream:
/// an upload is read from the request body and stored chunk by chunk as it arrives, a download is read
/// and sent chunk by chunk, so memory stays at a few chunks per request whatever the file's size.
/// Files are stored in the database (``AttachmentChunks``).
struct AttachmentsController {
    let services: ServerServices

    func addPublicRoutes(to router: Router<VaultRequestContext>) {
        // Download through the signed link handed out in `attachments[].url`.
        router.get("/api/attachments/:cipherId/:attachmentId") { request, context in try await download(request, context) }
    }

    func addRoutes(to api: RouterGroup<VaultRequestContext>) {
        api.post("ciphers/:id/attachment/v2") { request, context in try await create(request, context) }
        api.post("ciphers/:id/attachment") { request, context in try await legacyUpload(request, context) }
        api.post("ciphers/:id/attachment/:attachmentId") { request, context in try await upload(request, context) }
        api.get("ciphers/:id/attachment/:attachmentId") { request, context in
            let (_, attachment) = try await find(context)
            return JSONResponse.make(.object(services.renderer(for: request).attachment(attachment)))
        }
        api.get("ciphers/:id/attachment/:attachmentId/renew") { request, context in try await renew(request, context) }
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

    /// The largest file accepted, in the official message's words ("Max file size is 500 MB.").
    var limitError: APIError {
        APIError(.badRequest, "Max file size is \(ByteSize.readable(services.configuration.maxAttachmentBytes)).")
    }

    /// `POST /api/ciphers/{id}/attachment/v2`: makes an attachment whose file is uploaded next. The size
    /// limit is checked before anything is looked up; `Idempotency-Key` makes a retry answer the first
    /// attempt's attachment; `lastKnownRevisionDate` is checked as on `PUT /api/ciphers/{id}`.
    func create(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let userID = try context.requireUser()
        let cipherID = try CiphersController.id(context)
        let body = try await request.jsonObject(limit: services.configuration.maxBodyBytes)
        guard let size = body["fileSize"]?.intValue, size > 0 else { throw APIError.invalidModel(["fileSize": ["The FileSize field is required."]]) }
        guard size <= services.configuration.maxAttachmentBytes else { throw limitError }
        guard let fileName = body["fileName"]?.stringValue, (try? EncString(fileName)) != nil else {
            throw APIError.invalidModel(["fileName": ["fileName is not a valid encrypted string."]])
        }
        let key = body["key"]?.stringValue
        if let key, (try? EncString(key)) == nil { throw APIError.invalidModel(["key": ["key is not a valid encrypted string."]]) }
        let lastKnown = try Self.lastKnownRevisionDate(body)
        let createKey = try CipherRequests.idempotencyKey(request).map { "\(userID):\($0)" }
        guard let record = try await services.repository.visibleCipher(id: cipherID, userID: userID) else { throw APIError.notFound }
        guard record.access.edit else { throw APIError.cannotEdit }
        let creation: AttachmentCreation
        do {
            creation = try await services.repository.createAttachment(
                id: newID(), cipherID: cipherID, userID: userID, fileName: fileName, key: key, size: Int64(size), createKey: createKey,
                lastKnownRevisionDate: lastKnown, now: services.now())
        } catch let error as CipherWriteError {
            throw error.apiError
        }
        guard creation.cipher.id == cipherID else {
            throw APIError.invalidModel(["Idempotency-Key": ["This idempotency key made an attachment of another item."]])
        }
        return try uploadTarget(request, attachmentID: creation.attachmentID, cipher: creation.cipher)
    }

    /// Where an attachment's file goes (`attachment-fileUpload`): this server's direct route.
    func uploadTarget(_ request: Request, attachmentID: String, cipher: CipherRecord) throws -> Response {
        var object = JSONObject()
        object["object"] = .string("attachment-fileUpload")
        object["attachmentId"] = .string(attachmentID)
        object["url"] = .string("/ciphers/\(cipher.id)/attachment/\(attachmentID)")
        object["fileUploadType"] = .int(0)
        object["cipherResponse"] = try .object(JSONParser.parseObject(services.renderer(for: request).cipher(cipher)))
        object["cipherMiniResponse"] = .null
        return JSONResponse.make(.object(object))
    }

    /// `GET /api/ciphers/{id}/attachment/{attachmentId}/renew`: the upload target of an attachment whose file
    /// has not arrived yet (a client resuming an upload asks for it again: on servers with blob storage the
    /// link expires). `404` once the file is there, or when the attachment is gone.
    func renew(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let (record, attachment) = try await find(context)
        guard record.access.edit else { throw APIError.cannotEdit }
        guard attachment.uploadID == nil else { throw APIError.notFound }
        return try uploadTarget(request, attachmentID: attachment.id, cipher: record)
    }

    /// `lastKnownRevisionDate` of a request body, if sent (spec §3.2).
    static func lastKnownRevisionDate(_ body: JSONObject) throws -> Int64? {
        guard let value = body["lastKnownRevisionDate"], !value.isNull else { return nil }
        guard let text = value.stringValue, let date = WireDate(iso8601: text) else {
            throw APIError.invalidModel(["lastKnownRevisionDate": ["lastKnownRevisionDate is not a date."]])
        }
        return date.microsecondsSinceEpoch
    }

    /// An upload that arrived whole but could not become the file: another upload of it completed first.
    struct AnotherUploadCompleted: Error {}

    /// The answer to an upload of a file that is already there: the same whether the earlier upload was this
    /// client's (its answer lost) or another's (docs/PROTOCOL.md, "Attachments").
    static let alreadyUploaded = APIError(
        .badRequest, "This attachment's file has already been uploaded. Delete the attachment and add it again to replace it.")

    /// `POST /api/ciphers/{id}/attachment/{attachmentId}`: the file of an attachment made by the v2 flow.
    /// Needs edit rights on the item (seeing it is not enough: a read-only member could otherwise replace
    /// a shared file), the attachment must belong to that item, and each attachment's file is uploaded
    /// once. The body is stored as it arrives; one longer than the announced size is cut off there, one of
    /// another size is refused, and either leaves nothing. Completing it bumps the item's revision date.
    func upload(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let userID = try context.requireUser()
        let (record, attachment) = try await find(context)
        guard record.access.edit else { throw APIError.cannotEdit }
        guard attachment.uploadID == nil else { throw Self.alreadyUploaded }
        guard attachment.fileSize <= Int64(services.configuration.maxAttachmentBytes) else { throw limitError }
        var reader = try UploadFileReader(contentType: request.headers[.contentType] ?? "")
        let expected = Int(attachment.fileSize)
        // Every byte of the body counts, framing included: a multipart body may carry a little more than the file.
        let bodyLimit = expected + (reader.isMultipart ? UploadFileReader.multipartAllowance : 0)
        if let length = request.headers[.contentLength].flatMap(Int.init) {
            guard length <= bodyLimit else { throw Self.tooLarge(expected) }
            guard length >= expected else { throw Self.tooSmall(expected) }
        }
        let uploadID = try await services.repository.beginAttachmentUpload(attachmentID: attachment.id, now: services.now())
        var buffers = request.body.makeAsyncIterator()
        var received = 0
        try await receiveAndComplete(
            &buffers, reader: &reader, received: &received, file: [], expected: expected, bodyLimit: bodyLimit, attachmentID: attachment.id,
            cipherID: record.id, userID: userID, uploadID: uploadID)
        services.logger.debug("attachment uploaded", metadata: ["attachment": "\(attachment.id)", "bytes": "\(expected)"])
        if let updated = try await services.repository.visibleCipher(id: record.id, userID: userID) {
            await services.notifier.cipher(updated, .syncCipherUpdate, by: context)
        }
        return JSONResponse.empty()
    }

    /// Receives an upload attempt's file and makes it the attachment's; on any failure, deletes what was stored
    /// and answers 404 when the attachment was deleted meanwhile, "already uploaded" when another attempt completed
    /// first. Returns the file's size.
    @discardableResult
    func receiveAndComplete(_ buffers: inout RequestBody.AsyncIterator, reader: inout UploadFileReader, received: inout Int, file: [UInt8],
                            expected: Int?, bodyLimit: Int, attachmentID: String, cipherID: String, userID: String,
                            uploadID: String) async throws -> Int {
        do {
            let size = try await receiveFile(&buffers, reader: &reader, received: &received, file: file, expected: expected,
                                             bodyLimit: bodyLimit, uploadID: uploadID)
            guard try await services.repository.completeAttachmentUpload(
                uploadID: uploadID, attachmentID: attachmentID, cipherID: cipherID, userID: userID, size: Int64(size),
                now: services.now()) else { throw AnotherUploadCompleted() }
            return size
        } catch {
            do {
                try await services.repository.abandonAttachmentUpload(uploadID: uploadID)
            } catch let cleanup {
                // The sweep of a later upload deletes it (AttachmentChunks.abandonedAfter).
                services.logger.warning("an unfinished attachment upload could not be deleted", metadata: [
                    "attachment": "\(attachmentID)", "error": "\(cleanup)"])
            }
            // Deleted while its file was arriving (its chunks could no longer be stored, or it could not complete).
            if try await services.repository.attachment(id: attachmentID, cipherID: cipherID) == nil { throw APIError.notFound }
            // Not completed while it exists: another upload of it completed first.
            if error is AnotherUploadCompleted { throw Self.alreadyUploaded }
            throw error
        }
    }

    /// Reads an upload's body (from where `buffers` stands; `file`: file bytes already read) and stores the file
    /// in chunks as they fill: one chunk's store runs while the next is read (a task group of at most one
    /// store), so memory holds about two chunks and one incoming buffer. `expected`: the announced size (v2);
    /// without one (the legacy flow) the file may be up to the server's limit. Throws on the first byte past
    /// `expected` or `bodyLimit`, on a body that ends short, and on a file that is no binary EncString; the
    /// caller deletes what was stored. Returns the file's size.
    func receiveFile(_ buffers: inout RequestBody.AsyncIterator, reader: inout UploadFileReader, received: inout Int, file initial: [UInt8],
                     expected: Int?, bodyLimit: Int, uploadID: String) async throws -> Int {
        let repository = services.repository
        let most = expected ?? services.configuration.maxAttachmentBytes
        let tooLarge = expected.map(Self.tooLarge) ?? limitError
        return try await withThrowingTaskGroup(of: Void.self) { group in
            var file = initial
            file.reserveCapacity(AttachmentChunks.size + 64 * 1024)
            var firstByte: UInt8?
            var stored = 0
            var seq = 0
            var storing = false
            var more = true
            while more {
                if stored + file.count > most { throw tooLarge }
                if firstByte == nil, let first = file.first {
                    firstByte = first
                    if let expected { try Self.checkEncryptedFile(firstByte: first, size: expected) }
                }
                while file.count >= AttachmentChunks.size {
                    let chunk = Data(file[0..<AttachmentChunks.size])
                    file.removeFirst(AttachmentChunks.size)
                    if storing { try await group.next() }
                    group.addTask { [seq] in try await repository.storeAttachmentChunk(uploadID: uploadID, seq: seq, bytes: chunk) }
                    storing = true
                    stored += AttachmentChunks.size
                    seq += 1
                }
                guard let buffer = try await Self.next(&buffers) else {
                    more = false
                    continue
                }
                received += buffer.readableBytes
                guard received <= bodyLimit else { throw tooLarge }
                try reader.feed(buffer, into: &file)
            }
            try reader.finish()
            let size = stored + file.count
            if let expected {
                guard size == expected else { throw Self.tooSmall(expected) }
            } else {
                try Self.checkEncryptedFile(firstByte: firstByte ?? 0xFF, size: size)
            }
            if !file.isEmpty {
                let last = Data(file)
                group.addTask { [seq] in try await repository.storeAttachmentChunk(uploadID: uploadID, seq: seq, bytes: last) }
            }
            try await group.waitForAll()
            return size
        }
    }

    /// `POST /api/ciphers/{id}/attachment`: the legacy one-step upload that Bitwarden clients fall back to
    /// when a server has no v2 flow (docs/PROTOCOL.md, "Attachments"). A multipart body: the wrapped key as
    /// the text part `key` (optional, before the file), the file as the part `data` whose `filename` is the
    /// encrypted file name. The size is not announced: the body's Content-Length is checked against the
    /// limit first, then the file as it arrives. The attachment is made when the file part begins and
    /// becomes visible only once its file is complete; `Idempotency-Key` makes a repeat answer the first
    /// attempt's attachment (a completed one at once). Answers the item.
    func legacyUpload(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let userID = try context.requireUser()
        let cipherID = try CiphersController.id(context)
        let contentType = request.headers[.contentType] ?? ""
        guard contentType.lowercased().hasPrefix("multipart/form-data") else { throw APIError(.badRequest, "Invalid content.") }
        let bodyLimit = services.configuration.maxAttachmentBytes + UploadFileReader.multipartAllowance
        if let length = request.headers[.contentLength].flatMap(Int.init), length > bodyLimit { throw limitError }
        let createKey = try CipherRequests.idempotencyKey(request).map { "\(userID):\($0)" }
        guard let record = try await services.repository.visibleCipher(id: cipherID, userID: userID) else { throw APIError.notFound }
        guard record.access.edit else { throw APIError.cannotEdit }
        var reader = try UploadFileReader(contentType: contentType)
        var buffers = request.body.makeAsyncIterator()
        var received = 0
        var file: [UInt8] = []
        while !reader.fileStarted, let buffer = try await Self.next(&buffers) {
            received += buffer.readableBytes
            guard received <= bodyLimit else { throw limitError }
            try reader.feed(buffer, into: &file)
        }
        guard reader.fileStarted else { throw APIError(.badRequest, "The upload needs a multipart part named 'data'.") }
        guard let fileName = reader.fileName, (try? EncString(fileName)) != nil else {
            throw APIError.invalidModel(["fileName": ["fileName is not a valid encrypted string."]])
        }
        let key = reader.field("key")
        if let key, (try? EncString(key)) == nil { throw APIError.invalidModel(["key": ["key is not a valid encrypted string."]]) }
        let creation: AttachmentCreation
        do {
            creation = try await services.repository.createAttachment(
                id: newID(), cipherID: cipherID, userID: userID, fileName: fileName, key: key, size: 0, createKey: createKey,
                lastKnownRevisionDate: nil, now: services.now())
        } catch let error as CipherWriteError {
            throw error.apiError
        }
        guard creation.cipher.id == cipherID else {
            throw APIError.invalidModel(["Idempotency-Key": ["This idempotency key made an attachment of another item."]])
        }
        let made = try await services.repository.attachment(id: creation.attachmentID, cipherID: cipherID)
        if made?.uploadID == nil {
            let uploadID = try await services.repository.beginAttachmentUpload(attachmentID: creation.attachmentID, now: services.now())
            let size: Int
            do {
                size = try await receiveAndComplete(
                    &buffers, reader: &reader, received: &received, file: file, expected: nil, bodyLimit: bodyLimit,
                    attachmentID: creation.attachmentID, cipherID: cipherID, userID: userID, uploadID: uploadID)
            } catch {
                try? await services.repository.discardUnuploadedAttachment(id: creation.attachmentID)
                throw error
            }
            services.logger.debug("attachment uploaded (legacy flow)", metadata: ["attachment": "\(creation.attachmentID)", "bytes": "\(size)"])
        }
        guard let updated = try await services.repository.visibleCipher(id: cipherID, userID: userID) else { throw APIError.notFound }
        await services.notifier.cipher(updated, .syncCipherUpdate, by: context)
        return JSONResponse.make(.object(try JSONParser.parseObject(services.renderer(for: request).cipher(updated))))
    }

    /// The next piece of an upload's body; a connection that ends mid-body (the client went away, or sent
    /// something that is not HTTP) is the upload's failure, not the server's.
    static func next(_ buffers: inout RequestBody.AsyncIterator) async throws -> ByteBuffer? {
        do {
            return try await buffers.next()
        } catch {
            throw APIError(.badRequest, "The upload ended before the whole file arrived: the connection was lost.")
        }
    }

    static func tooLarge(_ expected: Int) -> APIError {
        APIError(.badRequest, "The uploaded file is larger than the size announced when the attachment was added (\(expected) bytes).")
    }

    static func tooSmall(_ expected: Int) -> APIError {
        APIError(.badRequest, "The uploaded file is smaller than the size announced when the attachment was added (\(expected) bytes).")
    }

    /// An attachment file is a binary EncString (spec §1.10): `[type 2 or 1][iv 16][mac 32][ciphertext]` or
    /// `[0][iv 16][ciphertext]`, the ciphertext a non-empty multiple of 16 bytes. Checked on the first byte
    /// and the announced size, before anything is stored; the size is then enforced to the byte.
    static func checkEncryptedFile(firstByte: UInt8, size: Int) throws {
        let header: Int
        switch firstByte {
        case 0: header = 17
        case 1, 2: header = 49
        default: throw APIError(.badRequest, "The attachment body is not an encrypted file.")
        }
        guard size > header, (size - header) % 16 == 0 else { throw APIError(.badRequest, "The attachment body is not an encrypted file.") }
    }

    /// Bytes per write of a download.
    static let downloadSlice = 64 * 1024

    /// `GET /api/attachments/{cipherId}/{attachmentId}?token=…`: the file, streamed a chunk at a time.
    func download(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        guard let token = request.uri.queryParameters.get("token"),
              let cipherID = context.parameters.get("cipherId")?.lowercased(),
              let attachmentID = context.parameters.get("attachmentId")?.lowercased(),
              let claims = services.signer.verify(token, nowSeconds: services.now() / 1_000_000),
              claims.subject == "attachment:\(cipherID):\(attachmentID)",
              let attachment = try await services.repository.attachment(id: attachmentID, cipherID: cipherID),
              let uploadID = attachment.uploadID else {
            throw APIError.notFound
        }
        let repository = services.repository
        let size = Int(attachment.fileSize)
        let body = ResponseBody(contentLength: size) { writer in
            var sent = 0
            var seq = 0
            while sent < size {
                // Deleted meanwhile: the connection is closed short of Content-Length, which clients see as a failed download.
                guard let chunk = try await repository.attachmentChunk(uploadID: uploadID, seq: seq) else {
                    throw APIError.notFound
                }
                // In slices: the channel's outbound buffer counts writes, not bytes, so slices bound what waits there.
                for start in stride(from: 0, to: chunk.count, by: Self.downloadSlice) {
                    try await writer.write(ByteBuffer(bytes: chunk[start..<min(start + Self.downloadSlice, chunk.count)]))
                }
                sent += chunk.count
                seq += 1
            }
            try await writer.finish(nil)
        }
        return Response(status: .ok, headers: [.contentType: "application/octet-stream"], body: body)
    }

    /// `DELETE /api/ciphers/{id}/attachment/{attachmentId}` (and `POST …/delete`): an optional JSON body with
    /// `lastKnownRevisionDate` is checked as on `PUT /api/ciphers/{id}`.
    func delete(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let userID = try context.requireUser()
        let raw = try await request.readBody(limit: services.configuration.maxBodyBytes)
        let lastKnown: Int64?
        if raw.allSatisfy({ [9, 10, 13, 32].contains($0) }) {
            lastKnown = nil
        } else {
            do {
                lastKnown = try Self.lastKnownRevisionDate(try JSONParser.parseObject(raw))
            } catch let error as ModelError {
                throw APIError.from(error)
            }
        }
        let (record, attachment) = try await find(context)
        guard record.access.edit else { throw APIError.cannotEdit }
        do {
            let updated = try await services.repository.deleteAttachment(
                id: attachment.id, cipherID: record.id, userID: userID, lastKnownRevisionDate: lastKnown, now: services.now())
            await services.notifier.cipher(updated, .syncCipherUpdate, by: context)
            return JSONResponse.make(.object(["cipher": .object(try JSONParser.parseObject(services.renderer(for: request).cipher(updated)))]))
        } catch let error as CipherWriteError {
            throw error.apiError
        }
    }
}

