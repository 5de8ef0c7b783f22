import VaultCrypto
import VaultModels

/// What kind of local item a queued change is about.
public enum PendingItemKind: String, Sendable, Codable, CaseIterable {
    case cipher
    case folder
}

/// The server operation a queued change stands for (seed 000 §3, with the later refinements).
public enum PendingChangeKind: String, Sendable, Codable, CaseIterable {
    /// The item exists only on this device; it is created on the server at sync.
    case create
    /// The item exists on the server and was changed here (content, trash, archive, folder, favorite).
    case update
    /// The item is to be moved to the server's trash.
    case softDelete
    /// The item is to be deleted from the server for good.
    case hardDelete
}

/// Where a queued change stands.
public enum PendingChangeState: String, Sendable, Codable {
    /// Will be tried at the next sync (after `nextAttemptDate`).
    case pending
    /// Refused for good or tried too often: kept with its data, no longer retried automatically,
    /// never blocking anything else; the user retries or discards it.
    case needsAttention
}

/// The per-user state of an item that offline operations change besides its content.
public struct ItemState: Sendable, Codable, Equatable {
    public var deleted: Bool
    public var archived: Bool
    public var folderID: String?
    public var favorite: Bool

    public init(deleted: Bool, archived: Bool, folderID: String?, favorite: Bool) {
        self.deleted = deleted
        self.archived = archived
        self.folderID = folderID
        self.favorite = favorite
    }
}

/// Everything about a queued change except its ids. Sealed (encrypted with the user key) as one blob
/// per record at rest (seed 003 option E): only the record id, user id and item id stay readable.
public struct PendingChangeMetadata: Sendable, Codable, Equatable {
    public var kind: PendingChangeKind
    /// The item's server revision date before the first offline change; never overwritten later
    /// (the baseline for conflict detection). `nil` for creates.
    public var originalRevisionDate: WireDate?
    /// Offline password changes, counted by comparing decrypted passwords (seed 000 §3).
    public var passwordChangeCount: Int
    /// Whether the content (not only trash/archive/folder/favorite state) changed offline.
    public var contentChanged: Bool
    /// When the first offline change was made (device clock).
    public var createdDate: WireDate
    /// When the last offline change was made (device clock), of any kind: a save during a resolution moves
    /// it (the saved-meanwhile rule).
    public var updatedDate: WireDate
    /// When the content was last changed here (device clock): a create or an edit, not a trash, archive,
    /// folder or favorite change. `nil` for a state-only record and for records queued before it existed.
    public var contentUpdatedDate: WireDate?
    /// The date "newer" compares in a conflict (docs/ARCHITECTURE.md, "Which version is newer"), converted to
    /// the server's clock, and the identity of the local version for backups (a backup is named by it and made
    /// once per content): the last content change, so that favoriting an old edit does not make it newer than
    /// an edit made elsewhere in between, nor a version to back up again. Records from before the content date
    /// was kept use their last save.
    public var contentEditDate: WireDate { contentUpdatedDate ?? updatedDate }
    public var attempts: Int
    public var lastError: String?
    public var nextAttemptDate: WireDate?
    public var state: PendingChangeState
    /// The item's state before the first offline change (captured with `originalRevisionDate`), so
    /// that state intents — restore, archive, move, favorite — can be replayed on a newer server copy.
    public var originalState: ItemState?
    /// How far the resolution got: the versions backed up already, and a backup posted without an answer
    /// yet (its exact body and key), so a retry, a re-plan or a restart never backs a version up twice.
    public var progress: ResolutionProgress {
        get { ResolutionProgress(backups: backedUp ?? [], inFlight: backupInFlight, pushedMerge: pushedMerge) }
        set {
            backedUp = newValue.backups.isEmpty ? nil : newValue.backups
            backupInFlight = newValue.inFlight
            pushedMerge = newValue.pushedMerge
        }
    }
    // Stored as fields of their own (the document's keys), so that `Codable` and the hand-written JSON agree.
    var backedUp: [BackedUpVersion]?
    var backupInFlight: BackupInFlight?
    var pushedMerge: PushedMerge?
    /// For a create: the encrypted names the item had before it was renamed here. An earlier attempt
    /// may have reached the server under one of them with its answer lost; the resolver adopts an item
    /// carrying any of them instead of posting a second copy (each name's random IV makes it unique).
    public var earlierNames: [String]?
    /// For a create: an attempt was sent and its answer not heard, so the item may be on the server
    /// (under one of its names). Deleting it for good then has to reach the server too.
    public var createSent: Bool?
    /// For a create: the item's wrapped key as text (unique to the item, unchanged by edits), to find
    /// the copy an unanswered create left on the server even after another device renamed it.
    public var itemKey: String?
    /// The version the first offline change started from (the last synced version, as wire JSON: every
    /// user-visible field already an EncString, and sealed again with the record): the base of the
    /// three-way merge (docs/ARCHITECTURE.md, "Merging"). `nil` for creates and for records queued
    /// before it existed (those conflicts end with a backup, as before).
    public var baseVersion: String?
    /// The server's revision written by this device's own merge push, while the item was saved again
    /// here (the record stayed): that version's content is no newer than ``mergedContentDate``, so a
    /// save made here before the push arrived still counts as the newer edit at the next run.
    public var mergedPushRevision: WireDate?
    /// The newest edit in the merged version (the later of the two sides it merged).
    public var mergedContentDate: WireDate?
    /// Attachments added here that are not on the server yet (staged, encrypted, in the profile).
    public var attachmentAdds: [StagedAttachment]?
    /// Server ids of attachments deleted here that the server still has.
    public var attachmentDeletes: [String]?

