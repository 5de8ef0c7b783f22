import AsyncHTTPClient
import Foundation
import NIOSSL
import Logging
import NIOCore
import NIOHTTP1
import VaultCrypto
import VaultModels
import VaultSyncCore

/// Timeouts and identity of the client, from configuration.
public struct APIConfiguration: Sendable {
    public var connectTimeout: TimeAmount = .seconds(5)
    public var requestTimeout: TimeAmount = .seconds(30)
    public var clientName = "cli"
    /// Sent as `Bitwarden-Client-Version`; ≥ 2024.12.0 or servers drop SSH keys (spec §2.0).
    public var clientVersion = "2025.10.0"
    /// 25 = Linux CLI.
    public var deviceType = 25
    /// The largest `/api/sync` answer taken into a spooled file (``BitwardenAPI/syncText(token:spoolDirectory:)``);
    /// an answer held in memory stops at 256 MiB.
    public var maximumSpooledAnswerSize = 1024 * 1024 * 1024
    /// The deadline of a save's attempt on the server (an item or folder written online). Past it the
    /// change is kept and queued: on a network that accepts connections and never answers (captive
    /// Wi-Fi, a dead proxy) a save returns in this long, not in ``requestTimeout``. The request that may
    /// still reach the server is harmless: a create carries its idempotency key, an update its revision
    /// check, and the resolver recognises a push the server already holds.
    public var saveTimeout: TimeAmount = .seconds(3)

    public init() {}
}

/// What one response told about the server's clock.
public struct ClockSample: Sendable {
    public var serverDate: WireDate
    public var sentAt: WireDate
    public var receivedAt: WireDate
}

/// The answer of the token endpoint (spec §2.3).
public struct TokenResponse: Sendable {
    public var accessToken: String
    /// `nil` after an API-key login: that session renews by logging in with the key again.
    public var refreshToken: String?
    public var expiresIn: Int
    public var key: String?
    public var privateKey: String?
    public var kdf: KdfConfiguration?
    /// The "remember this device" token, when two-step login was completed with remember asked.
    public var twoFactorToken: String?
    /// The KDF salt (the account's email), from `UserDecryptionOptions.MasterPasswordUnlock.Salt`.
    public var salt: String?
}

/// The answer of `/api/sync`, kept as the server sent it for the local cache.
public struct SyncResponse: Sendable {
    public var profile: JSONObject
    public var folders: [JSONObject]
    public var ciphers: [JSONObject]
    public var collections: [JSONObject]
}

/// An `/api/sync` answer as it arrived: in memory, or in a spooled file mapped read-only. Parsing it hands
/// each item to the caller as it is parsed, so a vault's items need never be held as parsed objects all
/// at once (docs/BENCHMARKS.md, P3-rss); from a file, the pages parsed are handed back as the parse moves
/// on, so the answer's text is not held whole either (P5).
public struct SyncText: Sendable {
    enum Storage: Sendable {
        case bytes([UInt8])
        case file(MappedFile)
    }

    let storage: Storage

    public init(bytes: [UInt8]) {
        storage = .bytes(bytes)
    }

    init(file: MappedFile) {
        storage = .file(file)
    }

    /// Whether the answer is read from a spooled file (else it is held in memory).
    public var isSpooled: Bool {
        if case .file = storage { return true }
        return false
    }

