import Foundation
import VaultAPI
import VaultCrypto
import VaultModels
import VaultStore
import VaultSyncCore

/// Every way a vault operation can fail, with a message a user can act on.
public enum VaultError: Error, Sendable, Equatable {
    case notLoggedIn
    case locked
    case wrongPassword
    /// The server did not accept the email and master password of a login (it does not say which was wrong).
    case loginRefused
    /// The session key does not open the saved session: wrong, expired, or the vault was locked.
    case sessionInvalid
    case accountNotFound(String)
    case itemNotFound(String)
    case folderNotFound(String)
    /// seed 001 U1: organization items are read-only while offline.
    case organizationItemOffline
    /// The item has a change (or its creation) still waiting to be sent: sharing it waits for a sync.
    case itemWaitsForSync(String)
    /// A share or an organization change that cannot be made as asked (nothing was sent).
    case sharingRefused(String)
    /// Sharing and organization changes are online only: the server could not be reached, nothing was changed or queued.
    case sharingOffline
    /// The server answered 404 to an organization's administration: this account may not (or the organization is gone).
    case notOrganizationManager
    /// The server understood the request and refused it (4xx); nothing was queued.
    case serverRefused(status: Int, message: String)
    /// The server could not be reached (for something that needs it: login, register, sync).
    case serverUnreachable(String)
    /// The server answered something that is not the protocol's answer (an HTML page from a captive
    /// portal or proxy, cut-off or malformed JSON): nothing of it was used.
    case serverAnswerInvalid(String)
    /// The server could not be reached and offline edits are turned off.
    case offlineEditsDisabled(String)
    /// The refresh token was refused: log in again. Local data is kept.
    case sessionExpired
    /// The item cannot be saved as it is; nothing was changed.
    case invalidItem(String)
    /// The folder cannot be saved as it is (an empty name, one too long); nothing was changed.
    case invalidFolder(String)
    /// The organization cannot be created as asked (an empty name, one too long); nothing was sent.
    case invalidOrganization(String)
    /// Only an accepted member (who has joined with the invitation's code) can be confirmed.
    case memberNotAccepted(String)
    /// The server announced KDF settings no account can have (see `BitwardenAPI.KdfSettingsRefused`); nothing was sent.
    case kdfUnusable(String)
    /// The queue was resolved, and what that did is in the report (backups made, deletes dropped, merges),
    /// then fetching the latest vault failed for `cause`. The report is not lost with the failure.
    indirect case syncIncomplete(SyncReport, cause: VaultError)
    case draftNotFound(String)
    case crypto(CryptoError)
    case model(ModelError)
    case storage(String)
    /// The profile's database file cannot be opened: damaged, or not a database (its whole explanation).
    case databaseUnusable(String)
    /// An import whose items are already in the vault (`DuplicatePolicy.refuse`): nothing was imported.
    case duplicateImport(count: Int, total: Int, examples: [String])
    /// An export refused because these items cannot be decrypted.
    case exportUnreadable(itemIDs: [String])
    /// A first login on this device whose announced KDF settings are below the current minimums;
    /// nothing was derived or sent (docs/SECURITY.md, KDF downgrade).
    case kdfBelowMinimums(offered: KdfConfiguration)
    /// The server announced KDF settings weaker than those this device saw unlock the account;
    /// nothing was derived or sent.
    case kdfWeakened(pinned: KdfConfiguration, offered: KdfConfiguration)
    /// The server address is refused (plain HTTP to another machine, or not a URL); nothing was sent.
    case insecureServer(String)
    /// An item would be encrypted for an organization the user has not trusted on this device.
    case organizationNotTrusted(String)
    /// The organization was trusted with another key than the one the server hands out now.
    case organizationKeyChanged(String)
    /// No key for this organization on this device (not a confirmed membership, or its key did not unwrap).
    case organizationUnavailable(String)
    /// The account's key pair is not on this device (an account made without one), or its private key does not open.
    case keyPairUnavailable
    /// The server refused to accept an organization invite with the code given (wrong, used already, the
    /// invite expired or took too many wrong codes); its message.
    case invitationRefused(organization: String, message: String)
    /// The password was right and the account needs a second factor: log in again with one of the
    /// listed providers' codes (``LoginOptions/secondFactor``).
    case twoFactorRequired(TwoFactorChallenge)
    /// The server refused the second factor (its message).
    case twoFactorCodeInvalid(provider: TwoFactorProviderType, message: String)
    /// The official server does not know this device and mailed a code to the account's address: log
    /// in again with it (``LoginOptions/newDeviceCode``).
    case newDeviceVerificationRequired(email: String)
    /// The server refused the new-device code.
    case newDeviceCodeInvalid
    /// The API key was refused (why).
    case apiKeyRefused(String)
    /// The server's certificate was refused (untrusted issuer, self-signed, expired, not yet valid, other
    /// names): nothing was sent to it (docs/SECURITY.md, "TLS trust and proxies").
    case untrustedCertificate(CertificateProblem)
    /// The configured CA file cannot be used (missing, unreadable, not PEM); nothing was sent.
    case caFileUnusable(path: String, reason: String)
    /// A proxy setting cannot be used; nothing was sent (never directly instead of through the proxy).
    case proxyUnusable(String)
    /// No attachment of the item matches (by id or file name).
    case attachmentNotFound(item: String, reference: String)
    /// Two attachments of the item have this file name: name one by its id.
    case attachmentAmbiguous(item: String, reference: String, ids: [String])
    /// The attachment operation needs the server (offline attachments are not built yet), or the item
    /// has queued changes that have to reach the server first.
    case attachmentNeedsServer(String)
    /// The file is larger than what is accepted.
    case attachmentTooLarge(size: Int, limit: Int)
    /// `conflicts resolve --keep` chose the live item's version, and the live item was deleted for good: that
    /// version is gone and the backup holds the only one left; nothing was changed. `deleteQueued`: the delete
    /// was made here and has not reached the server, so discarding it brings the item back.
    case conflictVersionGone(item: String, backup: String, keep: ConflictChoice, deleteQueued: Bool)
}

