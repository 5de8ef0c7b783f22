import Foundation
import GRDB
import VaultCrypto
import VaultModels
import VaultSyncCore

/// A logged-in account on this device.
public struct AccountRecord: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "account"

    /// The table's columns, for requests.
    public enum Columns {
        public static let userID = Column(CodingKeys.userID)
        public static let email = Column(CodingKeys.email)
        public static let sealedTokens = Column(CodingKeys.sealedTokens)
        public static let encryptedPrivateKey = Column(CodingKeys.encryptedPrivateKey)
    }
    public var userID: String
    public var email: String
    public var deviceIdentifier: String
    public var kdfType: Int
    public var kdfIterations: Int
    public var kdfMemory: Int?
    public var kdfParallelism: Int?
    public var protectedUserKey: String
    public var localAuthorizationHash: String
    public var encryptedPrivateKey: String?
    public var publicKey: String?
    public var sealedTokens: String?
    public var createdAt: Int64

    public init(userID: String, email: String, deviceIdentifier: String, kdf: KdfConfiguration, protectedUserKey: String,
                localAuthorizationHash: String, encryptedPrivateKey: String?, publicKey: String?, sealedTokens: String?, createdAt: Int64) {
        self.userID = userID
        self.email = email
        self.deviceIdentifier = deviceIdentifier
        kdfType = kdf.typeCode
        kdfIterations = kdf.iterations
        kdfMemory = kdf.memoryMiB
        kdfParallelism = kdf.parallelism
        self.protectedUserKey = protectedUserKey
        self.localAuthorizationHash = localAuthorizationHash
        self.encryptedPrivateKey = encryptedPrivateKey
        self.publicKey = publicKey
        self.sealedTokens = sealedTokens
        self.createdAt = createdAt
    }

    public var kdf: KdfConfiguration {
        get throws { try KdfConfiguration(type: kdfType, iterations: kdfIterations, memoryMiB: kdfMemory, parallelism: kdfParallelism) }
    }
}

/// One cached item exactly as the server sent it (or as it was encrypted here, offline).
public struct CipherRow: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "cipher"

    /// The table's columns, for requests.
    public enum Columns {
        public static let userID = Column(CodingKeys.userID)
        public static let id = Column(CodingKeys.id)
        public static let json = Column(CodingKeys.json)
    }
    public var userID: String
    public var id: String
    public var organizationID: String?
    public var revisionDate: Int64?
    public var json: String

    public init(userID: String, wire: CipherWire) {
        self.userID = userID
        id = wire.id ?? ""
        organizationID = wire.organizationId
        revisionDate = wire.revisionDate?.microsecondsSinceEpoch
        json = String(decoding: wire.jsonBytes(), as: UTF8.self)
    }

    /// Read by column name, not through `Decodable`: every listing and every name lookup reads every
    /// row of the vault, and GRDB's keyed decoding container cost 6% of a `vaultsync get` (P7).
    public init(row: Row) throws {
        userID = row[CodingKeys.userID.stringValue]
        id = row[CodingKeys.id.stringValue]
        organizationID = row[CodingKeys.organizationID.stringValue]
        revisionDate = row[CodingKeys.revisionDate.stringValue]
        json = row[CodingKeys.json.stringValue]
    }

    public func wire() throws -> CipherWire {
        do {
            return try CipherWire(jsonBytes: Array(json.utf8), path: "cipher")
        } catch {
            throw StoreError.corruptRecord(table: "cipher", id: id, reason: String(describing: error))
        }
    }
}

/// One cached folder (or organization, collection) as JSON.
public struct FolderRow: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "folder"

    /// The table's columns, for requests.
    public enum Columns {
        public static let userID = Column(CodingKeys.userID)
        public static let id = Column(CodingKeys.id)
    }
    public var userID: String
    public var id: String
    public var json: String

    public init(userID: String, wire: FolderWire) {
        self.userID = userID
        id = wire.id ?? ""
        json = String(decoding: wire.jsonBytes(), as: UTF8.self)
    }

    public func wire() throws -> FolderWire {
        do {
            return try FolderWire(jsonBytes: Array(json.utf8), path: "folder")
        } catch {
            throw StoreError.corruptRecord(table: "folder", id: id, reason: String(describing: error))
        }
    }
}

