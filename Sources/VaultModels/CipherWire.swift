import VaultCrypto

/// A vault item exactly as the server stores and sends it (spec §2.6): everything user-visible is an
/// EncString; ids, types, flags and dates are plain. Keys this version does not model are kept in
/// ``unknown`` and written back, so nothing a newer server adds is lost on decode → edit → encode.
public struct CipherWire: JSONObjectConvertible {
    public var object: String?
    public var id: String?
    public var organizationId: String?
    public var folderId: String?
    public var type: CipherType
    public var reprompt: RepromptType?
    public var favorite: Bool?
    /// The item key wrapped by the user or organization key (spec §1.10); `nil` for older items.
    public var key: EncString?
    public var name: EncString
    public var notes: EncString?
    public var login: LoginWire?
    public var card: CardWire?
    public var identity: IdentityWire?
    public var secureNote: SecureNoteWire?
    public var sshKey: SSHKeyWire?
    public var fields: [FieldWire]?
    public var passwordHistory: [PasswordHistoryWire]?
    public var attachments: [AttachmentWire]?
    public var collectionIds: [String]?
    public var edit: Bool?
    public var viewPassword: Bool?
    public var organizationUseTotp: Bool?
    public var permissions: CipherPermissionsWire?
    public var creationDate: WireDate?
    public var revisionDate: WireDate?
    public var deletedDate: WireDate?
    public var archivedDate: WireDate?
    /// Request only: the `revisionDate` the client last saw (spec §3.2).
    public var lastKnownRevisionDate: WireDate?
    /// Keys this version does not model.
    public var unknown: JSONObject

    public init(type: CipherType, name: EncString) {
        self.type = type
        self.name = name
        unknown = JSONObject()
    }

    public init(json: JSONObject, path: String) throws {
        var r = JSONReader(json, path: path)
        object = try r.string("object")
        id = try r.id("id")
        organizationId = try r.id("organizationId")
        folderId = try r.id("folderId")
        type = CipherType(rawValue: try r.requiredInt("type"))
        reprompt = try r.int("reprompt").map(RepromptType.init(rawValue:))
        favorite = try r.bool("favorite")
        key = try r.encString("key")
        name = try r.requiredEncString("name")
        notes = try r.encString("notes")
        login = try r.object("login")
        card = try r.object("card")
        identity = try r.object("identity")
        secureNote = try r.object("secureNote")
        sshKey = try r.object("sshKey")
        fields = try r.array("fields")
        passwordHistory = try r.array("passwordHistory")
        attachments = try r.array("attachments")
        collectionIds = try r.idArray("collectionIds")
        edit = try r.bool("edit")
        viewPassword = try r.bool("viewPassword")
        organizationUseTotp = try r.bool("organizationUseTotp")
        permissions = try r.object("permissions")
        creationDate = try r.date("creationDate")
        revisionDate = try r.date("revisionDate")
        deletedDate = try r.date("deletedDate")
        archivedDate = try r.date("archivedDate")
        lastKnownRevisionDate = try r.date("lastKnownRevisionDate")
        unknown = try r.unknown
    }

    public func write(into w: inout JSONWriter) {
        w.putIfPresent("object", object.map(JSONValue.string))
        w.put("id", id)
        w.put("organizationId", organizationId)
        w.put("folderId", folderId)
        w.put("type", type.rawValue)
        w.put("reprompt", reprompt?.rawValue)
        w.put("favorite", favorite)
        w.put("key", key)
        w.put("name", name)
        w.put("notes", notes)
        w.put("login", login)
        w.put("card", card)
        w.put("identity", identity)
        w.put("secureNote", secureNote)
        w.put("sshKey", sshKey)
        w.put("fields", fields)
        w.put("passwordHistory", passwordHistory)
        w.put("attachments", attachments)
        w.putIfPresent("collectionIds", collectionIds.map { .array($0.map(JSONValue.string)) })
        w.putIfPresent("edit", edit.map(JSONValue.bool))
        w.putIfPresent("viewPassword", viewPassword.map(JSONValue.bool))
        w.putIfPresent("organizationUseTotp", organizationUseTotp.map(JSONValue.bool))
        w.putIfPresent("permissions", permissions.map { .object($0.jsonObject()) })
        w.put("creationDate", creationDate)
        w.put("revisionDate", revisionDate)
        w.put("deletedDate", deletedDate)
        w.put("archivedDate", archivedDate)
        w.putIfPresent("lastKnownRevisionDate", lastKnownRevisionDate.map { .string($0.iso8601) })
        w.append(unknown: unknown)
    }

