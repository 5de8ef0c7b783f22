import Foundation
import VaultAPI
import VaultCrypto
import VaultModels
import VaultStore

/// An organization the account is a member of, as this device sees it.
public struct OrganizationSummary: Sendable, Equatable {
    public var id: String
    /// The name the server gives (plaintext, not authenticated).
    public var name: String
    /// The membership status (2: confirmed; only confirmed memberships carry a key).
    public var status: Int
    /// Whether this device holds the organization's key (a confirmed membership whose key unwrapped).
    public var keyAvailable: Bool
    /// Whether the user trusted it on this device with the key it has now: only then do the user's
    /// edits and new items get encrypted with its key.
    public var trusted: Bool
    /// Trusted once, but the server now hands out another key for it.
    public var keyChanged: Bool
}

/// A collection of one of the account's organizations, as the last sync gave it.
public struct CollectionSummary: Sendable, Equatable {
    public var id: String
    public var organizationID: String
    /// Decrypted with the organization's key; `nil` when this device holds no key for it or the name does not open.
    public var name: String?
    public var externalID: String?
}

extension VaultEngine {
    /// The collections of the account's organizations from the last sync (readable offline), names
    /// decrypted where the organization's key is held, sorted by name.
    public func collections() async throws -> [CollectionSummary] {
        let current = try requireSession()
        let userID = current.userID
        let rows = try await read { tx in try tx.organizations(of: userID).collections() }
        return rows.compactMap { row -> CollectionSummary? in
            guard let object = try? JSONParser.parseObject(Array(row.json.utf8)) else { return nil }
            let organizationID = (object["organizationId"]?.stringValue ?? "").lowercased()
            let name = object["name"]?.stringValue.flatMap { text -> String? in
                guard let key = current.keys.organizationKeys[organizationID], let sealed = try? EncString(text),
                      let plain = try? sealed.decrypt(key: key) else { return nil }
                return String(decoding: plain, as: UTF8.self)
            }
            return CollectionSummary(id: row.id, organizationID: organizationID, name: name, externalID: object["externalId"]?.stringValue)
        }.sorted { ($0.name ?? "", $0.id) < ($1.name ?? "", $1.id) }
    }

    /// The account's organization memberships from the last sync, with their trust on this device.
    public func organizations() async throws -> [OrganizationSummary] {
        let current = try requireSession()
        let userID = current.userID
        let (rows, trusted) = try await read { tx in
            let organizations = tx.organizations(of: userID)
            return (try organizations.all(), try organizations.trusted())
        }
        return rows.map { row in
            let object = Self.organizationObject(row)
            let key = current.keys.organizationKeys[row.id]
            let pinned = trusted[row.id].flatMap { Self.openPinnedKey($0, userKey: current.keys.userKey) }
            return OrganizationSummary(
                id: row.id, name: Self.organizationName(object), status: object?["status"]?.intValue ?? -1,
                keyAvailable: key != nil, trusted: key != nil && pinned != nil && pinned == key,
                keyChanged: key != nil && trusted[row.id] != nil && pinned != key)
        }.sorted { ($0.name, $0.id) < ($1.name, $1.id) }
    }

    /// Trusts an organization on this device, with the key the server hands out for it now
    /// (docs/SECURITY.md, "Injected organizations"). The user's command is the only way an
    /// organization key comes to encrypt their data: a membership the server announces is readable,
    /// never written to, until then.
    public func trustOrganization(id: String) async throws {
        let current = try requireSession()
        let organizationID = id.lowercased()
        guard let key = current.keys.organizationKeys[organizationID] else {
            throw VaultError.organizationUnavailable(organizationID)
        }
        let row = TrustedOrganizationRow(userID: current.userID, organizationID: organizationID,
                                         sealedKey: try cryptoCall { try EncString.encrypt(key.base64, key: current.keys.userKey).serialized },
                                         trustedAt: clock.now().microsecondsSinceEpoch)
        try await write { [userID = current.userID] tx in try tx.organizations(of: userID).trust(row) }
    }

