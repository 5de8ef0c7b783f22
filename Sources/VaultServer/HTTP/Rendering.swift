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
        var head = JSONObject()
        head["object"] = .string(object)
        head["id"] = .string(record.id)
        head["organizationId"] = record.organizationID.map(JSONValue.string) ?? .null
        head["folderId"] = record.folderID.map(JSONValue.string) ?? .null
        head["type"] = .int(record.type)
        head["favorite"] = .bool(record.favorite)
        head["edit"] = .bool(record.access.edit)
        head["viewPassword"] = .bool(record.access.viewPassword)
        head["organizationUseTotp"] = .bool(true)
        head["permissions"] = .object(["delete": .bool(record.access.canDelete), "restore": .bool(record.access.canDelete)])
        head["collectionIds"] = .array(record.collectionIDs.map(JSONValue.string))
        head["attachments"] = record.attachments.isEmpty ? .null : .array(record.attachments.map { .object(attachment($0)) })
        head["creationDate"] = Self.date(record.createdAt)
        head["revisionDate"] = Self.date(record.revisionDate)
        head["deletedDate"] = Self.date(record.deletedDate)
        head["archivedDate"] = Self.date(record.archivedDate)
        var bytes = head.serialized()
        let data = Array(record.data.utf8)
        if data.count > 2 {
            bytes.removeLast()  // }
            bytes.append(UInt8(ascii: ","))
            bytes.append(contentsOf: data[1...])  // payload without its opening brace
        }
        return bytes
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

    func profile(_ user: UserRecord, organizations: [JSONValue]) -> JSONObject {
        var object = JSONObject()
        object["object"] = .string("profile")
        object["id"] = .string(user.id)
        object["name"] = user.name.map(JSONValue.string) ?? .null
        object["email"] = .string(user.email)
        object["emailVerified"] = .bool(true)
        object["premium"] = .bool(true)
        object["premiumFromOrganization"] = .bool(false)
        object["culture"] = .string("en-US")
        object["twoFactorEnabled"] = .bool(false)
        object["key"] = .string(user.akey)
        object["privateKey"] = user.privateKey.map(JSONValue.string) ?? .null
        object["accountKeys"] = Self.accountKeys(user, pascal: false)
        object["securityStamp"] = .string(user.securityStamp)
        object["forcePasswordReset"] = .bool(false)
        object["usesKeyConnector"] = .bool(false)
        object["avatarColor"] = .null
        object["creationDate"] = Self.date(user.createdAt)
        object["organizations"] = .array(organizations)
        object["providers"] = .array([])
        object["providerOrganizations"] = .array([])
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