    /// Every EncString the item carries, with its field path (for server-side validation and scans).
    public var encryptedFields: [(path: String, value: EncString)] {
        var out: [(String, EncString)] = [("name", name)]
        if let key { out.append(("key", key)) }
        if let notes { out.append(("notes", notes)) }
        if let login { out += login.encryptedFields.map { ("login.\($0.0)", $0.1) } }
        for (label, group) in [("card", card?.values.map { ($0.key.rawValue, $0.value) }),
                               ("identity", identity?.values.map { ($0.key.rawValue, $0.value) }),
                               ("sshKey", sshKey?.values.map { ($0.key.rawValue, $0.value) })] {
            for (field, value) in group ?? [] { out.append(("\(label).\(field)", value)) }
        }
        for (index, field) in (fields ?? []).enumerated() {
            if let name = field.name { out.append(("fields[\(index)].name", name)) }
            if let value = field.value { out.append(("fields[\(index)].value", value)) }
        }
        for (index, entry) in (passwordHistory ?? []).enumerated() {
            out.append(("passwordHistory[\(index)].password", entry.password))
        }
        for (index, attachment) in (attachments ?? []).enumerated() {
            if let name = attachment.fileName { out.append(("attachments[\(index)].fileName", name)) }
            if let key = attachment.key { out.append(("attachments[\(index)].key", key)) }
        }
        return out
    }
}

/// Login data (spec §2.6).
public struct LoginWire: JSONObjectConvertible {
    public var uris: [LoginURIWire]?
    public var username: EncString?
    public var password: EncString?
    public var passwordRevisionDate: WireDate?
    public var totp: EncString?
    public var autofillOnPageLoad: Bool?
    public var fido2Credentials: [Fido2CredentialWire]?
    /// Legacy: the first URI, still sent by servers; never sent by VaultSync.
    public var uri: EncString?
    public var unknown: JSONObject

    public init() { unknown = JSONObject() }

    public init(json: JSONObject, path: String) throws {
        var r = JSONReader(json, path: path)
        uris = try r.array("uris")
        username = try r.encString("username")
        password = try r.encString("password")
        passwordRevisionDate = try r.date("passwordRevisionDate")
        totp = try r.encString("totp")
        autofillOnPageLoad = try r.bool("autofillOnPageLoad")
        fido2Credentials = try r.array("fido2Credentials")
        uri = try r.encString("uri")
        unknown = try r.unknown
    }

    public func write(into w: inout JSONWriter) {
        w.put("uris", uris)
        w.put("username", username)
        w.put("password", password)
        w.put("passwordRevisionDate", passwordRevisionDate)
        w.put("totp", totp)
        w.put("autofillOnPageLoad", autofillOnPageLoad)
        w.put("fido2Credentials", fido2Credentials)
        w.putIfPresent("uri", uri.map { .string($0.serialized) })
        w.append(unknown: unknown)
    }

    var encryptedFields: [(String, EncString)] {
        var out: [(String, EncString)] = []
        for (index, entry) in (uris ?? []).enumerated() {
            if let uri = entry.uri { out.append(("uris[\(index)].uri", uri)) }
            if let checksum = entry.uriChecksum { out.append(("uris[\(index)].uriChecksum", checksum)) }
        }
        if let username { out.append(("username", username)) }
        if let password { out.append(("password", password)) }
        if let totp { out.append(("totp", totp)) }
        if let uri { out.append(("uri", uri)) }
        for (index, credential) in (fido2Credentials ?? []).enumerated() {
            for (field, value) in credential.fields.values { out.append(("fido2Credentials[\(index)].\(field.rawValue)", value)) }
        }
        return out
    }
}

