import AsyncHTTPClient
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import Testing
import VaultCrypto
import VaultModels
@testable import VaultServer
import VaultTestSupport

/// A real server on a loopback port for attachment tests: the test client for JSON calls, an
/// AsyncHTTPClient for streamed bodies, and a second handle on the server's database to count what is stored.
struct AttachmentServer: Sendable {
    let api: APIClient
    let http: HTTPClient
    let base: String
    let database: any SQLDatabase

    /// Rows of a table (`attachment_chunks`, `attachment_uploads`, `attachments`).
    func count(_ table: String) async throws -> Int64 {
        try await database.read { session in try await session.query("SELECT COUNT(*) AS n FROM \(table)").first?.int("n") ?? -1 }
    }

    /// The tables an attachment's file lives in, counted: (upload attempts, chunks).
    func stored() async throws -> (uploads: Int64, chunks: Int64) {
        (try await count("attachment_uploads"), try await count("attachment_chunks"))
    }

    /// POSTs `size` bytes from `body` (a stream: nothing is held whole) to an attachment's upload route.
    func upload<Body: AsyncSequence & Sendable>(cipherID: String, attachmentID: String, token: String, body: Body, length: Int64?,
                                               contentType: String = "application/octet-stream") async throws -> APIResponse
        where Body.Element == ByteBuffer {
        try await post("/api/ciphers/\(cipherID)/attachment/\(attachmentID)", token: token, body: body, length: length, contentType: contentType)
    }

    /// POSTs a streamed body to `path`.
    func post<Body: AsyncSequence & Sendable>(_ path: String, token: String, body: Body, length: Int64?, contentType: String,
                                              headers: [(String, String)] = []) async throws -> APIResponse
        where Body.Element == ByteBuffer {
        var request = HTTPClientRequest(url: base + path)
        request.method = .POST
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        request.headers.add(name: "Content-Type", value: contentType)
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        request.body = .stream(body, length: length.map { .known($0) } ?? .unknown)
        let response = try await http.execute(request, timeout: .seconds(1800))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        return APIResponse(status: .init(code: Int(response.status.code)), headers: [:], bytes: Array(bytes.readableBytesView))
    }

    /// GETs a download link and returns the SHA-256 and length of what came, read as it arrives.
    func download(_ link: String) async throws -> (status: Int, digest: SHA256.Digest, length: Int, contentLength: String?) {
        let path = String(link[link.range(of: "/api/attachments/")!.lowerBound...])
        let response = try await http.execute(HTTPClientRequest(url: base + path), timeout: .seconds(1800))
        var hash = SHA256()
        var length = 0
        for try await buffer in response.body {
            buffer.withUnsafeReadableBytes { hash.update(bufferPointer: $0) }
            length += buffer.readableBytes
        }
        return (Int(response.status.code), hash.finalize(), length, response.headers.first(name: "content-length"))
    }
}

/// Runs `body` against a real server with the configuration `configure` sets.
func withAttachmentServer(_ backend: Backend, configure: @escaping @Sendable (inout ServerConfiguration) -> Void = { _ in },
                          _ body: @Sendable (AttachmentServer) async throws -> Void) async throws {
    let directory = NSTemporaryDirectory() + "vaultsync-test-" + UUID().uuidString
    let database = try await TestDatabase.make(backend, directory: directory)
    var configuration = database.configuration
    configure(&configuration)
    let app = try await buildApplication(configuration: configuration)
    let observer: any SQLDatabase = try configuration.databaseURL.map { try PostgresDatabase(url: $0, logger: Logger(label: "test-observer")) }
        ?? SQLiteDatabase(path: configuration.sqlitePath)
    let http = HTTPClient(eventLoopGroupProvider: .singleton)
    do {
        try await app.test(.live) { client in
            let port = try #require(client.port)
            try await body(AttachmentServer(api: APIClient(client: client), http: http, base: "http://127.0.0.1:\(port)", database: observer))
        }
    } catch {
        try? await http.shutdown()
        await observer.close()
        await database.cleanup()
        throw error
    }
    try await http.shutdown()
    await observer.close()
    await database.cleanup()
}

