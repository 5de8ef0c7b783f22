import Foundation
import Hummingbird
import Testing
import VaultCrypto
import VaultModels
@testable import VaultServer

/// An organization with one member of every kind the permission rules tell apart, all confirmed
/// through the API, and a collection `collectionID` the assigned ones share.
struct PermissionOrganization {
    enum Role: String, CaseIterable, CustomStringConvertible {
        case owner, admin, manager, userManage, userEdit, userEditHide, userReadOnly, userHide, unassigned, stranger
        var description: String { rawValue }

        /// Member type and the flags of the assignment to the shared collection (`nil`: not assigned).
        var membership: (type: Int, access: (readOnly: Bool, hidePasswords: Bool, manage: Bool)?)? {
            switch self {
            case .owner: (0, nil)
            case .admin: (1, nil)
            case .manager: (3, (false, false, false))
            case .userManage: (2, (false, false, true))
            case .userEdit: (2, (false, false, false))
            case .userEditHide: (2, (false, true, false))
            case .userReadOnly: (2, (true, false, false))
            case .userHide: (2, (true, true, false))
            case .unassigned: (2, nil)
            case .stranger: nil
            }
        }
    }

    let orgID: String
    let orgKey: SymmetricCryptoKey
    let collectionID: String
    let owner: TestUser
    var users: [Role: TestUser] = [:]
    var tokens: [Role: String] = [:]
    var membershipIDs: [Role: String] = [:]

    var ownerToken: String { tokens[.owner]! }
    var keys: VaultKeys { VaultKeys(userKey: owner.userKey, organizationKeys: [orgID: orgKey]) }

    static func make(_ api: APIClient) async throws -> PermissionOrganization {
        let owner = try await TestUser.register(api)
        let ownerToken = try await owner.token(api)
        let (orgID, orgKey) = try await owner.createOrganization(api, token: ownerToken)
        let collectionID = try #require(try await api.request(.get, "/api/organizations/\(orgID)/collections", token: ownerToken)
            .object["data"]?.arrayValue?.first?.objectValue?["id"]?.stringValue)
        var organization = PermissionOrganization(orgID: orgID, orgKey: orgKey, collectionID: collectionID, owner: owner)
        organization.users[.owner] = owner
        organization.tokens[.owner] = ownerToken
        for role in Role.allCases where role != .owner {
            let user = try await TestUser.register(api)
            organization.users[role] = user
            organization.tokens[role] = try await user.token(api)
            guard let membership = role.membership else { continue }
            let collections: [JSONValue] = membership.access.map { flags in
                [.object(["id": .string(collectionID), "readOnly": .bool(flags.readOnly), "hidePasswords": .bool(flags.hidePasswords),
                          "manage": .bool(flags.manage)])]
            } ?? []
            let invite = try await api.request(.post, "/api/organizations/\(orgID)/users/invite", token: ownerToken, json: .object([
                "emails": .array([.string(user.email)]), "type": .int(membership.type), "collections": .array(collections),
            ]))
            #expect(invite.status == .ok, "invite \(role): \(invite.message ?? "")")
            try await user.acceptInvite(api, organizationID: orgID, invite: invite)
            let memberID = try #require(invite.object["inviteCodes"]?.arrayValue?.first?.objectValue?["id"]?.stringValue)
            try await organization.confirm(api, memberID: memberID, user: user)
            organization.membershipIDs[role] = memberID
        }
        return organization
    }

    func confirm(_ api: APIClient, memberID: String, user: TestUser) async throws {
        let wrapped = try user.privateKey.publicKey.wrap(orgKey)
        let confirmed = try await api.request(.post, "/api/organizations/\(orgID)/users/\(memberID)/confirm", token: ownerToken,
                                              json: .object(["key": .string(wrapped.serialized)]))
        #expect(confirmed.status == .ok, "confirm: \(confirmed.message ?? "")")
    }

    /// A new shared login in the collection (password, history, a hidden field), made by the owner; its answer.
    func makeItem(_ api: APIClient, name: String = "Shared wifi") async throws -> JSONObject {
        var view = try keys.newItem(type: .login, name: name, organizationId: orgID)
        view.login = LoginView(username: "guest", password: "wifi-password")
        view.fields = [FieldView(type: .hidden, name: "pin", value: "4321"), FieldView(type: .text, name: "floor", value: "2")]
        view.passwordHistory = [PasswordHistoryView(password: "old-wifi-password", lastUsedDate: WireDate(microsecondsSinceEpoch: 1_700_000_000_000_000))]
        let created = try await api.request(.post, "/api/ciphers/create", token: ownerToken, json: .object([
            "cipher": try view.encrypted(with: keys).jsonValue, "collectionIds": .array([.string(collectionID)]),
        ]))
        #expect(created.status == .ok, "create: \(created.message ?? "")")
        return created.object
    }

    /// The item's edit as a request body: the name changed, based on `item`'s revision.
    func edit(of item: JSONObject, name: String) throws -> JSONValue {
        var view = try CipherWire(json: item, path: "$").decrypted(with: keys)
        view.name = name
        var wire = try view.encrypted(with: keys)
        wire.lastKnownRevisionDate = try CipherWire(json: item, path: "$").revisionDate
        return wire.jsonValue
    }
}

