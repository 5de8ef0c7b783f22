import Foundation
import NIOHTTP1
import VaultModels

/// An invite the server recorded, with the one-time code only the inviter is shown.
public struct IssuedInvitation: Sendable, Equatable {
    /// The invite's id, which becomes the member's id when it is accepted.
    public var id: String
    public var email: String
    /// The one-time code to hand to the invitee, as shown (`ABCD-EFGH-…`).
    public var code: String
    /// Until when the invite can be accepted, as the server said it (ISO 8601), if it did.
    public var expirationDate: String?

    public init(id: String, email: String, code: String, expirationDate: String?) {
        self.id = id
        self.email = email
        self.code = code
        self.expirationDate = expirationDate
    }
}

/// An invite to the signed-in account that it can still accept.
public struct PendingInvitation: Sendable, Equatable {
    /// The invite's id (the path's `{organizationUserId}` when accepting).
    public var id: String
    public var organizationID: String
    /// The organization's name as the server gives it (plaintext, not authenticated).
    public var organizationName: String
    /// The member type it offers (0 owner, 1 admin, 2 user, 3 manager).
    public var type: Int

    public init(id: String, organizationID: String, organizationName: String, type: Int) {
        self.id = id
        self.organizationID = organizationID
        self.organizationName = organizationName
        self.type = type
    }
}

/// The organization calls behind invitations (docs/PROTOCOL.md, "Organization invites").
extension BitwardenAPI {
    /// The organization's collections (`GET /api/organizations/{id}/collections`, owners and admins).
    public func organizationCollectionIDs(organizationID: String, token: String) async throws -> [String] {
        let answer = try object(try await send(.GET, "/api/organizations/\(organizationID)/collections", token: token))
        guard let data = answer["data"]?.arrayValue else { throw ServerCallError.invalidResponse("the collection list has no data") }
        return data.compactMap { $0.objectValue?["id"]?.stringValue }
    }

    /// Creates (`id` nil) or renames a collection (`POST /api/organizations/{org}/collections[/{id}]`; owners
    /// and admins). `name` is the serialized EncString of its name under the organization's key. A rename
    /// sends no `users`, which keeps who has access. Returns the collection's id.
    public func saveCollection(organizationID: String, id: String?, name: String, token: String) async throws -> String {
        var body: JSONObject = ["name": .string(name), "externalId": .null, "groups": .array([])]
        if id == nil { body["users"] = .array([]) }
        let path = "/api/organizations/\(organizationID)/collections" + (id.map { "/\($0)" } ?? "")
        let reply = try await send(id == nil ? .POST : .PUT, path, token: token, json: .object(body))
        guard let saved = try object(reply)["id"]?.stringValue, UUID(uuidString: saved) != nil else {
            throw ServerCallError.invalidResponse("the collection's answer has no id")
        }
        return saved.lowercased()
    }

    /// Deletes a collection (`DELETE /api/organizations/{org}/collections/{id}`; owners and admins).
    public func deleteCollection(organizationID: String, id: String, token: String) async throws {
        _ = try await send(.DELETE, "/api/organizations/\(organizationID)/collections/\(id)", token: token, json: nil)
    }

    /// The members and invitees of an organization (`GET /api/organizations/{id}/users`; owners and admins).
    public func organizationMembers(organizationID: String, token: String) async throws -> [OrganizationMember] {
        let reply = try await send(.GET, "/api/organizations/\(organizationID)/users", token: token, json: nil)
        return try (object(reply)["data"]?.arrayValue ?? []).map { entry in
            guard let object = entry.objectValue, let id = object["id"]?.stringValue, let email = object["email"]?.stringValue,
                  let status = object["status"]?.intValue, let type = object["type"]?.intValue else {
                throw ServerCallError.invalidResponse("a member entry lacks its id, email, status or type")
            }
            return OrganizationMember(id: id.lowercased(), userID: object["userId"]?.stringValue?.lowercased(), email: email,
                                      name: object["name"]?.stringValue, status: status, type: type,
                                      collections: (object["collections"]?.arrayValue ?? []).compactMap(CollectionGrant.init(wire:)))
        }
    }