/// A file of `size` bytes shaped like an encrypted attachment (type 2, IV, MAC, ciphertext), made as it
/// is read in pieces: a random 1 MiB block, each piece stamped with its index so that a piece out of place
/// changes the digest. `failAfter`: the stream throws once that many bytes were produced (a client
/// that goes away mid-upload).
struct GeneratedFile: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    static let piece = 256 * 1024
    static let block: [UInt8] = (0..<(1 << 20)).map { _ in UInt8.random(in: 0...255) }

    let size: Int
    var failAfter: Int?
    /// Bytes sent before and after the file (multipart framing).
    var prefix: [UInt8] = []
    var suffix: [UInt8] = []

    /// The size of an encrypted file whose ciphertext is `mib` MiB: header 49 bytes.
    static func encryptedSize(mib: Int) -> Int { mib * (1 << 20) + 49 }

    /// The file's bytes at piece `index`.
    func piece(_ index: Int) -> [UInt8] {
        let start = index * Self.piece
        let count = Swift.min(Self.piece, size - start)
        let offset = (index * 7919) % (Self.block.count - Self.piece)
        var bytes = Array(Self.block[offset..<offset + count])
        withUnsafeBytes(of: UInt64(index).littleEndian) { stamp in
            for position in 0..<Swift.min(8, bytes.count) { bytes[position] = stamp[position] }
        }
        if index == 0 { bytes[0] = 2 }
        return bytes
    }

    var pieces: Int { (size + Self.piece - 1) / Self.piece }

    /// The SHA-256 of the file, computed piece by piece.
    var digest: SHA256.Digest {
        var hash = SHA256()
        for index in 0..<pieces { hash.update(data: piece(index)) }
        return hash.finalize()
    }

    struct Iterator: AsyncIteratorProtocol {
        let file: GeneratedFile
        var index = -1
        var produced = 0

        /// The prefix (index -1), the pieces, the suffix, then the end.
        mutating func next() async throws -> ByteBuffer? {
            while true {
                let current = index
                index += 1
                if current == -1 {
                    if file.prefix.isEmpty { continue }
                    return ByteBuffer(bytes: file.prefix)
                }
                if current < file.pieces {
                    if let failAfter = file.failAfter, produced >= failAfter { throw CancellationError() }
                    let bytes = file.piece(current)
                    produced += bytes.count
                    return ByteBuffer(bytes: bytes)
                }
                if current == file.pieces, !file.suffix.isEmpty { return ByteBuffer(bytes: file.suffix) }
                return nil
            }
        }
    }

    func makeAsyncIterator() -> Iterator { Iterator(file: self) }
}

extension TestUser {
    /// `POST /api/ciphers/{id}/attachment/v2` announcing `size` bytes.
    func createAttachment(_ api: APIClient, token: String, cipherID: String, size: Int, lastKnown: String? = nil,
                          idempotencyKey: String? = nil) async throws -> APIResponse {
        var body: JSONObject = [
            "key": .string(try EncString.wrap(.generate(), with: userKey).serialized),
            "fileName": .string(try EncString.encrypt("big.bin", key: userKey).serialized), "fileSize": .int(size),
        ]
        if let lastKnown { body["lastKnownRevisionDate"] = .string(lastKnown) }
        var headers: HTTPFields = [:]
        if let idempotencyKey { headers[HTTPField.Name("Idempotency-Key")!] = idempotencyKey }
        return try await api.request(.post, "/api/ciphers/\(cipherID)/attachment/v2", token: token, json: .object(body), headers: headers)
    }

    /// A new login item's id and revision date.
    func item(_ api: APIClient, token: String, name: String = "with file") async throws -> (id: String, revision: String) {
        let created = try await api.request(.post, "/api/ciphers", token: token, json: .object(try loginItem(name: name)))
        return (try #require(created.object["id"]?.stringValue), try #require(created.object["revisionDate"]?.stringValue))
    }
}

@Suite("Attachments: streamed files, the size limit, revision checks, idempotent creates", .serialized)
struct AttachmentTests {
    /// The streamed round trip's size: 500 MiB, the issue's (about 22 s for both backends at once in a debug
    /// build on this 2-core machine, under load); `VAULTSYNC_ATTACHMENT_TEST_MIB=N` for a quicker run. Its
    /// memory and throughput are measured by VaultBench P7 in a release build, not asserted here.
    static var roundTripMiB: Int {
        ProcessInfo.processInfo.environment["VAULTSYNC_ATTACHMENT_TEST_MIB"].flatMap(Int.init) ?? 500
    }

