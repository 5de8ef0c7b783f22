import Foundation
import NIOHTTP1
import VaultCrypto
import VaultModels

/// Where and how the server wants an attachment's file (docs/PROTOCOL.md, "Attachments").
public struct AttachmentUpload: Sendable {
    public var attachmentID: String
    /// Relative to the API (`/ciphers/{id}/attachment/{attachmentId}`, a direct upload) or absolute
    /// (a storage service's signed link, `fileUploadType` 1).
    public var url: String
    /// 0: direct (multipart POST to the server); 1: Azure blob storage (PUT to the signed link).
    public var fileUploadType: Int
    /// The item as it is now, with the new attachment listed.
    public var cipher: CipherWire?

    public init(attachmentID: String, url: String, fileUploadType: Int, cipher: CipherWire? = nil) {
        self.attachmentID = attachmentID
        self.url = url
        self.fileUploadType = fileUploadType
        self.cipher = cipher
    }
}

extension BitwardenAPI {
    /// Announces an attachment (v2 flow, step one): its wrapped key, encrypted file name and encrypted
    /// size. `lastKnownRevisionDate`: the item's revision this device knows (the official server
    /// refuses a stale one). `idempotencyKey`: the same for every attempt at one attachment.
    public func createAttachment(cipherID: String, fileName: EncString, key: EncString, encryptedSize: Int,
                                 lastKnownRevisionDate: WireDate?, idempotencyKey: String? = nil,
                                 token: String) async throws -> AttachmentUpload {
        var body: JSONObject = ["key": .string(key.serialized), "fileName": .string(fileName.serialized),
                                "fileSize": .int(encryptedSize), "adminRequest": .bool(false)]
        if let lastKnownRevisionDate { body["lastKnownRevisionDate"] = .string(lastKnownRevisionDate.iso8601) }
        let reply = try await send(.POST, "/api/ciphers/\(cipherID)/attachment/v2", token: token, json: .object(body),
                                   idempotencyKey: idempotencyKey)
        return try uploadTarget(try object(reply), attachmentID: nil)
    }

    /// The upload target of an announced attachment whose file has not arrived, asked for again
    /// (`GET …/attachment/{attachmentId}/renew`: a storage service's signed link expires). `404` once the
    /// file is there or the attachment is gone; servers without the route answer 404 or 405 too.
    public func renewAttachmentUpload(cipherID: String, attachmentID: String, token: String) async throws -> AttachmentUpload {
        try uploadTarget(try object(try await send(.GET, "/api/ciphers/\(cipherID)/attachment/\(attachmentID)/renew", token: token)),
                         attachmentID: attachmentID)
    }

    /// An `attachment-fileUpload` answer (the renew answer may leave out the id it was asked about).
    func uploadTarget(_ object: JSONObject, attachmentID known: String?) throws -> AttachmentUpload {
        guard let attachmentID = object["attachmentId"]?.stringValue ?? known, let url = object["url"]?.stringValue else {
            throw ServerCallError.invalidResponse("the attachment answer has no attachmentId or url")
        }
        let cipher = object["cipherResponse"]?.objectValue.flatMap { try? CipherWire(json: $0, path: "cipherResponse") }
        return AttachmentUpload(attachmentID: attachmentID, url: url, fileUploadType: object["fileUploadType"]?.intValue ?? 0, cipher: cipher)
    }

    /// Uploads the encrypted file (v2 flow, step two) from a file, read as it is sent (memory does not grow
    /// with the file's size): a multipart POST to the server for a direct upload, a PUT to the signed link
    /// for blob storage (without the session's token: another host). `progress`: bytes of the file sent so far.
    public func uploadAttachment(_ upload: AttachmentUpload, cipherID: String, fileName: EncString, filePath: String, fileSize: Int,
                                 progress: (@Sendable (Int) -> Void)? = nil, token: String) async throws {
        let timeout = transferTimeout(bytes: fileSize)
        if upload.fileUploadType == 1 {
            _ = try await send(.PUT, upload.url, file: FileBody(path: filePath, fileSize: fileSize, progress: progress),
                               contentType: "application/octet-stream", timeout: timeout,
                               extraHeaders: [("x-ms-blob-type", "BlockBlob"), ("x-ms-version", "2020-04-08")])
            return
        }
        let path = upload.url.hasPrefix("http") ? upload.url : "/api" + upload.url
        let (prefix, suffix, contentType) = Self.multipartFrame(fileName: fileName.serialized)
        _ = try await send(.POST, path, token: upload.url.hasPrefix("http") ? nil : token,
                           file: FileBody(prefix: prefix, path: filePath, fileSize: fileSize, suffix: suffix, progress: progress),
                           contentType: contentType, timeout: timeout)
    }