    /// Attachment work waits for the server.
    public var hasAttachmentWork: Bool { !(attachmentAdds ?? []).isEmpty || !(attachmentDeletes ?? []).isEmpty }

    public init(kind: PendingChangeKind, originalRevisionDate: WireDate?, passwordChangeCount: Int = 0,
                contentChanged: Bool = false, createdDate: WireDate, updatedDate: WireDate,
                attempts: Int = 0, lastError: String? = nil, nextAttemptDate: WireDate? = nil, state: PendingChangeState = .pending) {
        self.kind = kind
        self.originalRevisionDate = originalRevisionDate
        self.passwordChangeCount = passwordChangeCount
        self.contentChanged = contentChanged
        self.createdDate = createdDate
        self.updatedDate = updatedDate
        self.attempts = attempts
        self.lastError = lastError
        self.nextAttemptDate = nextAttemptDate
        self.state = state
    }
}

/// A queued change: one per (user, item).
public struct PendingChange: Sendable, Equatable {
    public var id: String
    public var userID: String
    public var itemID: String
    public var itemKind: PendingItemKind
    public var metadata: PendingChangeMetadata
    /// The SHA-256 of the stored form this change was read from (set by the store; `nil` for a change
    /// made in memory). Every store seals a record anew, with a fresh IV, so a record whose stored form
    /// still has this digest has not been written since the read, and a transaction need not open it
    /// again to know that. A digest, not the text: a resolution holds two pages of changes at once.
    /// Not part of the change's value (`==` leaves it out).
    public var storedDigest: ContentDigest?

    public init(id: String, userID: String, itemID: String, itemKind: PendingItemKind, metadata: PendingChangeMetadata,
                storedDigest: ContentDigest? = nil) {
        self.id = id
        self.userID = userID
        self.itemID = itemID
        self.itemKind = itemKind
        self.metadata = metadata
        self.storedDigest = storedDigest
    }

    public static func == (lhs: PendingChange, rhs: PendingChange) -> Bool {
        lhs.id == rhs.id && lhs.userID == rhs.userID && lhs.itemID == rhs.itemID && lhs.itemKind == rhs.itemKind && lhs.metadata == rhs.metadata
    }
}

// Hand-written JSON (the same document `Codable` writes: property names as keys, nil left out, dates as
// ISO-8601 text): a queue record's metadata is sealed on every offline save and opened for every record
// a sync reads, and Foundation's coders were a visible part of both.