/// One login URI (spec §2.6).
public struct LoginURIWire: JSONObjectConvertible {
    public var uri: EncString?
    /// `EncString(base64(SHA-256(uri)))` (spec §1.10).
    public var uriChecksum: EncString?
    public var match: URIMatchType?
    public var unknown: JSONObject

    public init(uri: EncString?, uriChecksum: EncString?, match: URIMatchType?, unknown: JSONObject = JSONObject()) {
        self.uri = uri
        self.uriChecksum = uriChecksum
        self.match = match
        self.unknown = unknown
    }

    public init(json: JSONObject, path: String) throws {
        var r = JSONReader(json, path: path)
        uri = try r.encString("uri")
        uriChecksum = try r.encString("uriChecksum")
        match = try r.int("match").map(URIMatchType.init(rawValue:))
        unknown = try r.unknown
    }

    public func write(into w: inout JSONWriter) {
        w.put("uri", uri)
        w.put("uriChecksum", uriChecksum)
        w.put("match", match?.rawValue)
        w.append(unknown: unknown)
    }
}

/// A passkey, carried through: its fields are EncStrings plus a plain creation date.
public struct Fido2CredentialWire: JSONObjectConvertible {
    public var fields: EncryptedFields<Fido2Field>
    public var creationDate: WireDate?

    public init(fields: EncryptedFields<Fido2Field>, creationDate: WireDate?) {
        self.fields = fields
        self.creationDate = creationDate
    }

    public init(json: JSONObject, path: String) throws {
        var r = JSONReader(json, path: path)
        creationDate = try r.date("creationDate")
        // The remaining keys are the encrypted fields and anything unknown.
        fields = try EncryptedFields(json: r.unknown, path: path)
    }

    public func write(into w: inout JSONWriter) {
        fields.write(to: &w)
        w.put("creationDate", creationDate)
        w.append(unknown: fields.unknown)
    }
}

/// A custom field (spec §2.6).
public struct FieldWire: JSONObjectConvertible {
    public var type: FieldType
    public var name: EncString?
    public var value: EncString?
    public var linkedId: Int?
    public var unknown: JSONObject

    public init(type: FieldType, name: EncString?, value: EncString?, linkedId: Int?, unknown: JSONObject = JSONObject()) {
        self.type = type
        self.name = name
        self.value = value
        self.linkedId = linkedId
        self.unknown = unknown
    }

    public init(json: JSONObject, path: String) throws {
        var r = JSONReader(json, path: path)
        type = FieldType(rawValue: try r.int("type") ?? 0)
        name = try r.encString("name")
        value = try r.encString("value")
        linkedId = try r.int("linkedId")
        unknown = try r.unknown
    }

    public func write(into w: inout JSONWriter) {
        w.put("type", type.rawValue)
        w.put("name", name)
        w.put("value", value)
        w.put("linkedId", linkedId)
        w.append(unknown: unknown)
    }
}

/// One entry of the password history (spec §2.6).
public struct PasswordHistoryWire: JSONObjectConvertible {
    public var password: EncString
    public var lastUsedDate: WireDate
    public var unknown: JSONObject

    public init(password: EncString, lastUsedDate: WireDate, unknown: JSONObject = JSONObject()) {
        self.password = password
        self.lastUsedDate = lastUsedDate
        self.unknown = unknown
    }

    public init(json: JSONObject, path: String) throws {
        var r = JSONReader(json, path: path)
        password = try r.requiredEncString("password")
        lastUsedDate = try r.requiredDate("lastUsedDate")
        unknown = try r.unknown
    }

    public func write(into w: inout JSONWriter) {
        w.put("password", password)
        w.put("lastUsedDate", lastUsedDate)
        w.append(unknown: unknown)
    }
}

/// Attachment metadata (spec §2.6, §2.9); the body is stored and moved separately.
public struct AttachmentWire: JSONObjectConvertible {
    public var object: String?
    public var id: String?
    public var url: String?
    public var fileName: EncString?
    /// The attachment key, wrapped by the item key (or the user/organization key for older items).
    public var key: EncString?
    /// Size in bytes, as the decimal string the servers send.
    public var size: String?
    public var sizeName: String?
    public var unknown: JSONObject