    @Test("a large file streams up and back down through the real server; the bytes match (SHA-256)", arguments: Backend.available)
    func streamedRoundTrip(backend: Backend) async throws {
        let mib = Self.roundTripMiB
        try await withAttachmentServer(backend, configure: { $0.maxAttachmentBytes = (mib + 1) << 20 }) { server in
            let user = try await TestUser.register(server.api)
            let token = try await user.token(server.api)
            let (id, _) = try await user.item(server.api, token: token)
            let file = GeneratedFile(size: GeneratedFile.encryptedSize(mib: mib))
            let start = try await user.createAttachment(server.api, token: token, cipherID: id, size: file.size)
            let attachmentID = try #require(start.object["attachmentId"]?.stringValue, "\(start.message ?? "")")
            let clock = ContinuousClock()
            let began = clock.now
            let uploaded = try await server.upload(cipherID: id, attachmentID: attachmentID, token: token, body: file, length: Int64(file.size))
            #expect(uploaded.status == .ok, "\(uploaded.message ?? "")")
            let upTime = clock.now - began
            #expect(try await server.stored().chunks == Int64((file.size + AttachmentChunks.size - 1) / AttachmentChunks.size))

            let item = try await server.api.request(.get, "/api/ciphers/\(id)", token: token).object
            let attachment = try #require(item["attachments"]?.arrayValue?.first?.objectValue)
            #expect(attachment["size"] == .string(String(file.size)))
            let downloadStart = clock.now
            let download = try await server.download(try #require(attachment["url"]?.stringValue))
            #expect(download.status == 200)
            #expect(download.contentLength == String(file.size))
            #expect(download.length == file.size)
            #expect(download.digest == file.digest, "the file came back byte for byte")
            print("streamedRoundTrip \(backend) \(mib) MiB: up \(upTime), down \(clock.now - downloadStart)")
        }
    }

    @Test("a multipart upload split at every awkward place stores only the 'data' part's bytes", arguments: Backend.available)
    func multipartStreamed(backend: Backend) async throws {
        try await withAttachmentServer(backend) { server in
            let user = try await TestUser.register(server.api)
            let token = try await user.token(server.api)
            let (id, _) = try await user.item(server.api, token: token)
            let file = GeneratedFile(size: 3 * (1 << 20) + 49)
            let start = try await user.createAttachment(server.api, token: token, cipherID: id, size: file.size)
            let attachmentID = try #require(start.object["attachmentId"]?.stringValue)
            let boundary = "vaultsync-\(UUID().uuidString)"
            // A field part first, whose filename is "data" (not its name), then the file.
            var multipart = GeneratedFile(size: file.size)
            multipart.prefix = Array("""
                --\(boundary)\r\nContent-Disposition: form-data; name="note"; filename="data"\r\n\r\nnot the file\r\n\
                --\(boundary)\r\nContent-Disposition: form-data; name="data"; filename="big.bin"\r\nContent-Type: application/octet-stream\r\n\r\n
                """.utf8)
            multipart.suffix = Array("\r\n--\(boundary)--\r\n".utf8)
            let uploaded = try await server.upload(cipherID: id, attachmentID: attachmentID, token: token, body: multipart, length: nil,
                                                   contentType: "multipart/form-data; boundary=\"\(boundary)\"")
            #expect(uploaded.status == .ok, "\(uploaded.message ?? "")")
            let item = try await server.api.request(.get, "/api/ciphers/\(id)", token: token).object
            let link = try #require(item["attachments"]?.arrayValue?.first?.objectValue?["url"]?.stringValue)
            let download = try await server.download(link)
            #expect(download.digest == file.digest)
        }
    }

    /// A legacy upload's body: the wrapped key as the text part `key`, then the file as the part `data`
    /// named with the encrypted file name (what Bitwarden's clients send to a server without v2).
    static func legacyBody(_ file: GeneratedFile, key: String?, fileName: String, boundary: String) -> GeneratedFile {
        var body = file
        let keyPart = key.map { "--\(boundary)\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\n\($0)\r\n" } ?? ""
        body.prefix = Array((keyPart + """
            --\(boundary)\r\nContent-Disposition: form-data; name="data"; filename="\(fileName)"\r\n\
            Content-Type: application/octet-stream\r\n\r\n
            """).utf8)
        body.suffix = Array("\r\n--\(boundary)--\r\n".utf8)
        return body
    }

    @Test("the legacy one-step upload: key and file in one body; listed with both, downloads byte for byte, bumps the revision; a repeat with its Idempotency-Key attaches nothing more",
          arguments: Backend.available)
    func legacyUpload(backend: Backend) async throws {
        try await withAttachmentServer(backend) { server in
            let user = try await TestUser.register(server.api)
            let token = try await user.token(server.api)
            let (id, revision) = try await user.item(server.api, token: token)
            let file = GeneratedFile(size: GeneratedFile.encryptedSize(mib: 2) + 16 * 1000)
            let key = try EncString.wrap(.generate(), with: user.userKey).serialized
            let fileName = try EncString.encrypt("legacy.bin", key: user.userKey).serialized
            let boundary = "legacy-\(UUID().uuidString)"
            let body = Self.legacyBody(file, key: key, fileName: fileName, boundary: boundary)
            let contentType = "multipart/form-data; boundary=\(boundary)"
            let first = try await server.post("/api/ciphers/\(id)/attachment", token: token, body: body, length: nil, contentType: contentType,
                                              headers: [("Idempotency-Key", "legacy-1")])
            #expect(first.status == .ok, "\(first.message ?? "")")
            #expect(first.object["id"]?.stringValue == id)
            #expect(first.object["revisionDate"]?.stringValue != revision, "the item's revision moved")
            let listed = (first.object["attachments"]?.arrayValue ?? []).compactMap(\.objectValue)
            #expect(listed.count == 1)
            #expect(listed.first?["key"]?.stringValue == key && listed.first?["fileName"]?.stringValue == fileName)
            #expect(listed.first?["size"]?.stringValue == "\(file.size)")
            let download = try await server.download(try #require(listed.first?["url"]?.stringValue))
            #expect(download.digest == file.digest && download.length == file.size)

            // A repeat (its answer lost) answers the same attachment and stores nothing more.
            let again = try await server.post("/api/ciphers/\(id)/attachment", token: token, body: body, length: nil, contentType: contentType,
                                              headers: [("Idempotency-Key", "legacy-1")])
            #expect(again.status == .ok, "\(again.message ?? "")")
            let relisted = (again.object["attachments"]?.arrayValue ?? []).compactMap(\.objectValue)
            #expect(relisted.map { $0["id"]?.stringValue } == listed.map { $0["id"]?.stringValue })
            #expect(try await server.count("attachments") == 1)
            #expect(try await server.stored().uploads == 1)
        }
    }

    /// RELIABILITY bug 69: the web, browser, desktop and `bw` clients send `attachments` as a map of id to file name
    /// (and `attachments2`) with every edit, clone and share; the server read it as an answer's array and refused all.
    @Test("an edit and a clone as the official clients send them (attachments as a map, attachments2) are taken; the file stays",
          arguments: Backend.available)
    func officialClientAttachmentMaps(backend: Backend) async throws {
        try await withAttachmentServer(backend) { server in
            let user = try await TestUser.register(server.api)
            let token = try await user.token(server.api)
            let (id, _) = try await user.item(server.api, token: token)
            let fileName = try EncString.encrypt("map.bin", key: user.userKey).serialized
            let key = try EncString.wrap(.generate(), with: user.userKey).serialized
            let boundary = "map-\(UUID().uuidString)"
            let uploaded = try await server.post("/api/ciphers/\(id)/attachment", token: token,
                                                 body: Self.legacyBody(GeneratedFile(size: 16 * 100 + 49), key: key, fileName: fileName, boundary: boundary),
                                                 length: nil, contentType: "multipart/form-data; boundary=\(boundary)")
            #expect(uploaded.status == .ok, "\(uploaded.message ?? "")")
            let attachment = try #require(uploaded.object["attachments"]?.arrayValue?.first?.objectValue)
            let attachmentID = try #require(attachment["id"]?.stringValue)
            var body = try user.loginItem(name: "Edited in the web vault")
            body["lastKnownRevisionDate"] = uploaded.object["revisionDate"]
            body["attachments"] = .object([attachmentID: .string(fileName)])
            body["Attachments2"] = .object([attachmentID: .object(["fileName": .string(fileName), "key": .string(key)])])
            let edited = try await server.api.request(.put, "/api/ciphers/\(id)", token: token, json: .object(body))
            #expect(edited.status == .ok, "\(edited.message ?? "")")
            #expect(edited.object["attachments"]?.arrayValue?.compactMap { $0.objectValue?["id"]?.stringValue } == [attachmentID])
            // A clone sends the same body to the create route: a new item, without the other's file.
            body["lastKnownRevisionDate"] = nil
            let cloned = try await server.api.request(.post, "/api/ciphers", token: token, json: .object(body))
            #expect(cloned.status == .ok, "\(cloned.message ?? "")")
            #expect(cloned.object["id"]?.stringValue != id && (cloned.object["attachments"]?.arrayValue ?? []).isEmpty)
            #expect(try await server.count("attachments") == 1)
        }
    }

    @Test("renew: an attachment whose file has not arrived gets its upload target again; once uploaded, or unknown, 404",
          arguments: Backend.available)
    func renewUploadTarget(backend: Backend) async throws {
        try await withAttachmentServer(backend) { server in
            let user = try await TestUser.register(server.api)
            let token = try await user.token(server.api)
            let (id, _) = try await user.item(server.api, token: token)
            let file = GeneratedFile(size: GeneratedFile.encryptedSize(mib: 0) + 16 * 10)
            let start = try await user.createAttachment(server.api, token: token, cipherID: id, size: file.size)
            let attachmentID = try #require(start.object["attachmentId"]?.stringValue)
            let renewed = try await server.api.request(.get, "/api/ciphers/\(id)/attachment/\(attachmentID)/renew", token: token)
            #expect(renewed.status == .ok)
            #expect(renewed.object["url"]?.stringValue == start.object["url"]?.stringValue && renewed.object["fileUploadType"]?.intValue == 0)
            #expect(renewed.object["attachmentId"]?.stringValue == attachmentID)
            let uploaded = try await server.upload(cipherID: id, attachmentID: attachmentID, token: token, body: file, length: Int64(file.size))
            #expect(uploaded.status == .ok)
            let again = try await server.api.request(.get, "/api/ciphers/\(id)/attachment/\(attachmentID)/renew", token: token)
            #expect(again.status == .notFound)
            let unknown = try await server.api.request(.get, "/api/ciphers/\(id)/attachment/\(UUID().uuidString.lowercased())/renew", token: token)
            #expect(unknown.status == .notFound)
        }
    }

    @Test("a legacy upload that is not multipart, has no file part, is no encrypted file, is cut off or is over the limit is refused and leaves nothing",
          arguments: Backend.available)
    func legacyUploadRefusals(backend: Backend) async throws {
        try await withAttachmentServer(backend, configure: { $0.maxAttachmentBytes = 1 << 20 }) { server in
            let user = try await TestUser.register(server.api)
            let token = try await user.token(server.api)
            let (id, _) = try await user.item(server.api, token: token)
            let key = try EncString.wrap(.generate(), with: user.userKey).serialized
            let fileName = try EncString.encrypt("x.bin", key: user.userKey).serialized
            let boundary = "legacy-\(UUID().uuidString)"
            let multipart = "multipart/form-data; boundary=\(boundary)"
            let path = "/api/ciphers/\(id)/attachment"
            let small = GeneratedFile(size: GeneratedFile.encryptedSize(mib: 0) + 16 * 64)

            let plain = try await server.post(path, token: token, body: small, length: nil, contentType: "application/octet-stream")
            #expect(plain.status == .badRequest && plain.message == "Invalid content.")

            var noFile = GeneratedFile(size: 0)
            noFile.prefix = Array("--\(boundary)\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\n\(key)\r\n--\(boundary)--\r\n".utf8)
            let withoutFile = try await server.post(path, token: token, body: noFile, length: nil, contentType: multipart)
            #expect(withoutFile.status == .badRequest && withoutFile.message?.contains("'data'") == true, "\(withoutFile.message ?? "")")

            let notEncrypted = try await server.post(
                path, token: token, body: Self.legacyBody(GeneratedFile(size: 5000), key: key, fileName: fileName, boundary: boundary), length: nil,
                contentType: multipart)
            #expect(notEncrypted.status == .badRequest && notEncrypted.message?.contains("not an encrypted file") == true,
                    "\(notEncrypted.message ?? "")")

            var cut = Self.legacyBody(small, key: key, fileName: fileName, boundary: boundary)
            cut.suffix = []
            let cutOff = try await server.post(path, token: token, body: cut, length: nil, contentType: multipart)
            #expect(cutOff.status == .badRequest && cutOff.message?.contains("cut off") == true, "\(cutOff.message ?? "")")

            let large = GeneratedFile(size: GeneratedFile.encryptedSize(mib: 2))
            let streamedOver = try await server.post(
                path, token: token, body: Self.legacyBody(large, key: key, fileName: fileName, boundary: boundary), length: nil, contentType: multipart)
            #expect(streamedOver.status == .badRequest && streamedOver.message == "Max file size is 1 MB.", "\(streamedOver.message ?? "")")
            let overBody = Self.legacyBody(large, key: key, fileName: fileName, boundary: boundary)
            let announcedOver = try await server.post(
                path, token: token, body: overBody, length: Int64(overBody.prefix.count + large.size + overBody.suffix.count), contentType: multipart)
            #expect(announcedOver.status == .badRequest && announcedOver.message == "Max file size is 1 MB.")

            #expect(try await server.count("attachments") == 0)
            #expect(try await server.stored() == (0, 0))
        }
    }

    @Test("the streaming multipart reader gives the same bytes however the body is split")
    func multipartSplits() throws {
        let boundary = "b0undary"
        let file: [UInt8] = Array("\r\n--b0undar\r\n-\r\n--b0undarZ\r\n--".utf8) + (0..<300).map { UInt8($0 % 256) }
        let body = Array("preamble\r\n--\(boundary)\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\nk\r\n--\(boundary)\r\n".utf8)
            + Array("Content-Disposition: form-data; name=\"data\"; filename=\"f\"\r\n\r\n".utf8) + file
            + Array("\r\n--\(boundary)--\r\nepilogue".utf8)
        for piece in [1, 2, 3, 5, 7, 11, 13, 64, body.count] {
            var parser = MultipartFileParser(boundary: boundary, fieldName: "data")
            var out: [UInt8] = []
            for start in stride(from: 0, to: body.count, by: piece) {
                try parser.feed(ByteBuffer(bytes: body[start..<min(start + piece, body.count)]).readableBytesView, into: &out)
            }
            #expect(out == file, "pieces of \(piece)")
            #expect(parser.sawWholeFile)
        }
        var cut = MultipartFileParser(boundary: boundary, fieldName: "data")
        var out: [UInt8] = []
        try cut.feed(ByteBuffer(bytes: body[0..<(body.count - 40)]).readableBytesView, into: &out)
        #expect(!cut.sawWholeFile, "a body cut off inside the file part is not a whole file")
        #expect(MultipartFileParser.boundary(in: "multipart/form-data; charset=utf-8; boundary=\"a b\"") == "a b")
    }

    @Test("over the limit: the create is refused with the official message, and nothing is made", arguments: Backend.available)
    func createOverLimit(backend: Backend) async throws {
        try await withAttachmentServer(backend, configure: { $0.maxAttachmentBytes = 1 << 20 }) { server in
            let user = try await TestUser.register(server.api)
            let token = try await user.token(server.api)
            let (id, revision) = try await user.item(server.api, token: token)
            let refused = try await user.createAttachment(server.api, token: token, cipherID: id, size: (1 << 20) + 1)
            #expect(refused.status == .badRequest)
            #expect(refused.message == "Max file size is 1 MB.")
            #expect(try await server.count("attachments") == 0)
            let item = try await server.api.request(.get, "/api/ciphers/\(id)", token: token).object
            #expect(item["revisionDate"] == .string(revision), "a refused create changes nothing")
            #expect(try await user.createAttachment(server.api, token: token, cipherID: id, size: 1 << 20).status == .ok, "at the limit is fine")
        }
    }

    @Test("an upload longer or shorter than announced, or cut off by its client, is refused and leaves nothing", arguments: Backend.available)
    func refusedUploadsLeaveNothing(backend: Backend) async throws {
        try await withAttachmentServer(backend) { server in
            let user = try await TestUser.register(server.api)
            let token = try await user.token(server.api)
            let (id, _) = try await user.item(server.api, token: token)
            let announced = GeneratedFile.encryptedSize(mib: 4)
            let start = try await user.createAttachment(server.api, token: token, cipherID: id, size: announced)
            let attachmentID = try #require(start.object["attachmentId"]?.stringValue)

            // Longer, with no Content-Length (chunked): cut off once past the announced size, after chunks were stored.
            let longer = try await server.upload(cipherID: id, attachmentID: attachmentID, token: token,
                                                 body: GeneratedFile(size: announced + (1 << 20)), length: nil)
            #expect(longer.status == .badRequest)
            #expect(longer.message == "The uploaded file is larger than the size announced when the attachment was added (\(announced) bytes).")
            #expect(try await server.stored() == (0, 0))
            // Longer by its Content-Length: refused before anything is read or stored.
            let declared = try await server.upload(cipherID: id, attachmentID: attachmentID, token: token,
                                                   body: GeneratedFile(size: announced + 16), length: Int64(announced + 16))
            #expect(declared.status == .badRequest)
            #expect(try await server.stored() == (0, 0))
            // Shorter.
            let shorter = try await server.upload(cipherID: id, attachmentID: attachmentID, token: token,
                                                  body: GeneratedFile(size: announced - 16), length: nil)
            #expect(shorter.message == "The uploaded file is smaller than the size announced when the attachment was added (\(announced) bytes).")
            #expect(try await server.stored() == (0, 0))
            // The client goes away after 2.5 MiB: the server deletes what it stored once it sees the connection end.
            var failing = GeneratedFile(size: announced)
            failing.failAfter = 5 * (1 << 19)
            await #expect(throws: (any Error).self) {
                _ = try await server.upload(cipherID: id, attachmentID: attachmentID, token: token, body: failing, length: Int64(announced))
            }
            #expect(await waitUntil { (try? await server.stored()) ?? (1, 1) == (0, 0) }, "the cut-off upload's chunks are deleted")
            // None of that was an upload: the item lists no attachment, and the real file still goes in.
            let item = try await server.api.request(.get, "/api/ciphers/\(id)", token: token).object
            #expect(item["attachments"] == .null)
            let good = try await server.upload(cipherID: id, attachmentID: attachmentID, token: token, body: GeneratedFile(size: announced),
                                               length: Int64(announced))
            #expect(good.status == .ok, "\(good.message ?? "")")
            // Not an encrypted file: refused on its first byte.
            let other = try #require(try await user.createAttachment(server.api, token: token, cipherID: id, size: 161).object["attachmentId"]?.stringValue)
            let plain = try await server.api.request(.post, "/api/ciphers/\(id)/attachment/\(other)", token: token,
                                                     body: Array(repeating: 7, count: 161), headers: [.contentType: "application/octet-stream"])
            #expect(plain.message == "The attachment body is not an encrypted file.")
            #expect(try await server.stored() == (1, 5), "only the good upload is stored")
        }
    }