extension VaultError: LocalizedError {
    public var errorDescription: String? {
        switch self {
        case .notLoggedIn: return "You are not logged in. Run `vaultsync login EMAIL` first."
        case .locked: return "The vault is locked. Unlock it with your master password."
        case .wrongPassword:
            return "Invalid master password. If it was changed on another device, sign in again with the new one: until then "
                + "this device's vault opens with the old one, and its pending changes are kept."
        case .loginRefused:
            return "The server did not accept this email and master password. Check both (the email is the one the account signs in with) and try again."
        case .sessionInvalid:
            // Each unlock has a session of its own: another shell's unlock no longer ends this one.
            return "The session key no longer opens this vault: the session expired or the vault was locked (`vaultsync lock`). "
                + "Unlock again with your master password."
        case .accountNotFound(let email): return "No account \(email) on this device. Log in first."
        case .itemNotFound(let id): return "No item \(id) in this vault."
        case .folderNotFound(let id): return "No folder \(id) in this vault."
        case .organizationItemOffline:
            return "Organization items cannot be edited while offline. Reconnect to save changes to this item."
        case .sharingRefused(let reason): return "Nothing was changed: \(reason)."
        case .sharingOffline:
            return "Sharing and changes to an organization need the server, which could not be reached: nothing was changed, and nothing is queued."
        case .notOrganizationManager:
            return "The server refused: only the organization's owners and admins (and a collection's managers, for its access) can do this, or the organization no longer exists."
        case .itemWaitsForSync(let id):
            return "The item \(id) has a change that has not reached the server yet. Run `vaultsync sync`, then try again."
        case .serverRefused(let status, let message): return "The server refused the request (\(status)): \(message)"
        case .serverUnreachable(let detail): return "The server could not be reached: \(detail)."
        case .serverAnswerInvalid(let reason):
            return "The server's answer could not be understood (\(reason)). Nothing was changed on this device; queued changes stay queued."
        case .offlineEditsDisabled(let detail): return "The server could not be reached (\(detail)), and offline edits are turned off."
        case .sessionExpired:
            // A change the server refused this way was not saved (RELIABILITY bug 73: the message did not say so).
            return "The server no longer accepts this device's login (it expired, or the master password was changed on another device). "
                + "Log in again; what this command would have changed was not saved, and your local data and pending changes are kept."
        case .invalidItem(let reason): return "The item cannot be saved: \(reason)."
        case .invalidFolder(let reason): return "The folder cannot be saved: \(reason)."
        case .invalidOrganization(let reason): return "The organization cannot be created: \(reason)."
        case .memberNotAccepted(let email):
            return "\(email) has not accepted the invitation yet: only a member who accepted it can be confirmed."
        case .kdfUnusable(let reason):
            return "The server announced key derivation settings no account can have (\(reason)). A hostile server announces weak "
                + "settings to obtain a password hash that is cheap to crack, so nothing was sent."
        case .syncIncomplete(_, let cause): return cause.description
        case .draftNotFound(let id): return "No draft \(id)."
        case .crypto(let error): return error.description
        case .model(let error): return error.description
        case .storage(let detail): return "The local vault could not be written: \(detail)"
        case .databaseUnusable(let explanation): return explanation
        case .duplicateImport(let count, let total, let examples):
            let names = examples.map { "\"\($0)\"" }.joined(separator: ", ")
            return "\(count) of the \(total) items are already in the vault (same type, name and content, e.g. \(names)); nothing was imported. Import only the new ones, or all of them anyway, on purpose."
        case .kdfBelowMinimums(let offered):
            return "The server says this account derives its key with \(offered.summary), below Bitwarden's current minimums (PBKDF2-SHA256 with 600,000 iterations, or Argon2id with 2 iterations and 16 MiB). A hostile server announces weak settings to obtain a password hash that is cheap to crack, so nothing was sent. If you know your account really uses these settings, log in again confirming them (accept KDF \(offered.spec)), then raise them in your account settings."
        case .kdfWeakened(let pinned, let offered):
            return "The server now says this account derives its key with \(offered.summary), weaker than the \(pinned.summary) this device has seen unlock it. A hostile server announces weaker settings to obtain a password hash that is cheap to crack, so nothing was sent. Only if you changed the settings yourself, log in again confirming them (accept KDF \(offered.spec))."
        case .insecureServer(let reason):
            return "The server address is refused: \(reason). Nothing was sent."
        case .organizationNotTrusted(let organization):
            return "Nothing was saved: the organization \(organization) is not trusted on this device. A server can announce memberships you never accepted, with a key it knows; trust an organization only if you joined it (vaultsync org trust)."
        case .keyPairUnavailable:
            return "This account's key pair is not on this device (or does not open with the account's key); log in again to fetch it."
        case .organizationKeyChanged(let organization):
            return "Nothing was saved: the server now hands out another key for the organization \(organization) than the one you trusted. Trust it again only if you know why its key changed."
        case .organizationUnavailable(let organization):
            return "No key for the organization \(organization) on this device: it is not a confirmed membership of this account (sync, or ask its administrator to confirm you)."
        case .invitationRefused(let organization, let message):
            return "The invitation to \(organization) was not accepted: \(message) The code is the one `vaultsync org invite` printed for the owner, who gives it to you over another channel."
        case .twoFactorRequired(let challenge):
            let usable = challenge.providers.filter { TwoFactorRules.supported.contains($0) }
            var text = "This account uses two-step login"
            text += usable.isEmpty ? "." : " (\(usable.map(\.name).joined(separator: ", "))): log in again with a code."
            if let note = TwoFactorRules.unsupportedNote(offered: challenge.providers, also: !usable.isEmpty) {
                text += " Note: \(note)."
            }
            return text
        case .twoFactorCodeInvalid(let provider, let message):
            return "The \(provider.name) code was not accepted (\(message)). Check it and try again; nothing was changed."
        case .newDeviceVerificationRequired(let email):
            return "The server does not know this device yet and has emailed a verification code to \(email). Log in again with that code."
        case .newDeviceCodeInvalid:
            return "The new-device verification code was not accepted. Check the latest email, or ask for a new code."
        case .apiKeyRefused(let reason):
            return "The API key was not accepted: \(reason)."
        case .untrustedCertificate(let problem):
            return "The server was not used: \(problem)"
        case .caFileUnusable(let path, let reason):
            return "The CA file \(path) cannot be used: \(reason). Nothing was sent to the server; fix the file or change the setting (vaultsync config ca-file)."
        case .proxyUnusable(let reason):
            return "The proxy cannot be used: \(reason). Nothing was sent to the server."
        case .attachmentNotFound(let item, let reference):
            return "\"\(item)\" has no attachment \"\(reference)\". `vaultsync attachment list ITEM` shows its attachments."
        case .attachmentAmbiguous(let item, let reference, let ids):
            return "\"\(item)\" has \(ids.count) attachments named \"\(reference)\"; name one by its id: \(ids.joined(separator: ", "))."
        case .attachmentNeedsServer(let reason):
            return reason
        case .attachmentTooLarge(let size, let limit):
            return "The file is \(size / 1_048_576) MiB encrypted; at most \(limit / 1_048_576) MiB can be attached. Nothing was sent."
        case .conflictVersionGone(let item, let backup, let keep, let deleteQueued):
            let whose = keep == .mine ? "your" : "their"
            let other = keep == .mine ? "theirs" : "mine"
            let undo = deleteQueued
                ? " The delete was made on this device and has not reached the server: `vaultsync pending discard \"\(item)\" --yes` brings the item back."
                : ""
            return "\"\(item)\", the item that held \(whose) version, was deleted for good, so that version is gone; the backup \"\(backup)\" holds "
                + "the only version left. Nothing was changed: keep \(other) to make the backup the item again, or keep both to leave it as it is.\(undo)"
        case .exportUnreadable(let ids):
            let named = ids.prefix(3).joined(separator: ", ") + (ids.count > 3 ? ", …" : "")
            return "\(ids.count) item\(ids.count == 1 ? "" : "s") cannot be decrypted (\(named)), so an export would leave \(ids.count == 1 ? "it" : "them") out; nothing was written. "
                + "A sync may repair one damaged on the way; one that is not yours (a server can plant items) can be deleted: `vaultsync delete \(ids[0]) --permanent`."
        }
    }
}

