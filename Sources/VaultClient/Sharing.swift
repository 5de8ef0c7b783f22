import Foundation
import VaultAPI
import VaultCrypto
import VaultModels
import VaultStore

/// Sharing items through organizations (docs/CLI.md, "Sharing"). Every call here is online only and
/// nothing of it is queued: a share or an access change that waited on a device would land later over
/// whatever the organization decided meanwhile, and the organization's key is the server-side truth
/// of who may read what. Offline, each refuses at once with ``VaultError/organizationItemOffline``.
extension VaultEngine {
    /// Moves a personal item into an organization, into `collectionIDs` (at least one), in one request as
    /// the official clients do. The item keeps its own key, now wrapped with the organization's key, so
    /// its fields and its attachments' keys stay as they are; an older item without a key of its own gets
    /// one, with every field and each attachment's name and key encrypted again under it. The
    /// organization must be trusted on this device. The vault is downloaded again afterwards.
    public func share(itemID: String, organizationID: String, collectionIDs: [String]) async throws {
        let current = try requireSession()
        let organization = organizationID.lowercased()
        let collections = collectionIDs.map { $0.lowercased() }
        guard !collections.isEmpty else { throw VaultError.sharingRefused("an item is shared into at least one collection") }
        try requireTrustedOrganization(organization, keys: current.keys, userID: current.userID)
        guard let organizationKey = current.keys.organizationKeys[organization] else { throw VaultError.organizationUnavailable(organization) }
        let wire = try await sendableItem(itemID, userID: current.userID)
        guard wire.organizationId == nil else {
            throw VaultError.sharingRefused("the item is in an organization already; `vaultsync edit ITEM --collection C` changes its collections")
        }
        let id = wire.id ?? itemID.lowercased()
        var shared: CipherWire
        if let itemKey = wire.key {
            shared = wire
            let key = try cryptoCall { try itemKey.decryptKey(key: current.keys.userKey) }
            shared.key = try cryptoCall { try EncString.wrap(key, with: organizationKey, random: random) }
        } else {
            shared = try reencryptedWithNewKey(wire, organization: organization, keys: current.keys)
        }
        shared.organizationId = organization
        shared.collectionIds = collections
        _ = try await sharingCall(.share) { [shared] api, token in
            try await api.shareCipher(shared, id: id, collectionIDs: collections, lastKnownRevisionDate: wire.revisionDate, token: token)
        }
        _ = try await pull()
    }

    /// Replaces the collections of an organization item (online only; at least one). The vault is
    /// downloaded again afterwards.
    public func setCollections(itemID: String, collectionIDs: [String]) async throws {
        let current = try requireSession()
        let collections = collectionIDs.map { $0.lowercased() }
        guard !collections.isEmpty else {
            throw VaultError.sharingRefused("an organization item stays in at least one collection (delete it to remove it)")
        }
        let wire = try await sendableItem(itemID, userID: current.userID)
        guard wire.organizationId != nil else {
            throw VaultError.sharingRefused("the item is personal: `vaultsync share ITEM ORG --collection C` moves it into an organization")
        }
        let id = wire.id ?? itemID.lowercased()
        _ = try await sharingCall(.item) { api, token in try await api.setCipherCollections(id: id, collectionIDs: collections, token: token) }
        _ = try await pull()
    }

    /// Gives a member `access` to a collection, or takes it away (`nil`). Owners, admins and the
    /// collection's managers only; the member's other collections stay as they are. The member's devices
    /// hear of it at once over live sync.
    public func setCollectionAccess(organizationID: String, collectionID: String, memberID: String, access: CollectionAccess?) async throws {
        let organization = organizationID.lowercased(), collection = collectionID.lowercased(), member = memberID.lowercased()
        try await sharingCall { api, token in
            var users = try await api.collectionUsers(organizationID: organization, collectionID: collection, token: token)
                .filter { $0.collectionID != member }
            if let access { users.append(CollectionGrant(collectionID: member, access: access)) }
            try await api.setCollectionUsers(organizationID: organization, collectionID: collection, users: users, token: token)
        }
        _ = try await pull()
    }

    /// Invites `email` as a member of `type` (2 user, 3 manager, 1 admin) with `collections`; `nil`
    /// gives every collection of the organization with `access` (edit, read-only…). See
    /// ``inviteToOrganization(id:email:type:readOnly:)`` for the one-time code.
    public func inviteToOrganization(id organizationID: String, email: String, type: Int, collections: [CollectionGrant]?,
                                     access: CollectionAccess = .edit) async throws -> IssuedInvitation {
        let id = organizationID.lowercased()
        let grants: [CollectionGrant]
        if let collections {
            grants = collections.map { CollectionGrant(collectionID: $0.collectionID.lowercased(), access: $0.access) }
        } else {
            grants = try await sharingCall { api, token in try await api.organizationCollectionIDs(organizationID: id, token: token) }
                .map { CollectionGrant(collectionID: $0, access: access) }
        }
        return try await sharingCall { api, token in
            try await api.invite(email: email, organizationID: id, type: type, collections: grants, token: token)
        }
    }

