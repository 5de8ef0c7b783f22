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
        var data = record.data
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

/// JSON values appended straight to bytes, for the paths that write one per item (the same text
/// `JSONValue.serialized()` gives).
enum JSONBytes {
    static func string(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { bytes in
            // Copy runs that need no escaping in one go (ids and EncStrings never need any).
            var runStart = 0
            for index in bytes.indices {
                let byte = bytes[index]
                guard byte < 0x20 || byte == 0x22 || byte == 0x5C else { continue }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
                escape(byte, to: &out)
                runStart = index + 1
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart...]))
        }
        out.append(UInt8(ascii: "\""))
    }

    private static func escape(_ byte: UInt8, to out: inout [UInt8]) {
        switch byte {
        case 0x22: out.append(contentsOf: [0x5C, 0x22])
        case 0x5C: out.append(contentsOf: [0x5C, 0x5C])
        case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
        case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
        case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
        default:
            let hex = Array("0123456789abcdef".utf8)
            out.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
        }
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
        var seconds = micros / 1_000_000
        var fraction = micros % 1_000_000
        if fraction < 0 {
            fraction += 1_000_000
            seconds -= 1
        }
        var days = seconds / 86_400
        var secondOfDay = seconds % 86_400
        if secondOfDay < 0 {
            secondOfDay += 86_400
            days -= 1
        }
        // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm, as WireDate's).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        guard (0...9999).contains(year) else {
            string(WireDate(microsecondsSinceEpoch: micros).iso8601, to: &out)
            return
        }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 29) { buffer in
            func put(_ value: Int64, width: Int, at offset: Int) {
                var rest = value
                for index in stride(from: offset + width - 1, through: offset, by: -1) {
                    buffer[index] = UInt8(ascii: "0") + UInt8(rest % 10)
                    rest /= 10
                }
            }
            buffer[0] = UInt8(ascii: "\"")
            put(year, width: 4, at: 1)
            put(month, width: 2, at: 6)
            put(day, width: 2, at: 9)
            put(secondOfDay / 3600, width: 2, at: 12)
            put(secondOfDay % 3600 / 60, width: 2, at: 15)
            put(secondOfDay % 60, width: 2, at: 18)
            put(fraction, width: 6, at: 21)
            (buffer[5], buffer[8], buffer[11]) = (UInt8(ascii: "-"), UInt8(ascii: "-"), UInt8(ascii: "T"))
            (buffer[14], buffer[17], buffer[20], buffer[27]) = (UInt8(ascii: ":"), UInt8(ascii: ":"), UInt8(ascii: "."), UInt8(ascii: "Z"))
            buffer[28] = UInt8(ascii: "\"")
            out.append(contentsOf: UnsafeBufferPointer(buffer))
        }
    }
}