    /// Invites `email` to an organization this account owns or administers (online only), as a member of
    /// `type` (2 user, 1 admin, 3 manager) with access to every collection of the organization, read-only
    /// when `readOnly`. Returns the invite with its one-time code: the owner hands it to the invitee over
    /// another channel, and the invitee accepts with it (``acceptInvitation(_:code:)``). Inviting an email
    /// again makes a new code and the old one stops working (docs/SECURITY.md, "Invitations are bound to a
    /// one-time code").
    public func inviteToOrganization(id organizationID: String, email: String, type: Int, readOnly: Bool) async throws -> IssuedInvitation {
        try await inviteToOrganization(id: organizationID, email: email, type: type, collections: nil, access: readOnly ? .readOnly : .edit)
    }

    /// The invites to this account that it can still accept (online only).
    public func pendingInvitations() async throws -> [PendingInvitation] {
        try await accountCall { api, token in try await api.pendingInvitations(token: token) }
            .sorted { ($0.organizationName, $0.organizationID) < ($1.organizationName, $1.organizationID) }
    }

    /// Accepts an invite with the one-time code the organization's owner handed over (online only). The
    /// membership is then Accepted: the owner still confirms it before its items reach this account.
    /// A refusal of the code is ``VaultError/invitationRefused(organization:message:)``.
    public func acceptInvitation(_ invitation: PendingInvitation, code: String) async throws {
        do {
            try await accountCall { api, token in
                try await api.acceptInvitation(id: invitation.id, organizationID: invitation.organizationID, code: code, token: token)
            }
        } catch VaultError.serverRefused(let status, let message) where status == 400 {
            throw VaultError.invitationRefused(organization: "\"\(invitation.organizationName)\" (\(invitation.organizationID))", message: message)
        }
    }

    /// Refuses to encrypt for an organization the user has not trusted here, or whose key is no longer
    /// the one they trusted. Called wherever an item is encrypted (``encrypt(_:keys:)``).
    func requireTrustedOrganization(_ organizationID: String, keys: VaultKeys, userID: String) throws {
        let id = organizationID.lowercased()
        let (row, name) = try readNow { tx in
            let organizations = tx.organizations(of: userID)
            return (try organizations.trusted(id: id), try organizations.find(id: id).map { Self.organizationName(Self.organizationObject($0)) })
        }
        let label = name.map { "\"\($0)\" (\(id))" } ?? id
        guard let row else { throw VaultError.organizationNotTrusted(label) }
        guard let key = keys.organizationKeys[id], Self.openPinnedKey(row, userKey: keys.userKey) == key else {
            throw VaultError.organizationKeyChanged(label)
        }
    }

    /// What a sync should tell about memberships: new ones (not trusted), and trusted ones whose key
    /// changed. `organizations` are the snapshot's entries; `known` the ids stored before this sync.
    func membershipNotices(organizations: [JSONObject], known: Set<String>, keys: VaultKeys, userID: String) async throws -> [String] {
        let trusted = try await read { tx in try tx.organizations(of: userID).trusted() }
        var notices: [String] = []
        for object in organizations {
            guard let id = object["id"]?.stringValue?.lowercased() else { continue }
            let name = Self.organizationName(object)
            if let pinned = trusted[id] {
                if let key = keys.organizationKeys[id], Self.openPinnedKey(pinned, userKey: keys.userKey) != key {
                    notices.append("The server now hands out another key for the organization \"\(name)\" (\(id)) than the one you trusted: nothing of yours is encrypted for it until you trust it again (only if you know why it changed).")
                }
            } else if !known.contains(id) {
                notices.append("New organization membership: \"\(name)\" (\(id)). Its shared items can be read; nothing of yours is encrypted for it until you trust it on this device.")
            }
        }
        return notices
    }

    /// The (plaintext, unauthenticated) name of a stored or synced organization entry.
    static func organizationName(_ object: JSONObject?) -> String {
        object?["name"]?.stringValue ?? "(no name)"
    }

    static func organizationObject(_ row: OrganizationRow) -> JSONObject? {
        try? JSONParser.parseObject(Array(row.json.utf8))
    }

    static func openPinnedKey(_ row: TrustedOrganizationRow, userKey: SymmetricCryptoKey) -> SymmetricCryptoKey? {
        guard let text = try? EncString(row.sealedKey).decryptString(key: userKey) else { return nil }
        return try? SymmetricCryptoKey(base64: text)
    }
}