    /// The snapshot with an empty `ciphers`: each item goes to `eachCipher` (with its position) instead.
    /// The text is checked whole as before: an entry that is not an object, or a text that is not JSON,
    /// throws (after `eachCipher` saw the entries before it).
    public func parse(eachCipher: (Int, JSONObject) throws -> Void) throws -> SyncResponse {
        func parseObject(_ buffer: UnsafeBufferPointer<UInt8>, release: ((Int) -> Void)?) throws -> JSONObject {
            try JSONParser.parseObject(buffer: buffer, streaming: ["ciphers"]) { _, index, element, end in
                guard let cipher = element.objectValue else { throw ServerCallError.invalidResponse("sync.ciphers[\(index)] is not an object") }
                try eachCipher(index, cipher)
                release?(end)
            }
        }
        let object: JSONObject
        do {
            switch storage {
            case .bytes(let bytes): object = try bytes.withUnsafeBufferPointer { try parseObject($0, release: nil) }
            case .file(let file): object = try file.withBuffer { try parseObject($0, release: file.release(before:)) }
            }
        } catch let error as ModelError {
            throw ServerCallError.invalidResponse("expected a JSON object (\(error))")
        }
        func objects(_ key: String, required: Bool = true) throws -> [JSONObject] {
            guard let value = object[key], !value.isNull else {
                // A vault's items or folders missing, or null, would read as every one deleted (RELIABILITY bug 64).
                if required { throw ServerCallError.invalidResponse("sync.\(key) is missing") }
                return []
            }
            guard let array = value.arrayValue else { throw ServerCallError.invalidResponse("sync.\(key) is not an array") }
            // An entry that is not an object makes the snapshot unusable (its absence would read as a deletion).
            return try array.enumerated().map { index, element in
                guard let object = element.objectValue else { throw ServerCallError.invalidResponse("sync.\(key)[\(index)] is not an object") }
                return object
            }
        }
        guard let profile = object["profile"]?.objectValue else { throw ServerCallError.invalidResponse("sync without profile") }
        return SyncResponse(profile: profile, folders: try objects("folders"), ciphers: try objects("ciphers"),
                            collections: try objects("collections", required: false))
    }
}

/// A Bitwarden-compatible API client over AsyncHTTPClient (spec §2): camelCase out, first-letter
/// case-insensitive in, server error messages turned into ``ServerCallError``.
public final class BitwardenAPI: Sendable {
    public let baseURL: String
    /// Where requests go: AsyncHTTPClient, or what a test puts in its place (``HTTPTransport``).
    let transport: any HTTPTransport
    let configuration: APIConfiguration
    let now: @Sendable () -> WireDate
    let onClockSample: @Sendable (ClockSample) -> Void
    let logger: Logger
    /// Extra authorities and proxy, for finding out why a certificate was refused (ServerTrust.swift).
    let connection: ConnectionSettings

    /// - Parameters:
    ///   - baseURL: the server, e.g. `http://127.0.0.1:8087` (API at `/api`, identity at `/identity`).
    ///   - now: the device clock (injected so tests can skew it).
    ///   - onClockSample: receives every response's `Date` header for the clock-offset estimate.
    public convenience init(baseURL: String, httpClient: HTTPClient, configuration: APIConfiguration = APIConfiguration(),
                            now: @escaping @Sendable () -> WireDate = { WireDate(Date()) },
                            onClockSample: @escaping @Sendable (ClockSample) -> Void = { _ in }, logger: Logger = Logger(label: "vaultsync.api"),
                            connection: ConnectionSettings = ConnectionSettings()) {
        self.init(baseURL: baseURL, transport: AsyncHTTPClientTransport(client: httpClient), configuration: configuration, now: now,
                  onClockSample: onClockSample, logger: logger, connection: connection)
    }

    /// The same with any transport in place of AsyncHTTPClient (the deterministic simulation's in-process server).
    public init(baseURL: String, transport: any HTTPTransport, configuration: APIConfiguration = APIConfiguration(),
                now: @escaping @Sendable () -> WireDate = { WireDate(Date()) },
                onClockSample: @escaping @Sendable (ClockSample) -> Void = { _ in }, logger: Logger = Logger(label: "vaultsync.api"),
                connection: ConnectionSettings = ConnectionSettings()) {
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        self.baseURL = base
        self.transport = transport
        self.configuration = configuration
        self.now = now
        self.onClockSample = onClockSample
        self.logger = logger
        self.connection = connection
    }

    /// The instant by which every request made in this task must be done (a save's attempt:
    /// ``APIConfiguration/saveTimeout`` from the save's start): each request gets what is left of it, so
    /// a token refresh and the save's own request share the one deadline.
    @TaskLocal public static var requestDeadline: NIODeadline?