    @Test("create and delete check lastKnownRevisionDate; create, upload and delete bump the item's and the account's revision",
          arguments: Backend.available)
    func revisionRules(backend: Backend) async throws {
        try await withAttachmentServer(backend) { server in
            let api = server.api
            let user = try await TestUser.register(api)
            let token = try await user.token(api)
            let (id, created) = try await user.item(api, token: token)
            func revisions() async throws -> (item: String, account: Int) {
                let item = try await api.request(.get, "/api/ciphers/\(id)", token: token).object["revisionDate"]?.stringValue
                let account = try await api.request(.get, "/api/accounts/revision-date", token: token).json?.intValue
                return (try #require(item), try #require(account))
            }
            // Another device edits the item: the create below still holds the revision it was made at.
            var wire = try CipherWire(json: try await api.request(.get, "/api/ciphers/\(id)", token: token).object, path: "$")
            wire.lastKnownRevisionDate = WireDate(iso8601: created)
            let edited = try await api.request(.put, "/api/ciphers/\(id)", token: token, json: wire.jsonValue)
            let current = try #require(edited.object["revisionDate"]?.stringValue)
            let stale = try await user.createAttachment(api, token: token, cipherID: id, size: 161, lastKnown: created)
            #expect(stale.status == .badRequest)
            #expect(stale.message == APIError.outOfDate.message)
            #expect(try await server.count("attachments") == 0)

            let before = try await revisions()
            let start = try await user.createAttachment(api, token: token, cipherID: id, size: 161, lastKnown: current)
            #expect(start.status == .ok, "\(start.message ?? "")")
            let attachmentID = try #require(start.object["attachmentId"]?.stringValue)
            let afterCreate = try await revisions()
            #expect(start.object["cipherResponse"]?.objectValue?["revisionDate"] == .string(afterCreate.item))
            #expect(afterCreate.item > before.item && afterCreate.account > before.account, "create bumps both")

            let file = Array(try EncString.encrypt(Array(repeating: 1, count: 100), key: .generate()).binary())
            #expect(try await api.request(.post, "/api/ciphers/\(id)/attachment/\(attachmentID)", token: token, body: file,
                                          headers: [.contentType: "application/octet-stream"]).status == .ok)
            let afterUpload = try await revisions()
            #expect(afterUpload.item > afterCreate.item && afterUpload.account > afterCreate.account, "upload bumps both")

            let path = "/api/ciphers/\(id)/attachment/\(attachmentID)"
            let staleDelete = try await api.request(.delete, path, token: token, json: .object(["lastKnownRevisionDate": .string(afterCreate.item)]))
            #expect(staleDelete.status == .badRequest)
            #expect(staleDelete.message == APIError.outOfDate.message)
            #expect(try await server.count("attachments") == 1, "a stale delete deletes nothing")
            #expect(try await revisions() == afterUpload)
            let deleted = try await api.request(.post, path + "/delete", token: token,
                                                json: .object(["lastKnownRevisionDate": .string(afterUpload.item)]))
            #expect(deleted.status == .ok, "\(deleted.message ?? "")")
            let afterDelete = try await revisions()
            #expect(deleted.object["cipher"]?.objectValue?["revisionDate"] == .string(afterDelete.item))
            #expect(afterDelete.item > afterUpload.item && afterDelete.account > afterUpload.account, "delete bumps both")
            #expect(try await server.stored() == (0, 0), "the file went with the attachment")
        }
    }