extension VaultEngine {
    /// This account's fingerprint phrase (``AccountFingerprint``: its public key and user id), the one another
    /// member compares before confirming it in an organization. Read from this device's copy of the key pair.
    public func fingerprintPhrase() async throws -> String {
        let current = try requireSession()
        let (_, privateKey) = try await ownKeyPair(current)
        return AccountFingerprint.phrase(material: current.userID, publicKeySPKI: privateKey.publicKey.spkiDER)
    }

    /// Another account's fingerprint phrase (online only): the phrase of the public key the server gives for
    /// `userID`, which that person compares with their own (`bw get fingerprint USER_ID`).
    public func fingerprintPhrase(ofUser userID: String) async throws -> String {
        try await publicKey(ofUser: userID, naming: userID).phrase
    }

    /// The public key the server gives for another account (online only), and its fingerprint phrase.
    func publicKey(ofUser userID: String, naming label: String) async throws -> (key: RSAPublicKey, phrase: String) {
        let id = userID.lowercased()
        let encoded = try await accountCall { api, token in try await api.userPublicKey(userID: id, token: token) }
        guard let publicKey = try? RSAPublicKey(spkiBase64: encoded) else {
            throw VaultError.serverAnswerInvalid("the public key the server gave for \(label) is not an RSA public key")
        }
        return (publicKey, AccountFingerprint.phrase(material: id, publicKeySPKI: publicKey.spkiDER))
    }

    /// Adds a collection to an organization this account owns or administers (online only), its name
    /// encrypted with the organization's key, which must be trusted on this device. The vault is then
    /// downloaded again so that ``collections()`` lists it. Returns its id.
    public func addCollection(organizationID: String, name: String) async throws -> String {
        try await saveCollection(organizationID: organizationID, id: nil, name: name)
    }

    /// Renames a collection (online only; who has access stays as it is).
    public func renameCollection(organizationID: String, id: String, name: String) async throws {
        _ = try await saveCollection(organizationID: organizationID, id: id.lowercased(), name: name)
    }

    /// Deletes a collection (online only). Its items stay in the organization, in their other collections.
    public func deleteCollection(organizationID: String, id: String) async throws {
        let organization = organizationID.lowercased(), collection = id.lowercased()
        try await sharingCall { api, token in try await api.deleteCollection(organizationID: organization, id: collection, token: token) }
        _ = try await pull()
    }

    private func saveCollection(organizationID: String, id: String?, name: String) async throws -> String {
        let trimmed = name.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else { throw VaultError.invalidOrganization("a collection's name is empty") }
        let current = try requireSession()
        let organization = organizationID.lowercased()
        try requireTrustedOrganization(organization, keys: current.keys, userID: current.userID)
        guard let key = current.keys.organizationKeys[organization] else { throw VaultError.organizationUnavailable(organization) }
        let sealed = try cryptoCall { try EncString.encrypt(trimmed, key: key).serialized }
        let saved = try await sharingCall { api, token in
            try await api.saveCollection(organizationID: organization, id: id, name: sealed, token: token)
        }
        _ = try await pull()
        return saved
    }

    /// This account's email and private key, from this device's copy.    /// This account's email and private key, from this device's copy.
    func ownKeyPair(_ current: UnlockedSession) async throws -> (email: String, privateKey: RSAPrivateKey) {
        guard let account = try await read({ tx in try tx.accounts.find(userID: current.userID) }),
              let encrypted = account.encryptedPrivateKey, let sealed = try? EncString(encrypted),
              let privateKey = try? RSAPrivateKey.decrypt(sealed, userKey: current.keys.userKey) else {
            throw VaultError.keyPairUnavailable
        }
        return (account.email, privateKey)
    }