@Suite("Sharing: the permission rules of every item, attachment and collection route, and the member flows")
struct SharingPermissionsTests {
    typealias Role = PermissionOrganization.Role

    @Test("permissions matrix: each item, attachment and collection route × owner, admin, manager, user (manage, edit, edit except passwords, read-only, hide passwords), a member without the collection and a stranger",
          arguments: Backend.available)
    func matrix(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let organization = try await PermissionOrganization.make(api)
            let org = "/api/organizations/\(organization.orgID)"
            let writers: Set<Role> = [.owner, .admin, .manager, .userManage, .userEdit, .userEditHide]
            let readers = writers.union([.userReadOnly, .userHide])
            let managers: Set<Role> = [.owner, .admin, .manager, .userManage]
            /// What a role gets: 200 when allowed; otherwise 403 for a member who sees the thing, 404 for anyone else.
            func expected(_ role: Role, allowed: Set<Role>, sees: Set<Role>) -> HTTPResponse.Status {
                allowed.contains(role) ? .ok : sees.contains(role) ? .forbidden : .notFound
            }
            let members = Set(Role.allCases).subtracting([.stranger])
            let second = try await api.request(.post, "\(org)/collections", token: organization.ownerToken, json: .object([
                "name": .string(try EncString.encrypt("Second", key: organization.orgKey).serialized),
            ])).object["id"]?.stringValue ?? ""

            for role in Role.allCases {
                let token = try #require(organization.tokens[role])
                // Item routes, each on a fresh item so that one role's change does not decide another's answer.
                var routes: [(String, allowed: Set<Role>, (String, JSONObject) throws -> (HTTPRequest.Method, String, JSONValue?))] = [
                    ("read", readers, { id, _ in (.get, "/api/ciphers/\(id)", nil) }),
                    ("edit", writers, { id, item in (.put, "/api/ciphers/\(id)", try organization.edit(of: item, name: "Edited by \(role)")) }),
                    ("trash", writers, { id, _ in (.put, "/api/ciphers/\(id)/delete", nil) }),
                    ("delete for good", writers, { id, _ in (.delete, "/api/ciphers/\(id)", nil) }),
                    ("archive", writers, { id, _ in (.put, "/api/ciphers/\(id)/archive", nil) }),
                    ("attach", writers, { id, _ in (.post, "/api/ciphers/\(id)/attachment/v2", .object([
                        "key": .string(try EncString.wrap(.generate(), with: organization.orgKey).serialized),
                        "fileName": .string(try EncString.encrypt("plan.pdf", key: organization.orgKey).serialized), "fileSize": .int(161),
                    ])) }),
                    // Into a collection only owners and admins may write to.
                    ("collections", [.owner, .admin], { id, _ in
                        (.put, "/api/ciphers/\(id)/collections_v2",
                         .object(["collectionIds": .array([.string(organization.collectionID), .string(second)])]))
                    }),
                ]
                routes.append(("restore", writers, { id, _ in (.put, "/api/ciphers/\(id)/restore", nil) }))
                for (label, allowed, route) in routes {
                    let item = try await organization.makeItem(api)
                    let id = try #require(item["id"]?.stringValue)
                    if label == "restore" {
                        #expect(try await api.request(.put, "/api/ciphers/\(id)/delete", token: organization.ownerToken).status == .ok)
                    }
                    let before = try await api.request(.get, "/api/ciphers/\(id)", token: organization.ownerToken).object
                    let (method, path, json) = try route(id, item)
                    let answer = try await api.request(method, path, token: token, json: json)
                    let want = expected(role, allowed: allowed, sees: readers)
                    #expect(answer.status == want, "\(role) \(label): \(answer.status) \(answer.message ?? "")")
                    if want != .ok && label != "read" {
                        // Refused: the item is as it was, every field of it.
                        let after = try await api.request(.get, "/api/ciphers/\(id)", token: organization.ownerToken).object
                        #expect(after == before, "\(role) \(label) changed nothing")
                    }
                }

                // Collection routes: a collection of this role's own (the same assignment), so a delete leaves the others.
                let own = try await api.request(.post, "\(org)/collections", token: organization.ownerToken, json: .object([
                    "name": .string(try EncString.encrypt("Own of \(role)", key: organization.orgKey).serialized),
                    "users": .array(role.membership?.access.map { flags in
                        [.object(["id": .string(organization.membershipIDs[role] ?? ""), "readOnly": .bool(flags.readOnly),
                                  "hidePasswords": .bool(flags.hidePasswords), "manage": .bool(flags.manage)])]
                    } ?? []),
                ]))
                let collection = try #require(own.object["id"]?.stringValue, "\(own.message ?? "")")
                let current = try await api.request(.get, "\(org)/collections/\(collection)/users", token: organization.ownerToken).json ?? .array([])
                let collectionRoutes: [(String, HTTPRequest.Method, String, JSONValue?)] = [
                    ("rename", .put, "\(org)/collections/\(collection)",
                     .object(["name": .string(try EncString.encrypt("Renamed by \(role)", key: organization.orgKey).serialized)])),
                    ("list access", .get, "\(org)/collections/\(collection)/users", nil),
                    ("set access", .put, "\(org)/collections/\(collection)/users", current),
                    ("delete", .delete, "\(org)/collections/\(collection)", nil),
                ]
                for (label, method, path, json) in collectionRoutes {
                    let answer = try await api.request(method, path, token: token, json: json)
                    let want = expected(role, allowed: managers, sees: members)
                    #expect(answer.status == want, "\(role) collection \(label): \(answer.status) \(answer.message ?? "")")
                }
                // Creating a collection and administering members: owners and admins only; anyone else is told nothing.
                for (label, method, path, json) in [
                    ("create collection", HTTPRequest.Method.post, "\(org)/collections",
                     JSONValue.object(["name": .string(try EncString.encrypt("New", key: organization.orgKey).serialized)])),
                    ("list members", .get, "\(org)/users", nil),
                ] as [(String, HTTPRequest.Method, String, JSONValue?)] {
                    let answer = try await api.request(method, path, token: token, json: json)
                    #expect(answer.status == ([.owner, .admin].contains(role) ? .ok : .notFound), "\(role) \(label): \(answer.status)")
                }
            }
        }
    }

    @Test("hide passwords: such members never receive the password, its history, hidden fields; an edit of theirs keeps them; other members see everything",
          arguments: Backend.available)
    func hidePasswords(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let organization = try await PermissionOrganization.make(api)
            let item = try await organization.makeItem(api)
            let id = try #require(item["id"]?.stringValue)
            let raw = try await api.request(.get, "/api/ciphers/\(id)", token: organization.ownerToken).object
            let sealedPassword = try #require(raw["login"]?.objectValue?["password"]?.stringValue)
            for role in [Role.userHide, .userEditHide] {
                let token = try #require(organization.tokens[role])
                let sync = try await api.request(.get, "/api/sync", token: token).object
                let shared = try #require(sync["ciphers"]?.arrayValue?.compactMap(\.objectValue).first { $0["id"] == .string(id) })
                #expect(shared["viewPassword"] == .bool(false))
                #expect(shared["login"]?.objectValue?["password"] == .null, "\(role): no password")
                #expect(shared["passwordHistory"] == .null, "\(role): no history")
                let fields = shared["fields"]?.arrayValue?.compactMap(\.objectValue) ?? []
                #expect(fields.first { $0["type"] == .int(1) }?["value"] == .null, "\(role): the hidden field's value is gone")
                #expect(fields.first { $0["type"] == .int(0) }?["value"] != .null, "\(role): a text field stays")
                #expect(!String(decoding: try await api.request(.get, "/api/ciphers/\(id)", token: token).bytes, as: UTF8.self).contains(sealedPassword))
                // What they can open: everything else.
                let memberKeys = VaultKeys(userKey: organization.users[role]!.userKey, organizationKeys: [organization.orgID: organization.orgKey])
                let view = try CipherWire(json: shared, path: "$").decrypted(with: memberKeys)
                #expect(view.name == "Shared wifi" && view.login?.username == "guest" && view.login?.password == nil)
            }
            // "Can edit, except passwords": the edit lands; the password, history and hidden field stay the stored ones.
            let editorToken = try #require(organization.tokens[.userEditHide])
            let seen = try await api.request(.get, "/api/ciphers/\(id)", token: editorToken).object
            var edited = try CipherWire(json: seen, path: "$").decrypted(with: organization.keys)
            edited.name = "Guest wifi"
            edited.login?.password = "attempted-change"
            var wire = try edited.encrypted(with: organization.keys)
            wire.lastKnownRevisionDate = try CipherWire(json: seen, path: "$").revisionDate
            let saved = try await api.request(.put, "/api/ciphers/\(id)", token: editorToken, json: wire.jsonValue)
            #expect(saved.status == .ok, "\(saved.message ?? "")")
            #expect(saved.object["login"]?.objectValue?["password"] == .null, "the answer hides it too")
            let stored = try CipherWire(json: try await api.request(.get, "/api/ciphers/\(id)", token: organization.ownerToken).object, path: "$")
                .decrypted(with: organization.keys)
            #expect(stored.name == "Guest wifi")
            #expect(stored.login?.password == "wifi-password")
            #expect(stored.passwordHistory.map(\.password) == ["old-wifi-password"])
            #expect(stored.fields.first { $0.type == .hidden }?.value == "4321")
            // An edit-rights member sees it all.
            let full = try await api.request(.get, "/api/ciphers/\(id)", token: organization.tokens[.userEdit]!).object
            #expect(full["viewPassword"] == .bool(true) && full["login"]?.objectValue?["password"] == .string(sealedPassword))
        }
    }

    @Test("member flows: access changed per collection, a role changed, a member removed (their next sync drops the items), leaving (not the last owner), an invite withdrawn, the organization deleted with the password",
          arguments: Backend.available)
    func memberFlows(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let organization = try await PermissionOrganization.make(api)
            let org = "/api/organizations/\(organization.orgID)"
            let id = try #require(try await organization.makeItem(api)["id"]?.stringValue)
            func sees(_ role: Role) async throws -> Bool {
                let sync = try await api.request(.get, "/api/sync", token: organization.tokens[role]!).object
                return sync["ciphers"]?.arrayValue?.contains { $0.objectValue?["id"] == .string(id) } ?? false
            }
            let readerSees = try await sees(.userReadOnly), unassignedSees = try await sees(.unassigned)
            #expect(readerSees && !unassignedSees)

            // The list of members carries each one's collections.
            let listed = try await api.request(.get, "\(org)/users", token: organization.ownerToken).object["data"]?.arrayValue ?? []
            let reader = try #require(listed.compactMap(\.objectValue).first { $0["id"] == .string(organization.membershipIDs[.userReadOnly]!) })
            #expect(reader["collections"] == .array([.object(["id": .string(organization.collectionID), "readOnly": .bool(true),
                                                               "hidePasswords": .bool(false), "manage": .bool(false)])]))

            // A collection's access: the unassigned member is added, the read-only one taken out.
            var users = (try await api.request(.get, "\(org)/collections/\(organization.collectionID)/users", token: organization.ownerToken)
                .json?.arrayValue ?? []).filter { $0.objectValue?["id"] != .string(organization.membershipIDs[.userReadOnly]!) }
            users.append(.object(["id": .string(organization.membershipIDs[.unassigned]!), "readOnly": .bool(true),
                                  "hidePasswords": .bool(false), "manage": .bool(false)]))
            let set = try await api.request(.put, "\(org)/collections/\(organization.collectionID)/users", token: organization.ownerToken,
                                            json: .array(users))
            #expect(set.status == .ok, "\(set.message ?? "")")
            let nowUnassignedSees = try await sees(.unassigned), nowReaderSees = try await sees(.userReadOnly)
            #expect(nowUnassignedSees && !nowReaderSees)
            #expect(try await api.request(.get, "/api/ciphers/\(id)", token: organization.tokens[.userReadOnly]!).status == .notFound)

            // A role: the unassigned member becomes an admin (owners only make admins; admins cannot).
            let byAdmin = try await api.request(.put, "\(org)/users/\(organization.membershipIDs[.userEdit]!)", token: organization.tokens[.admin]!,
                                                json: .object(["type": .int(1), "collections": .array([])]))
            #expect(byAdmin.status == .badRequest, "\(byAdmin.message ?? "")")
            let promoted = try await api.request(.put, "\(org)/users/\(organization.membershipIDs[.userEdit]!)", token: organization.ownerToken,
                                                 json: .object(["type": .int(1), "collections": .array([])]))
            #expect(promoted.status == .ok, "\(promoted.message ?? "")")
            #expect(try await api.request(.get, "\(org)/users", token: organization.tokens[.userEdit]!).status == .ok, "now an admin")

            // Removal: the member's next sync has neither the item nor the organization; admins cannot remove the owner.
            let ownerMembership = try #require(listed.compactMap(\.objectValue).first { $0["type"] == .int(0) }?["id"]?.stringValue)
            #expect(try await api.request(.delete, "\(org)/users/\(ownerMembership)", token: organization.tokens[.admin]!).status == .badRequest)
            #expect(try await api.request(.delete, "\(org)/users/\(ownerMembership)", token: organization.ownerToken).status == .badRequest,
                    "nobody removes themselves")
            #expect(try await sees(.userHide))
            #expect(try await api.request(.delete, "\(org)/users/\(organization.membershipIDs[.userHide]!)", token: organization.ownerToken).status == .ok)
            let removedSees = try await sees(.userHide)
            #expect(!removedSees)
            let removedSync = try await api.request(.get, "/api/sync", token: organization.tokens[.userHide]!).object
            #expect(removedSync["profile"]?.objectValue?["organizations"] == .array([]))
            #expect(try await api.request(.get, "/api/ciphers/\(id)", token: organization.tokens[.userHide]!).status == .notFound)

            // Leaving: a member leaves; the last owner cannot.
            #expect(try await api.request(.post, "\(org)/leave", token: organization.tokens[.userManage]!).status == .ok)
            let leftSees = try await sees(.userManage)
            #expect(!leftSees)
            let lastOwner = try await api.request(.post, "\(org)/leave", token: organization.ownerToken)
            #expect(lastOwner.status == .badRequest && lastOwner.message?.contains("at least one confirmed owner") == true, "\(lastOwner.message ?? "")")
            #expect(try await api.request(.post, "\(org)/leave", token: organization.tokens[.stranger]!).status == .notFound)

            // An invite withdrawn: it can no longer be accepted.
            let invitee = try await TestUser.register(api)
            let invite = try await api.request(.post, "\(org)/users/invite", token: organization.ownerToken,
                                               json: .object(["emails": .array([.string(invitee.email)]), "type": .int(2)]))
            let inviteID = try #require(invite.object["inviteCodes"]?.arrayValue?.first?.objectValue?["id"]?.stringValue)
            #expect(try await api.request(.delete, "\(org)/users/\(inviteID)", token: organization.ownerToken).status == .ok)
            let pending = try await api.request(.get, "/api/vaultsync/invites", token: try await invitee.token(api)).object["data"]
            #expect(pending == .array([]))

            // Deleting the organization: owners only, with the master password; its items go for everyone.
            #expect(try await api.request(.delete, org, token: organization.tokens[.admin]!, json: .object([
                "masterPasswordHash": .string(organization.users[.admin]!.masterKey.serverAuthorizationHash(password: organization.users[.admin]!.password)),
            ])).status == .badRequest)
            #expect(try await api.request(.delete, org, token: organization.ownerToken,
                                          json: .object(["masterPasswordHash": .string("wrong")])).status == .badRequest)
            #expect(try await sees(.owner))
            let deleted = try await api.request(.delete, org, token: organization.ownerToken, json: .object([
                "masterPasswordHash": .string(organization.owner.masterKey.serverAuthorizationHash(password: organization.owner.password)),
            ]))
            #expect(deleted.status == .ok, "\(deleted.message ?? "")")
            let afterDeletion = [try await sees(.owner), try await sees(.admin), try await sees(.unassigned)]
            #expect(afterDeletion == [false, false, false])
            #expect(try await api.request(.get, "/api/ciphers/\(id)", token: organization.ownerToken).status == .notFound)
        }
    }

    @Test("PasswordHiding: the secrets go and come back by position; a payload that is not JSON is left as it is")
    func passwordHidingUnit() throws {
        let stored = #"{"name":"n","login":{"username":"u","password":"p","fido2Credentials":[{"keyValue":"k","rpId":"r"}]},"passwordHistory":[{"password":"old"}],"fields":[{"type":1,"name":"a","value":"secret-a"},{"type":0,"name":"b","value":"plain"},{"type":1,"name":"c","value":"secret-c"}],"sshKey":{"privateKey":"priv","publicKey":"pub"}}"#
        let hidden = try JSONParser.parseObject(Array(PasswordHiding.hidden(stored).utf8))
        #expect(hidden["login"]?.objectValue?["password"] == .null && hidden["login"]?.objectValue?["username"] == .string("u"))
        #expect(hidden["login"]?.objectValue?["fido2Credentials"]?.arrayValue?.first?.objectValue?["keyValue"] == .null)
        #expect(hidden["passwordHistory"] == .null && hidden["sshKey"]?.objectValue?["privateKey"] == .null)
        #expect(hidden["fields"]?.arrayValue?.map { $0.objectValue?["value"] ?? .null } == [.null, .string("plain"), .null])
        // The member's edit: a new hidden field with a value, the others left empty; a password they typed is ignored.
        let edit = #"{"name":"n2","login":{"username":"u","password":"typed","fido2Credentials":[{"keyValue":null,"rpId":"r"}]},"fields":[{"type":1,"name":"a","value":null},{"type":1,"name":"new","value":"mine"},{"type":1,"name":"c","value":null}],"sshKey":{"privateKey":null,"publicKey":"pub"}}"#
        let kept = try JSONParser.parseObject(Array(PasswordHiding.keepingHidden(edit, stored: stored).utf8))
        #expect(kept["name"] == .string("n2"))
        #expect(kept["login"]?.objectValue?["password"] == .string("p"))
        #expect(kept["login"]?.objectValue?["fido2Credentials"]?.arrayValue?.first?.objectValue?["keyValue"] == .string("k"))
        #expect(kept["passwordHistory"]?.arrayValue?.count == 1 && kept["sshKey"]?.objectValue?["privateKey"] == .string("priv"))
        #expect(kept["fields"]?.arrayValue?.map { $0.objectValue?["value"] ?? .null } == [.string("secret-a"), .string("mine"), .string("secret-c")])
        #expect(PasswordHiding.hidden("not json") == "not json")
    }
}