    /// An account's public key (`GET /api/users/{id}/public-key`): base64 of its DER SubjectPublicKeyInfo.
    public func userPublicKey(userID: String, token: String) async throws -> String {
        let reply = try await send(.GET, "/api/users/\(userID)/public-key", token: token, json: nil)
        guard let key = try object(reply)["publicKey"]?.stringValue else {
            throw ServerCallError.invalidResponse("the public-key answer has no publicKey")
        }
        return key
    }

    /// Confirms an accepted member, giving them `key`: the organization's key wrapped with their public key.
    public func confirmMember(organizationID: String, memberID: String, key: String, token: String) async throws {
        _ = try await send(.POST, "/api/organizations/\(organizationID)/users/\(memberID)/confirm", token: token,
                           json: .object(["key": .string(key)]))
    }

    /// Creates an organization owned by the caller (`POST /api/organizations`, the free plan): `key` is the
    /// organization's key wrapped with the caller's public key, `collectionName` its first collection's name
    /// encrypted with that key (both serialized EncStrings). Returns the new organization's id, lower-cased.
    public func createOrganization(name: String, billingEmail: String, key: String, collectionName: String,
                                   token: String) async throws -> String {
        let body: JSONObject = [
            "name": .string(name), "billingEmail": .string(billingEmail), "planType": .int(0),
            "key": .string(key), "collectionName": .string(collectionName),
        ]
        let reply = try await send(.POST, "/api/organizations", token: token, json: .object(body))
        guard let id = try object(reply)["id"]?.stringValue, UUID(uuidString: id) != nil else {
            throw ServerCallError.invalidResponse("the new organization's answer has no id")
        }
        return id.lowercased()
    }

    /// Invites `email` (`POST /api/organizations/{id}/users/invite`) as a member of `type` with the given
    /// access to `collectionIDs`, and returns the invite with its one-time code. A server that answers
    /// without a code (the official one mails it; this one sends it back to the inviter) is refused as an
    /// invalid answer: without it the invitee cannot accept.
    public func invite(email: String, organizationID: String, type: Int, collections: [CollectionGrant],
                       token: String) async throws -> IssuedInvitation {
        let body: JSONObject = [
            "emails": .array([.string(email)]), "type": .int(type), "groups": .array([]),
            "collections": .array(collections.map { $0.wire() }),
        ]
        let reply = try await send(.POST, "/api/organizations/\(organizationID)/users/invite", token: token, json: .object(body))
        guard !reply.body.isEmpty else {
            throw ServerCallError.invalidResponse("the server recorded the invite but gave no one-time code for it (it may mail the invitation instead)")
        }
        let entries = (try object(reply)["inviteCodes"]?.arrayValue ?? []).compactMap(\.objectValue)
        guard let entry = entries.first(where: { $0["email"]?.stringValue?.lowercased() == email.lowercased() }) ?? entries.first,
              let id = entry["id"]?.stringValue, let code = entry["code"]?.stringValue else {
            throw ServerCallError.invalidResponse("the invite answer has no one-time code")
        }
        return IssuedInvitation(id: id, email: entry["email"]?.stringValue ?? email, code: code,
                                expirationDate: entry["expirationDate"]?.stringValue)
    }

    /// The invites the signed-in account can still accept (`GET /api/vaultsync/invites`, a VaultSync server extension).
    public func pendingInvitations(token: String) async throws -> [PendingInvitation] {
        let answer = try object(try await send(.GET, "/api/vaultsync/invites", token: token))
        guard let data = answer["data"]?.arrayValue else { throw ServerCallError.invalidResponse("the invite list has no data") }
        return data.compactMap { value in
            guard let entry = value.objectValue, let id = entry["id"]?.stringValue,
                  let organizationID = entry["organizationId"]?.stringValue else { return nil }
            return PendingInvitation(id: id, organizationID: organizationID.lowercased(),
                                     organizationName: entry["organizationName"]?.stringValue ?? "(no name)",
                                     type: entry["type"]?.intValue ?? 2)
        }
    }

    /// Accepts an invite with its one-time code (`POST /api/organizations/{orgId}/users/{id}/accept`, `{"token"}`).
    public func acceptInvitation(id: String, organizationID: String, code: String, token: String) async throws {
        _ = try await send(.POST, "/api/organizations/\(organizationID)/users/\(id)/accept", token: token,
                           json: .object(["token": .string(code), "resetPasswordKey": .null]))
    }