    @Test("Idempotency-Key: a repeat answers the first attachment (even with the base it was sent with); concurrent repeats make one",
          arguments: Backend.available)
    func idempotentCreate(backend: Backend) async throws {
        try await withAttachmentServer(backend) { server in
            let api = server.api
            let user = try await TestUser.register(api)
            let token = try await user.token(api)
            let (id, revision) = try await user.item(api, token: token)
            let first = try await user.createAttachment(api, token: token, cipherID: id, size: 161, lastKnown: revision, idempotencyKey: "attach-1")
            #expect(first.status == .ok)
            let attachmentID = try #require(first.object["attachmentId"]?.stringValue)
            // The retry carries the revision the first attempt started from, which that attempt bumped.
            let repeated = try await user.createAttachment(api, token: token, cipherID: id, size: 161, lastKnown: revision, idempotencyKey: "attach-1")
            #expect(repeated.status == .ok, "\(repeated.message ?? "")")
            #expect(repeated.object["attachmentId"] == .string(attachmentID))
            #expect(repeated.object["url"] == first.object["url"])
            #expect(try await server.count("attachments") == 1)

            // Eight attempts at once with a new key: one attachment, every answer names it.
            let answers = try await withThrowingTaskGroup(of: String?.self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        try await user.createAttachment(api, token: token, cipherID: id, size: 161, idempotencyKey: "attach-2").object["attachmentId"]?.stringValue
                    }
                }
                return try await group.reduce(into: [String?]()) { $0.append($1) }
            }
            #expect(answers.count == 8 && Set(answers).count == 1 && answers[0] != nil, "\(answers)")
            #expect(try await server.count("attachments") == 2)

