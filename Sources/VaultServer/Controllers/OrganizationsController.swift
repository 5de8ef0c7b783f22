import Foundation
import Hummingbird
import VaultCrypto
import VaultModels

/// The minimal organization flows of organizations.md §6.
struct OrganizationsController {
    let services: ServerServices

    func addRoutes(to api: RouterGroup<VaultRequestContext>) {
        addMemberRoutes(to: api)
        api.post("organizations") { request, context in try await create(request, context) }
        api.get("organizations/:orgId") { _, context in
            let (orgID, membership) = try await member(context)
            guard membership.type == 0 else { throw APIError.notFound }
            return JSONResponse.make(.object(["object": .string("organization"), "id": .string(orgID)]))
        }
        api.get("organizations/:orgId/collections") { _, context in
            let (orgID, membership) = try await member(context)
            guard membership.hasFullAccess else { throw APIError.notFound }
            let rows = try await services.repository.collections(organizationID: orgID)
            return JSONResponse.list(rows.map { VaultRepository.collectionObject($0, object: "collection", access: nil).serialized() })
        }
        api.post("organizations/:orgId/collections") { request, context in try await saveCollection(request, context, update: false) }
        for method in [HTTPRequest.Method.put, .post] {
            api.on("organizations/:orgId/collections/:id", method: method) { request, context in
                try await saveCollection(request, context, update: true)
            }
        }
        api.delete("organizations/:orgId/collections/:id") { _, context in
            let (orgID, _) = try await managedCollection(context)
            guard try await services.repository.deleteCollection(id: try Self.uuid(context, "id"), organizationID: orgID, now: services.now()) else {
                throw APIError.notFound
            }
            return JSONResponse.empty()
        }
        api.get("organizations/:orgId/collections/:id/users") { _, context in
            let (orgID, _) = try await managedCollection(context)
            guard let rows = try await services.repository.collectionMembers(collectionID: try Self.uuid(context, "id"), organizationID: orgID) else {
                throw APIError.notFound
            }
            return JSONResponse.make(.array(rows.map { row in
                .object(["id": .string(row.text("membership_id") ?? ""), "readOnly": .bool(row.bool("read_only")),
                         "hidePasswords": .bool(row.bool("hide_passwords")), "manage": .bool(row.bool("manage"))])
            }))
        }
        api.post("organizations/:orgId/users/invite") { request, context in try await invite(request, context) }
        api.post("organizations/:orgId/users/:id/confirm") { request, context in
            let (orgID, membership) = try await member(context)
            guard membership.hasFullAccess else { throw APIError.notFound }
            let body = try await request.jsonObject(limit: services.configuration.maxBodyBytes)
            guard let key = body["key"]?.stringValue, (try? EncString(key)) != nil else {
                throw APIError(.badRequest, "Key or UserId is not set, unable to process request")
            }
            let confirmed = try await services.repository.confirm(organizationID: orgID, membershipID: try Self.uuid(context, "id"), key: key,
                                                                  now: services.now())
            // The new member's devices fetch the organization key (and its items) now.
            await services.notifier.user(confirmed, .syncOrgKeys, contextID: context.claims?.device)
            return JSONResponse.empty()
        }
        api.post("organizations/:orgId/users/:id/accept") { request, context in try await accept(request, context) }
        api.get("vaultsync/invites") { _, context in
            guard let user = try await services.repository.user(id: try context.requireUser()) else { throw APIError.unauthorized }
            let rows = try await services.repository.pendingInvites(email: user.email, notBefore: inviteNotBefore)
            return JSONResponse.list(rows.map { row in
                JSONObject(dictionaryLiteral:
                    ("object", .string("organizationInvite")), ("id", .string(row.text("id") ?? "")),
                    ("organizationId", .string(row.text("organization_id") ?? "")), ("organizationName", .string(row.text("name") ?? "")),
                    ("type", .int(Int(row.int("type") ?? 2)))).serialized()
            })
        }
        api.get("organizations/:orgId/users") { _, context in
            let (orgID, membership) = try await member(context)
            guard membership.hasFullAccess else { throw APIError.notFound }
            let rows = try await services.repository.members(organizationID: orgID)
            let invites = try await services.repository.invites(organizationID: orgID)
            let assignments = try await services.repository.assignments(organizationID: orgID)
            return JSONResponse.list(invites.map { row in
                var object = JSONObject()
                object["object"] = .string("organizationUserUserDetails")
                object["id"] = .string(row.text("id") ?? "")
                object["userId"] = .null
                object["name"] = .null
                object["email"] = .string(row.text("email") ?? "")
                object["status"] = .int(0)
                object["type"] = .int(Int(row.int("type") ?? 2))
                object["collections"] = (try? JSONParser.parse(Array((row.text("collections") ?? "[]").utf8))) ?? .array([])
                object["groups"] = .array([])
                object["acceptedWithCode"] = .bool(false)
                // Whether the invitee can still accept it (docs/PROTOCOL.md, "Organization invites").
                object["inviteState"] = .string(row.text("code_hash") == nil ? "noCode"
                    : (row.int("failed_attempts") ?? 0) >= InviteCodes.maximumFailures ? "tooManyWrongCodes"
                    : (row.int("created_at") ?? 0) < inviteNotBefore ? "expired" : "pending")
                return object.serialized()
            } + rows.map { row in
                Self.memberObject(row, collections: assignments[row.text("id") ?? ""] ?? [], object: "organizationUserUserDetails").serialized()
            })
        }
        api.post("organizations/:orgId/users/public-keys") { request, context in
            let (orgID, membership) = try await member(context)
            guard membership.hasFullAccess else { throw APIError.notFound }
            let ids = Set(try CipherRequests.ids(from: try await request.jsonObject(limit: services.configuration.maxBodyBytes)))
            let rows = try await services.repository.members(organizationID: orgID).filter { ids.contains($0.text("id") ?? "") }
            return JSONResponse.list(rows.map { row in
                JSONObject(dictionaryLiteral:
                    ("object", .string("organizationUserPublicKeyResponseModel")), ("id", .string(row.text("id") ?? "")),
                    ("userId", .string(row.text("user_id") ?? "")), ("key", row.text("public_key").map(JSONValue.string) ?? .null)).serialized()
            })
        }
        api.get("users/:id/public-key") { _, context in
            guard let user = try await services.repository.user(id: try Self.uuid(context, "id")), let key = user.publicKey else {
                throw APIError.notFound
            }
            return JSONResponse.make(.object(["object": .string("userKey"), "userId": .string(user.id), "publicKey": .string(key)]))
        }
    }