    /// What is left of ``requestDeadline`` now (at least a millisecond: a request past it fails at once).
    static var remainingDeadline: TimeAmount? {
        requestDeadline.map { max($0 - .now(), .milliseconds(1)) }
    }

    // MARK: Transport

    struct Reply {
        var status: Int
        var body: [UInt8]
    }

    func send(_ method: HTTPMethod, _ path: String, token: String? = nil, json: JSONValue? = nil, form: [(String, String)]? = nil,
              bytes: [UInt8]? = nil, file: FileBody? = nil, downloadTo: String? = nil, downloadInto: Int32? = nil,
              downloadProgress: (@Sendable (Int) -> Void)? = nil, maximumBodySize: Int? = nil,
              contentType: String? = nil, idempotencyKey: String? = nil, timeout: TimeAmount? = nil,
              extraHeaders: [(String, String)] = [], acceptingErrors: Bool = false) async throws -> Reply {
        var headers = HTTPHeaders()
        headers.add(name: "Accept", value: "application/json")
        if let idempotencyKey { headers.add(name: "Idempotency-Key", value: idempotencyKey) }
        headers.add(name: "Bitwarden-Client-Name", value: configuration.clientName)
        headers.add(name: "Bitwarden-Client-Version", value: configuration.clientVersion)
        headers.add(name: "Device-Type", value: String(configuration.deviceType))
        if let token { headers.add(name: "Authorization", value: "Bearer \(token)") }
        for (name, value) in extraHeaders { headers.add(name: name, value: value) }
        var body: [UInt8]?
        if let json {
            headers.add(name: "Content-Type", value: "application/json; charset=utf-8")
            body = json.serialized()
        } else if let form {
            let text = form.map { "\(Self.formEncode($0.0))=\(Self.formEncode($0.1))" }.joined(separator: "&")
            headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded; charset=utf-8")
            body = Array(text.utf8)
        } else if bytes != nil || file != nil {
            headers.add(name: "Content-Type", value: contentType ?? "application/octet-stream")
            body = bytes
        }
        // An absolute URL (an attachment's download or upload link) may name another host.
        let url = path.hasPrefix("https://") || path.hasPrefix("http://") ? path : baseURL + path
        var request = TransportRequest(method: method, url: url, headers: headers, body: body, bodyFile: file,
                                       timeout: timeout ?? Self.remainingDeadline ?? configuration.requestTimeout)
        request.maximumBodySize = maximumBodySize
        let sentAt = now()
        let response: TransportResponse
        do {
            if let downloadInto {
                response = try await transport.download(request, into: downloadInto, progress: downloadProgress, logger: logger)
            } else if let downloadTo {
                response = try await transport.download(request, to: downloadTo, progress: downloadProgress, logger: logger)
            } else {
                response = try await transport.execute(request, logger: logger)
            }
        } catch let error as FileBodyError {
            throw error  // this device's file, not the network: never taken for "offline"
        } catch {
            throw await failure(of: error)
        }
        let receivedAt = now()
        if let dateHeader = response.headers.first(name: "Date"), let serverDate = Self.parseHTTPDate(dateHeader) {
            onClockSample(ClockSample(serverDate: serverDate, sentAt: sentAt, receivedAt: receivedAt))
        }
        let replyBody = response.body
        let status = response.status
        guard (200..<300).contains(status) || acceptingErrors else {
            let object = try? JSONParser.parseObject(replyBody)
            throw ServerCallError.answer(status: status, message: Self.errorMessage(object, status: status),
                                         createdID: object?["createdId"]?.stringValue)
        }
        return Reply(status: status, body: replyBody)
    }

    /// The deadline of a transfer of `bytes`: the request timeout, plus time for the bytes at a slow
    /// 256 KiB/s (a large attachment on a poor line is not cut off by the timeout of a small request).
    func transferTimeout(bytes: Int) -> TimeAmount {
        configuration.requestTimeout + .seconds(Int64(bytes / (256 * 1024)))
    }