/// An organization entry of the profile (name plaintext on the wire; the key stays wrapped).
public struct OrganizationRow: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "organization"

    /// The table's columns, for requests.
    public enum Columns {
        public static let userID = Column(CodingKeys.userID)
        public static let id = Column(CodingKeys.id)
    }
    public var userID: String
    public var id: String
    public var json: String

    public init(userID: String, id: String, json: String) {
        self.userID = userID
        self.id = id
        self.json = json
    }
}

/// An organization the user trusted on this device, with its key at that moment sealed with the user
/// key (migration v7). Only these organizations' keys encrypt the user's data.
public struct TrustedOrganizationRow: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "trustedOrganization"

    /// The table's columns, for requests.
    public enum Columns {
        public static let userID = Column(CodingKeys.userID)
        public static let organizationID = Column(CodingKeys.organizationID)
    }
    public var userID: String
    public var organizationID: String
    public var sealedKey: String
    public var trustedAt: Int64

    public init(userID: String, organizationID: String, sealedKey: String, trustedAt: Int64) {
        self.userID = userID
        self.organizationID = organizationID
        self.sealedKey = sealedKey
        self.trustedAt = trustedAt
    }
}

/// A collection entry (name encrypted with the organization key).
public struct CollectionRow: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "collection"

    /// The table's columns, for requests.
    public enum Columns {
        public static let userID = Column(CodingKeys.userID)
        public static let id = Column(CodingKeys.id)
    }
    public var userID: String
    public var id: String
    public var json: String

    public init(userID: String, id: String, json: String) {
        self.userID = userID
        self.id = id
        self.json = json
    }
}

/// A queued change at rest: ids readable, everything else sealed.
public struct PendingChangeRow: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "pendingChange"

    /// The table's columns, for requests.
    public enum Columns {
        public static let id = Column(CodingKeys.id)
        public static let userID = Column(CodingKeys.userID)
        public static let itemKind = Column(CodingKeys.itemKind)
        public static let itemID = Column(CodingKeys.itemID)
    }
    public var id: String
    public var userID: String
    public var itemKind: String
    public var itemID: String
    public var sealed: String

    /// Read by column name (the synthesized `Decodable` path decoded every row through a decoder: a
    /// resolution reads 10,000 records and more, a page at a time).
    public init(row: Row) throws {
        id = try row.decode(forColumn: "id")
        userID = try row.decode(forColumn: "userID")
        itemKind = try row.decode(forColumn: "itemKind")
        itemID = try row.decode(forColumn: "itemID")
        sealed = try row.decode(forColumn: "sealed")
    }

    public init(_ change: PendingChange, key: SymmetricCryptoKey) throws {
        id = change.id
        userID = change.userID
        itemKind = change.itemKind.rawValue
        itemID = change.itemID
        sealed = try Sealed.seal(json: change.metadata, key: key)
    }

    /// The SHA-256 of `sealed` (``PendingChange/storedDigest``).
    public var storedDigest: ContentDigest {
        var text = sealed
        return text.withUTF8 { ContentDigest(of: UnsafeRawBufferPointer($0)) }
    }

    public func open(key: SymmetricCryptoKey) throws -> PendingChange {
        let metadata: PendingChangeMetadata
        do {
            metadata = try Sealed.open(json: PendingChangeMetadata.self, from: sealed, key: key)
        } catch {
            throw StoreError.sealedRecordUnreadable(table: "pendingChange", id: id)
        }
        return PendingChange(id: id, userID: userID, itemID: itemID, itemKind: PendingItemKind(rawValue: itemKind) ?? .cipher,
                             metadata: metadata, storedDigest: storedDigest)
    }
}

/// An autosaved, encrypted edit in progress.
public struct DraftRow: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "draft"

    /// The table's columns, for requests.
    public enum Columns {
        public static let id = Column(CodingKeys.id)
        public static let userID = Column(CodingKeys.userID)
        public static let itemID = Column(CodingKeys.itemID)
    }
    public var id: String
    public var userID: String
    public var itemID: String?
    public var sealed: String

    public init(id: String, userID: String, itemID: String?, sealed: String) {
        self.id = id
        self.userID = userID
        self.itemID = itemID
        self.sealed = sealed
    }
}