    static func uuid(_ context: VaultRequestContext, _ name: String) throws -> String {
        guard let value = context.parameters.get(name), UUID(uuidString: value) != nil else { throw APIError.notFound }
        return value.lowercased()
    }

    /// The caller's confirmed membership; 404 for non-members (never reveal an organization).
    func member(_ context: VaultRequestContext) async throws -> (String, MembershipRecord) {
        let orgID = try Self.uuid(context, "orgId")
        guard let membership = try await services.repository.membership(userID: try context.requireUser(), organizationID: orgID),
              membership.status == 2 else { throw APIError.notFound }
        return (orgID, membership)
    }

    func create(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let userID = try context.requireUser()
        let body = try await request.jsonObject(limit: services.configuration.maxBodyBytes)
        guard let name = body["name"]?.stringValue, !name.isEmpty, name.count <= 50 else {
            throw APIError.invalidModel(["name": ["The Name field is required (at most 50 characters)."]])
        }
        guard let billing = body["billingEmail"]?.stringValue, billing.contains("@") else {
            throw APIError.invalidModel(["billingEmail": ["BillingEmail is not a valid email address."]])
        }
        guard let key = body["key"]?.stringValue, (try? EncString(key)) != nil else {
            throw APIError.invalidModel(["key": ["key is not a valid encrypted string."]])
        }
        let collectionName = body["collectionName"]?.stringValue
        if let collectionName, (try? EncString(collectionName)) == nil {
            throw APIError.invalidModel(["collectionName": ["collectionName is not a valid encrypted string."]])
        }
        let id = try await services.repository.createOrganization(
            userID: userID, name: name, billingEmail: billing.lowercased(), key: key, collectionName: collectionName, now: services.now())
        var object = JSONObject()
        object["object"] = .string("organization")
        object["id"] = .string(id)
        object["name"] = .string(name)
        object["billingEmail"] = .string(billing.lowercased())
        object["planType"] = .int(6)
        object["hasPublicAndPrivateKeys"] = .bool(false)
        return JSONResponse.make(.object(object))
    }

    static func accessEntries(_ value: JSONValue?, field: String) throws -> [VaultRepository.CollectionAccessEntry]? {
        guard let values = value?.arrayValue else { return nil }
        return try RequestLimits.check(values, field: field, limit: RequestLimits.accessEntries).map { entry in
            guard let object = entry.objectValue, let id = object["id"]?.stringValue, UUID(uuidString: id) != nil else {
                throw APIError.invalidModel(["users": ["Each entry needs an id."]])
            }
            return .init(membershipID: id.lowercased(), readOnly: object["readOnly"]?.boolValue ?? false,
                         hidePasswords: object["hidePasswords"]?.boolValue ?? false, manage: object["manage"]?.boolValue ?? false)
        }
    }

    /// The caller's membership, for a route on the collection `id` they must manage (owners and admins
    /// manage every collection; others need `manage` on it, or to be its manager): 403 for a member who
    /// does not, 404 for anyone else.
    func managedCollection(_ context: VaultRequestContext) async throws -> (String, MembershipRecord) {
        let (orgID, membership) = try await member(context)
        guard try await services.repository.manages(collectionID: try Self.uuid(context, "id"), membership) else {
            throw membership.hasFullAccess ? APIError.notFound : APIError.cannotEdit
        }
        return (orgID, membership)
    }