    /// Sets a member's role and collections (`PUT /api/organizations/{org}/users/{id}`; owners and admins).
    public func updateMember(organizationID: String, memberID: String, type: Int, collections: [CollectionGrant], token: String) async throws {
        let body: JSONObject = ["type": .int(type), "collections": .array(collections.map { $0.wire() }), "groups": .array([]),
                                "accessAll": .bool(false)]
        _ = try await send(.PUT, "/api/organizations/\(organizationID)/users/\(memberID)", token: token, json: .object(body))
    }

    /// Removes a member, or withdraws an invite (`DELETE /api/organizations/{org}/users/{id}`; owners and admins).
    public func removeMember(organizationID: String, memberID: String, token: String) async throws {
        _ = try await send(.DELETE, "/api/organizations/\(organizationID)/users/\(memberID)", token: token, json: nil)
    }

    /// Leaves an organization (`POST /api/organizations/{org}/leave`).
    public func leaveOrganization(organizationID: String, token: String) async throws {
        _ = try await send(.POST, "/api/organizations/\(organizationID)/leave", token: token, json: nil)
    }

    /// Who is assigned to a collection (`GET /api/organizations/{org}/collections/{id}/users`): each grant's
    /// `collectionID` holds the member's id.
    public func collectionUsers(organizationID: String, collectionID: String, token: String) async throws -> [CollectionGrant] {
        let reply = try await send(.GET, "/api/organizations/\(organizationID)/collections/\(collectionID)/users", token: token, json: nil)
        guard let entries = (try? JSONParser.parse(reply.body))?.arrayValue else {
            throw ServerCallError.invalidResponse("the collection's user list is not a list")
        }
        return entries.compactMap(CollectionGrant.init(wire:))
    }

    /// Replaces who is assigned to a collection (`PUT …/collections/{id}/users`), each grant's `collectionID`
    /// holding the member's id.
    public func setCollectionUsers(organizationID: String, collectionID: String, users: [CollectionGrant], token: String) async throws {
        _ = try await send(.PUT, "/api/organizations/\(organizationID)/collections/\(collectionID)/users", token: token,
                           json: .array(users.map { $0.wire() }))
    }

    /// Moves a personal item into an organization (`PUT /api/ciphers/{id}/share`): `cipher` re-encrypted for
    /// it, into `collectionIDs` (at least one), in one request. Returns the item as the server now has it.
    public func shareCipher(_ cipher: CipherWire, id: String, collectionIDs: [String], lastKnownRevisionDate: WireDate?,
                            token: String) async throws -> CipherWire {
        var request = cipher.requestObject(lastKnownRevisionDate: lastKnownRevisionDate)
        // Each attachment's name and key as encrypted for the organization (changed only for an item that had no key of its own).
        request["attachments2"] = .object(JSONObject(entries: (cipher.attachments ?? []).compactMap { attachment in
            guard let id = attachment.id, let name = attachment.fileName, let key = attachment.key else { return nil }
            return .init(key: id, value: .object(["fileName": .string(name.serialized), "key": .string(key.serialized)]))
        }))
        let body: JSONObject = ["cipher": .object(request), "collectionIds": .array(collectionIDs.map(JSONValue.string))]
        return try self.cipher(try await send(.PUT, "/api/ciphers/\(id)/share", token: token, json: .object(body)), expecting: id)
    }

    /// Replaces the collections of an organization item (`PUT /api/ciphers/{id}/collections_v2`). Returns the
    /// item as the caller now sees it, or `nil` when they no longer can (they moved it out of all their collections).
    public func setCipherCollections(id: String, collectionIDs: [String], token: String) async throws -> CipherWire? {
        let reply = try await send(.PUT, "/api/ciphers/\(id)/collections_v2", token: token,
                                   json: .object(["collectionIds": .array(collectionIDs.map(JSONValue.string))]))
        let answer = try object(reply)
        guard answer["unavailable"]?.boolValue != true, let cipher = answer["cipher"]?.objectValue else { return nil }
        return try CipherWire(json: cipher, path: "cipher")
    }

    /// Deletes an organization with everything in it (`DELETE /api/organizations/{org}`, owners, with the
    /// master password's hash).
    public func deleteOrganization(organizationID: String, passwordHash: String, token: String) async throws {
        _ = try await send(.DELETE, "/api/organizations/\(organizationID)", token: token,
                           json: .object(["masterPasswordHash": .string(passwordHash)]))
    }
}
