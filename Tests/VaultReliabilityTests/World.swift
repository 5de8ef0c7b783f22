import Foundation
#if canImport(Glibc)
import Glibc
#endif
import GRDB
import Logging
import Testing
import VaultAPI
import VaultClient
import VaultCrypto
import VaultModels
import VaultStore
import VaultSyncCore
import VaultTestSupport

/// `VAULTSYNC_TRACE=1`: the engines log their decisions (debug level, labelled with the end of the
/// profile's directory name) and every test save prints one line, to follow an item through a failing seed.
enum Trace {
    static let enabled = ProcessInfo.processInfo.environment["VAULTSYNC_TRACE"] == "1"

    static func save(_ device: SimDevice, _ what: String, id: String?, name: String?, password: String? = nil, outcome: SaveOutcome? = nil) {
        guard enabled else { return }
        print("TRACE device \(device.index) (\(device.profile.suffix(8))) \(what) id=\(id ?? "-") name=\(name ?? "-") pw=\(password ?? "-") "
              + "\(outcome.map { $0.isOffline ? "offline" : "synced" } ?? "")")
    }
}

/// Run sizes: the CI size by default, the long mode with `VAULTSYNC_LONG=1`; each one can be set
/// exactly with its own environment variable.
enum RunSize {
    static var isLong: Bool { ProcessInfo.processInfo.environment["VAULTSYNC_LONG"] == "1" }

    static func value(_ variable: String, ci: Int, long: Int) -> Int {
        if let text = ProcessInfo.processInfo.environment[variable], let value = Int(text) { return value }
        return isLong ? long : ci
    }
}

/// The token endpoint: after a device's login, each of its requests there is a token refresh.
let tokenPath = "/identity/connect/token"

/// A proxy tally of the token endpoint in words: how many refreshes, how many got which fault (those
/// forwarded before the fault are refreshes the server did and the device never heard of).
func describeRefreshes(_ tally: [String: Int]) -> String {
    let faults = tally.filter { $0.key != "requests" }
    return "\(tally["requests"] ?? 0) refreshes, \(faults.values.reduce(0, +)) with a fault \(faults.sorted { $0.key < $1.key })"
}

/// The test account's KDF: the server's minimum, so unlocking stays quick.
let reliabilityKDF = KdfConfiguration.pbkdf2(iterations: 100_000)
let reliabilityPassword = "correct horse battery staple"

/// A device clock with a skew that can jump (NTP corrections, a user changing the time).
///
/// On the machine's time by default. On a simulation's time, each read moves the device's own time a
/// millisecond on, and never below the world's: two things the device does in one step have times of
/// their own (queue records, backup names), and the values depend only on the order of the reads.
final class SkewedClock: DeviceClock, @unchecked Sendable {
    private let lock = NSLock()
    private var skew: Int64
    private let time: SimulatedTime?
    private var local: Int64 = 0

    init(skewSeconds: Int64, time: SimulatedTime? = nil) {
        skew = skewSeconds * 1_000_000
        self.time = time
    }

    func now() -> WireDate {
        lock.withLock {
            guard let time else { return WireDate(Date()).adding(microseconds: skew) }
            local = max(local + 1_000, time.worldMicroseconds)
            return WireDate(microsecondsSinceEpoch: local + skew)
        }
    }

    func jump(seconds: Int64) {
        lock.withLock { skew += seconds * 1_000_000 }
    }

    func set(skewSeconds: Int64) {
        lock.withLock { skew = skewSeconds * 1_000_000 }
    }

    var skewSeconds: Int64 { lock.withLock { skew / 1_000_000 } }
}

/// Everything the test saved, to prove that nothing was lost: each saved password is unique, and a
/// password never disappears (the client keeps a changed password in the item's history and backs up
/// the losing side of a conflict). Passwords are followed by the name of the item they were saved in
/// (names are never edited by the tests, so a name follows an item across id swaps and devices).
final class Ledger: @unchecked Sendable {
    private let lock = NSLock()
    private var passwords: [String: String] = [:]
    /// Every note saved (→ the item it was saved into), and the notes some save replaced on purpose
    /// (the note its device showed when the user saved a new one).
    private var notes: [String: String] = [:]
    private var replacedNotes: Set<String> = []
    /// Every name a device gave an item (added with it, or renamed to it), and the names some rename
    /// replaced on purpose (the name its device showed when the user typed a new one).
    private var names: Set<String> = []
    private var replacedNames: Set<String> = []
    /// Every login username saved, and those some save replaced on purpose (as for notes).
    private var usernames: [String: String] = [:]
    private var replacedUsernames: Set<String> = []
    private var shapes = 0
    private var deletedForGood: Set<String> = []
    private var plaintexts: Set<String> = []
    private var counter = 0
    private var edits = 0
    /// A renamed item's names: each name → the name it was renamed from (its lineage's first is the root).
    private var renamedFrom: [String: String] = [:]
    private var tallies: [String: Int] = [:]
    let tag: String

    init(tag: String) { self.tag = tag }

    /// A new unique value (also remembered as a secret that must never be stored in plaintext).
    func fresh(_ kind: String) -> String {
        lock.withLock {
            counter += 1
            let value = "\(kind)-\(tag)-\(counter)"
            plaintexts.insert(value)
            return value
        }
    }

    /// A password that was saved (the operation returned) into the item named `itemName`.
    func saved(password: String, itemName: String) {
        lock.withLock { passwords[password] = itemName }
    }

    /// A note that was saved into the item named `itemName`, over `replacing` (the note the device
    /// showed when the user wrote the new one: that one was replaced on purpose, and may go).
    func saved(note: String, replacing: String?, itemName: String) {
        lock.withLock {
            notes[note] = itemName
            if let replacing { replacedNotes.insert(replacing) }
        }
    }

