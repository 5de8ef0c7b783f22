import VaultCrypto

extension CipherWire {
    /// Decrypts the item with the user or organization key (and its item key, if it has one).
    ///
    /// - Throws: ``ModelError/decryptionFailed(itemID:field:reason:)`` naming the item and the field
    ///   that failed, ``ModelError/missingOrganizationKey(organizationID:)``. Only this item is affected;
    ///   use ``VaultDecryption/decryptAll(_:keys:)`` to decrypt a vault item by item.
    public func decrypted(with keys: VaultKeys) throws -> CipherView {
        let key = try keys.fieldKey(itemKey: self.key, organizationId: organizationId, itemID: id)
        let itemID = id
        func text(_ value: EncString, _ field: String) throws -> String {
            try decryptField(value, key: key, itemID: itemID, field: field)
        }
        func optional(_ value: EncString?, _ field: String) throws -> String? {
            try decryptOptional(value, key: key, itemID: itemID, field: field)
        }

        var view = CipherView(type: type, name: try text(name, "name"))
        view.login = nil
        view.card = nil
        view.identity = nil
        view.secureNote = nil
        view.sshKey = nil
        view.id = id
        view.organizationId = organizationId
        view.folderId = folderId
        view.notes = try optional(notes, "notes")
        view.favorite = favorite ?? false
        view.reprompt = reprompt ?? .none
        view.itemKey = self.key
        if let login {
            var plain = LoginView()
            plain.username = try optional(login.username, "login.username")
            plain.password = try optional(login.password, "login.password")
            plain.totp = try optional(login.totp, "login.totp")
            plain.passwordRevisionDate = login.passwordRevisionDate
            plain.autofillOnPageLoad = login.autofillOnPageLoad
            plain.unknown = login.unknown
            for (index, entry) in (login.uris ?? []).enumerated() {
                let uri = try optional(entry.uri, "login.uris[\(index)].uri")
                // spec §1.10: a URI whose checksum does not verify was swapped; clients drop it.
                if let checksum = entry.uriChecksum, let uri {
                    let expected = try text(checksum, "login.uris[\(index)].uriChecksum")
                    guard expected == URIChecksum.plaintext(for: uri) else { continue }
                }
                plain.uris.append(LoginURIView(uri: uri, match: entry.match, unknown: entry.unknown))
            }
            plain.fido2Credentials = try login.fido2Credentials?.enumerated().map { index, credential in
                Fido2CredentialView(
                    fields: try credential.fields.decrypted(key: key, itemID: itemID, path: "login.fido2Credentials[\(index)]"),
                    creationDate: credential.creationDate)
            }
            view.login = plain
        }
        view.card = try card?.decrypted(key: key, itemID: itemID, path: "card")
        view.identity = try identity?.decrypted(key: key, itemID: itemID, path: "identity")
        view.sshKey = try sshKey?.decrypted(key: key, itemID: itemID, path: "sshKey")
        view.secureNote = secureNote
        view.fields = try (fields ?? []).enumerated().map { index, field in
            FieldView(type: field.type,
                      name: try optional(field.name, "fields[\(index)].name"),
                      value: try optional(field.value, "fields[\(index)].value"),
                      linkedId: field.linkedId, unknown: field.unknown)
        }
        view.passwordHistory = try (passwordHistory ?? []).enumerated().map { index, entry in
            PasswordHistoryView(password: try text(entry.password, "passwordHistory[\(index)].password"),
                                lastUsedDate: entry.lastUsedDate, unknown: entry.unknown)
        }
        view.attachments = try (attachments ?? []).enumerated().map { index, attachment in
            var plain = AttachmentView(id: attachment.id,
                                       fileName: try optional(attachment.fileName, "attachments[\(index)].fileName"),
                                       key: attachment.key, size: attachment.size)
            plain.url = attachment.url
            plain.sizeName = attachment.sizeName
            plain.object = attachment.object
            plain.unknown = attachment.unknown
            return plain
        }
        view.collectionIds = collectionIds
        view.creationDate = creationDate
        view.revisionDate = revisionDate
        view.deletedDate = deletedDate
        view.archivedDate = archivedDate
        view.edit = edit
        view.viewPassword = viewPassword
        view.organizationUseTotp = organizationUseTotp
        view.permissions = permissions
        view.object = object
        view.unknown = unknown
        return view
    }
}

