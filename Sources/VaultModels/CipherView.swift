import VaultCrypto

/// A decrypted vault item: what the app shows and edits.
///
/// A plain value type: copying an item with one change is `var copy = item; copy.name = "…"`, and the
/// copy carries every field, including the ones this version does not model (``unknown`` at each
/// level). ``CipherWire/decrypted(with:)`` and ``encrypted(with:random:)`` convert between the two forms.
public struct CipherView: Sendable, Equatable {
    public var id: String?
    public var organizationId: String?
    public var folderId: String?
    public var type: CipherType
    public var name: String
    public var notes: String?
    public var favorite: Bool
    public var reprompt: RepromptType
    /// The item key, still wrapped by the user or organization key; `nil` for older items that are
    /// encrypted with the user or organization key directly.
    public var itemKey: EncString?
    public var login: LoginView?
    public var card: CardView?
    public var identity: IdentityView?
    public var secureNote: SecureNoteWire?
    public var sshKey: SSHKeyView?
    public var fields: [FieldView]
    public var passwordHistory: [PasswordHistoryView]
    public var attachments: [AttachmentView]
    public var collectionIds: [String]?
    public var creationDate: WireDate?
    public var revisionDate: WireDate?
    public var deletedDate: WireDate?
    public var archivedDate: WireDate?
    /// Server-computed access flags (plain on the wire).
    public var edit: Bool?
    public var viewPassword: Bool?
    public var organizationUseTotp: Bool?
    public var permissions: CipherPermissionsWire?
    public var object: String?
    /// Top-level keys this version does not model (including the data of item types 6–8).
    public var unknown: JSONObject

    /// A new item of `type` named `name`, with no item key yet (see ``VaultKeys/newItem(type:name:organizationId:random:)``).
    public init(type: CipherType, name: String) {
        self.type = type
        self.name = name
        favorite = false
        reprompt = .none
        fields = []
        passwordHistory = []
        attachments = []
        unknown = JSONObject()
        switch type {
        case .login: login = LoginView()
        case .card: card = CardView()
        case .identity: identity = IdentityView()
        case .secureNote: secureNote = SecureNoteWire()
        case .sshKey: sshKey = SSHKeyView()
        default: break
        }
    }

    /// Whether the item is in the trash.
    public var isDeleted: Bool { deletedDate != nil }

    /// Whether the item is archived.
    public var isArchived: Bool { archivedDate != nil }

    /// Returns a copy with one change applied.
    public func with(_ change: (inout CipherView) throws -> Void) rethrows -> CipherView {
        var copy = self
        try change(&copy)
        return copy
    }
}

/// Decrypted login data.
public struct LoginView: Sendable, Equatable {
    public var uris: [LoginURIView]
    public var username: String?
    public var password: String?
    public var passwordRevisionDate: WireDate?
    public var totp: String?
    public var autofillOnPageLoad: Bool?
    /// Passkeys, decrypted so that they can be re-encrypted under a new item key.
    public var fido2Credentials: [Fido2CredentialView]?
    public var unknown: JSONObject

    public init(uris: [LoginURIView] = [], username: String? = nil, password: String? = nil, totp: String? = nil) {
        self.uris = uris
        self.username = username
        self.password = password
        self.totp = totp
        unknown = JSONObject()
    }
}

/// A decrypted login URI. The checksum is computed when encrypting and verified when decrypting.
public struct LoginURIView: Sendable, Equatable {
    public var uri: String?
    public var match: URIMatchType?
    public var unknown: JSONObject

    public init(uri: String?, match: URIMatchType? = nil, unknown: JSONObject = JSONObject()) {
        self.uri = uri
        self.match = match
        self.unknown = unknown
    }
}

/// A decrypted passkey.
public struct Fido2CredentialView: Sendable, Equatable {
    public var fields: PlainFields<Fido2Field>
    public var creationDate: WireDate?

    public init(fields: PlainFields<Fido2Field>, creationDate: WireDate?) {
        self.fields = fields
        self.creationDate = creationDate
    }
}

/// A decrypted custom field.
public struct FieldView: Sendable, Equatable {
    public var type: FieldType
    public var name: String?
    public var value: String?
    public var linkedId: Int?
    public var unknown: JSONObject

    public init(type: FieldType, name: String?, value: String?, linkedId: Int? = nil, unknown: JSONObject = JSONObject()) {
        self.type = type
        self.name = name
        self.value = value
        self.linkedId = linkedId
        self.unknown = unknown
    }
}

/// A decrypted password-history entry.
public struct PasswordHistoryView: Sendable, Equatable {
    public var password: String
    public var lastUsedDate: WireDate
    public var unknown: JSONObject

    public init(password: String, lastUsedDate: WireDate, unknown: JSONObject = JSONObject()) {
        self.password = password
        self.lastUsedDate = lastUsedDate
        self.unknown = unknown
    }
}

/// Decrypted attachment metadata. The attachment key stays wrapped (by the item key, or by the
/// user/organization key for items without one) until the body is needed.
public struct AttachmentView: Sendable, Equatable {
    public var id: String?
    public var url: String?
    public var fileName: String?
    public var key: EncString?
    public var size: String?
    public var sizeName: String?
    public var object: String?
    public var unknown: JSONObject

    public init(id: String?, fileName: String?, key: EncString?, size: String?) {
        self.id = id
        self.fileName = fileName
        self.key = key
        self.size = size
        unknown = JSONObject()
    }
}

/// A decrypted folder.
public struct FolderView: Sendable, Equatable {
    public var id: String?
    public var name: String
    public var revisionDate: WireDate?
    public var object: String?
    public var unknown: JSONObject

    public init(id: String?, name: String, revisionDate: WireDate? = nil) {
        self.id = id
        self.name = name
        self.revisionDate = revisionDate
        unknown = JSONObject()
    }
}