    /// A name a device gave an item (`replacing` nil: added with it), over `replacing` (the name the
    /// device showed when the user typed the new one: that one was replaced on purpose, and may go).
    /// Renaming a conflict backup replaces the name it kept (its original name) on purpose too.
    func saved(name: String, replacing: String?) {
        lock.withLock {
            names.insert(name)
            if let replacing {
                replacedNames.insert(replacing)
                replacedNames.insert(BackupName.originalName(of: replacing))
            }
        }
    }

    /// A login username that was saved into the item named `itemName`, over `replacing` (the username
    /// the device showed: replaced on purpose). Usernames are secrets of the plaintext scan too.
    func saved(username: String, replacing: String?, itemName: String) {
        lock.withLock {
            usernames[username] = itemName
            plaintexts.insert(username)
            if let replacing { replacedUsernames.insert(replacing) }
        }
    }

    /// A username that belongs to a fresh value of the ledger's (`note-TAG-N` → `user-TAG-N`), so that
    /// saving one draws nothing and counts nothing: a seed's names, passwords, notes and trace stay
    /// those it had before usernames were followed.
    static func username(from value: String) -> String {
        "user-" + value.drop { $0 != "-" }.dropFirst()
    }

    /// What an edit changes, counted (nothing drawn from the random sequence): the password and the
    /// notes, the password only, or the notes only, in turn; so that two devices' edits of one item meet
    /// on the same fields (a true conflict, a backup) and on different ones (merged, no backup).
    func nextEditShape() -> EditShape {
        lock.withLock {
            shapes += 1
            return [EditShape.passwordAndNotes, .passwordOnly, .notesOnly][shapes % 3]
        }
    }

    /// Saved notes that no save replaced on purpose and that are in none of `present` (every item's notes,
    /// backups and trashed items included), except those of items the user deleted for good: a note that
    /// lost a conflict must be in the backup, and one merged in must be in the item.
    func lostNotes(present: Set<String>) -> [String] {
        lock.withLock {
            let deletedItems = Set(deletedForGood.map(root(of:)))
            return notes.filter { note, name in
                !replacedNotes.contains(note) && !present.contains(note) && !deletedItems.contains(root(of: name))
            }.map { "\($0.key) (in \"\($0.value)\")" }.sorted()
        }
    }

    /// Names a device gave an item that no rename replaced on purpose and that are in none of `present`
    /// (every item's name, backups' and trashed items' included; a backup counts by its original name),
    /// except those of items the user deleted for good. Two devices renaming one item differently
    /// replace its name on purpose, but neither replaces the other's: both new names must stay (one
    /// on the item, the other on the backup of the version that lost).
    func lostNames(present: [String]) -> [String] {
        lock.withLock {
            let deletedItems = Set(deletedForGood.map(root(of:)))
            let kept = Set(present.flatMap { [$0, BackupName.originalName(of: $0)] })
            return names.filter { name in
                !replacedNames.contains(name) && !kept.contains(name) && !deletedItems.contains(root(of: name))
            }.sorted()
        }
    }

    /// Saved usernames that no save replaced on purpose and that are in none of `present` (every item's
    /// username, backups' and trashed items' included), except those of items deleted for good: the
    /// rule of ``lostNotes(present:)``.
    func lostUsernames(present: Set<String>) -> [String] {
        lock.withLock {
            let deletedItems = Set(deletedForGood.map(root(of:)))
            return usernames.filter { username, name in
                !replacedUsernames.contains(username) && !present.contains(username) && !deletedItems.contains(root(of: name))
            }.map { "\($0.key) (in \"\($0.value)\")" }.sorted()
        }
    }

    /// An item was deleted for good by the user: what it held may be gone, and so may its backups'.
    func deletedForGood(itemName: String) {
        lock.withLock { _ = deletedForGood.insert(itemName) }
    }

    /// Whether this edit also renames the item: every third edit, counted here so that it draws nothing
    /// from the random sequence (the simulation's steps stay those of the seeds run before renames).
    func nextEditRenames() -> Bool {
        lock.withLock {
            edits += 1
            return edits % 3 == 0
        }
    }

    /// An item was renamed: its old and new names are one item (for the exemptions of items deleted
    /// for good, and for counting copies of one item).
    func renamed(from old: String, to new: String) {
        lock.withLock { renamedFrom[new] = old }
    }

    /// The first name of the item a name belongs to, following renames only: a backup is an item of
    /// its own (renamed, it loses its suffix and is still not the original).
    func item(named name: String) -> String {
        lock.withLock {
            var current = name
            while let older = renamedFrom[current] { current = older }
            return current
        }
    }

    /// Whether the item a name belongs to (or the item it was backed up from) was deleted for good on
    /// some device. Devices that had edited it offline each recreate it, under the name they gave it:
    /// renamed differently, those are separate items (each device's data kept).
    func wasDeletedForGood(_ name: String) -> Bool {
        lock.withLock {
            let item = root(of: name)
            return deletedForGood.contains { root(of: $0) == item }
        }
    }

    /// Whether two names belong to one item, following renames and backups (for describing a finding).
    func sameItem(_ first: String, _ second: String) -> Bool {
        lock.withLock { root(of: first) == root(of: second) }
    }

    /// Lost passwords with the name of the item each was saved into (``lost(present:)``'s pairs).
    func lostPasswords(present: Set<String>) -> [(password: String, itemName: String)] {
        lock.withLock {
            let deletedItems = Set(deletedForGood.map(root(of:)))
            return passwords.filter { password, name in !present.contains(password) && !deletedItems.contains(root(of: name)) }
                .map { (password: $0.key, itemName: $0.value) }.sorted { $0.password < $1.password }
        }
    }

    /// The first name of the item a name belongs to, following renames and backups to what they
    /// were made from (what deleting an item for good may take with it).
    private func root(of name: String) -> String {
        var current = name
        while true {
            let original = BackupName.originalName(of: current)
            if original != current { current = original; continue }
            guard let older = renamedFrom[current] else { return current }
            current = older
        }
    }

