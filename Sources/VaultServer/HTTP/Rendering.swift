import Foundation
import VaultModels

/// Builds response JSON in Vaultwarden's shape (camelCase, `cipherDetails`, six-digit dates).
struct Renderer: Sendable {
    /// Public base URL (for attachment download links).
    let baseURL: String
    let signer: AccessTokenSigner
    let now: @Sendable () -> Int64

    static func date(_ micros: Int64?) -> JSONValue {
        guard let micros else { return .null }
        return .string(WireDate(microsecondsSinceEpoch: micros).iso8601)
    }

    /// A cipher as its user sees it. The stored payload is spliced in as text: no re-parsing per item.
    func cipher(_ record: CipherRecord, object: String = "cipherDetails") -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(record.data.utf8.count + 560)
        writeCipher(record, object: object, to: &bytes)
        return bytes
    }

    /// Appends ``cipher(_:object:)``'s text to `out`. The head is written straight into the bytes, keys in
    /// the order the `JSONObject` this replaced gave them (a sync writes one per item, so no intermediate
    /// object and no date strings): object, id, organizationId, folderId, type, favorite, edit,
    /// viewPassword, organizationUseTotp, permissions, collectionIds, attachments, creationDate,
    /// revisionDate, deletedDate, archivedDate, then the payload's keys.
    func writeCipher(_ record: CipherRecord, object: String = "cipherDetails", to out: inout [UInt8]) {
        out.append(contentsOf: #"{"object":"#.utf8)
        JSONBytes.string(object, to: &out)
        out.append(contentsOf: #","id":"#.utf8)
        JSONBytes.string(record.id, to: &out)
        out.append(contentsOf: #","organizationId":"#.utf8)
        JSONBytes.optionalString(record.organizationID, to: &out)
        out.append(contentsOf: #","folderId":"#.utf8)
        JSONBytes.optionalString(record.folderID, to: &out)
        out.append(contentsOf: #","type":"#.utf8)
        JSONBytes.int(record.type, to: &out)
        out.append(contentsOf: #","favorite":"#.utf8)
        JSONBytes.bool(record.favorite, to: &out)
        out.append(contentsOf: #","edit":"#.utf8)
        JSONBytes.bool(record.access.edit, to: &out)
        out.append(contentsOf: #","viewPassword":"#.utf8)
        JSONBytes.bool(record.access.viewPassword, to: &out)
        out.append(contentsOf: #","organizationUseTotp":true,"permissions":{"delete":"#.utf8)
        JSONBytes.bool(record.access.canDelete, to: &out)
        out.append(contentsOf: #","restore":"#.utf8)
        JSONBytes.bool(record.access.canDelete, to: &out)
        out.append(contentsOf: #"},"collectionIds":["#.utf8)
        for (index, collection) in record.collectionIDs.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            JSONBytes.string(collection, to: &out)
        }
        out.append(contentsOf: #"],"attachments":"#.utf8)
        if record.attachments.isEmpty {
            out.append(contentsOf: "null".utf8)
        } else {
            out.append(contentsOf: JSONValue.array(record.attachments.map { .object(attachment($0)) }).serialized())
        }
        out.append(contentsOf: #","creationDate":"#.utf8)
        JSONBytes.date(record.createdAt, to: &out)
        out.append(contentsOf: #","revisionDate":"#.utf8)
        JSONBytes.date(record.revisionDate, to: &out)
        out.append(contentsOf: #","deletedDate":"#.utf8)
        JSONBytes.date(record.deletedDate, to: &out)
        out.append(contentsOf: #","archivedDate":"#.utf8)
        JSONBytes.date(record.archivedDate, to: &out)
        var data = record.access.viewPassword ? record.data : PasswordHiding.hidden(record.data)
        data.withUTF8 { payload in
            if payload.count > 2 {
                out.append(UInt8(ascii: ","))
                out.append(contentsOf: UnsafeBufferPointer(rebasing: payload[1...]))  // payload without its opening brace
            } else {
                out.append(UInt8(ascii: "}"))
            }
        }
    }

    func attachment(_ record: AttachmentRecord) -> JSONObject {
        var object = JSONObject()
        object["object"] = .string("attachment")
        object["id"] = .string(record.id)
        object["url"] = .string(downloadURL(cipherID: record.cipherID, attachmentID: record.id))
        object["fileName"] = .string(record.fileName)
        object["key"] = record.key.map(JSONValue.string) ?? .null
        object["size"] = .string(String(record.fileSize))
        object["sizeName"] = .string(Self.sizeName(record.fileSize))
        return object
    }

    /// A short-lived signed link, like Vaultwarden's: the download needs no bearer header.
    func downloadURL(cipherID: String, attachmentID: String) -> String {
        let nowSeconds = now() / 1_000_000
        let token = signer.sign(AccessClaims(subject: "attachment:\(cipherID):\(attachmentID)", email: "", name: "", securityStamp: "",
                                             device: "", deviceType: 0, clientID: "download", notBefore: nowSeconds,
                                             expires: nowSeconds + 300))
        return "\(baseURL)/attachments/\(cipherID)/\(attachmentID)?token=\(token)"
    }

    static func sizeName(_ size: Int64) -> String {
        let units = ["Bytes", "KB", "MB", "GB"]
        var value = Double(size)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(size) Bytes" : String(format: "%.2f %@", value, units[unit])
    }

    func folder(_ record: FolderRecord) -> JSONObject {
        ["object": .string("folder"), "id": .string(record.id), "name": .string(record.name), "revisionDate": Self.date(record.revisionDate)]
    }

    static func kdfObject(_ user: UserRecord, pascal: Bool) -> JSONObject {
        var object = JSONObject()
        object[pascal ? "KdfType" : "kdfType"] = .int(user.kdfType)
        object[pascal ? "Iterations" : "iterations"] = .int(user.kdfIterations)
        object[pascal ? "Memory" : "memory"] = user.kdfMemory.map(JSONValue.int) ?? .null
        object[pascal ? "Parallelism" : "parallelism"] = user.kdfParallelism.map(JSONValue.int) ?? .null
        return object
    }

    static func accountKeys(_ user: UserRecord, pascal: Bool) -> JSONValue {
        guard let privateKey = user.privateKey, let publicKey = user.publicKey else { return .null }
        let pair: JSONObject = [
            "wrappedPrivateKey": .string(privateKey), "publicKey": .string(publicKey),
            pascal ? "Object" : "object": .string("publicKeyEncryptionKeyPair"),
        ]
        return .object(["publicKeyEncryptionKeyPair": .object(pair), pascal ? "Object" : "object": .string("privateKeys")])
    }

    func profile(_ user: UserRecord, organizations: [JSONValue], twoFactorEnabled: Bool) -> JSONObject {
        var object = JSONObject()
        object["object"] = .string("profile")
        object["id"] = .string(user.id)
        object["name"] = user.name.map(JSONValue.string) ?? .null
        object["email"] = .string(user.email)
        object["emailVerified"] = .bool(true)
        object["premium"] = .bool(true)
        object["premiumFromOrganization"] = .bool(false)
        object["culture"] = .string("en-US")
        object["twoFactorEnabled"] = .bool(twoFactorEnabled)
        object["key"] = .string(user.akey)
        object["privateKey"] = user.privateKey.map(JSONValue.string) ?? .null
        object["accountKeys"] = Self.accountKeys(user, pascal: false)
        object["securityStamp"] = .string(user.securityStamp)
        object["forcePasswordReset"] = .bool(false)
        object["usesKeyConnector"] = .bool(false)
        object["avatarColor"] = user.avatarColor.map(JSONValue.string) ?? .null
        object["creationDate"] = Self.date(user.createdAt)
        object["organizations"] = .array(organizations)
        object["providers"] = .array([])
        object["providerOrganizations"] = .array([])
        return object
    }

    /// The `domains` object of `GET /api/settings/domains` and of a sync (docs/PROTOCOL.md, "Account settings"):
    /// the user's equivalent domains, and the global groups, which this server does not have (an empty list).
    /// `withExclusions` adds the global groups the user turned off (a VaultSync member, for the settings route:
    /// with no global list they would show nowhere else).
    static func domains(_ user: UserRecord, withExclusions: Bool) -> JSONObject {
        func stored(_ text: String?) -> JSONValue {
            guard let text, let value = try? JSONParser.parse(Array(text.utf8)), value.arrayValue != nil else { return .array([]) }
            return value
        }
        var object = JSONObject()
        object["object"] = .string("domains")
        object["equivalentDomains"] = stored(user.equivalentDomains)
        object["globalEquivalentDomains"] = .array([])
        if withExclusions { object["excludedGlobalEquivalentDomains"] = stored(user.excludedGlobalDomains) }
        return object
    }

    static func userDecryption(_ user: UserRecord) -> JSONObject {
        ["masterPasswordUnlock": .object([
            "kdf": .object(kdfObject(user, pascal: false)),
            "masterKeyEncryptedUserKey": .string(user.akey),
            "masterKeyWrappedUserKey": .string(user.akey),
            "salt": .string(user.email),
        ])]
    }
}

/// JSON values appended straight to bytes, for the paths that write one per item (the same text
/// `JSONValue.serialized()` gives).
enum JSONBytes {
    static func string(_ text: String, to out: inout [UInt8]) {
        JSONValue.writeString(text, to: &out)
    }

    static func optionalString(_ text: String?, to out: inout [UInt8]) {
        if let text { string(text, to: &out) } else { out.append(contentsOf: "null".utf8) }
    }

    static func bool(_ value: Bool, to out: inout [UInt8]) {
        out.append(contentsOf: (value ? "true" : "false").utf8)
    }

    static func int(_ value: Int, to out: inout [UInt8]) {
        out.append(contentsOf: String(value).utf8)
    }

    /// `WireDate.iso8601` in quotes (six fractional digits and `Z`), or `null`.
    static func date(_ micros: Int64?, to out: inout [UInt8]) {
        guard let micros else {
            out.append(contentsOf: "null".utf8)
            return
        }
        WireDate(microsecondsSinceEpoch: micros).writeJSON(to: &out)
    }
}
