import Foundation
import Hummingbird
import VaultModels

/// Account settings the official clients change (docs/PROTOCOL.md, "Account settings"): the name
/// (`PUT`/`POST /api/accounts/profile`), the avatar colour (`PUT`/`POST /api/accounts/avatar`), equivalent
/// domains (`GET`, `PUT`, `POST /api/settings/domains`), and the anonymous password-hint request
/// (`POST /api/accounts/password-hint`), which this server, having no mail, refuses alike for every email.
struct ProfileController {
    let services: ServerServices

    func addPublicRoutes(to router: Router<VaultRequestContext>) {
        router.post("/api/accounts/password-hint") { request, _ in try await passwordHint(request) }
    }

    func addRoutes(to api: RouterGroup<VaultRequestContext>) {
        for method in [HTTPRequest.Method.put, .post] {
            api.on("accounts/profile", method: method) { request, context in try await updateProfile(request, context) }
            api.on("accounts/avatar", method: method) { request, context in try await updateAvatar(request, context) }
            api.on("settings/domains", method: method) { request, context in try await updateDomains(request, context) }
        }
        api.get("settings/domains") { _, context in
            guard let user = try await services.repository.user(id: try context.requireUser()) else { throw APIError.unauthorized }
            return JSONResponse.make(.object(Renderer.domains(user, withExclusions: true)))
        }
    }

    /// The profile as `GET /api/accounts/profile` answers it.
    func profileResponse(userID: String) async throws -> Response {
        guard let user = try await services.repository.user(id: userID) else { throw APIError.unauthorized }
        let organizations = try await services.repository.profileOrganizations(userID: userID)
        let twoFactorEnabled = try await services.repository.read { session in try await VaultRepository.twoFactorEnabled(userID: userID, session) }
        return JSONResponse.make(.object(services.renderer(for: nil).profile(user, organizations: organizations, twoFactorEnabled: twoFactorEnabled)))
    }

    /// `{"name", "masterPasswordHint", "culture"}`: the name is set (at most 50 characters; empty or absent
    /// clears it). The hint is checked as the official model checks it and otherwise ignored, as the official
    /// server does since hints left the profile: it changes with the master password (`POST
    /// /api/accounts/password`), and the web vault sends this field empty. `culture` is ignored.
    func updateProfile(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let userID = try context.requireUser()
        let body = try await request.jsonObject(limit: services.configuration.maxBodyBytes)
        let name = try Self.optionalString(body, "name", maxLength: 50)
        _ = try Self.optionalString(body, "masterPasswordHint", maxLength: 50)
        guard try await services.repository.setName(userID: userID, name: name?.isEmpty == true ? nil : name, now: services.now()) else {
            throw APIError.unauthorized
        }
        return try await profileResponse(userID: userID)
    }

    /// `{"avatarColor"}`: `#` and six hex digits, or `null` for the clients' default.
    func updateAvatar(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let userID = try context.requireUser()
        let body = try await request.jsonObject(limit: services.configuration.maxBodyBytes)
        let color = try Self.optionalString(body, "avatarColor", maxLength: 7)
        if let color, !Self.isHexColor(color) {
            throw APIError.invalidModel(["avatarColor": ["The field AvatarColor must be a colour written #RRGGBB (# and six hex digits), or null."]])
        }
        guard try await services.repository.setAvatarColor(userID: userID, color: color, now: services.now()) else {
            throw APIError.unauthorized
        }
        return try await profileResponse(userID: userID)
    }

    /// `{"equivalentDomains": [[domain, …], …], "excludedGlobalEquivalentDomains": [type, …]}`, either `null` or
    /// absent for none: replaces both, and answers as `GET /api/settings/domains` does.
    func updateDomains(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let userID = try context.requireUser()
        let body = try await request.jsonObject(limit: services.configuration.maxBodyBytes)
        let groups = try Self.equivalentDomains(body["equivalentDomains"])
        let excluded = try Self.excludedGlobalDomains(body["excludedGlobalEquivalentDomains"])
        let groupsText = groups.isEmpty ? nil
            : String(decoding: JSONValue.array(groups.map { .array($0.map(JSONValue.string)) }).serialized(), as: UTF8.self)
        let excludedText = excluded.isEmpty ? nil : String(decoding: JSONValue.array(excluded.map(JSONValue.int)).serialized(), as: UTF8.self)
        guard let user = try await services.repository.setEquivalentDomains(userID: userID, groups: groupsText, excluded: excludedText,
                                                                            now: services.now()) else {
            throw APIError.unauthorized
        }
        await services.notifier.user(userID, .syncSettings, contextID: context.claims?.device)
        return JSONResponse.make(.object(Renderer.domains(user, withExclusions: true)))
    }

    /// `POST /api/accounts/password-hint` `{"email"}`, anonymous. The official server mails the hint (or says
    /// by mail there is none) and answers `200` for any email, known or not. This server sends no mail, so it
    /// answers every well-formed request with the same `400` saying so, without looking the email up: the
    /// answer (and its timing) tells nothing about an account, and the hint is never shown to whoever asks.
    func passwordHint(_ request: Request) async throws -> Response {
        let body = try await request.jsonObject(limit: 64 * 1024)
        guard let email = try Self.optionalString(body, "email", maxLength: 256), !email.isEmpty else {
            throw APIError.invalidModel(["email": ["The Email field is required."]])
        }
        guard Self.looksLikeEmail(email) else {
            throw APIError.invalidModel(["email": ["The Email field is not a valid e-mail address."]])
        }
        throw APIError(.badRequest, "This server does not send password hints: it has no mail to send them with.")
    }