    func count(_ key: String, by amount: Int = 1) {
        lock.withLock { tallies[key, default: 0] += amount }
    }

    var counts: [String: Int] { lock.withLock { tallies } }
    var secrets: Set<String> { lock.withLock { plaintexts } }
    var savedPasswordCount: Int { lock.withLock { passwords.count } }

    /// Saved passwords that are in none of `present`, except those of items the user deleted for good.
    func lost(present: Set<String>) -> [String] {
        lostPasswords(present: present).map { "\($0.password) (in \"\($0.itemName)\")" }
    }
}

/// What one edit of the simulation changes (``Ledger/nextEditShape()``).
enum EditShape {
    case passwordAndNotes, passwordOnly, notesOnly
}

/// What the tests set on a device's network: a fault proxy on loopback, or the simulation's
/// in-process transport (the same fault plan, without sockets).
protocol DeviceNetwork: Sendable {
    func setRandomFaults(_ faults: [FaultProxy.RandomFault], seed: UInt64) async
    func setPartitioned(_ partitioned: Bool) async
    func setForwardHook(_ hook: (@Sendable (String, String) async -> Void)?) async
    func tally(pathPrefix: String) async -> [String: Int]
}

extension FaultProxy: DeviceNetwork {}
extension InProcessTransport: DeviceNetwork {}

/// One simulated device: a profile database, an engine behind its own network (a fault proxy, or the
/// simulation's in-process transport), a skewed clock.
final class SimDevice: @unchecked Sendable {
    let index: Int
    let profile: String
    let network: any DeviceNetwork
    let clock: SkewedClock
    /// Reads the profile's files for the plaintext checks, keeping the engine's locks.
    let files = LockKeepingReader()
    private(set) var engine: VaultEngine
    var locked = false
    var lockedSteps = 0
    /// The server ended the session (``VaultError/sessionExpired``): the user must log in again.
    var sessionEnded = false
    /// How often the user logged in again after the session ended.
    var loginsAgain = 0
    /// The simulation's partition of this device's network is on (``LiveDelivery``: no hub connection).
    var partitioned = false
    /// Hub records sent to this device and not yet heard (``LiveDelivery``).
    var liveInbox: [String] = []

    init(index: Int, profile: String, network: any DeviceNetwork, clock: SkewedClock, engine: VaultEngine) {
        self.index = index
        self.profile = profile
        self.network = network
        self.clock = clock
        self.engine = engine
    }

    /// The fault proxy of a device on real sockets (every device but the simulation's).
    var proxy: FaultProxy {
        guard let proxy = network as? FaultProxy else { preconditionFailure("device \(index) has no fault proxy: it is in process") }
        return proxy
    }

    var databasePath: String { profile + "/vault.sqlite" }

    /// Opens the profile from a copy of `template` (a logged-in profile) and unlocks it. A copy shares
    /// the template's login (device identifier and refresh token) unless `ownLogin`: then it logs in as
    /// a device of its own, as a real one does. Shared logins end after the first access token's
    /// lifetime (an hour): the server rotates refresh tokens, so only the first device to refresh keeps
    /// its session; runs that may last longer need `ownLogin`.
    static func cloned(from template: String, index: Int, proxy: FaultProxy, url: String? = nil, clock: SkewedClock, email: String,
                       ownLogin: Bool = false, configure: (inout EngineConfiguration) -> Void) async throws -> SimDevice {
        let profile = temporaryDirectory("vaultsync-sim-device")
        let path = profile + "/vault.sqlite"
        try FileManager.default.copyItem(atPath: template, toPath: path)
        // A new device has measured nothing yet (the template's clock offset belongs to another clock).
        let queue = try DatabaseQueue(path: path)
        try await queue.write { db in
            try db.execute(sql: "UPDATE syncState SET clockOffset = NULL, lastContactDate = NULL, lastContactFailed = 0")
            if ownLogin { try db.execute(sql: "UPDATE account SET deviceIdentifier = ?", arguments: [UUID().uuidString.lowercased()]) }
        }
        try queue.close()
        let proxyURL = await proxy.url
        let engine = try makeEngine(path: path, url: url ?? proxyURL, clock: clock, configure: configure)
        if ownLogin {
            try await engine.login(email: email, password: reliabilityPassword, acceptingKdf: reliabilityKDF)
        } else {
            try await engine.unlock(email: email, password: reliabilityPassword)
        }
        return SimDevice(index: index, profile: profile, network: proxy, clock: clock, engine: engine)
    }

    static func makeEngine(path: String, url: String, clock: any DeviceClock, random: any RandomSource = SystemRandomSource(),
                           transport: (any HTTPTransport)? = nil, logLevel: Logger.Level = .info,
                           configure: (inout EngineConfiguration) -> Void) throws -> VaultEngine {
        var configuration = EngineConfiguration(serverURL: url)
        configuration.api.connectTimeout = .seconds(10)
        configuration.api.requestTimeout = .seconds(20)
        // Two cores running suites side by side: a save is not queued because the machine was slow.
        configuration.api.saveTimeout = .seconds(20)
        configure(&configuration)
        var logger = Logger(label: "vaultsync.engine " + (path as NSString).deletingLastPathComponent.suffix(8))
        logger.logLevel = Trace.enabled ? .debug : logLevel
        return try VaultEngine(databasePath: path, configuration: configuration, clock: clock, random: random, transport: transport, logger: logger)
    }