extension VaultError: CustomStringConvertible {
    public var description: String { errorDescription ?? "VaultError" }
}

/// What a login may need beyond the master password.
public struct LoginOptions: Sendable, Equatable {
    /// KDF settings the user confirmed (see ``KdfPolicy``).
    public var acceptingKdf: KdfConfiguration?
    /// A code for two-step login (after ``VaultError/twoFactorRequired(_:)``).
    public var secondFactor: SecondFactor?
    /// The official server's emailed new-device code (after ``VaultError/newDeviceVerificationRequired(email:)``).
    public var newDeviceCode: String?
    /// The token the official server sent with its two-step challenge that authorizes the email-code
    /// request (``TwoFactorChallenge/emailSessionToken``).
    public var emailSessionToken: String?

    public init(acceptingKdf: KdfConfiguration? = nil, secondFactor: SecondFactor? = nil, newDeviceCode: String? = nil,
                emailSessionToken: String? = nil) {
        self.acceptingKdf = acceptingKdf
        self.secondFactor = secondFactor
        self.newDeviceCode = newDeviceCode
        self.emailSessionToken = emailSessionToken
    }
}

/// Whether a save reached the server or was kept locally for later.
public enum SaveOutcome: Sendable, Equatable {
    case synced
    /// Saved on this device and queued; `pendingCount` changes are waiting for the server.
    case savedOffline(pendingCount: Int)
    /// Saved on this device and queued because the server's certificate was refused: the server was not
    /// used. The change waits until the certificate is trusted (a CA file) or fixed on the server.
    case savedUntrustedServer(pendingCount: Int, problem: CertificateProblem)
    /// Saved on this device and queued because the server answered that its copy changed since this edit
    /// began (another device or a sync wrote in between). The server was reached; the next sync resolves
    /// the two versions (merged, or the newer kept and the other backed up).
    case savedForConflict(pendingCount: Int)
    /// Saved on this device and queued behind the item's earlier change, which still waits for the server:
    /// the server was not asked (the next sync compares the item with the server's copy as a whole).
    case savedBehindQueuedChange(pendingCount: Int)
    /// Saved on this device and queued because the server no longer has the item (another device deleted
    /// it for good since this one synced): the next sync makes it again from this version when its content
    /// was changed, as for the same change made offline (README, "The client engine", step 3).
    case savedItemGoneFromServer(pendingCount: Int)
    /// Saved on this device and queued because the profile holds no sign-in (it became a new device, or
    /// signed in nowhere yet): the change waits for the next login and sync.
    case savedSignedOut(pendingCount: Int)

