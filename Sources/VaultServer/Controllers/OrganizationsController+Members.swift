import Foundation
import Hummingbird
import VaultModels

/// The routes that change an organization's members and their access (docs/PROTOCOL.md, "Sharing"):
/// the official clients' paths, with Vaultwarden's older `POST …/delete` twins.
extension OrganizationsController {
    func addMemberRoutes(to api: RouterGroup<VaultRequestContext>) {
        for method in [HTTPRequest.Method.put, .post] {
            api.on("organizations/:orgId/users/:id", method: method) { request, context in try await updateMember(request, context) }
            api.on("organizations/:orgId/collections/:id/users", method: method) { request, context in
                try await setCollectionUsers(request, context)
            }
        }
        api.get("organizations/:orgId/users/:id") { _, context in
            let (orgID, membership) = try await member(context)
            guard membership.hasFullAccess else { throw APIError.notFound }
            let id = try Self.uuid(context, "id")
            guard let row = try await services.repository.members(organizationID: orgID).first(where: { $0.text("id") == id }) else {
                throw APIError.notFound
            }
            let assignments = try await services.repository.assignments(organizationID: orgID)
            return JSONResponse.make(bytes: Self.memberObject(row, collections: assignments[id] ?? [], object: "organizationUserDetails").serialized())
        }
        api.delete("organizations/:orgId/users/:id") { _, context in try await removeMember(context) }
        api.post("organizations/:orgId/users/:id/delete") { _, context in try await removeMember(context) }
        api.post("organizations/:orgId/users/:id/remove") { _, context in try await removeMember(context) }
        api.post("organizations/:orgId/leave") { _, context in
            let orgID = try Self.uuid(context, "orgId")
            let userID = try context.requireUser()
            switch try await services.repository.leave(organizationID: orgID, userID: userID, now: services.now()) {
            case .failure(.notFound): throw APIError.notFound
            case .failure(.refused(let message)): throw APIError(.badRequest, message)
            case .success:
                // The account's other devices drop the organization's items and key now.
                await services.notifier.user(userID, .syncOrgKeys, contextID: context.claims?.device)
                return JSONResponse.empty()
            }
        }
        api.delete("organizations/:orgId") { request, context in try await deleteOrganization(request, context) }
        api.post("organizations/:orgId/delete") { request, context in try await deleteOrganization(request, context) }
    }

    /// A member as `GET …/users` lists them, with their collections.
    static func memberObject(_ row: SQLRow, collections: [VaultRepository.CollectionAccessEntry], object name: String) -> JSONObject {
        var object = JSONObject()
        object["object"] = .string(name)
        object["id"] = .string(row.text("id") ?? "")
        object["userId"] = .string(row.text("user_id") ?? "")
        object["name"] = row.text("name").map(JSONValue.string) ?? .null
        object["email"] = .string(row.text("email") ?? "")
        object["status"] = .int(Int(row.int("status") ?? 0))
        object["type"] = .int(Int(row.int("type") ?? 2))
        object["collections"] = .array(collections.map(Self.accessObject))
        object["groups"] = .array([])
        // The member proved they were the invitee with the invite's one-time code.
        object["acceptedWithCode"] = .bool(row.bool("accepted_with_code"))
        return object
    }

    /// `{"id", "readOnly", "hidePasswords", "manage"}`: one assignment, the id naming the collection or the member.
    static func accessObject(_ entry: VaultRepository.CollectionAccessEntry) -> JSONValue {
        .object(["id": .string(entry.membershipID), "readOnly": .bool(entry.readOnly), "hidePasswords": .bool(entry.hidePasswords),
                 "manage": .bool(entry.manage)])
    }

    static func apiError(_ refusal: VaultRepository.MembershipRefusal) -> APIError {
        switch refusal {
        case .notFound: return .notFound
        case .refused(let message): return APIError(.badRequest, message)
        }
    }