    static func formEncode(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }

    /// The server's message: `message` ?? `errorModel.message` ?? `ErrorModel.Message` ?? `error_description` (spec §3.3).
    static func errorMessage(_ body: [UInt8], status: Int) -> String {
        errorMessage(try? JSONParser.parseObject(body), status: status)
    }

    static func errorMessage(_ object: JSONObject?, status: Int) -> String {
        if let object {
            if let message = object["message"]?.stringValue, !message.isEmpty {
                // Bitwarden's "The model state is invalid." says what was wrong in `validationErrors`
                // (field → messages): the first few go with it, each cut short (the server's text).
                let reasons = (object["validationErrors"]?.objectValue?.entries ?? []).flatMap { $0.value.arrayValue ?? [] }
                    .compactMap(\.stringValue).filter { !$0.isEmpty }.prefix(3).map { String($0.prefix(200)) }
                return reasons.isEmpty ? message : message + " " + reasons.joined(separator: " ")
            }
            if let model = object["errorModel"]?.objectValue, let message = model["message"]?.stringValue { return message }
            if let description = object["error_description"]?.stringValue { return description }
            if let error = object["error"]?.stringValue { return error }
        }
        return "HTTP \(status)"
    }

    static func transportError(_ error: any Error) -> ServerCallError {
        if let error = error as? ServerCallError { return error }
        let text = String(describing: error)
        if let client = error as? HTTPClientError {
            switch client {
            case .readTimeout, .writeTimeout, .connectTimeout, .getConnectionFromPoolTimeout, .deadlineExceeded:
                return .transport(.timeout, detail: "the request timed out")
            case .remoteConnectionClosed, .cancelled, .bodyLengthMismatch:
                return .transport(.connectionLost, detail: "the connection was lost")
            case .tlsHandshakeTimeout:
                return .transport(.tls, detail: "the TLS handshake timed out")
            default:
                return .transport(.unreachable, detail: text)
            }
        }
        if text.contains("NIOSSL") || text.contains("TLS") { return .transport(.tls, detail: "TLS failed") }
        if text.lowercased().contains("refused") { return .transport(.unreachable, detail: "connection refused") }
        if text.lowercased().contains("reset") { return .transport(.connectionLost, detail: "connection reset") }
        return .transport(.unreachable, detail: text)
    }