    /// Whether the save stayed on this device (queued), for any of the reasons above.
    public var isOffline: Bool {
        switch self {
        case .synced: return false
        case .savedOffline, .savedUntrustedServer, .savedForConflict, .savedBehindQueuedChange, .savedItemGoneFromServer, .savedSignedOut:
            return true
        }
    }

    /// The queued changes after the save (`nil` when it reached the server).
    public var pendingCount: Int? {
        switch self {
        case .synced: return nil
        case .savedOffline(let count), .savedUntrustedServer(let count, _), .savedForConflict(let count), .savedBehindQueuedChange(let count),
             .savedItemGoneFromServer(let count), .savedSignedOut(let count):
            return count
        }
    }

    /// Why the server was not used, when its certificate was refused.
    public var certificateProblem: CertificateProblem? {
        if case .savedUntrustedServer(_, let problem) = self { return problem }
        return nil
    }
}

/// The result of a save: the item as it now is locally, and where it went.
public struct SaveResult<Value: Sendable>: Sendable {
    public var value: Value
    public var outcome: SaveOutcome
}

/// How conflicts end (``EngineConfiguration/conflictPolicy``).
public enum ConflictPolicy: String, Sendable, Equatable, CaseIterable {
    /// Three-way merge per field; a backup copy only for a true same-field conflict.
    case merge
    /// The newer version wins, the other is kept as a backup copy (the original rule).
    case newerWinsWithBackup = "backup"
}

