import Foundation
import Hummingbird
import VaultModels

/// `/api/sync`, `/api/accounts/revision-date`, `/api/accounts/profile`, `/api/config`, `/alive`.
struct AccountController {
    let services: ServerServices

    func addPublicRoutes(to router: Router<VaultRequestContext>) {
        router.get("/alive") { _, _ in JSONResponse.make(.string(WireDate(microsecondsSinceEpoch: services.now()).iso8601)) }
        router.get("/api/alive") { _, _ in JSONResponse.make(.string(WireDate(microsecondsSinceEpoch: services.now()).iso8601)) }
        router.get("/api/config") { request, _ in config(request) }
    }

    func addRoutes(to api: RouterGroup<VaultRequestContext>) {
        api.get("sync") { request, context in try await sync(request, context) }
        api.get("accounts/revision-date") { _, context in
            guard let revision = try await services.repository.accountRevision(userID: try context.requireUser()) else {
                throw APIError.unauthorized
            }
            // A bare number of milliseconds (spec §2.5).
            return JSONResponse.make(.number(String(WireDate(microsecondsSinceEpoch: revision).millisecondsSinceEpoch)))
        }
        api.get("accounts/profile") { _, context in
            let userID = try context.requireUser()
            guard let user = try await services.repository.user(id: userID) else { throw APIError.unauthorized }
            let organizations = try await services.repository.profileOrganizations(userID: userID)
            let twoFactorEnabled = try await services.repository.read { session in try await VaultRepository.twoFactorEnabled(userID: userID, session) }
            return JSONResponse.make(.object(services.renderer(for: nil).profile(user, organizations: organizations, twoFactorEnabled: twoFactorEnabled)))
        }
    }

    func config(_ request: Request) -> Response {
        let base = services.baseURL(for: request)
        var object = JSONObject()
        object["object"] = .string("config")
        object["version"] = .string("2025.10.0")
        object["gitHash"] = .string("vaultsync")
        object["server"] = .object(["name": .string("VaultSync"), "url": .string("https://github.com/vaultsync")])
        object["settings"] = .object(["disableUserRegistration": .bool(services.configuration.disableSignups)])
        object["environment"] = .object([
            "vault": .string(base), "api": .string(base + "/api"), "identity": .string(base + "/identity"),
            "notifications": .string(base + "/notifications"), "sso": .string(""), "cloudRegion": .null,
        ])
        object["push"] = .object(["pushTechnology": .int(0), "vapidPublicKey": .null])
        object["featureStates"] = .object(["enableCipherKeyEncryption": .bool(true), "pm-19148-innovation-archive": .bool(true)])
        object["communication"] = .null
        return JSONResponse.make(.object(object))
    }

    func sync(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let userID = try context.requireUser()
        let snapshot = try await services.repository.syncSnapshot(userID: userID)
        guard let user = snapshot.user else { throw APIError.unauthorized }
        let renderer = services.renderer(for: request)
        let excludeDomains = request.uri.queryParameters.get("excludeDomains").map { $0.lowercased() == "true" } ?? false
        // Assemble the bytes directly: ciphers are already serialized by the renderer.
        var head = JSONObject()
        head["object"] = .string("sync")
        head["profile"] = .object(renderer.profile(user, organizations: snapshot.organizations, twoFactorEnabled: snapshot.twoFactorEnabled))
        head["folders"] = .array(snapshot.folders.map { .object(renderer.folder($0)) })
        head["collections"] = .array(snapshot.collections)
        head["domains"] = excludeDomains ? .null : .object(Renderer.domains(user, withExclusions: false))
        head["policies"] = .array([])
        head["sends"] = .array([])
        head["userDecryption"] = .object(Renderer.userDecryption(user))
        var bytes = head.serialized()
        bytes.reserveCapacity(bytes.count + snapshot.ciphers.reduce(0) { $0 + $1.data.utf8.count + 560 })
        bytes.removeLast()
        bytes.append(contentsOf: #","ciphers":["#.utf8)
        for (index, cipher) in snapshot.ciphers.enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            renderer.writeCipher(cipher, to: &bytes)
        }
        bytes.append(contentsOf: "]}".utf8)
        return JSONResponse.make(bytes: bytes)
    }
}

/// What a sync returns, read in one transaction so it is a consistent snapshot.
struct SyncSnapshot: Sendable {
    var user: UserRecord?
    var folders: [FolderRecord]
    var ciphers: [CipherRecord]
    var organizations: [JSONValue]
    var collections: [JSONValue]
    var twoFactorEnabled: Bool
}

extension VaultRepository {
    func syncSnapshot(userID: String) async throws -> SyncSnapshot {
        try await read { session in
            let user = try await Self.user(id: userID, session)
            let folders = try await session.query("SELECT * FROM folders WHERE user_id = ? ORDER BY created_at", [.text(userID)])
                .map(FolderRecord.init(row:))
            let ciphers = try await Self.visibleCiphers(userID: userID, session)
            let organizations = try await Self.profileOrganizations(userID: userID, session)
            let collections = try await Self.syncCollections(userID: userID, session)
            let twoFactorEnabled = try await Self.twoFactorEnabled(userID: userID, session)
            return SyncSnapshot(user: user, folders: folders, ciphers: ciphers, organizations: organizations, collections: collections,
                                twoFactorEnabled: twoFactorEnabled)
        }
    }

    func profileOrganizations(userID: String) async throws -> [JSONValue] {
        try await read { session in try await Self.profileOrganizations(userID: userID, session) }
    }
}