    /// Sets a member's role (0 owner, 1 admin, 2 user, 3 manager), keeping their collections unless
    /// `collections` is given. Owners and admins only; only an owner makes owners and admins.
    public func updateMember(organizationID: String, member: OrganizationMember, type: Int, collections: [CollectionGrant]? = nil) async throws {
        let organization = organizationID.lowercased()
        try await sharingCall { api, token in
            try await api.updateMember(organizationID: organization, memberID: member.id, type: type,
                                       collections: collections ?? member.collections, token: token)
        }
    }

    /// Removes a member, or withdraws an invitation. The organization is not re-keyed: what the member
    /// could read before, they may have kept (docs/SECURITY.md, "Removing a member").
    public func removeMember(organizationID: String, memberID: String) async throws {
        let organization = organizationID.lowercased(), member = memberID.lowercased()
        try await sharingCall { api, token in try await api.removeMember(organizationID: organization, memberID: member, token: token) }
    }

    /// Leaves an organization: its items and key leave this device with the next download, done here.
    public func leaveOrganization(id organizationID: String) async throws {
        let organization = organizationID.lowercased()
        try await sharingCall(.share) { api, token in try await api.leaveOrganization(organizationID: organization, token: token) }
        _ = try await pull()
    }

    /// Deletes an organization this account owns, with its items, attachments and collections, for every
    /// member (online only; the master password proves it again). The vault is downloaded again afterwards.
    public func deleteOrganization(id organizationID: String, password: String) async throws {
        let organization = organizationID.lowercased()
        let hash = try await verifiedPasswordHash(password)
        try await sharingCall { api, token in try await api.deleteOrganization(organizationID: organization, passwordHash: hash, token: token) }
        _ = try await pull()
    }

    /// Who is assigned to a collection, by member id (owners, admins and the collection's managers).
    public func collectionMembers(organizationID: String, collectionID: String) async throws -> [CollectionGrant] {
        let organization = organizationID.lowercased(), collection = collectionID.lowercased()
        return try await sharingCall { api, token in
            try await api.collectionUsers(organizationID: organization, collectionID: collection, token: token)
        }
    }

    // MARK: Parts

    /// What a sharing call is, for what its failures mean.
    enum SharingCallKind: Sendable {
        /// A change of an organization's item (its collections): offline, the organization items' refusal.
        case item
        /// A personal item shared: offline, sharing's refusal.
        case share
        /// The organization's administration (members, collections, access): offline, sharing's refusal; a
        /// 404 is the server saying this account may not.
        case administration
    }

    /// A server call of sharing: online only, never queued.
    func sharingCall<T: Sendable>(_ kind: SharingCallKind = .administration, _ call: @Sendable (BitwardenAPI, String) async throws -> T) async throws -> T {
        do {
            return try await accountCall(call)
        } catch VaultError.serverUnreachable {
            throw kind == .item ? VaultError.organizationItemOffline : VaultError.sharingOffline
        } catch VaultError.serverRefused(404, _) where kind == .administration {
            throw VaultError.notOrganizationManager
        }
    }

    /// The stored item, which the server must already hold as it is here: an item with a change still
    /// waiting to be sent (or never sent yet) is refused until a sync has sent it.
    func sendableItem(_ itemID: String, userID: String) async throws -> CipherWire {
        let id = try currentID(of: itemID.lowercased())
        let (row, waiting) = try await read { tx in
            (try tx.ciphers(of: userID).find(id: id), try tx.queue(of: userID).items().contains(QueuedItem(kind: .cipher, itemID: id)))
        }
        guard let row else { throw VaultError.itemNotFound(itemID) }
        guard !waiting else { throw VaultError.itemWaitsForSync(itemID) }
        return try modelCall { try row.wire() }
    }

    /// `wire` (a personal item without a key of its own) encrypted again under a new item key wrapped by
    /// the organization's key, its attachments' names and keys too.
    func reencryptedWithNewKey(_ wire: CipherWire, organization: String, keys: VaultKeys) throws -> CipherWire {
        var view = try modelCall { try wire.decrypted(with: keys) }
        view.organizationId = organization
        view.itemKey = try modelCall { try keys.wrapNewItemKey(organizationId: organization, random: random) }
        let itemKey = try modelCall { try keys.fieldKey(itemKey: view.itemKey, organizationId: organization, itemID: wire.id) }
        var shared = try encrypt(view, keys: keys, fieldKey: itemKey)
        shared.id = wire.id
        shared.revisionDate = wire.revisionDate
        shared.attachments = try (wire.attachments ?? []).map { attachment in
            var moved = attachment
            guard let key = attachment.key else {
                // A file encrypted with the account's key itself: only uploading it again could share it.
                throw VaultError.invalidItem("the attachment \(attachment.id ?? "") has no key of its own (an older client's): "
                    + "download it, delete it and attach it again, then share the item")
            }
            let fileKey = try cryptoCall { try key.decryptKey(key: keys.userKey) }
            moved.key = try cryptoCall { try EncString.wrap(fileKey, with: itemKey, random: random) }
            if let name = attachment.fileName {
                let plain = try cryptoCall { try name.decrypt(key: keys.userKey) }
                moved.fileName = try cryptoCall { try EncString.encrypt(plain, key: itemKey, random: random) }
            }
            return moved
        }
        return shared
    }
}
