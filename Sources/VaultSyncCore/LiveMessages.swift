import VaultModels

/// One `ReceiveMessage` from the hub: `{ContextId, Type, Payload}`. Payloads carry ids and dates only.
public struct PushNotification: Sendable, Equatable {
    /// The push type's number (``PushType`` when it is one this client knows).
    public var type: Int
    /// The device that made the change: a device ignores its own echo.
    public var contextID: String?
    /// The item's, folder's or user's id (`Payload.Id`, or `Payload.UserId` for account-wide messages).
    public var id: String?
    public var userID: String?
    public var organizationID: String?
    public var revisionDate: WireDate?

    public init(type: Int, contextID: String? = nil, id: String? = nil, userID: String? = nil, organizationID: String? = nil,
                revisionDate: WireDate? = nil) {
        self.type = type
        self.contextID = contextID
        self.id = id
        self.userID = userID
        self.organizationID = organizationID
        self.revisionDate = revisionDate
    }

    /// Reads a message's argument object. Keys are taken in any case: the official server writes
    /// PascalCase over MessagePack and camelCase over JSON. `nil` when it has no numeric type.
    public init?(_ object: JSONObject) {
        func value(_ name: String) -> JSONValue? { Self.field(name, of: object) }
        guard let type = value("Type")?.intValue else { return nil }
        self.type = type
        contextID = value("ContextId")?.stringValue
        let payload = value("Payload")?.objectValue ?? [:]
        func field(_ name: String) -> JSONValue? { Self.field(name, of: payload) }
        id = field("Id")?.stringValue?.lowercased()
        userID = field("UserId")?.stringValue?.lowercased()
        organizationID = field("OrganizationId")?.stringValue?.lowercased()
        revisionDate = field("RevisionDate")?.stringValue.flatMap { WireDate(iso8601: $0) }
    }

    /// A member of `object` whose key is `name` in any case.
    static func field(_ name: String, of object: JSONObject) -> JSONValue? {
        let wanted = name.lowercased()
        return object.first { $0.key.lowercased() == wanted }?.value
    }
}

/// What the engine does for one live message (pure: the engine performs it).
public enum LiveAction: Sendable, Equatable {
    /// Fetch this item (`GET /api/ciphers/{id}`) and apply it with the pull's rules.
    case fetchItem(id: String, revisionDate: WireDate?)
    /// The item is gone for good on the server: remove the local copy (unless a change is queued).
    case removeItem(id: String)
    /// A folder changed: folders are few, so a full sync fetches them with everything else.
    case syncFolders
    /// The folder is gone: remove the local copy (unless a change is queued).
    case removeFolder(id: String)
    /// Something account-wide changed: a full sync.
    case fullSync
    /// The server ended this account's sessions: lock and forget the tokens.
    case logOut
    /// Nothing to do: this device's own echo, another account's message, or a type this client ignores.
    case ignore
}

extension LiveAction {
    /// The action for `message` on the device `deviceIdentifier` signed in as `userID`. A message made
    /// by this device (its own echo) changes nothing here, except `LogOut`, which always ends the
    /// session. Duplicated, late or reordered messages are harmless: each action reads the server's
    /// current state, and the pull's rules never let an older version replace a newer one.
    public static func decide(_ message: PushNotification, deviceIdentifier: String, userID: String) -> LiveAction {
        guard let type = PushType(rawValue: message.type) else { return .ignore }
        if type == .logOut {
            if let target = message.userID, target.lowercased() != userID.lowercased() { return .ignore }
            return .logOut
        }
        if let context = message.contextID, context.lowercased() == deviceIdentifier.lowercased() { return .ignore }
        switch type {
        case .syncCipherCreate, .syncCipherUpdate:
            guard let id = message.id else { return .fullSync }
            return .fetchItem(id: id, revisionDate: message.revisionDate)
        case .syncLoginDelete, .syncCipherDelete:
            guard let id = message.id else { return .fullSync }
            return .removeItem(id: id)
        case .syncFolderCreate, .syncFolderUpdate:
            return .syncFolders
        case .syncFolderDelete:
            guard let id = message.id else { return .fullSync }
            return .removeFolder(id: id)
        case .syncCiphers, .syncVault, .syncOrgKeys, .syncSettings:
            return .fullSync
        case .logOut, .syncSendCreate, .syncSendUpdate, .syncSendDelete, .authRequest, .authRequestResponse:
            return .ignore
        }
    }
}

/// How a device keeps in step with the server: over the hub, by polling the account's revision date
/// (a server without a hub), or not at all (unreachable).
public enum LiveState: String, Sendable, Equatable {
    case live
    case polling
    case offline
}

/// When to try the hub again after it went away: exponential backoff with jitter, capped at 30 s, so
/// a server that comes back is reached within 30 s (issue: "queued changes leave by themselves").
public struct ReconnectSchedule: Sendable, Equatable {
    public var backoff: Backoff

    public init(base: Double = 0.5, cap: Double = 30) {
        backoff = Backoff(base: base, cap: cap, maximumAttempts: .max)
    }

    /// Seconds to wait after `failures` consecutive failed connections; `unit` in [0, 1).
    public func delay(afterFailures failures: Int, unit: Double) -> Double {
        backoff.delay(afterAttempts: failures, unit: unit)
    }
}

/// Whether a (re)connection must sync: the account's revision date moved since the last sync, or
/// changes are queued here.
public func syncNeededOnConnect(serverRevision: Int64?, lastSyncRevision: Int64?, pendingCount: Int) -> Bool {
    if pendingCount > 0 { return true }
    guard let serverRevision else { return true }
    guard let lastSyncRevision else { return true }
    return serverRevision != lastSyncRevision
}