            // Keys belong to their user; a key used for another item, or malformed, is refused.
            let other = try await TestUser.register(api)
            let otherToken = try await other.token(api)
            let (otherID, _) = try await other.item(api, token: otherToken)
            #expect(try await other.createAttachment(api, token: otherToken, cipherID: otherID, size: 161, idempotencyKey: "attach-1")
                .object["attachmentId"] != .string(attachmentID))
            let (secondID, _) = try await user.item(api, token: token, name: "second")
            let misused = try await user.createAttachment(api, token: token, cipherID: secondID, size: 161, idempotencyKey: "attach-1")
            #expect(misused.status == .badRequest)
            #expect(try await user.createAttachment(api, token: token, cipherID: id, size: 161, idempotencyKey: "bad key").status == .badRequest)
            #expect(try await server.count("attachments") == 3)
        }
    }

    @Test("a retried upload after the first completed gets the documented 'already uploaded' answer; the file stays as it was",
          arguments: Backend.available)
    func retriedUpload(backend: Backend) async throws {
        try await withAttachmentServer(backend) { server in
            let user = try await TestUser.register(server.api)
            let token = try await user.token(server.api)
            let (id, _) = try await user.item(server.api, token: token)
            let file = GeneratedFile(size: GeneratedFile.encryptedSize(mib: 2))
            let start = try await user.createAttachment(server.api, token: token, cipherID: id, size: file.size, idempotencyKey: "k")
            let attachmentID = try #require(start.object["attachmentId"]?.stringValue)
            #expect(try await server.upload(cipherID: id, attachmentID: attachmentID, token: token, body: file, length: Int64(file.size)).status == .ok)
            // The answer was lost: the client repeats the create (same key) and the upload.
            let again = try await user.createAttachment(server.api, token: token, cipherID: id, size: file.size, idempotencyKey: "k")
            #expect(again.object["attachmentId"] == .string(attachmentID))
            let retry = try await server.upload(cipherID: id, attachmentID: attachmentID, token: token, body: file, length: Int64(file.size))
            #expect(retry.status == .badRequest)
            #expect(retry.message == AttachmentsController.alreadyUploaded.message)
            let item = try await server.api.request(.get, "/api/ciphers/\(id)", token: token).object
            let listed = try #require(item["attachments"]?.arrayValue?.first?.objectValue)
            #expect(listed["id"] == .string(attachmentID) && listed["size"] == .string(String(file.size)), "listed: the file is complete")
            #expect(try await server.download(try #require(listed["url"]?.stringValue)).digest == file.digest)
            #expect(try await server.stored() == (1, 3))
        }
    }

    @Test("an attachment deleted while its file is arriving: the upload answers 404 and nothing of it is left", arguments: Backend.available)
    func deletedDuringUpload(backend: Backend) async throws {
        try await withAttachmentServer(backend) { server in
            let user = try await TestUser.register(server.api)
            let token = try await user.token(server.api)
            let (id, _) = try await user.item(server.api, token: token)
            let file = GeneratedFile(size: GeneratedFile.encryptedSize(mib: 4))
            let attachmentID = try #require(try await user.createAttachment(server.api, token: token, cipherID: id, size: file.size)
                .object["attachmentId"]?.stringValue)
            let (body, sender) = AsyncStream.makeStream(of: ByteBuffer.self)
            async let answer = server.upload(cipherID: id, attachmentID: attachmentID, token: token, body: body, length: Int64(file.size))
            for index in 0..<8 { sender.yield(ByteBuffer(bytes: file.piece(index))) }  // 2 MiB
            #expect(await waitUntil { ((try? await server.count("attachment_chunks")) ?? 0) >= 1 }, "the first chunk is stored")
            #expect(try await server.api.request(.delete, "/api/ciphers/\(id)/attachment/\(attachmentID)", token: token).status == .ok)
            for index in 8..<file.pieces { sender.yield(ByteBuffer(bytes: file.piece(index))) }
            sender.finish()
            let response = try await answer
            #expect(response.status == .notFound, "\(response.message ?? "")")
            #expect(try await server.stored() == (0, 0))
        }
    }

    @Test("a file stays while its item is in the trash and goes when the item is deleted for good", arguments: Backend.available)
    func filesGoWithTheirItem(backend: Backend) async throws {
        try await withAttachmentServer(backend) { server in
            let user = try await TestUser.register(server.api)
            let token = try await user.token(server.api)
            let (id, _) = try await user.item(server.api, token: token)
            let file = GeneratedFile(size: GeneratedFile.encryptedSize(mib: 1))
            let attachmentID = try #require(try await user.createAttachment(server.api, token: token, cipherID: id, size: file.size)
                .object["attachmentId"]?.stringValue)
            #expect(try await server.upload(cipherID: id, attachmentID: attachmentID, token: token, body: file, length: Int64(file.size)).status == .ok)
            #expect(try await server.stored() == (1, 2))
            #expect(try await server.api.request(.put, "/api/ciphers/\(id)/delete", token: token).status == .ok)
            #expect(try await server.stored() == (1, 2), "in the trash the file stays")
            #expect(try await server.api.request(.delete, "/api/ciphers/\(id)", token: token).status == .ok)
            #expect(try await server.stored() == (0, 0))
        }
    }

    @Test("migration 10 moves files stored whole into chunks; they download unchanged", arguments: Backend.available)
    func migrationMovesBodies(backend: Backend) async throws {
        let directory = NSTemporaryDirectory() + "vaultsync-test-" + UUID().uuidString
        let testDatabase = try await TestDatabase.make(backend, directory: directory)
        let configuration = testDatabase.configuration
        // An older server's database: schema 8, one attachment of 2.5 MiB stored whole, one not uploaded.
        let old = try openDatabase(configuration, logger: Logger(label: "test"))
        try await Migrations.run(on: old, through: 8)
        let file = GeneratedFile(size: 5 * (1 << 19) + 49)
        let body = Data((0..<file.pieces).flatMap { file.piece($0) })
        let now = Int64(Date().timeIntervalSince1970 * 1_000_000)
        try await old.transaction { session in
            try await session.query("""
                INSERT INTO users (id, email, password_hash, password_salt, password_iterations, akey, kdf_type, kdf_iterations,
                    security_stamp, created_at, updated_at, revision_date) VALUES ('u1', 'old@example.com', 'h', 's', 1, 'k', 0, 600000, 's', ?, ?, ?)
                """, [.int(now), .int(now), .int(now)])
            try await session.query("INSERT INTO ciphers (id, user_id, type, data, created_at, revision_date) VALUES ('c1', 'u1', 1, '{}', ?, ?)",
                                    [.int(now), .int(now)])
            try await session.query("""
                INSERT INTO attachments (id, cipher_id, file_name, file_size, body, created_at) VALUES ('a1', 'c1', '2.x|y|z', ?, ?, ?),
                    ('a2', 'c1', '2.x|y|z', 161, NULL, ?)
                """, [.int(Int64(body.count)), .blob(body), .int(now), .int(now)])
        }
        await old.close()
        let database = try openDatabase(configuration, logger: Logger(label: "test"))
        let repository = VaultRepository(database: database)
        try await repository.migrate()
        let migrated = try #require(try await repository.attachment(id: "a1", cipherID: "c1"))
        #expect(migrated.uploadID == "a1" && migrated.fileSize == Int64(body.count))
        #expect(try await repository.attachment(id: "a2", cipherID: "c1")?.uploadID == nil)
        var hash = SHA256()
        var seq = 0
        var sizes: [Int] = []
        while let chunk = try await repository.attachmentChunk(uploadID: "a1", seq: seq) {
            hash.update(data: chunk)
            sizes.append(chunk.count)
            seq += 1
        }
        #expect(sizes == [1 << 20, 1 << 20, (1 << 19) + 49])
        #expect(hash.finalize() == file.digest)
        let bodies = try await database.read { session in try await session.query("SELECT COUNT(*) AS n FROM attachments WHERE body IS NOT NULL").first?.int("n") }
        #expect(bodies == 0, "the whole bodies are gone")
        await database.close()
        await testDatabase.cleanup()
    }

    @Test("sizes for --attachment-limit: bytes and units; unreadable values are refused")
    func byteSizes() throws {
        #expect(try ByteSize.parse("500MiB") == 500 << 20)
        #expect(try ByteSize.parse("104857600") == 100 << 20)
        #expect(try ByteSize.parse("1.5 GiB") == 3 << 29)
        #expect(try ByteSize.parse("2gb") == 2_000_000_000)
        #expect(try ByteSize.parse("64k") == 65_536)
        #expect(try ByteSize.parse("10 B") == 10)
        for bad in ["", "MiB", "-5MiB", "0", "5 PiB", "1e9", "12..5M", "ten"] {
            #expect(throws: ByteSize.ParseError.self, "\(bad)") { try ByteSize.parse(bad) }
        }
        #expect(ByteSize.readable(500 << 20) == "500 MB")
        #expect(ByteSize.readable(1 << 30) == "1 GB")
        #expect(ByteSize.readable(1000) == "1000 bytes")
        #expect(ByteSize.readable(512 << 10, binaryUnits: true) == "512 KiB" && ByteSize.readable(1, binaryUnits: true) == "1 byte")
    }
}