    /// Creates an organization this account owns (online only), as the official clients do: a new
    /// organization key made here and wrapped with this account's public key, and a first collection,
    /// `collectionName`, encrypted with it. The vault is then downloaded again, and the organization is
    /// trusted on this device only if the server hands back the key made here (a server that swaps in a
    /// key of its own is refused, and the organization stays untrusted). Returns its id.
    public func createOrganization(name: String, collectionName: String) async throws -> String {
        let trimmed = name.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else { throw VaultError.invalidOrganization("the name is empty") }
        guard trimmed.count <= 50 else { throw VaultError.invalidOrganization("the name is longer than 50 characters, the most servers accept") }
        let collection = collectionName.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !collection.isEmpty else { throw VaultError.invalidOrganization("the first collection's name is empty") }
        let current = try requireSession()
        let (email, privateKey) = try await ownKeyPair(current)
        let organizationKey = SymmetricCryptoKey.generate()
        let wrapped = try cryptoCall { try privateKey.publicKey.wrap(organizationKey).serialized }
        let sealedName = try cryptoCall { try EncString.encrypt(collection, key: organizationKey).serialized }
        let id = try await accountCall { api, token in
            try await api.createOrganization(name: trimmed, billingEmail: email, key: wrapped, collectionName: sealedName, token: token)
        }
        _ = try await pull()
        guard try requireSession().keys.organizationKeys[id] == organizationKey else {
            throw VaultError.serverAnswerInvalid("the server answered the new organization \(id) with a key this device did not make")
        }
        try await trustOrganization(id: id)
        return id
    }

    /// The members and invitees of an organization this account owns or administers (online only).
    public func organizationMembers(id organizationID: String) async throws -> [OrganizationMember] {
        let id = organizationID.lowercased()
        return try await sharingCall { api, token in try await api.organizationMembers(organizationID: id, token: token) }
            .sorted { ($0.email, $0.id) < ($1.email, $1.id) }
    }

    /// Fetches an accepted member's public key and computes its fingerprint phrase (online only), for the
    /// owner to compare with the phrase the member reads out (`vaultsync fingerprint`) before
    /// ``confirm(_:)``: the confirmation wraps the organization's key with exactly this key.
    public func prepareConfirmation(organizationID: String, member: OrganizationMember) async throws -> MemberConfirmation {
        if member.status == 2 { throw VaultError.sharingRefused("\(member.email) is a confirmed member already") }
        guard member.status == 1, let userID = member.userID else { throw VaultError.memberNotAccepted(member.email) }
        let id = organizationID.lowercased()
        // Checked before the phrase is shown, so that nobody compares words for a confirmation that cannot happen.
        let current = try requireSession()
        try requireTrustedOrganization(id, keys: current.keys, userID: current.userID)
        let (publicKey, phrase) = try await publicKey(ofUser: userID, naming: member.email)
        return MemberConfirmation(organizationID: id, member: member, publicKey: publicKey, phrase: phrase)
    }

    /// Confirms the member of `confirmation`, giving them the organization's key wrapped with the public key
    /// whose phrase was checked. The organization must be trusted on this device: its key is what is handed on.
    public func confirm(_ confirmation: MemberConfirmation) async throws {
        let current = try requireSession()
        try requireTrustedOrganization(confirmation.organizationID, keys: current.keys, userID: current.userID)
        guard let organizationKey = current.keys.organizationKeys[confirmation.organizationID] else {
            throw VaultError.organizationUnavailable(confirmation.organizationID)
        }
        let wrapped = try cryptoCall { try confirmation.publicKey.wrap(organizationKey).serialized }
        try await accountCall { api, token in
            try await api.confirmMember(organizationID: confirmation.organizationID, memberID: confirmation.member.id, key: wrapped, token: token)
        }
    }
}

/// An accepted member about to be confirmed: their public key as the server gave it, and its phrase.
public struct MemberConfirmation: Sendable {
    public let organizationID: String
    public let member: OrganizationMember
    public let publicKey: RSAPublicKey
    /// Bitwarden's five-word fingerprint phrase of the member's account id and public key.
    public let phrase: String

    /// Whether `given` (as a person types it: any case, spaces or dashes between the words) is this phrase.
    public func matches(_ given: String) -> Bool {
        Self.words(given) == Self.words(phrase)
    }

    static func words(_ text: String) -> [String] {
        text.lowercased().split(whereSeparator: { $0 == "-" || $0 == " " || $0 == "," }).map(String.init)
    }
}