extension CipherView {
    /// Encrypts the item for the wire with its item key (or the owner key for items without one).
    ///
    /// Every user-visible string becomes a fresh type 2 EncString; URI checksums are computed; the data
    /// object matching ``type`` is always written (empty if the view has none) and ``unknown`` keys are
    /// carried over at every level.
    ///
    /// `fieldKey`: the key ``itemKey`` opens to, when the caller opened it already (``CipherWire/fieldKey(with:)``
    /// of the stored version whose item key and owner this view carries).
    public func encrypted(with keys: VaultKeys, fieldKey: SymmetricCryptoKey? = nil,
                          random: any RandomSource = SystemRandomSource()) throws -> CipherWire {
        let key = try fieldKey ?? keys.fieldKey(itemKey: itemKey, organizationId: organizationId, itemID: id)
        func text(_ value: String, _ field: String) throws -> EncString {
            try encryptField(value, key: key, random: random, field: field)
        }
        func optional(_ value: String?, _ field: String) throws -> EncString? {
            try encryptOptional(value, key: key, random: random, field: field)
        }

        var wire = CipherWire(type: type, name: try text(name, "name"))
        wire.object = object
        wire.id = id
        wire.organizationId = organizationId
        wire.folderId = folderId
        wire.notes = try optional(notes, "notes")
        wire.favorite = favorite
        wire.reprompt = reprompt
        wire.key = itemKey

        let login = self.login ?? (type == .login ? LoginView() : nil)
        if let login {
            var encrypted = LoginWire()
            encrypted.username = try optional(login.username, "login.username")
            encrypted.password = try optional(login.password, "login.password")
            encrypted.totp = try optional(login.totp, "login.totp")
            encrypted.passwordRevisionDate = login.passwordRevisionDate
            encrypted.autofillOnPageLoad = login.autofillOnPageLoad
            encrypted.unknown = login.unknown
            encrypted.uris = try login.uris.enumerated().map { index, entry in
                LoginURIWire(
                    uri: try optional(entry.uri, "login.uris[\(index)].uri"),
                    uriChecksum: try entry.uri.map { try text(URIChecksum.plaintext(for: $0), "login.uris[\(index)].uriChecksum") },
                    match: entry.match, unknown: entry.unknown)
            }
            encrypted.fido2Credentials = try login.fido2Credentials?.enumerated().map { index, credential in
                Fido2CredentialWire(
                    fields: try credential.fields.encrypted(key: key, random: random, path: "login.fido2Credentials[\(index)]"),
                    creationDate: credential.creationDate)
            }
            wire.login = encrypted
        }
        wire.card = try (card ?? (type == .card ? CardView() : nil))?.encrypted(key: key, random: random, path: "card")
        wire.identity = try (identity ?? (type == .identity ? IdentityView() : nil))?.encrypted(key: key, random: random, path: "identity")
        wire.sshKey = try (sshKey ?? (type == .sshKey ? SSHKeyView() : nil))?.encrypted(key: key, random: random, path: "sshKey")
        wire.secureNote = secureNote ?? (type == .secureNote ? SecureNoteWire() : nil)
        wire.fields = fields.isEmpty ? nil : try fields.enumerated().map { index, field in
            FieldWire(type: field.type,
                      name: try optional(field.name, "fields[\(index)].name"),
                      value: try optional(field.value, "fields[\(index)].value"),
                      linkedId: field.linkedId, unknown: field.unknown)
        }
        wire.passwordHistory = passwordHistory.isEmpty ? nil : try passwordHistory.enumerated().map { index, entry in
            PasswordHistoryWire(password: try text(entry.password, "passwordHistory[\(index)].password"),
                                lastUsedDate: entry.lastUsedDate, unknown: entry.unknown)
        }
        wire.attachments = attachments.isEmpty ? nil : try attachments.enumerated().map { index, attachment in
            var encrypted = AttachmentWire(id: attachment.id,
                                           fileName: try optional(attachment.fileName, "attachments[\(index)].fileName"),
                                           key: attachment.key, size: attachment.size)
            encrypted.url = attachment.url
            encrypted.sizeName = attachment.sizeName
            encrypted.object = attachment.object
            encrypted.unknown = attachment.unknown
            return encrypted
        }
        wire.collectionIds = collectionIds
        wire.creationDate = creationDate
        wire.revisionDate = revisionDate
        wire.deletedDate = deletedDate
        wire.archivedDate = archivedDate
        wire.edit = edit
        wire.viewPassword = viewPassword
        wire.organizationUseTotp = organizationUseTotp
        wire.permissions = permissions
        wire.unknown = unknown
        return wire
    }
}

extension CipherWire {
    /// Decrypts the item's name only (a search by name need not decrypt every field).
    public func decryptedName(with keys: VaultKeys) throws -> String {
        let key = try keys.fieldKey(itemKey: self.key, organizationId: organizationId, itemID: id)
        return try decryptField(name, key: key, itemID: id, field: "name")
    }

    /// Decrypts the name of the item stored as `jsonBytes` without reading the item into a
    /// ``CipherWire``: only the four top-level fields a name needs (id, organization, item key, name)
    /// are read and checked, the rest of the text is only parsed. Finding an item by name reads every
    /// item of the vault this way (`vaultsync get NAME`), where building and validating each whole
    /// item cost most of the time.
    public static func decryptedName<Bytes: Collection>(jsonBytes: Bytes, keys: VaultKeys) throws -> String where Bytes.Element == UInt8 {
        var reader = JSONReader(try JSONParser.parseObject(jsonBytes), path: "cipher")
        let id = try reader.id("id")
        let key = try keys.fieldKey(itemKey: try reader.encString("key"), organizationId: try reader.id("organizationId"), itemID: id)
        return try decryptField(try reader.requiredEncString("name"), key: key, itemID: id, field: "name")
    }
}