    /// A device of the deterministic simulation: a new profile whose engine talks to `server` through
    /// its own in-process transport, on the simulation's time, with a seeded random source (keys, IVs,
    /// backoff jitter), logging errors only (the trace says what happened; `VAULTSYNC_TRACE=1` adds the
    /// engine's decisions). It logs in as a device of its own; with `registering`, it registers the
    /// account first.
    static func inProcess(index: Int, server: InProcessServer, skewSeconds: Int64, randomSeed: UInt64, email: String,
                          registering: Bool) async throws -> SimDevice {
        let profile = temporaryDirectory("vaultsync-sim-device")
        let (engine, transport, clock) = try inProcessEngine(path: profile + "/vault.sqlite", server: server, skewSeconds: skewSeconds,
                                                             randomSeed: randomSeed)
        if registering { try await engine.register(email: email, password: reliabilityPassword, kdf: reliabilityKDF) }
        try await engine.login(email: email, password: reliabilityPassword, acceptingKdf: reliabilityKDF)
        _ = transport.tally(pathPrefix: tokenPath)
        return SimDevice(index: index, profile: profile, network: transport, clock: clock, engine: engine)
    }

    /// A device of the deterministic simulation from a copy of a logged-in profile (a ``WorldTemplate``'s),
    /// unlocked from its sealed session: no key derivation. Like a new device, it has measured no clock offset.
    static func inProcess(index: Int, server: InProcessServer, copying template: String, sealedSession: String,
                          sessionKey: SymmetricCryptoKey, skewSeconds: Int64, randomSeed: UInt64) async throws -> SimDevice {
        let profile = temporaryDirectory("vaultsync-sim-device")
        let path = profile + "/vault.sqlite"
        try FileManager.default.copyItem(atPath: template, toPath: path)
        let queue = try DatabaseQueue(path: path)
        try await queue.write { db in
            try db.execute(sql: "UPDATE syncState SET clockOffset = NULL, lastContactDate = NULL, lastContactFailed = 0")
        }
        try queue.close()
        let (engine, transport, clock) = try inProcessEngine(path: path, server: server, skewSeconds: skewSeconds, randomSeed: randomSeed)
        try await engine.unlock(sealedSession: sealedSession, sessionKey: sessionKey)
        _ = transport.tally(pathPrefix: tokenPath)
        return SimDevice(index: index, profile: profile, network: transport, clock: clock, engine: engine)
    }

    static func inProcessEngine(path: String, server: InProcessServer, skewSeconds: Int64,
                                randomSeed: UInt64) throws -> (VaultEngine, InProcessTransport, SkewedClock) {
        let transport = InProcessTransport(server: server)
        let clock = SkewedClock(skewSeconds: skewSeconds, time: server.time)
        let engine = try makeEngine(path: path, url: InProcessServer.url, clock: clock, random: SeededRandomSource(seed: randomSeed),
                                    transport: transport, logLevel: .error) { configuration in
            configuration.resolutionConcurrency = 1
            // A device's queue holds a few changes here: pages of three make most passes read several pages.
            configuration.resolutionPageSize = 3
            // VAULTSYNC_SIM_CONFLICTS=backup runs the seeds with the original rule, to compare the backups made.
            if ProcessInfo.processInfo.environment["VAULTSYNC_SIM_CONFLICTS"] == "backup" { configuration.conflictPolicy = .newerWinsWithBackup }
        }
        return (engine, transport, clock)
    }

    /// Replaces the engine by a new one on the same profile (an app restart), unlocked.
    func restart(url: String, email: String, configure: (inout EngineConfiguration) -> Void) async throws {
        await engine.shutdown()
        engine = try Self.makeEngine(path: databasePath, url: url, clock: clock, configure: configure)
        try await engine.unlock(email: email, password: reliabilityPassword)
        locked = false
    }

    /// Logs in again after the server ended the session, as the user is asked to; the profile keeps
    /// its data and queue.
    func logInAgain(email: String) async throws {
        try await engine.login(email: email, password: reliabilityPassword, acceptingKdf: reliabilityKDF)
        sessionEnded = false
        loginsAgain += 1
    }

    func remove() async {
        await engine.shutdown()
        files.closeAll()
        try? FileManager.default.removeItem(atPath: profile)
    }
}

/// A registered account and a logged-in template profile that devices are cloned from.
struct AccountTemplate {
    let email: String
    let databasePath: String

    static func register(serverURL: String) async throws -> AccountTemplate {
        let email = "sim-\(UUID().uuidString.prefix(8).lowercased())@example.com"
        let profile = temporaryDirectory("vaultsync-sim-template")
        let engine = try SimDevice.makeEngine(path: profile + "/vault.sqlite", url: serverURL, clock: SystemDeviceClock()) { _ in }
        try await engine.register(email: email, password: reliabilityPassword, kdf: reliabilityKDF)
        try engine.localStore.checkpoint()
        await engine.shutdown()
        return AccountTemplate(email: email, databasePath: profile + "/vault.sqlite")
    }
}

// MARK: Random operations

/// The operations the tests perform, all of which work offline.
enum Operation: String, CaseIterable, Sendable {
    case add, edit, trash, restore, deleteForGood, archive, move, favorite, createFolder, renameFolder, deleteFolder, sync

    /// Relative weights: mostly edits and adds, some state changes, few permanent deletes.
    static let weights: [(Operation, Int)] = [
        (.add, 14), (.edit, 30), (.trash, 5), (.restore, 5), (.deleteForGood, 2), (.archive, 5), (.move, 6), (.favorite, 5),
        (.createFolder, 3), (.renameFolder, 3), (.deleteFolder, 2), (.sync, 12),
    ]

    static func random(using generator: inout some RandomNumberGenerator) -> Operation {
        let total = weights.reduce(0) { $0 + $1.1 }
        var pick = Int.random(in: 0..<total, using: &generator)
        for (operation, weight) in weights {
            if pick < weight { return operation }
            pick -= weight
        }
        return .edit
    }
}

/// An item an operation can pick, with the state that decides which operations apply.
struct Target: Sendable {
    var id: String
    var deleted: Bool
    var archived: Bool
    var favorite: Bool
}