    /// `PUT /api/organizations/{orgId}/users/{id}` `{"type", "collections": [{"id", "readOnly", "hidePasswords", "manage"}]}`.
    func updateMember(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let (orgID, membership) = try await member(context)
        guard membership.hasFullAccess else { throw APIError.notFound }
        let body = try await request.jsonObject(limit: services.configuration.maxBodyBytes)
        guard let type = body["type"]?.intValue, [0, 1, 2, 3].contains(type) else {
            throw APIError.invalidModel(["type": ["Type must be 0 (owner), 1 (admin), 2 (user) or 3 (manager)."]])
        }
        let collections = try Self.accessEntries(body["collections"], field: "collections")
        switch try await services.repository.updateMember(organizationID: orgID, membershipID: try Self.uuid(context, "id"), type: type,
                                                          collections: collections, by: membership, now: services.now()) {
        case .failure(let refusal): throw Self.apiError(refusal)
        case .success(let userID):
            await services.notifier.user(userID, .syncOrgKeys, contextID: context.claims?.device)
            return JSONResponse.empty()
        }
    }

    func removeMember(_ context: VaultRequestContext) async throws -> Response {
        let (orgID, membership) = try await member(context)
        guard membership.hasFullAccess else { throw APIError.notFound }
        switch try await services.repository.removeMember(organizationID: orgID, membershipID: try Self.uuid(context, "id"),
                                                          by: membership, now: services.now()) {
        case .failure(let refusal): throw Self.apiError(refusal)
        case .success(let userID):
            // The removed member's devices drop the organization's items and key at once.
            if let userID { await services.notifier.user(userID, .syncOrgKeys, contextID: context.claims?.device) }
            return JSONResponse.empty()
        }
    }

    /// `PUT /api/organizations/{orgId}/collections/{id}/users` `[{"id": memberId, "readOnly", "hidePasswords", "manage"}]`:
    /// by owners, admins and the collection's managers.
    func setCollectionUsers(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let (orgID, membership) = try await member(context)
        let collectionID = try Self.uuid(context, "id")
        guard try await services.repository.manages(collectionID: collectionID, membership) else {
            throw membership.hasFullAccess ? APIError.notFound : APIError.cannotEdit
        }
        let bytes = try await request.readBody(limit: services.configuration.maxBodyBytes)
        let parsed = try? JSONParser.parse(bytes)
        // The official body is the list itself; `{"users": […]}` as in a collection save is taken too.
        guard let users = try Self.accessEntries(parsed?.arrayValue.map(JSONValue.array) ?? parsed?.objectValue?["users"], field: "users") else {
            throw APIError.invalidModel(["users": ["The body must be a list of {id, readOnly, hidePasswords, manage}."]])
        }
        switch try await services.repository.setCollectionMembers(collectionID: collectionID, organizationID: orgID, users: users,
                                                                  now: services.now()) {
        case .failure(let refusal): throw Self.apiError(refusal)
        case .success(let affected):
            for userID in affected { await services.notifier.user(userID, .syncVault, contextID: context.claims?.device) }
            return JSONResponse.empty()
        }
    }

    /// `DELETE /api/organizations/{orgId}` `{"masterPasswordHash"}`, by an owner: everything of the organization goes.
    func deleteOrganization(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let (orgID, membership) = try await member(context)
        guard membership.hasFullAccess else { throw APIError.notFound }
        guard membership.type == 0 else { throw APIError(.badRequest, "Only owners can delete an organization.") }
        let body = try await request.jsonObject(limit: services.configuration.maxBodyBytes)
        _ = try await SessionsController(services: services).verifiedUser(request, context, presented: body["masterPasswordHash"]?.stringValue)
        let members = try await services.repository.deleteOrganization(id: orgID, now: services.now())
        services.logger.info("organization deleted", metadata: ["organization": "\(orgID)", "members": "\(members.count)"])
        for userID in members { await services.notifier.user(userID, .syncOrgKeys, contextID: context.claims?.device) }
        return JSONResponse.empty()
    }
}