    // MARK: Reading the bodies

    /// `body[field]` as a string, `nil` when absent or `null`; 400 naming the field when it is another kind of
    /// value or longer than `maxLength` (counted as the official server counts, in UTF-16 units).
    static func optionalString(_ body: JSONObject, _ field: String, maxLength: Int) throws -> String? {
        guard let value = body[field], !value.isNull else { return nil }
        guard let text = value.stringValue else {
            throw APIError.invalidModel([field: ["\(field) should be a string, found \(value.kindName)."]])
        }
        guard text.utf16.count <= maxLength else {
            throw APIError.invalidModel([field: ["The field \(field) must be a string with a maximum length of \(maxLength)."]])
        }
        return text
    }

    static func isHexColor(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        return bytes.count == 7 && bytes[0] == UInt8(ascii: "#") && bytes.dropFirst().allSatisfy { $0 < 128 && Character(Unicode.Scalar($0)).isHexDigit }
    }

    /// One `@`, neither first nor last, and no line break: the official model's e-mail check.
    static func looksLikeEmail(_ text: String) -> Bool {
        guard let at = text.firstIndex(of: "@"), at != text.startIndex, text.index(after: at) != text.endIndex,
              text.lastIndex(of: "@") == at else { return false }
        return !text.contains(where: \.isNewline)
    }

    /// `equivalentDomains`: a list of lists of domain names (each at most 255 characters), at most
    /// ``RequestLimits/equivalentDomainGroups`` lists of ``RequestLimits/equivalentDomainsPerGroup``.
    static func equivalentDomains(_ value: JSONValue?) throws -> [[String]] {
        let field = "equivalentDomains"
        guard let value, !value.isNull else { return [] }
        let wrongShape = APIError.invalidModel([field: ["\(field) should be a list of lists of domain names."]])
        guard let groups = value.arrayValue else { throw wrongShape }
        try RequestLimits.check(groups, field: field, limit: RequestLimits.equivalentDomainGroups)
        return try groups.map { group in
            guard let domains = group.arrayValue else { throw wrongShape }
            try RequestLimits.check(domains, field: field, limit: RequestLimits.equivalentDomainsPerGroup)
            return try domains.map { domain in
                guard let text = domain.stringValue else { throw wrongShape }
                guard !text.isEmpty, text.utf16.count <= 255 else {
                    throw APIError.invalidModel([field: ["A domain name in \(field) must have 1 to 255 characters."]])
                }
                return text
            }
        }
    }

    /// `excludedGlobalEquivalentDomains`: global group types (the official enumeration is a byte), each once.
    static func excludedGlobalDomains(_ value: JSONValue?) throws -> [Int] {
        let field = "excludedGlobalEquivalentDomains"
        guard let value, !value.isNull else { return [] }
        let wrongShape = APIError.invalidModel([field: ["\(field) should be a list of global domain types (whole numbers from 0 to 255)."]])
        guard let types = value.arrayValue else { throw wrongShape }
        try RequestLimits.check(types, field: field, limit: 256)
        var seen = Set<Int>()
        return try types.compactMap { entry in
            guard let type = entry.intValue, (0...255).contains(type) else { throw wrongShape }
            return seen.insert(type).inserted ? type : nil
        }
    }
}

extension VaultRepository {
    /// Sets the account's name and moves its revision on (the other devices' next sync shows it); `false`
    /// if the account is gone.
    func setName(userID: String, name: String?, now: Int64) async throws -> Bool {
        try await transaction { session in
            try await !session.query("UPDATE users SET name = ?, updated_at = ?, revision_date = ? WHERE id = ? RETURNING id",
                                     [.optionalText(name), .int(now), .int(now), .text(userID)]).isEmpty
        }
    }

    /// Sets the account's avatar colour (`nil`: the default) and moves its revision on.
    func setAvatarColor(userID: String, color: String?, now: Int64) async throws -> Bool {
        try await transaction { session in
            try await !session.query("UPDATE users SET avatar_color = ?, updated_at = ?, revision_date = ? WHERE id = ? RETURNING id",
                                     [.optionalText(color), .int(now), .int(now), .text(userID)]).isEmpty
        }
    }

    /// Replaces the account's equivalent domains and excluded global groups (JSON text, `nil` for none),
    /// moves its revision on, and returns the account as stored.
    func setEquivalentDomains(userID: String, groups: String?, excluded: String?, now: Int64) async throws -> UserRecord? {
        try await transaction { session in
            try await session.query("""
                UPDATE users SET equivalent_domains = ?, excluded_global_domains = ?, updated_at = ?, revision_date = ?
                WHERE id = ? RETURNING *
                """, [.optionalText(groups), .optionalText(excluded), .int(now), .int(now), .text(userID)]).first.map(UserRecord.init(row:))
        }
    }
}