/// Engine settings, with defaults.
public struct EngineConfiguration: Sendable {
    public var serverURL: String
    /// seed 001 §12.3: when off, unreachable-server failures surface as errors instead of queuing.
    public var offlineEditsEnabled = true
    /// If the last server contact failed less than this many seconds ago, organization edits are
    /// refused at once instead of waiting for a network timeout (seed 001 U1).
    public var knownOfflineWindow: Double = 60
    /// If the last server contact failed less than this many seconds ago, a personal item's save is
    /// queued at once instead of trying the server again: a burst of saves while offline (a script, a
    /// person working through items) waits on the network once, not once per save, which on a network
    /// that drops packets is a full connect timeout each. The first save after it tries the server
    /// again; a sync resolves what was queued meanwhile. 0: every save tries the server.
    public var offlineBurstWindow: Double = 10
    /// Drafts older than this (seconds) whose item has no pending change are purged (seed 004 §2).
    public var draftMaximumAge: Double = 7 * 24 * 3600
    public var api = APIConfiguration()
    public var deviceName = "vaultsync"
    /// seed 001 §12.3: when off, `sync()` only pulls; queued changes wait (and stay protected).
    public var resolutionEnabled = true
    /// seed 000 §7: put conflict backups in a folder named "Offline Sync Conflicts" (created on demand)
    /// instead of the original item's folder.
    public var backupsInConflictFolder = false
    /// How a conflict (both sides changed the item) ends: merged field by field against the version
    /// both started from, with a backup only for fields both changed differently (default); or the
    /// newer version wins and the other is kept as a backup copy, whatever fields they touched.
    public var conflictPolicy = ConflictPolicy.merge
    /// Downloaded attachments kept encrypted on this device for reading offline, at most this many
    /// bytes (least recently used evicted); 0: none kept.
    public var attachmentCacheBytes = 256 * 1_048_576
    /// Queued changes resolved at once (bounded concurrency); bulk requests in flight: two, at most this.
    public var resolutionConcurrency = 4
    /// Queued item changes read and resolved per page: a pass never holds more of the queue than two
    /// pages, the one it resolves and the next, opened meanwhile (a queue of 100,000 offline creates is
    /// resolved in pages, not opened whole). The opened records and bulk requests are most of a pass's
    /// memory: pages of 1,000, two at a time, keep the peak of 100,000 creates where pages of 2,000 one at
    /// a time had it, and resolve faster than those did; pages of 2,000 two at a time would be ~6% faster
    /// still and take P5 over its goal (docs/BENCHMARKS.md, measured 2026-11-26).
    public var resolutionPageSize = 1_000
    /// Plain pushes per bulk request, where the server offers the VaultSync bulk extension (0: never).
    public var bulkPushSize = 500
    /// Allows `http://` to a server that is not on this machine's loopback interface. Off by default:
    /// the login hash and the tokens would cross the network readable (docs/SECURITY.md). Only for a
    /// test network the user controls; every engine started with it logs a warning.
    public var insecureAllowPlainHTTP = false
    /// A PEM file of certificate authorities trusted in addition to the system's (a private CA of a
    /// self-hosted server). Checked when the engine starts; a file that cannot be used fails every
    /// server call with ``VaultError/caFileUnusable(path:reason:)``, naming it.
    public var caFile: String?
    /// Proxies, as the caller read them (the command line: HTTPS_PROXY, HTTP_PROXY, NO_PROXY…). The
    /// engine never reads environment variables itself. Empty: direct connections.
    public var proxy = ProxySettings()

    public init(serverURL: String) {
        self.serverURL = serverURL
    }
}

/// The device clock, injected so tests can skew it.
public protocol DeviceClock: Sendable {
    func now() -> WireDate
}

public struct SystemDeviceClock: DeviceClock {
    public init() {}
    public func now() -> WireDate { WireDate(Date()) }
}