    /// The legacy one-step upload (`POST /api/ciphers/{id}/attachment`), for servers without the v2 flow
    /// (they answer its announce 404 or 405): one multipart body with the wrapped key as the text part `key`
    /// and the file as the part `data` named with the encrypted file name, read from the file as it is
    /// sent. Answers the item, its new attachment listed (found by its wrapped key: the server hands out
    /// no id otherwise). `idempotencyKey` is sent for servers that honour it on this route (ours).
    public func uploadAttachmentLegacy(cipherID: String, fileName: EncString, key: EncString, filePath: String, fileSize: Int,
                                       idempotencyKey: String? = nil, progress: (@Sendable (Int) -> Void)? = nil,
                                       token: String) async throws -> CipherWire {
        var (prefix, suffix, contentType) = Self.multipartFrame(fileName: fileName.serialized)
        let boundary = String(contentType.split(separator: "=").last ?? "")
        prefix = Array("--\(boundary)\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\n\(key.serialized)\r\n".utf8) + prefix
        let reply = try await send(.POST, "/api/ciphers/\(cipherID)/attachment", token: token,
                                   file: FileBody(prefix: prefix, path: filePath, fileSize: fileSize, suffix: suffix, progress: progress),
                                   contentType: contentType, idempotencyKey: idempotencyKey, timeout: transferTimeout(bytes: fileSize))
        return try CipherWire(json: try object(reply), path: "cipher")
    }

    /// The encrypted file behind a download link (which may be another host: no token is sent), into a
    /// file as it arrives. `expectedSize` sets the deadline.
    public func downloadAttachment(url: String, to path: String, expectedSize: Int, progress: (@Sendable (Int) -> Void)? = nil) async throws {
        _ = try await send(.GET, url.hasPrefix("http") ? url : baseURL + url, downloadTo: path, downloadProgress: progress,
                           timeout: transferTimeout(bytes: expectedSize))
    }

    /// The item's attachment with a fresh download link (`url`).
    public func attachmentDownloadURL(cipherID: String, attachmentID: String, token: String) async throws -> String {
        let object = try object(try await send(.GET, "/api/ciphers/\(cipherID)/attachment/\(attachmentID)", token: token))
        guard let url = object["url"]?.stringValue else { throw ServerCallError.invalidResponse("the attachment has no download url") }
        return url
    }

    /// Deletes an attachment; the answer's item, when the server sends one.
    public func deleteAttachment(cipherID: String, attachmentID: String, token: String) async throws -> CipherWire? {
        let reply = try await send(.DELETE, "/api/ciphers/\(cipherID)/attachment/\(attachmentID)", token: token)
        guard let object = try? JSONParser.parseObject(reply.body), let cipher = object["cipher"]?.objectValue else { return nil }
        return try? CipherWire(json: cipher, path: "cipher")
    }

    /// A `multipart/form-data` body with one file part named `data` (the encrypted file name as its name):
    /// what goes before and after the file.
    static func multipartFrame(fileName: String) -> (prefix: [UInt8], suffix: [UInt8], contentType: String) {
        let boundary = "vaultsync-" + UUID().uuidString.lowercased()
        let quoted = fileName.replacingOccurrences(of: "\"", with: "%22")
        let prefix = Array("--\(boundary)\r\nContent-Disposition: form-data; name=\"data\"; filename=\"\(quoted)\"\r\n".utf8)
            + Array("Content-Type: application/octet-stream\r\n\r\n".utf8)
        return (prefix, Array("\r\n--\(boundary)--\r\n".utf8), "multipart/form-data; boundary=\(boundary)")
    }
}