struct Targets: Sendable {
    var items: [Target]
    var folders: [String]
    /// Item and folder names by id, for the simulation's trace (empty where the targets come from the cache).
    var names: [String: String] = [:]
}

/// An error a test operation must never see: the store or the crypto failed, or an item is damaged.
struct UnexpectedFailure: Error, CustomStringConvertible {
    var description: String
}

extension SimDevice {
    /// The cached items' wire forms (no decryption).
    func cachedWires() async throws -> [CipherWire] {
        let userID = await engine.currentUserID ?? ""
        return try await engine.localStore.readDatabase { db in
            try CipherRow.filter(Column("userID") == userID).fetchAll(db).map { try $0.wire() }
        }
    }

    func cachedFolderIDs() async throws -> [String] {
        let userID = await engine.currentUserID ?? ""
        return try await engine.localStore.readDatabase { db in
            try String.fetchAll(db, sql: "SELECT id FROM folder WHERE userID = ? ORDER BY id", arguments: [userID])
        }
    }

    /// What operations can pick from, from the cache's wire forms (no decryption; order by id).
    func targetsFromCache() async throws -> Targets {
        let items = try await cachedWires().compactMap { wire in
            wire.id.map { Target(id: $0, deleted: wire.deletedDate != nil, archived: wire.archivedDate != nil, favorite: wire.favorite ?? false) }
        }
        return Targets(items: items.sorted { $0.id < $1.id }, folders: try await cachedFolderIDs())
    }

    /// Until the hook is cleared: when this device's sync first pushes an item (a PUT of one item, a
    /// bulk push or a create), the user saves an item again before the server's answer arrives (the
    /// engine serves calls while the sync waits): the item being pushed, or else `fallback`. The saved
    /// password goes into `ledger` like any other.
    func saveDuringNextPush(ledger: Ledger, fallback: String?, saved: (@Sendable (String) -> Void)? = nil) async {
        let fired = Once()
        let engine = self.engine
        await network.setForwardHook { method, path in
            let id: String?
            if method == "PUT", path.hasPrefix("/api/ciphers/") {
                id = path.dropFirst("/api/ciphers/".count).split(separator: "/").first.map(String.init)
            } else if method == "POST", ["/api/vaultsync/ciphers/bulk-update", "/api/ciphers"].contains(path) {
                id = fallback
            } else {
                return
            }
            guard let id, fired.first() else { return }
            guard var view = try? await engine.item(id: id) else { return }
            let password = ledger.fresh("pw")
            if view.login == nil { view.login = LoginView() }
            view.login?.password = password
            if let result = try? await engine.updateItem(view) {
                ledger.saved(password: password, itemName: view.name)
                ledger.count("save during a push")
                saved?("saved \"\(view.name)\" during \(method) \(InProcessTransport.masked(path)) (\(result.outcome.isOffline ? "offline" : "synced"))")
            }
        }
    }

