import ArgumentParser
import Foundation
import LocalHTTP
import VaultClient
import VaultModels
#if canImport(Glibc)
import Glibc
#endif

/// `bw serve`: bw's Vault Management API (docs/BW-COMPATIBILITY.md, "bw serve"), a local REST API on
/// the offline-first engine. Every route answers what the matching bw command answers, in bw's
/// `{success, data}` envelope; a save while the server is away is queued and answered as saved, and
/// live sync sends it when the server is back.
struct BWServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "bw's Vault Management API: a local REST API on this engine (localhost:8087 by default).",
        discussion: """
        Unlocked from the start with a session (--session or BW_SESSION), else locked until POST /unlock {"password": "…"}.
        A request that carries an Origin header (a web page's) is refused unless --disable-origin-protection.
        """
    )
    @OptionGroup var bw: BWOptions
    @Option(name: .customLong("hostname"), help: "The address to listen on (localhost; `all` for every interface).") var hostname = "localhost"
    @Option(name: .customLong("port"), help: "The port to listen on.") var port = 8087
    @Flag(name: .customLong("disable-origin-protection"), help: "Answer requests that carry an Origin header (web pages') too.")
    var disableOriginProtection = false

    func run() async throws {
        var environment = AgentHost.environment
        let session = bw.session ?? environment["BW_SESSION"] ?? environment["VAULTSYNC_SESSION"]
        // The served vault is locked and unlocked by the API alone: no route reads a password or session from the environment.
        for name in ["VAULTSYNC_SESSION", "VAULTSYNC_PASSWORD", "BW_SESSION"] { environment[name] = nil }
        guard (1...65_535).contains(port) || port == 0 else { throw CLIError.usage("--port must be a port number (1–65535)") }
        let context = try CLIContext.open(try GlobalOptions.parse([]), environment: environment)
        if let session, !session.isEmpty, context.settings.email != nil {
            do {
                try await context.unlock(sessionKey: session)
            } catch {
                Console.note("warning: the session did not unlock the vault (\(describe(error).message)); POST /unlock unlocks it")
            }
        }
        if !(await context.engine.isLocked) { await context.engine.startLiveSync() }
        let host = hostname == "all" ? "0.0.0.0" : hostname
        let server: LocalHTTPServer
        do {
            server = try await LocalHTTPServer.bind(host: host, port: port)
        } catch {
            throw CLIError.stated("Cannot listen on \(hostname):\(port): \(error). Is another `bw serve` running? Choose another port with --port.", .failure)
        }
        let stop = StopSignals(signals: [SIGINT, SIGTERM])
        stop.keepWaiting()
        signal(SIGPIPE, SIG_IGN)
        let serving = BWServe(context: context, protectOrigin: !disableOriginProtection)
        print("Listening on \(hostname):\(server.port)")
        fflush(nil)
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await server.serve { await serving.answer($0) } }
            await stop.waitForSignal()
            // No new connections; the open ones (keep-alive clients stay connected) end with the task.
            server.close()
            group.cancelAll()
            await group.waitForAll()
        }
        await context.engine.stopLiveSync()
        await context.engine.shutdown()
    }
}

/// The routes of bw's Vault Management API, each answered by the bw command it names.
struct BWServe: Sendable {
    let context: CLIContext
    let protectOrigin: Bool

    /// A route no bw command answers.
    struct NoRoute: Error {}

    func answer(_ request: LocalHTTPRequest) async -> LocalHTTPResponse {
        // bw's guard against web pages: a browser sends Origin with a cross-site request, a local program does not.
        if protectOrigin, request.header("Origin") != nil { return LocalHTTPResponse(status: 403) }
        do {
            if let file = try await attachmentFile(request) {
                let name = file.fileName.replacingOccurrences(of: "\"", with: "")
                return LocalHTTPResponse(status: 200, headers: [("Content-Type", "application/octet-stream"),
                                                                ("Content-Disposition", "attachment; filename=\"\(name)\"")], body: file.contents)
            }
            let response = try await route(request)
            return .json(200, BWOutput.json(.object(["success": .bool(true), "data": BWOutput.data(response)]), pretty: false))
        } catch is NoRoute {
            return LocalHTTPResponse(status: 404, headers: [("Content-Type", "text/plain; charset=utf-8")], body: Array("Not Found".utf8))
        } catch {
            let failure = BWErrors.failure(for: error)
            return .json(400, BWOutput.json(.object(["success": .bool(false), "message": .string(failure.message)]), pretty: false))
        }
    }