    public init(id: String?, fileName: EncString?, key: EncString?, size: String?) {
        self.id = id
        self.fileName = fileName
        self.key = key
        self.size = size
        unknown = JSONObject()
    }

    public init(json: JSONObject, path: String) throws {
        var r = JSONReader(json, path: path)
        object = try r.string("object")
        id = try r.id("id")
        url = try r.string("url")
        fileName = try r.encString("fileName")
        key = try r.encString("key")
        switch r.value("size") {
        case .string(let text)?: size = text
        case .number(let literal)?: size = literal
        case nil: size = nil
        case let other?: throw ModelError.wrongType(path: "\(path).size", expected: "a string", found: other.kindName)
        }
        sizeName = try r.string("sizeName")
        unknown = try r.unknown
    }

    public func write(into w: inout JSONWriter) {
        w.putIfPresent("object", object.map(JSONValue.string))
        w.put("id", id)
        w.put("url", url)
        w.put("fileName", fileName)
        w.put("key", key)
        w.put("size", size)
        w.put("sizeName", sizeName)
        w.append(unknown: unknown)
    }
}

/// `{"type": 0}` for a secure note.
public struct SecureNoteWire: JSONObjectConvertible {
    public var type: SecureNoteType?
    public var unknown: JSONObject

    public init(type: SecureNoteType? = .generic, unknown: JSONObject = JSONObject()) {
        self.type = type
        self.unknown = unknown
    }

    public init(json: JSONObject, path: String) throws {
        var r = JSONReader(json, path: path)
        type = try r.int("type").map(SecureNoteType.init(rawValue:))
        unknown = try r.unknown
    }

    public func write(into w: inout JSONWriter) {
        w.put("type", type?.rawValue)
        w.append(unknown: unknown)
    }
}

/// `{"delete": bool, "restore": bool}`, computed by the server.
public struct CipherPermissionsWire: JSONObjectConvertible {
    public var delete: Bool
    public var restore: Bool
    public var unknown: JSONObject

    public init(delete: Bool, restore: Bool) {
        self.delete = delete
        self.restore = restore
        unknown = JSONObject()
    }

    public init(json: JSONObject, path: String) throws {
        var r = JSONReader(json, path: path)
        delete = try r.bool("delete") ?? false
        restore = try r.bool("restore") ?? false
        unknown = try r.unknown
    }

    public func write(into w: inout JSONWriter) {
        w.put("delete", delete)
        w.put("restore", restore)
        w.append(unknown: unknown)
    }
}

/// A folder as the server sends it (spec §2.8).
public struct FolderWire: JSONObjectConvertible {
    public var object: String?
    public var id: String?
    public var name: EncString
    public var revisionDate: WireDate?
    public var unknown: JSONObject

    public init(id: String?, name: EncString, revisionDate: WireDate?) {
        self.id = id
        self.name = name
        self.revisionDate = revisionDate
        unknown = JSONObject()
    }

    public init(json: JSONObject, path: String) throws {
        var r = JSONReader(json, path: path)
        object = try r.string("object")
        id = try r.id("id")
        name = try r.requiredEncString("name")
        revisionDate = try r.date("revisionDate")
        unknown = try r.unknown
    }

    public func write(into w: inout JSONWriter) {
        w.putIfPresent("object", object.map(JSONValue.string))
        w.put("id", id)
        w.put("name", name)
        w.put("revisionDate", revisionDate)
        w.append(unknown: unknown)
    }
}

extension CipherWire {
    /// Keys only the server sends; a request leaves them out (spec §2.6 request model).
    public static let responseOnlyKeys = [
        "object", "id", "edit", "viewPassword", "permissions", "collectionIds", "organizationUseTotp", "creationDate",
        "revisionDate", "deletedDate", "attachments", "data",
    ]

    /// The body of a create or update request: the request model, unknown fields included, and
    /// `lastKnownRevisionDate` when given (spec §3.2).
    public func requestObject(lastKnownRevisionDate: WireDate? = nil) -> JSONObject {
        var copy = self
        copy.lastKnownRevisionDate = lastKnownRevisionDate
        copy.login?.uri = nil
        var object = copy.jsonObject()
        for key in Self.responseOnlyKeys { object[key] = nil }
        return object
    }
}