extension ItemState: JSONObjectConvertible {
    public init(json: JSONObject, path: String) throws {
        var reader = JSONReader(json, path: path)
        deleted = try reader.requiredBool("deleted")
        archived = try reader.requiredBool("archived")
        folderID = try reader.string("folderID")
        favorite = try reader.requiredBool("favorite")
    }

    public func write(into writer: inout JSONWriter) {
        writer.put("deleted", deleted)
        writer.put("archived", archived)
        writer.putIfPresent("folderID", folderID)
        writer.put("favorite", favorite)
    }
}

extension PendingChangeMetadata: JSONObjectConvertible {
    public init(json: JSONObject, path: String) throws {
        var reader = JSONReader(json, path: path)
        kind = try reader.requiredRaw("kind", as: PendingChangeKind.self)
        originalRevisionDate = try reader.date("originalRevisionDate")
        passwordChangeCount = try reader.requiredInt("passwordChangeCount")
        contentChanged = try reader.requiredBool("contentChanged")
        createdDate = try reader.requiredDate("createdDate")
        updatedDate = try reader.requiredDate("updatedDate")
        contentUpdatedDate = try reader.date("contentUpdatedDate")
        attempts = try reader.requiredInt("attempts")
        lastError = try reader.string("lastError")
        nextAttemptDate = try reader.date("nextAttemptDate")
        state = try reader.requiredRaw("state", as: PendingChangeState.self)
        originalState = try reader.object("originalState")
        progress = ResolutionProgress(backups: try reader.array("backedUp") ?? [], inFlight: try reader.object("backupInFlight"),
                                      pushedMerge: try reader.object("pushedMerge"))
        // Records written before the progress was typed: "server:µs" / "local:µs" and the backup's body.
        if let legacy = try reader.string("backupDoneFor"), let done = BackedUpVersion(legacyMarker: legacy) {
            if let body = try reader.string("pendingBackup") {
                progress.inFlight = BackupInFlight(version: done.version, date: done.date, originalID: "", idempotencyKey: nil, body: body)
            } else {
                progress.backups.append(done)
            }
        }
        earlierNames = try reader.stringArray("earlierNames")
        createSent = try reader.bool("createSent")
        itemKey = try reader.string("itemKey")
        baseVersion = try reader.string("baseVersion")
        mergedPushRevision = try reader.date("mergedPushRevision")
        mergedContentDate = try reader.date("mergedContentDate")
        attachmentAdds = try reader.array("attachmentAdds")
        attachmentDeletes = try reader.stringArray("attachmentDeletes")
    }

    public func write(into writer: inout JSONWriter) {
        writer.put("kind", kind.rawValue)
        writer.putIfPresent("originalRevisionDate", originalRevisionDate)
        writer.put("passwordChangeCount", passwordChangeCount)
        writer.put("contentChanged", contentChanged)
        writer.put("createdDate", createdDate)
        writer.put("updatedDate", updatedDate)
        writer.putIfPresent("contentUpdatedDate", contentUpdatedDate)
        writer.put("attempts", attempts)
        writer.putIfPresent("lastError", lastError)
        writer.putIfPresent("nextAttemptDate", nextAttemptDate)
        writer.put("state", state.rawValue)
        writer.putIfPresent("originalState", originalState)
        if !progress.backups.isEmpty { writer.put("backedUp", progress.backups) }
        writer.putIfPresent("backupInFlight", progress.inFlight)
        writer.putIfPresent("pushedMerge", progress.pushedMerge)
        writer.putIfPresent("earlierNames", earlierNames)
        writer.putIfPresent("createSent", createSent)
        writer.putIfPresent("itemKey", itemKey)
        writer.putIfPresent("baseVersion", baseVersion)
        writer.putIfPresent("mergedPushRevision", mergedPushRevision)
        writer.putIfPresent("mergedContentDate", mergedContentDate)
        if let attachmentAdds { writer.put("attachmentAdds", attachmentAdds) }
        writer.putIfPresent("attachmentDeletes", attachmentDeletes)
    }
}