    /// Performs `operation` on a random target; records what was saved in `ledger`. Errors the user
    /// would see (the server refused, an item was removed meanwhile) are counted; storage, crypto and
    /// damaged-item errors are thrown as ``UnexpectedFailure``. Returns what happened in words, with the
    /// names the ledger gave (never ids, which are random): the simulation's trace.
    @discardableResult
    func perform(_ operation: Operation, targets: Targets, ledger: Ledger, using generator: inout SeededRandom) async throws -> String {
        let items = targets.items
        let folders = targets.folders
        func pick(_ candidates: [Target], using generator: inout SeededRandom) -> String? {
            candidates.isEmpty ? nil : candidates[Int.random(in: 0..<candidates.count, using: &generator)].id
        }
        let randomFolder: String? = folders.isEmpty || Bool.random(using: &generator) ? nil
            : folders[Int.random(in: 0..<folders.count, using: &generator)]
        func named(_ id: String?) -> String { id.map { "\"\(targets.names[$0] ?? "?")\"" } ?? "no folder" }
        func saved(_ outcome: SaveOutcome) -> String { outcome.isOffline ? "saved offline" : "saved" }
        func skipped() -> String {
            ledger.count("skipped")
            return "nothing to do"
        }
        let what: String
        do {
            switch operation {
            case .add:
                let name = ledger.fresh("item")
                let password = ledger.fresh("pw")
                var view = CipherView(type: .login, name: name)
                let username = Ledger.username(from: name)
                view.login = LoginView(username: username, password: password)
                view.notes = ledger.fresh("note")
                view.folderId = randomFolder
                let result = try await engine.addItem(view)
                ledger.saved(password: password, itemName: name)
                if let note = view.notes { ledger.saved(note: note, replacing: nil, itemName: name) }
                ledger.saved(name: name, replacing: nil)
                ledger.saved(username: username, replacing: nil, itemName: name)
                Trace.save(self, "add", id: result.value.id, name: name, password: password, outcome: result.outcome)
                what = "\"\(name)\" in \(named(randomFolder)) pw=\(password): \(saved(result.outcome))"
            case .edit:
                guard let id = pick(items, using: &generator) else { return skipped() }
                var view = try await engine.item(id: id)
                let shape = ledger.nextEditShape()
                let password = shape == .notesOnly ? nil : ledger.fresh("pw")
                if let password {
                    if view.login == nil { view.login = LoginView() }
                    view.login?.password = password
                }
                let shownNote = view.notes
                let note = shape == .passwordOnly ? nil : ledger.fresh("note")
                if let note { view.notes = note }
                // A notes-only edit changes the username too: two edits then conflict exactly where they did before.
                let shownUsername = view.login?.username
                let username = shape == .notesOnly ? note.map(Ledger.username(from:)) : nil
                if let username {
                    if view.login == nil { view.login = LoginView() }
                    view.login?.username = username
                }
                let oldName = view.name
                if ledger.nextEditRenames() { view.name = ledger.fresh("item") }
                let result = try await engine.updateItem(view)
                if view.name != oldName {
                    ledger.renamed(from: oldName, to: view.name)
                    ledger.saved(name: view.name, replacing: oldName)
                    ledger.count("edit with a rename")
                }
                if let password { ledger.saved(password: password, itemName: view.name) }
                if let note { ledger.saved(note: note, replacing: shownNote, itemName: view.name) }
                if let username { ledger.saved(username: username, replacing: shownUsername, itemName: view.name) }
                Trace.save(self, "edit", id: id, name: view.name, password: password, outcome: result.outcome)
                what = "\"\(oldName)\"" + (view.name != oldName ? " renamed \"\(view.name)\"" : "")
                    + (password.map { " pw=\($0)" } ?? "") + (note.map { " note=\($0)" } ?? "") + ": \(saved(result.outcome))"
            case .trash:
                guard let id = pick(items.filter { !$0.deleted }, using: &generator) else { return skipped() }
                let outcome = try await engine.softDeleteItem(id: id)
                Trace.save(self, "trash", id: id, name: nil, outcome: outcome)
                what = "\(named(id)): \(saved(outcome))"
            case .restore:
                guard let id = pick(items.filter(\.deleted), using: &generator) else { return skipped() }
                let outcome = try await engine.restoreItem(id: id)
                Trace.save(self, "restore", id: id, name: nil, outcome: outcome)
                what = "\(named(id)): \(saved(outcome))"
            case .deleteForGood:
                guard let id = pick(items, using: &generator) else { return skipped() }
                let name = try await engine.item(id: id).name
                let outcome = try await engine.permanentlyDeleteItem(id: id)
                ledger.deletedForGood(itemName: name)
                Trace.save(self, "deleteForGood", id: id, name: name, outcome: outcome)
                what = "\"\(name)\": \(saved(outcome))"
            case .archive:
                guard let item = items.isEmpty ? nil : items[Int.random(in: 0..<items.count, using: &generator)] else {
                    return skipped()
                }
                let id = item.id
                let outcome = try await engine.setArchived(id: id, !item.archived)
                Trace.save(self, item.archived ? "unarchive" : "archive", id: id, name: nil, outcome: outcome)
                what = "\(named(id)) \(item.archived ? "out of" : "into") the archive: \(saved(outcome))"
            case .move:
                guard let id = pick(items, using: &generator) else { return skipped() }
                let outcome = try await engine.moveItem(id: id, toFolder: randomFolder)
                Trace.save(self, "move to \(randomFolder ?? "no folder")", id: id, name: nil, outcome: outcome)
                what = "\(named(id)) to \(named(randomFolder)): \(saved(outcome))"
            case .favorite:
                guard let item = items.isEmpty ? nil : items[Int.random(in: 0..<items.count, using: &generator)] else {
                    return skipped()
                }
                let id = item.id
                let outcome = try await engine.setFavorite(id: id, !item.favorite)
                Trace.save(self, "favorite \(!item.favorite)", id: id, name: nil, outcome: outcome)
                what = "\(named(id)) favorite \(!item.favorite): \(saved(outcome))"
            case .createFolder:
                let name = ledger.fresh("folder")
                what = "\"\(name)\": \(saved(try await engine.createFolder(name: name).outcome))"
            case .renameFolder:
                guard let id = randomFolder else { return skipped() }
                let name = ledger.fresh("folder")
                what = "\(named(id)) to \"\(name)\": \(saved(try await engine.renameFolder(id: id, name: name)))"
            case .deleteFolder:
                guard let id = randomFolder else { return skipped() }
                what = "\(named(id)): \(saved(try await engine.deleteFolder(id: id)))"
            case .sync:
                let retry = Int.random(in: 0..<4, using: &generator) == 0
                if retry { try await engine.retryPending() }
                let report = try await engine.sync()
                ledger.count("backups made", by: report.backups.count)
                ledger.count("merges", by: report.messages.filter { $0.contains("merged your") || $0.contains("kept the other device's") }.count)
                what = (retry ? "after a retry of everything: " : "") + "resolved \(report.resolved), backups \(report.backups.count), "
                    + "still pending \(report.stillPending), needs attention \(report.needsAttention), messages \(report.messages.count)"
            }
            ledger.count(operation.rawValue)
            return what
        } catch let caught as VaultError {
            // A sync whose download failed after its resolution is that failure (its report is for the person).
            var error = caught
            if case .syncIncomplete(_, let cause) = caught { error = cause }
            switch error {
            case .storage, .crypto, .model:
                throw UnexpectedFailure(description: "device \(index), \(operation.rawValue): \(error)")
            case .serverRefused(let status, _):
                ledger.count("\(operation.rawValue) refused \(status)")
                return "refused \(status)"
            default:
                if case .sessionExpired = error { sessionEnded = true }
                ledger.count("\(operation.rawValue) failed")
                return "failed: \(error)"
            }
        }
    }
}

// MARK: Invariants

/// What an item looks like to the user, to compare devices.
struct ItemFingerprint: Equatable, CustomStringConvertible {
    var name: String
    var username: String?
    var password: String?
    var notes: String?
    var history: [String]
    var deleted: Bool
    var archived: Bool
    var folderID: String?
    var favorite: Bool

    init(_ view: CipherView) {
        name = view.name
        username = view.login?.username
        password = view.login?.password
        notes = view.notes
        history = view.passwordHistory.map(\.password).sorted()
        deleted = view.deletedDate != nil
        archived = view.archivedDate != nil
        folderID = view.folderId
        favorite = view.favorite
    }

    var description: String {
        "\(name) pw=\(password ?? "-") deleted=\(deleted) archived=\(archived) folder=\(folderID ?? "-") favorite=\(favorite)"
    }
}