/// Per-account sync bookkeeping (not secret).
public struct SyncStateRow: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "syncState"
    public var userID: String
    public var lastSyncDate: Int64?
    public var accountRevisionDate: Int64?
    public var clockOffset: String?
    public var lastContactDate: Int64?
    public var lastContactFailed: Bool
    /// The certificate problem of the last contact (JSON of `CertificateProblem`), `nil` otherwise.
    public var lastContactProblem: String?

    public init(userID: String) {
        self.userID = userID
        lastContactFailed = false
    }

    /// Read by column name (``FetchableRecord``'s initializer, in place of the one `Decodable` gives): every save reads it (the known-offline check), and
    /// GRDB's keyed decoding container was 5% of an offline save's time (docs/BENCHMARKS.md, measured 2026-11-27).
    public init(row: Row) throws {
        userID = try row.decode(forColumn: CodingKeys.userID.stringValue)
        lastSyncDate = try row.decode(forColumn: CodingKeys.lastSyncDate.stringValue)
        accountRevisionDate = try row.decode(forColumn: CodingKeys.accountRevisionDate.stringValue)
        clockOffset = try row.decode(forColumn: CodingKeys.clockOffset.stringValue)
        lastContactDate = try row.decode(forColumn: CodingKeys.lastContactDate.stringValue)
        lastContactFailed = try row.decode(forColumn: CodingKeys.lastContactFailed.stringValue)
        lastContactProblem = try row.decode(forColumn: CodingKeys.lastContactProblem.stringValue)
    }
}

/// What this device keeps of an account across logout (migration v8): the device identifier the
/// server knows it by, and the "remember this device" token of two-step login, sealed with a key
/// derived from the master key (so only the master password opens it).
public struct RememberedLoginRow: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "rememberedLogin"
    public var email: String
    public var deviceIdentifier: String
    public var sealedTwoFactorToken: String?
    public var updatedAt: Int64

    public init(email: String, deviceIdentifier: String, sealedTwoFactorToken: String?, updatedAt: Int64) {
        self.email = email
        self.deviceIdentifier = deviceIdentifier
        self.sealedTwoFactorToken = sealedTwoFactorToken
        self.updatedAt = updatedAt
    }
}

/// A conflict backup this device made or learned of (migrations v2, v3, v6): which item it backs up,
/// whose version lost, whether the user reviewed it and whether its twin check is still to run.
public struct ConflictBackupRow: Codable, Sendable, Equatable, FetchableRecord, PersistableRecord {
    public static let databaseTableName = "conflictBackup"

    /// The table's columns, for requests.
    public enum Columns {
        public static let userID = Column(CodingKeys.userID)
        public static let backupID = Column(CodingKeys.backupID)
        public static let createdAt = Column(CodingKeys.createdAt)
        public static let reviewedAt = Column(CodingKeys.reviewedAt)
        public static let twinCheckPending = Column(CodingKeys.twinCheckPending)
        public static let sealedDifference = Column(CodingKeys.sealedDifference)
    }

    public var userID: String
    public var backupID: String
    public var originalID: String
    public var createdAt: Int64
    /// "local" (this device's edit lost), "server" (the server's version lost) or "unknown".
    public var losingSide: String
    public var reviewedAt: Int64?
    public var twinCheckPending: Bool
    /// The comparison of the merge that made this backup (JSON of `ItemMerge.ItemDifference`), sealed
    /// with the user key; `nil` for a backup made without a merge.
    public var sealedDifference: String?

    public init(userID: String, backupID: String, originalID: String, createdAt: Int64, losingSide: String, reviewedAt: Int64?,
                twinCheckPending: Bool, sealedDifference: String? = nil) {
        self.userID = userID
        self.backupID = backupID
        self.originalID = originalID
        self.createdAt = createdAt
        self.losingSide = losingSide
        self.reviewedAt = reviewedAt
        self.twinCheckPending = twinCheckPending
        self.sealedDifference = sealedDifference
    }
}