extension BackedUpVersion: JSONObjectConvertible {
    public init(json: JSONObject, path: String) throws {
        var reader = JSONReader(json, path: path)
        self.init(version: try reader.requiredRaw("version"), date: try reader.requiredDate("date"), backupID: try reader.requiredString("backupID"))
    }

    /// A marker of the earlier format, "server:<revision µs>" or "local:<save µs>" (the backup's id unknown).
    init?(legacyMarker marker: String) {
        let parts = marker.split(separator: ":")
        guard parts.count == 2, let version = PlanVersion(rawValue: String(parts[0])), let micros = Int64(parts[1]) else { return nil }
        self.init(version: version, date: WireDate(microsecondsSinceEpoch: micros), backupID: "")
    }

    public func write(into writer: inout JSONWriter) {
        writer.put("version", version.rawValue)
        writer.put("date", date)
        writer.put("backupID", backupID)
    }
}

extension BackupInFlight: JSONObjectConvertible {
    public init(json: JSONObject, path: String) throws {
        var reader = JSONReader(json, path: path)
        self.init(version: try reader.requiredRaw("version"), date: try reader.requiredDate("date"),
                  originalID: try reader.requiredString("originalID"), idempotencyKey: try reader.string("idempotencyKey"),
                  body: try reader.requiredString("body"), attachments: try reader.array("attachments"))
    }

    public func write(into writer: inout JSONWriter) {
        writer.put("version", version.rawValue)
        writer.put("date", date)
        writer.put("originalID", originalID)
        writer.putIfPresent("idempotencyKey", idempotencyKey)
        writer.put("body", body)
        if let attachments { writer.put("attachments", attachments) }
    }
}

extension PushedMerge: JSONObjectConvertible {
    public init(json: JSONObject, path: String) throws {
        var reader = JSONReader(json, path: path)
        self.init(body: try reader.requiredString("body"), local: try reader.requiredString("local"))
    }

    public func write(into writer: inout JSONWriter) {
        writer.put("body", body)
        writer.put("local", local)
    }
}

extension AttachmentCopy: JSONObjectConvertible {
    public init(json: JSONObject, path: String) throws {
        var reader = JSONReader(json, path: path)
        self.init(sourceItemID: try reader.requiredString("sourceItemID"), sourceAttachmentID: try reader.requiredString("sourceAttachmentID"),
                  fileName: try reader.requiredString("fileName"), key: try reader.requiredString("key"))
    }

    public func write(into writer: inout JSONWriter) {
        writer.put("sourceItemID", sourceItemID)
        writer.put("sourceAttachmentID", sourceAttachmentID)
        writer.put("fileName", fileName)
        writer.put("key", key)
    }
}

/// An attachment added while offline: its encrypted file is staged in the profile under `id` (a device-
/// made id, also the idempotency key of its announce), its name and key encrypted for the item's key.
public struct StagedAttachment: Sendable, Equatable, Codable {
    public var id: String
    /// The file name, encrypted with the item's key.
    public var fileName: String
    /// The attachment key, wrapped with the item's key.
    public var key: String
    /// The encrypted file's size in bytes.
    public var size: Int
    /// The id the server handed out when the attachment was announced (step one of the upload): kept
    /// before the file is sent, so a retry uploads to it instead of announcing a second attachment.
    public var serverID: String?

    public init(id: String, fileName: String, key: String, size: Int, serverID: String? = nil) {
        self.id = id
        self.fileName = fileName
        self.key = key
        self.size = size
        self.serverID = serverID
    }
}

extension StagedAttachment: JSONObjectConvertible {
    public init(json: JSONObject, path: String) throws {
        var reader = JSONReader(json, path: path)
        self.init(id: try reader.requiredString("id"), fileName: try reader.requiredString("fileName"), key: try reader.requiredString("key"),
                  size: try reader.requiredInt("size"), serverID: try reader.string("serverID"))
    }

    public func write(into writer: inout JSONWriter) {
        writer.put("id", id)
        writer.put("fileName", fileName)
        writer.put("key", key)
        writer.put("size", size)
        writer.putIfPresent("serverID", serverID)
    }
}