    func saveCollection(_ request: Request, _ context: VaultRequestContext, update: Bool) async throws -> Response {
        let (orgID, membership) = update ? try await managedCollection(context) : try await member(context)
        // New collections: owners and admins only (the official "limit collection creation to admins").
        guard update || membership.hasFullAccess else { throw APIError.notFound }
        let body = try await request.jsonObject(limit: services.configuration.maxBodyBytes)
        guard let name = body["name"]?.stringValue, (try? EncString(name)) != nil, name.utf8.count <= 1000 else {
            throw APIError.invalidModel(["name": ["name is not a valid encrypted string."]])
        }
        let users = try Self.accessEntries(body["users"], field: "users")
        guard let row = try await services.repository.saveCollection(
            organizationID: orgID, id: update ? try Self.uuid(context, "id") : nil, name: name,
            externalID: body["externalId"]?.stringValue, users: update ? users : (users ?? []), now: services.now()) else {
            throw APIError.notFound
        }
        return JSONResponse.make(.object(VaultRepository.collectionObject(row, object: "collectionDetails", access: .owner)))
    }

    func invite(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let (orgID, membership) = try await member(context)
        guard membership.hasFullAccess else { throw APIError.notFound }
        let body = try await request.jsonObject(limit: services.configuration.maxBodyBytes)
        guard let values = body["emails"]?.arrayValue, !values.isEmpty else {
            throw APIError.invalidModel(["emails": ["The Emails field is required."]])
        }
        try RequestLimits.check(values, field: "emails", limit: RequestLimits.inviteEmails)
        // Checked by form only: whether an address has an account never changes the answer.
        let emails = try values.map { value -> String in
            // Normalised as accounts are (docs/SECURITY.md, look-alike accounts), so an invite names one account.
            guard let email = value.stringValue.map(EmailAddress.normalise), email.count <= 256,
                  let at = email.firstIndex(of: "@"), at != email.startIndex, email.index(after: at) != email.endIndex else {
                throw APIError.invalidModel(["emails": ["Every email must be an email address of at most 256 characters."]])
            }
            return email
        }
        let type = body["type"]?.intValue ?? 2
        guard (0...4).contains(type) else { throw APIError.invalidModel(["type": ["Invalid member type."]]) }
        if type != 2 && membership.type != 0 { throw APIError(.badRequest, "Only Owners can invite Managers, Admins or Owners") }
        let collections = try Self.accessEntries(body["collections"], field: "collections") ?? []
        let issued = try await services.repository.invite(organizationID: orgID, emails: emails, type: type, collections: collections,
                                                          now: services.now())
        // Bitwarden answers with an empty body, which its clients do not read; this server adds the codes,
        // for the inviter only (docs/PROTOCOL.md, "Organization invites").
        let expires = WireDate(microsecondsSinceEpoch: services.now() + services.configuration.inviteLifetime * 1_000_000).iso8601
        return JSONResponse.make(.object([
            "object": .string("organizationInvites"),
            "inviteCodes": .array(issued.map { invite in
                .object(["id": .string(invite.id), "email": .string(invite.email), "code": .string(invite.code),
                         "expirationDate": .string(expires)])
            }),
        ]))
    }

    /// Invites older than this (microseconds since the epoch) can no longer be accepted.
    var inviteNotBefore: Int64 { services.now() - services.configuration.inviteLifetime * 1_000_000 }

    /// What every refused accept answers, whatever the reason (docs/SECURITY.md, "Invitations are bound to a
    /// one-time code").
    static let acceptRefused = "This invitation cannot be accepted with this code: it is wrong, used already or expired. Ask the organization for a new invitation."

    /// `POST /api/organizations/{orgId}/users/{id}/accept` `{"token"}` by the invitee, where `token` is the
    /// invite's one-time code. The account must be the invited email, and the code the invite's.
    func accept(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let orgID = try Self.uuid(context, "orgId")
        guard let inviteID = context.parameters.get("id").flatMap({ UUID(uuidString: $0) != nil ? $0.lowercased() : nil }) else {
            throw APIError(.badRequest, Self.acceptRefused)
        }
        // A body that is not JSON is an attempt without a code, refused (and counted) as any other.
        let bytes = try await request.readBody(limit: services.configuration.maxBodyBytes)
        let code = (try? JSONParser.parseObject(bytes))?["token"]?.stringValue
        guard let user = try await services.repository.user(id: try context.requireUser()) else { throw APIError.unauthorized }
        switch try await services.repository.acceptInvite(id: inviteID, organizationID: orgID, user: user, code: code,
                                                          notBefore: inviteNotBefore, now: services.now()) {
        case nil: return JSONResponse.empty()
        case .refused: throw APIError(.badRequest, Self.acceptRefused)
        case .alreadyMember: throw APIError(.badRequest, "You are already a member of this organization.")
        }
    }
}