/// What a list shows of an item: its state, in the clear on the wire, and its name and username, the
/// two fields decrypted. The other fields stay encrypted until the item itself is opened.
public struct ItemSummary: Sendable, Equatable {
    public var id: String?
    public var type: CipherType
    public var name: String
    public var username: String?
    public var folderId: String?
    public var organizationId: String?
    public var favorite: Bool
    public var isDeleted: Bool
    public var isArchived: Bool
}

extension CipherView {
    /// What a list shows of this item.
    public var summary: ItemSummary {
        ItemSummary(id: id, type: type, name: name, username: login?.username, folderId: folderId, organizationId: organizationId,
                    favorite: favorite, isDeleted: isDeleted, isArchived: isArchived)
    }
}

extension CipherWire {
    /// The key this item's fields are encrypted with: its item key opened with its owner's key (the user's or
    /// its organization's), or that owner key for an item without one.
    public func fieldKey(with keys: VaultKeys) throws -> SymmetricCryptoKey {
        try keys.fieldKey(itemKey: key, organizationId: organizationId, itemID: id)
    }

    /// The name and the login password alone: what a save compares its edit with (a changed password goes
    /// to the history), where ``decrypted(with:)`` decrypts every field.
    /// `key`: this item's ``fieldKey(with:)`` (a save opens it once, for this and for its encryption).
    public func decryptedNameAndPassword(key: SymmetricCryptoKey) throws -> (name: String, password: String?) {
        (try decryptField(name, key: key, itemID: id, field: "name"),
         try decryptOptional(login?.password, key: key, itemID: id, field: "login.password"))
    }

    /// What ``summary(jsonBytes:keys:)`` reads of a stored item; the rest is read over, not built.
    static let summaryFields = JSONParser.Selection(paths: [
        "id", "organizationId", "key", "name", "type", "folderId", "favorite", "deletedDate", "archivedDate", "login.username",
    ])

    /// The summary of the item stored as `jsonBytes` (``ItemSummary``): the text is parsed once, and
    /// only its key, name and username are decrypted, where ``decrypted(with:)`` builds and decrypts
    /// every field (a list of a large vault spent most of its time there).
    public static func summary<Bytes: Collection>(jsonBytes: Bytes, keys: VaultKeys) throws -> ItemSummary where Bytes.Element == UInt8 {
        var reader = JSONReader(try JSONParser.parseObject(jsonBytes, keeping: summaryFields), path: "cipher")
        let id = try reader.id("id")
        let organizationId = try reader.id("organizationId")
        let key = try keys.fieldKey(itemKey: try reader.encString("key"), organizationId: organizationId, itemID: id)
        let name = try decryptField(try reader.requiredEncString("name"), key: key, itemID: id, field: "name")
        var username: String?
        if let login = reader.value("login")?.objectValue {
            var fields = JSONReader(login, path: "cipher.login")
            username = try fields.encString("username").map { try decryptField($0, key: key, itemID: id, field: "login.username") }
        }
        return ItemSummary(id: id, type: CipherType(rawValue: try reader.requiredInt("type")), name: name, username: username,
                           folderId: try reader.id("folderId"), organizationId: organizationId, favorite: try reader.bool("favorite") ?? false,
                           isDeleted: try reader.date("deletedDate") != nil, isArchived: try reader.date("archivedDate") != nil)
    }
}

extension FolderWire {
    /// Decrypts the folder name with the user key.
    public func decrypted(with keys: VaultKeys) throws -> FolderView {
        var view = FolderView(id: id, name: try decryptField(name, key: keys.userKey, itemID: id, field: "folder.name"),
                              revisionDate: revisionDate)
        view.object = object
        view.unknown = unknown
        return view
    }
}

extension FolderView {
    /// Encrypts the folder name with the user key.
    public func encrypted(with keys: VaultKeys, random: any RandomSource = SystemRandomSource()) throws -> FolderWire {
        var wire = FolderWire(id: id, name: try encryptField(name, key: keys.userKey, random: random, field: "folder.name"),
                              revisionDate: revisionDate)
        wire.object = object
        wire.unknown = unknown
        return wire
    }
}

/// Decrypting a whole vault, one item at a time.
public enum VaultDecryption {
    /// Decrypts every item independently: a damaged item yields its own error and never hides the others.
    public static func decryptAll(_ ciphers: [CipherWire], keys: VaultKeys) -> [Result<CipherView, ModelError>] {
        ciphers.map { cipher in
            do {
                return .success(try cipher.decrypted(with: keys))
            } catch let error as ModelError {
                return .failure(error)
            } catch {
                return .failure(.decryptionFailed(itemID: cipher.id, field: "?", reason: .decryptionFailed(String(describing: error))))
            }
        }
    }
}