    func route(_ request: LocalHTTPRequest) async throws -> BWResponse {
        let path = request.path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        switch (request.method, path.first, path.count) {
        case ("GET", "status", 1):
            return await BWStatusCommand.status(context, unlocked: !(await context.engine.isLocked))
        case ("POST", "unlock", 1):
            return try await unlock(request)
        case ("POST", "lock", 1):
            return try await BWLockCommand.parse([]).respond(context)
        case ("POST", "sync", 1):
            try await requireUnlocked()
            return try await BWSyncCommand.parse(flags(request, ["force": "--force"])).respond(context)
        case ("GET", "generate", 1):
            let names = ["uppercase": "-u", "lowercase": "-l", "number": "-n", "special": "-s", "passphrase": "-p",
                         "capitalize": "-c", "includeNumber": "--includeNumber", "ambiguous": "--ambiguous"]
            let values = ["length", "words", "minNumber", "minSpecial", "separator"].compactMap { name in
                request.query[name].map { "--\(name)=\($0)" }
            }
            return try await BWGenerateCommand.parse(flags(request, names) + values).respond(context)
        case ("GET", "list", 3) where path[1] == "object":
            try await requireUnlocked()
            let values = ["search", "url", "folderid", "collectionid", "organizationid"].compactMap { name in
                request.query[name].map { "--\(name)=\($0)" }
            }
            return try await BWListCommand.parse(flags(request, ["trash": "--trash"]) + values + ["--", path[2]]).respond(context)
        case ("GET", "object", 3):
            if path[1] != "template" { try await requireUnlocked() }
            return try await BWGetCommand.get(path[1], path[2], context: context)
        case ("POST", "object", 2):
            try await requireUnlocked()
            return try await BWCreateCommand.create(path[1], request: try body(request), context: context)
        case ("PUT", "object", 3):
            try await requireUnlocked()
            if path[1].lowercased() == "item-collections", let list = try? JSONParser.parse(request.body), list.arrayValue != nil {
                return try await BWSharing.setCollections(id: path[2], collectionIDs: try BWRequest.collectionIDs(list), context: context)
            }
            return try await BWEditCommand.edit(path[1], id: path[2], request: try body(request), context: context)
        case ("DELETE", "object", 3):
            try await requireUnlocked()
            let item = request.query["itemid"].map { ["--itemid=\($0)"] } ?? []
            return try await BWDeleteCommand.parse(flags(request, ["permanent": "--permanent"]) + item + ["--", path[1], path[2]]).respond(context)
        case ("POST", "attachment", 1):
            try await requireUnlocked()
            return try await createAttachment(request)
        case ("POST", "restore", 3):
            try await requireUnlocked()
            return try await BWRestoreCommand.parse(["--", path[1], path[2]]).respond(context)
        case ("POST", "move", 3):
            try await requireUnlocked()
            guard let list = try? JSONParser.parse(request.body) else { throw BWFailure.parseError }
            return try await BWSharing.move(id: path[1], organizationID: path[2], collectionIDs: try BWRequest.collectionIDs(list), context: context)
        default:
            throw NoRoute()
        }
    }

    /// GET /object/attachment/{id}?itemid=…: the file itself (bw answers a file, not an envelope); `nil` for other routes.
    func attachmentFile(_ request: LocalHTTPRequest) async throws -> (fileName: String, contents: [UInt8])? {
        let path = request.path.split(separator: "/").map(String.init)
        guard request.method == "GET", path.count == 3, path[0] == "object", path[1] == "attachment" else { return nil }
        try await requireUnlocked()
        return try await BWAttachments.contents(path[2], itemID: request.query["itemid"], context: context)
    }

    /// POST /attachment?itemid=…, the file as the multipart form field `file`: the item with it.
    func createAttachment(_ request: LocalHTTPRequest) async throws -> BWResponse {
        guard let itemID = request.query["itemid"], !itemID.isEmpty else { throw BWFailure(message: "`itemid` option is required.") }
        guard let file = request.multipartFile(named: "file") else { throw BWFailure(message: "`file` is required.") }
        let id = try await BWAttachments.item(itemID, context: context)
        let name = (file.fileName as NSString).lastPathComponent
        _ = try await context.engine.addAttachment(itemID: id, fileName: name.isEmpty ? "attachment" : name, contents: file.contents)
        return .object(BWItems.json(try await context.engine.item(id: id)))
    }

    /// bw's `exitIfLocked` for the API: a locked vault answers "Vault is locked." until POST /unlock.
    func requireUnlocked() async throws {
        guard context.settings.email != nil else { throw BWFailure.notLoggedIn }
        guard !(await context.engine.isLocked) else { throw BWFailure.locked }
    }

    /// POST /unlock `{"password": "…"}`: bw's unlock message, with the session key as `raw`.
    func unlock(_ request: LocalHTTPRequest) async throws -> BWResponse {
        guard let email = context.settings.email else { throw BWFailure.notLoggedIn }
        let object = (try? JSONParser.parseObject(request.body)) ?? [:]
        guard let password = object["password"]?.stringValue, !password.isEmpty else {
            throw BWFailure(message: "Master password is required.")
        }
        try await context.unlockLocally(email: email, password: password)
        await context.engine.startLiveSync()
        let key = try await context.startSession()
        return .message(title: "Your vault is now unlocked!", message: BWUnlockCommand.sessionText(key), raw: key)
    }

    /// The flags of the query's names that are set: present with any value but `false` (bw's `convertBooleanOption`).
    func flags(_ request: LocalHTTPRequest, _ names: [String: String]) -> [String] {
        names.sorted { $0.key < $1.key }.compactMap { name, flag in
            request.query[name].flatMap { $0.lowercased() == "false" ? nil : flag }
        }
    }

    /// A request's JSON object (the API takes the object itself, where the command line takes it base64-encoded).
    func body(_ request: LocalHTTPRequest) throws -> JSONObject {
        guard !request.body.isEmpty else { throw BWFailure(message: "`requestJson` was not provided.") }
        guard let object = try? JSONParser.parseObject(request.body) else { throw BWFailure.parseError }
        return object
    }
}