/// A device's decrypted view of its vault.
struct DeviceSnapshot {
    var items: [String: ItemFingerprint] = [:]
    var folders: [String: String] = [:]
    var encryptedNames: [String] = []
    /// Every password in the cache: current ones and password histories.
    var passwords: Set<String> = []
    /// Items and folders with a queue record, and those records' states.
    var queued: [String: PendingChangeState] = [:]
    var queuedKinds: [String: PendingChangeKind] = [:]
    var folderNames: [(String, String)] = []

    /// Targets in a repeatable order: by name, then by what else the user sees, and only then by the
    /// random ids (two items that agree on all of it are interchangeable).
    var targets: Targets {
        let ordered = items.sorted { ($0.value.name, $0.value.description, $0.key) < ($1.value.name, $1.value.description, $1.key) }
        var names = items.mapValues(\.name)
        names.merge(folders) { item, _ in item }
        return Targets(items: ordered.map { Target(id: $0.key, deleted: $0.value.deleted, archived: $0.value.archived, favorite: $0.value.favorite) },
                       folders: folderNames.sorted { ($0.1, $0.0) < ($1.1, $1.0) }.map(\.0), names: names)
    }

    static func take(_ device: SimDevice) async throws -> DeviceSnapshot {
        var snapshot = DeviceSnapshot()
        for item in try await device.engine.items() {
            let view: CipherView
            do {
                view = try item.result.get()
            } catch {
                throw UnexpectedFailure(description: "device \(device.index): item \(item.id) cannot be read: \(error)")
            }
            let fingerprint = ItemFingerprint(view)
            snapshot.items[item.id] = fingerprint
            if let password = fingerprint.password { snapshot.passwords.insert(password) }
            snapshot.passwords.formUnion(fingerprint.history)
        }
        for folder in try await device.engine.folders() {
            snapshot.folders[folder.id ?? ""] = folder.name
            snapshot.folderNames.append((folder.id ?? "", folder.name))
        }
        snapshot.encryptedNames = try await device.cachedWires().map(\.name.serialized)
        for change in try await device.engine.pendingChanges() {
            snapshot.queued[change.itemID] = change.metadata.state
            snapshot.queuedKinds[change.itemID] = change.metadata.kind
        }
        return snapshot
    }
}

/// What a backup holds of the version it keeps, for finding one version backed up twice.
struct BackupVersion: Hashable {
    var item: String
    var username: String?
    var password: String?
    var notes: String?
    var history: [String]

    /// Usernames count, since edits change them too: two backups with one password, notes and
    /// history but different usernames are two versions (seed 16540 flagged them as one).
    init(_ backup: ItemFingerprint) {
        item = BackupName.originalName(of: backup.name)
        username = backup.username
        password = backup.password
        notes = backup.notes
        history = backup.history
    }
}

enum Invariants {
    /// The files of a device's profile (database, WAL, shared memory, anything else) hold none of `secrets`.
    static func plaintextFindings(_ device: SimDevice, secrets: Set<String>) throws -> [String] {
        var findings: [String] = []
        let files = try FileManager.default.contentsOfDirectory(atPath: device.profile)
        for file in files {
            guard let data = device.files.read(device.profile + "/" + file), !data.isEmpty else { continue }
            data.withUnsafeBytes { haystack in
                for secret in secrets {
                    let found = Array(secret.utf8).withUnsafeBytes { needle in Self.contains(haystack, needle) }
                    if found { findings.append("\(file) contains \(secret)") }
                }
            }
        }
        return findings
    }

    static func contains(_ haystack: UnsafeRawBufferPointer, _ needle: UnsafeRawBufferPointer) -> Bool {
        byteSearch(haystack, contains: needle)
    }

    /// Queue records are either waiting or need attention, and keep their data: every record except
    /// a permanent delete still has its local item or folder.
    /// Every device holds what the server holds (items and folders), but for what still waits in a
    /// queue (a record that needs attention stays local by design).
    static func serverFindings(_ snapshots: [DeviceSnapshot], server: DeviceSnapshot) -> [String] {
        var findings: [String] = []
        for (index, snapshot) in snapshots.enumerated() {
            let queued = Set(snapshot.queued.keys)
            for id in Set(server.items.keys).union(snapshot.items.keys).subtracting(queued).sorted() where server.items[id] != snapshot.items[id] {
                findings.append("device \(index) and the server differ on item \(id): "
                                + "\(snapshot.items[id]?.description ?? "missing") vs \(server.items[id]?.description ?? "missing")")
            }
            for id in Set(server.folders.keys).union(snapshot.folders.keys).subtracting(queued).sorted() where server.folders[id] != snapshot.folders[id] {
                findings.append("device \(index) and the server differ on folder \(id)")
            }
        }
        return findings
    }

    static func queueFindings(_ snapshot: DeviceSnapshot, device: Int) -> [String] {
        snapshot.queued.compactMap { id, _ in
            let kind = snapshot.queuedKinds[id]
            if kind == .hardDelete { return nil }
            return snapshot.items[id] != nil || snapshot.folders[id] != nil ? nil : "device \(device): queue record for \(id) lost its data"
        }
    }

    /// Original items (not backups) appear once, under any of their names (a renamed item posted
    /// twice shows as its old and its new name); no item was created twice (two items with the
    /// byte-identical encrypted name can only come from a create sent twice).
    static func duplicateFindings(_ snapshot: DeviceSnapshot, ledger: Ledger) -> [String] {
        var findings: [String] = []
        let originals = snapshot.items.values.map(\.name).filter { !$0.contains(" - offline conflict ") }
        for (item, names) in Dictionary(grouping: originals, by: { ledger.item(named: $0) })
        where names.count > 1 && (Set(names).count == 1 || !ledger.wasDeletedForGood(item)) {
            findings.append("\(names.count) items of \(item): \(names.sorted())")
        }
        for (_, count) in Dictionary(grouping: snapshot.encryptedNames, by: { $0 }).mapValues(\.count) where count > 1 {
            findings.append("\(count) items with the same encrypted name (a create sent twice)")
        }
        // One version is kept once: two backups of one item with the same content are a backup made twice
        // (bug 20: a version backed up on one device as the server's, on another as its own).
        let backups = snapshot.items.values.filter { BackupName.isBackup($0.name) }
        for (version, copies) in Dictionary(grouping: backups, by: { BackupVersion($0) }) where copies.count > 1 {
            findings.append("\(copies.count) backups of one version of \(version.item): \(copies.map(\.name).sorted())")
        }
        return findings
    }