    /// `Sun, 06 Nov 1994 08:49:37 GMT`.
    static func parseHTTPDate(_ text: String) -> WireDate? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, let day = Int(parts[1]), let year = Int(parts[3]) else { return nil }
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        guard let month = months.firstIndex(of: String(parts[2])) else { return nil }
        let iso = String(format: "%04d-%02d-%02dT%@Z", year, month + 1, day, String(parts[4]))
        return WireDate(iso8601: iso)
    }

    func object(_ reply: Reply) throws -> JSONObject {
        do {
            return try JSONParser.parseObject(reply.body)
        } catch {
            throw ServerCallError.invalidResponse("expected a JSON object (\(error))")
        }
    }

    // MARK: Identity

    /// The account's KDF settings (spec §2.1; identity first, `/api` as a fallback).
    /// The KDF settings a prelogin announced are outside what any account can have (PBKDF2 with 1 iteration,
    /// Argon2id with no memory…): what a hostile server announces to get a hash that is cheap to crack.
    public struct KdfSettingsRefused: Error, Sendable {
        public var reason: String
    }

    public func prelogin(email: String) async throws -> KdfConfiguration {
        let body = JSONValue.object(["email": .string(email)])
        let reply: Reply
        do {
            reply = try await send(.POST, "/identity/accounts/prelogin", json: body)
        } catch let error as ServerCallError where error.failure == .status(404) {
            reply = try await send(.POST, "/api/accounts/prelogin", json: body)
        }
        let object = try object(reply)
        guard let typeValue = object["kdf"], let iterationsValue = object["kdfIterations"] else {
            throw ServerCallError.invalidResponse("prelogin without kdf settings")
        }
        guard let type = typeValue.intValue, let iterations = iterationsValue.intValue else {
            throw ServerCallError.invalidResponse("prelogin's kdf settings are not whole numbers (kdf \(typeValue), kdfIterations \(iterationsValue))")
        }
        do {
            return try KdfConfiguration(type: type, iterations: iterations, memoryMiB: object["kdfMemory"]?.intValue,
                                        parallelism: object["kdfParallelism"]?.intValue)
        } catch let error as CryptoError {
            if case .invalidKdfParameters(let reason) = error { throw KdfSettingsRefused(reason: reason) }
            throw ServerCallError.invalidResponse("the server's KDF settings are refused: \(error)")
        }
    }

    /// Registers with the legacy body (spec §2.2), exactly one spelling of `key` and `keys`.
    public func register(email: String, name: String?, passwordHash: String, protectedKey: String, kdf: KdfConfiguration,
                         publicKey: String, encryptedPrivateKey: String) async throws {
        let body: JSONObject = [
            "email": .string(email), "name": name.map(JSONValue.string) ?? .null, "masterPasswordHint": .null,
            "masterPasswordHash": .string(passwordHash), "key": .string(protectedKey),
            "kdf": .int(kdf.typeCode), "kdfIterations": .int(kdf.iterations),
            "kdfMemory": kdf.memoryMiB.map(JSONValue.int) ?? .null, "kdfParallelism": kdf.parallelism.map(JSONValue.int) ?? .null,
            "keys": .object(["publicKey": .string(publicKey), "encryptedPrivateKey": .string(encryptedPrivateKey)]),
        ]
        _ = try await send(.POST, "/identity/accounts/register", json: .object(body))
    }

    /// Refresh grant; `authenticationExpired` when the server refuses the refresh token.
    public func refresh(refreshToken: String) async throws -> TokenResponse {
        do {
            let reply = try await send(.POST, "/identity/connect/token", form: [
                ("grant_type", "refresh_token"), ("refresh_token", refreshToken), ("client_id", configuration.clientName),
            ])
            return try tokenResponse(reply)
        } catch let error as ServerCallError {
            if case .http(let status, _) = error, status == 400 || status == 401 { throw ServerCallError.authenticationExpired }
            throw error
        }
    }

    /// Token revocation (RFC 7009) at `/identity/connect/revocation` with the form field `token`: the
    /// VaultSync server ends the session of the device the token belongs to (docs/PROTOCOL.md). Other
    /// servers may not offer it; the caller treats a refusal as "the server was not told".
    public func revoke(token: String) async throws {
        _ = try await send(.POST, "/identity/connect/revocation", form: [
            ("token", token), ("token_type_hint", "refresh_token"), ("client_id", configuration.clientName),
        ])
    }

    func tokenResponse(_ reply: Reply) throws -> TokenResponse {
        let object = try object(reply)
        // An API-key login (client_credentials) answers without a refresh token (docs/PROTOCOL.md).
        guard let access = object["access_token"]?.stringValue else {
            throw ServerCallError.invalidResponse("token response without an access token")
        }
        let refresh = object["refresh_token"]?.stringValue
        let unlock = object["UserDecryptionOptions"]?.objectValue?["MasterPasswordUnlock"]?.objectValue
        let key = object["Key"]?.stringValue ?? unlock?["MasterKeyWrappedUserKey"]?.stringValue ?? unlock?["MasterKeyEncryptedUserKey"]?.stringValue
        var kdf: KdfConfiguration?
        if let type = object["Kdf"]?.intValue, let iterations = object["KdfIterations"]?.intValue {
            kdf = try? KdfConfiguration(type: type, iterations: iterations, memoryMiB: object["KdfMemory"]?.intValue,
                                        parallelism: object["KdfParallelism"]?.intValue)
        }
        return TokenResponse(accessToken: access, refreshToken: refresh, expiresIn: object["expires_in"]?.intValue ?? 3600,
                             key: key, privateKey: object["PrivateKey"]?.stringValue, kdf: kdf,
                             twoFactorToken: object["TwoFactorToken"]?.stringValue, salt: unlock?["Salt"]?.stringValue)
    }

    // MARK: Vault

    public func sync(token: String) async throws -> SyncResponse {
        var ciphers: [JSONObject] = []
        var snapshot = try await syncText(token: token).parse { _, object in ciphers.append(object) }
        snapshot.ciphers = ciphers
        return snapshot
    }

    /// `/api/sync` as the server sent it, not yet parsed (``SyncText/parse(eachCipher:)``). With
    /// `spoolDirectory`, the answer is written to a file with no name there as it arrives and read back
    /// mapped (up to ``APIConfiguration/maximumSpooledAnswerSize``); without it, or when no file can be
    /// made there, it is held in memory.
    public func syncText(token: String, spoolDirectory: String? = nil) async throws -> SyncText {
        let path = "/api/sync?excludeDomains=true"
        guard let spoolDirectory, let spool = try? SpoolFile(directory: spoolDirectory) else {
            return SyncText(bytes: try await send(.GET, path, token: token).body)
        }
        _ = try await send(.GET, path, token: token, downloadInto: spool.descriptor, maximumBodySize: configuration.maximumSpooledAnswerSize)
        return SyncText(file: try MappedFile(descriptor: spool.descriptor))
    }

    /// Milliseconds since the epoch (spec §2.5).
    public func revisionDate(token: String) async throws -> Int64 {
        let reply = try await send(.GET, "/api/accounts/revision-date", token: token)
        guard let value = try? JSONParser.parse(reply.body), case .number(let literal) = value, let millis = Int64(literal) else {
            throw ServerCallError.invalidResponse("revision date is not a number")
        }
        return millis
    }

    /// `expecting`: the id the request named; an answer about another item is not an answer (RELIABILITY bug 63: a
    /// push answered with another item's id was settled, and the edit lost).
    func cipher(_ reply: Reply, expecting id: String? = nil) throws -> CipherWire {
        let wire: CipherWire
        do {
            wire = try CipherWire(json: try object(reply), path: "cipher")
        } catch let error as ModelError {
            throw ServerCallError.invalidResponse(error.description)
        }
        if let id, wire.id?.lowercased() != id.lowercased() {
            throw ServerCallError.invalidResponse("the answer about item \(id) is about \(wire.id ?? "no item")")
        }
        return wire
    }

    /// Creates an item. `idempotencyKey`: the same for every attempt at one create (docs/PROTOCOL.md,
    /// "Idempotent creates"); a VaultSync server answers a repeat with the item the first attempt made,
    /// other servers ignore the header.
    public func createCipher(_ cipher: CipherWire, collectionIDs: [String] = [], idempotencyKey: String? = nil,
                             token: String) async throws -> CipherWire {
        if cipher.organizationId != nil || !collectionIDs.isEmpty {
            let body: JSONObject = ["cipher": .object(cipher.requestObject()), "collectionIds": .array(collectionIDs.map(JSONValue.string))]
            return try self.cipher(try await send(.POST, "/api/ciphers/create", token: token, json: .object(body), idempotencyKey: idempotencyKey))
        }
        return try self.cipher(try await send(.POST, "/api/ciphers", token: token, json: .object(cipher.requestObject()),
                                              idempotencyKey: idempotencyKey))
    }

    /// Many personal creates in one request: the VaultSync server's bulk extension
    /// (`POST /api/vaultsync/ciphers/bulk-create`), each entry with its idempotency key (a repeat answers
    /// with the item the first attempt made). Each entry's outcome, in order: the created cipher, or the
    /// error `POST /api/ciphers` would have given. A server without the extension answers 404 (thrown as
    /// `.http(404, …)`): the caller falls back to one POST per item.
    public func bulkCreateCiphers(_ entries: [(idempotencyKey: String, cipher: CipherWire)], token: String) async throws
        -> [Result<CipherWire, ServerCallError>] {
        let body: JSONObject = ["ciphers": .array(entries.map { entry in
            var object = entry.cipher.requestObject()
            object["idempotencyKey"] = .string(entry.idempotencyKey)
            return .object(object)
        })]
        let answer = try object(try await send(.POST, "/api/vaultsync/ciphers/bulk-create", token: token, json: .object(body)))
        guard let data = answer["data"]?.arrayValue, data.count == entries.count else {
            throw ServerCallError.invalidResponse("the bulk create answered \(answer["data"]?.arrayValue?.count ?? 0) results for \(entries.count) entries")
        }
        return zip(entries, data).map { entry, value in
            guard let result = value.objectValue, result["idempotencyKey"]?.stringValue == entry.idempotencyKey,
                  let status = result["status"]?.intValue else {
                return .failure(.invalidResponse("a bulk create result does not match its entry"))
            }
            guard status == 200 else {
                return .failure(.answer(status: status, message: result["message"]?.stringValue ?? "HTTP \(status)",
                                        createdID: result["createdId"]?.stringValue))
            }
            guard let cipher = result["cipher"]?.objectValue else {
                return .failure(.invalidResponse("a bulk create result has no cipher"))
            }
            do {
                return .success(try CipherWire(json: cipher, path: "cipher"))
            } catch {
                return .failure(.invalidResponse("\(error)"))
            }
        }
    }

    public func updateCipher(_ cipher: CipherWire, id: String, lastKnownRevisionDate: WireDate?, token: String) async throws -> CipherWire {
        let body = cipher.requestObject(lastKnownRevisionDate: lastKnownRevisionDate)
        return try self.cipher(try await send(.PUT, "/api/ciphers/\(id)", token: token, json: .object(body)), expecting: id)
    }

    /// Many updates in one request: the VaultSync server's bulk extension
    /// (`POST /api/vaultsync/ciphers/bulk-update`). Each entry's outcome, in order: the updated cipher, or
    /// the error `PUT /api/ciphers/{id}` would have given. A server without the extension answers 404
    /// (thrown as `.http(404, …)`): the caller falls back to one PUT per item.
    public func bulkUpdateCiphers(_ entries: [(id: String, cipher: CipherWire, lastKnownRevisionDate: WireDate?)],
                                  token: String) async throws -> [Result<CipherWire, ServerCallError>] {
        // "answer": "revision": the server answers each stored entry with its new revision date, folder
        // and favorite only; the cipher is what was sent (no rendering and parsing of every item again).
        let body: JSONObject = ["answer": .string("revision"), "ciphers": .array(entries.map { entry in
            var object = entry.cipher.requestObject(lastKnownRevisionDate: entry.lastKnownRevisionDate)
            object["id"] = .string(entry.id)
            return .object(object)
        })]
        let answer = try object(try await send(.POST, "/api/vaultsync/ciphers/bulk-update", token: token, json: .object(body)))
        guard let data = answer["data"]?.arrayValue, data.count == entries.count else {
            throw ServerCallError.invalidResponse("the bulk update answered \(answer["data"]?.arrayValue?.count ?? 0) results for \(entries.count) entries")
        }
        return zip(entries, data).map { entry, value in
            guard let result = value.objectValue, result["id"]?.stringValue?.lowercased() == entry.id.lowercased(),
                  let status = result["status"]?.intValue else {
                return .failure(.invalidResponse("a bulk update result does not match its entry"))
            }
            guard status == 200 else {
                return .failure(.http(status: status, message: result["message"]?.stringValue ?? "HTTP \(status)"))
            }
            do {
                if let cipher = result["cipher"]?.objectValue { return .success(try CipherWire(json: cipher, path: "cipher")) }
                guard let text = result["revisionDate"]?.stringValue, let revision = WireDate(iso8601: text) else {
                    throw ServerCallError.invalidResponse("a bulk update result has neither the cipher nor its revision date")
                }
                var stored = entry.cipher
                stored.id = entry.id
                stored.revisionDate = revision
                stored.folderId = result["folderId"]?.stringValue
                stored.favorite = result["favorite"]?.boolValue ?? stored.favorite
                stored.lastKnownRevisionDate = nil
                return .success(stored)
            } catch let error as ModelError {
                return .failure(.invalidResponse(error.description))
            } catch {
                return .failure(.invalidResponse("\(error)"))
            }
        }
    }

    public func getCipher(id: String, token: String) async throws -> CipherWire {
        try cipher(try await send(.GET, "/api/ciphers/\(id)", token: token), expecting: id)
    }

    public func softDeleteCipher(id: String, token: String) async throws {
        _ = try await send(.PUT, "/api/ciphers/\(id)/delete", token: token)
    }

    public func hardDeleteCipher(id: String, token: String) async throws {
        _ = try await send(.DELETE, "/api/ciphers/\(id)", token: token)
    }

    public func restoreCipher(id: String, token: String) async throws -> CipherWire {
        try cipher(try await send(.PUT, "/api/ciphers/\(id)/restore", token: token), expecting: id)
    }

    public func archiveCipher(id: String, archived: Bool, token: String) async throws -> CipherWire {
        try cipher(try await send(.PUT, "/api/ciphers/\(id)/\(archived ? "archive" : "unarchive")", token: token), expecting: id)
    }

    /// Folder and favorite (per user; no revision bump, spec §3.1).
    public func updateCipherState(id: String, folderID: String?, favorite: Bool, token: String) async throws -> CipherWire {
        let body: JSONObject = ["folderId": folderID.map(JSONValue.string) ?? .null, "favorite": .bool(favorite)]
        return try cipher(try await send(.PUT, "/api/ciphers/\(id)/partial", token: token, json: .object(body)), expecting: id)
    }

    /// Creates a folder. `idempotencyKey`: the same for every attempt at one create (docs/PROTOCOL.md,
    /// "Idempotent creates"); a server that honours it answers a repeat with the folder the first made.
    public func createFolder(name: EncString, idempotencyKey: String? = nil, token: String) async throws -> FolderWire {
        try folder(try await send(.POST, "/api/folders", token: token, json: .object(["name": .string(name.serialized)]),
                                  idempotencyKey: idempotencyKey))
    }

    public func renameFolder(id: String, name: EncString, token: String) async throws -> FolderWire {
        try folder(try await send(.PUT, "/api/folders/\(id)", token: token, json: .object(["name": .string(name.serialized)])))
    }

    public func deleteFolder(id: String, token: String) async throws {
        _ = try await send(.DELETE, "/api/folders/\(id)", token: token)
    }

    func folder(_ reply: Reply) throws -> FolderWire {
        do {
            return try FolderWire(json: try object(reply), path: "folder")
        } catch let error as ModelError {
            throw ServerCallError.invalidResponse(error.description)
        }
    }
}

extension BitwardenAPI {
    /// The hub's address the server names in `GET /api/config` (`environment.notifications`), `nil` when
    /// it names none (docs/PROTOCOL.md, "Live sync (client)").
    public func notificationsAddress() async throws -> String? {
        let reply = try await send(.GET, "/api/config")
        let address = try object(reply)["environment"]?.objectValue?["notifications"]?.stringValue ?? ""
        return address.isEmpty ? nil : address
    }

    /// The TLS settings of a connection this client makes beside its HTTP requests (the hub's WebSocket):
    /// the system's authorities and the CA file's, as for every request.
    public var webSocketTLS: TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let authorities = connection.authorities {
            tls.additionalTrustRoots = [.certificates(authorities.certificates)]
        }
        return tls
    }

    /// Any JSON call (organization administration and tests).
    public func rawJSON(_ method: HTTPMethod, _ path: String, token: String, body: JSONValue? = nil) async throws -> JSONObject {
        let reply = try await send(method, path, token: token, json: body)
        return reply.body.isEmpty ? JSONObject() : try object(reply)
    }
}