    /// All devices show the same items and folders (apart from what still has a queue record
    /// somewhere, which keeps its local version until resolved).
    static func convergenceFindings(_ snapshots: [DeviceSnapshot]) -> [String] {
        guard let first = snapshots.first else { return [] }
        let queuedAnywhere = Set(snapshots.flatMap(\.queued.keys))
        var findings: [String] = []
        for (index, other) in snapshots.enumerated().dropFirst() {
            let ids = Set(first.items.keys).union(other.items.keys).subtracting(queuedAnywhere)
            for id in ids.sorted() where first.items[id] != other.items[id] {
                findings.append("device 0 and \(index) differ on item \(id): \(first.items[id]?.description ?? "missing") vs \(other.items[id]?.description ?? "missing")")
            }
            let folderIDs = Set(first.folders.keys).union(other.folders.keys).subtracting(queuedAnywhere)
            for id in folderIDs.sorted() where first.folders[id] != other.folders[id] {
                findings.append("device 0 and \(index) differ on folder \(id)")
            }
        }
        return findings
    }
}

/// Faults off, everyone unlocked, then sync rounds until every queue is drained or needs attention.
/// With `loggingInAgain`, a device whose session the server ended (a refresh whose answer was lost,
/// not retried within the server's grace period) logs in again and syncs, as its user would.
func settle(_ devices: [SimDevice], email: String, rounds: Int = 3, loggingInAgain: Bool = false) async throws -> [DeviceSnapshot] {
    func syncing(_ device: SimDevice, _ call: (VaultEngine) async throws -> Void) async throws {
        do {
            if loggingInAgain, device.sessionEnded { try await device.logInAgain(email: email) }
            try await call(device.engine)
        } catch VaultError.sessionExpired where loggingInAgain {
            try await device.logInAgain(email: email)
            try await call(device.engine)
        } catch VaultError.syncIncomplete(_, cause: .sessionExpired) where loggingInAgain {
            try await device.logInAgain(email: email)
            try await call(device.engine)
        }
    }
    for device in devices {
        await device.network.setRandomFaults([], seed: 0)
        await device.network.setPartitioned(false)
        if device.locked {
            try await device.engine.unlock(email: email, password: reliabilityPassword)
            device.locked = false
        }
    }
    for _ in 0..<rounds {
        for device in devices {
            try await device.engine.retryPending()
            do {
                try await syncing(device) { _ = try await $0.sync() }
            } catch let error as VaultError {
                throw UnexpectedFailure(description: "device \(device.index): sync with faults off failed: \(error)")
            }
        }
        var waiting = false
        for device in devices where try await device.engine.pendingChanges().contains(where: { $0.metadata.state == .pending }) {
            waiting = true
        }
        if !waiting { break }
    }
    // A last pull everywhere after the last write (the last device to sync pulled after it).
    for device in devices.dropLast() { try await syncing(device) { _ = try await $0.pull() } }
    var snapshots: [DeviceSnapshot] = []
    for device in devices { snapshots.append(try await DeviceSnapshot.take(device)) }
    return snapshots
}

/// Every end-of-run invariant; returns what failed (empty: all held).
func finalFindings(_ devices: [SimDevice], snapshots: [DeviceSnapshot], ledger: Ledger) throws -> [String] {
    var findings: [String] = []
    for (device, snapshot) in zip(devices, snapshots) {
        for (id, state) in snapshot.queued where state != .needsAttention {
            findings.append("device \(device.index): record for \(id) still pending after the final rounds")
        }
        findings += Invariants.queueFindings(snapshot, device: device.index)
        findings += Invariants.duplicateFindings(snapshot, ledger: ledger).map { "device \(device.index): \($0)" }
        findings += try Invariants.plaintextFindings(device, secrets: ledger.secrets).map { "device \(device.index): \($0)" }
    }
    findings += Invariants.convergenceFindings(snapshots)
    let present = snapshots.reduce(into: Set<String>()) { $0.formUnion($1.passwords) }
    // Each lost password, then what each device holds of its item (its renames and backups included), to
    // tell a version dropped without a backup from one whose history was cut.
    let lostPasswords = ledger.lostPasswords(present: present)
    findings += lostPasswords.map { "lost: \($0.password) (in \"\($0.itemName)\")" }
    for lost in lostPasswords {
        for (device, snapshot) in zip(devices, snapshots) {
            for (id, item) in snapshot.items.sorted(by: { $0.key < $1.key }) where ledger.sameItem(item.name, lost.itemName) {
                findings.append("  of \(lost.password), device \(device.index) holds \(id): \(item) notes=\(item.notes ?? "-") history=\(item.history)")
            }
        }
    }
    let notes = snapshots.reduce(into: Set<String>()) { $0.formUnion($1.items.values.compactMap(\.notes)) }
    findings += ledger.lostNotes(present: notes).map { "lost note: \($0)" }
    let names = snapshots.flatMap { $0.items.values.map(\.name) }
    findings += ledger.lostNames(present: names).map { "lost name: \($0)" }
    let usernames = snapshots.reduce(into: Set<String>()) { $0.formUnion($1.items.values.compactMap(\.username)) }
    findings += ledger.lostUsernames(present: usernames).map { "lost username: \($0)" }
    return findings
}
