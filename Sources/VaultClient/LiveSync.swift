import Foundation
import Logging
import NIOConcurrencyHelpers
import VaultAPI
import VaultModels
import VaultStore
import VaultSyncCore

/// How live sync runs (``VaultEngine/startLiveSync(_:)``).
public struct LiveSyncOptions: Sendable {
    /// How often a server without a hub is asked for the account's revision date.
    public var pollInterval: Duration
    /// After how many polls the hub is tried again (a server may gain one, a proxy may stop refusing).
    public var pollsBeforeHubRetry: Int
    /// When to reconnect after the hub or the server went away (capped at 30 s by default).
    public var reconnect: ReconnectSchedule
    /// The hub's keep-alive: a ping this often, and silence for twice as long ends the connection.
    public var pingInterval: Duration
    /// While connected, how often the queue is looked at: a change queued while the server answered
    /// (a refused or failed request, a save made by another process on this profile) is sent once its
    /// retry is due, without waiting for a reconnection.
    public var queueCheckInterval: Duration

    public init(pollInterval: Duration = .seconds(30), pollsBeforeHubRetry: Int = 10, reconnect: ReconnectSchedule = ReconnectSchedule(),
                pingInterval: Duration = .seconds(15), queueCheckInterval: Duration = .seconds(10)) {
        self.pollInterval = pollInterval
        self.pollsBeforeHubRetry = pollsBeforeHubRetry
        self.reconnect = reconnect
        self.pingInterval = pingInterval
        self.queueCheckInterval = queueCheckInterval
    }
}

/// What live sync did, for an app's screens and `vaultsync watch` (one stream: ``VaultEngine/liveEvents()``).
public enum LiveEvent: Sendable, Equatable {
    /// How the device keeps in step now: over the hub, by polling, or not at all.
    case state(LiveState)
    /// An item changed on another device and this device now holds the new version (`name`: its
    /// decrypted name, when it can be read here).
    case itemChanged(id: String, name: String?)
    /// An item was deleted for good elsewhere and is gone here too.
    case itemRemoved(id: String, name: String?)
    /// An item changed elsewhere while a change of this device waits for it: the change is kept,
    /// and the next sync resolves the two.
    case itemKeptForResolution(id: String)
    /// A full sync ran (on connecting, or because the server said the vault changed): `sent` queued
    /// changes reached the server, `pending` still wait.
    case synced(sent: Int, pending: Int, messages: [String])
    /// The server ended this account's sessions (password change, "log out everywhere"): the vault
    /// is locked and the tokens forgotten; signing in again is needed.
    case loggedOut
    /// A step failed and is tried again later (the reason, in the error's words).
    case problem(String)
}

/// Wakes a waiting loop early: a network change, a save that queued a change.
final class WakeSignal: Sendable {
    private let state = NIOLockedValueBox<(pending: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    func wake() {
        let waiter = state.withLockedValue { value -> CheckedContinuation<Void, Never>? in
            if let waiter = value.waiter {
                value.waiter = nil
                return waiter
            }
            value.pending = true
            return nil
        }
        waiter?.resume()
    }

    /// Returns after `duration`, at a wake, or at cancellation, whichever comes first.
    func wait(upTo duration: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(for: duration) }
            group.addTask { await self.waitForWake() }
            await group.next()
            group.cancelAll()
        }
    }

    private func waitForWake() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLockedValue { value -> Bool in
                    if value.pending || Task.isCancelled {
                        value.pending = false
                        return true
                    }
                    value.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLockedValue { value -> CheckedContinuation<Void, Never>? in
                defer { value.waiter = nil }
                return value.waiter
            }
            waiter?.resume()
        }
    }
}

extension VaultEngine {
    /// Keeps the unlocked vault live: a connection to the server's notifications hub (or polling where
    /// there is none) applies changes made on other devices as they happen, and queued changes leave as
    /// soon as the server answers. Every (re)connection compares the account's revision date and syncs
    /// when it moved or when changes are queued; reconnection backs off with jitter, 30 s at most.
    /// Always with the pull's rules: an item with a queued change is never overwritten. Runs until
    /// ``stopLiveSync()``, a lock, or the server ending the session. Calling it again while it runs does
    /// nothing.
    public func startLiveSync(_ options: LiveSyncOptions = LiveSyncOptions()) {
        guard liveTask == nil else { return }
        let wake = WakeSignal()
        liveWake = wake
        liveTask = Task { [weak self] in
            await self?.runLive(options, wake: wake)
        }
    }

    /// Stops live sync and waits until it has stopped.
    public func stopLiveSync() async {
        let task = liveTask
        task?.cancel()
        await task?.value
        liveTask = nil
        liveWake = nil
        setLiveState(nil)
    }

    /// Tries the server at once instead of waiting out a backoff: call it when the network changes
    /// (NWPathMonitor on Apple platforms) or the app comes to the foreground.
    public func networkChanged() {
        liveWake?.wake()
    }

    /// How the device keeps in step now, `nil` when live sync is not running.
    public var liveSyncState: LiveState? { liveState }

    /// A stream of ``LiveEvent``s from now on. Ends when the consumer stops.
    public func liveEvents() -> AsyncStream<LiveEvent> {
        let (stream, continuation) = AsyncStream<LiveEvent>.makeStream(bufferingPolicy: .bufferingNewest(256))
        let id = UUID()
        liveContinuations[id] = continuation
        continuation.onTermination = { [weak self] _ in
            Task { await self?.removeLiveContinuation(id) }
        }
        if let liveState { continuation.yield(.state(liveState)) }
        return stream
    }

    func removeLiveContinuation(_ id: UUID) {
        liveContinuations[id] = nil
    }

    func emit(_ event: LiveEvent) {
        for continuation in liveContinuations.values { continuation.yield(event) }
    }

    func setLiveState(_ state: LiveState?) {
        guard state != liveState else { return }
        liveState = state
        if let state { emit(.state(state)) }
        publishStatus()
    }

    /// The live loop: connect, catch up, apply messages; on loss back off and try again.
    func runLive(_ options: LiveSyncOptions, wake: WakeSignal) async {
        var failures = 0
        var hubUnavailable = false
        var polls = 0
        defer {
            liveTask = nil
            liveWake = nil
            setLiveState(nil)
        }
        while !Task.isCancelled, session != nil {
            do {
                // A revision-date call first: it tells whether the server answers, refreshes an expired
                // access token (the hub takes it in the address), and says whether to catch up.
                try await catchUp()
                failures = 0
                if hubUnavailable {
                    setLiveState(.polling)
                    polls += 1
                    if polls >= options.pollsBeforeHubRetry {
                        polls = 0
                        hubUnavailable = false
                    }
                    await wake.wait(upTo: options.pollInterval)
                    continue
                }
                let end = try await connectHub(options)
                switch end {
                case .cancelled:
                    return
                case .closedByServer(let error, let allowReconnect):
                    logger.info("the hub closed the connection", metadata: ["error": "\(error ?? "")", "reconnect": "\(allowReconnect)"])
                    if !allowReconnect {
                        // A close without a reconnect hint is the server ending the session: the next
                        // revision-date call tells (401 that no refresh cures ends it here too).
                        failures = max(failures, 1)
                    }
                case .lost(let reason):
                    logger.info("the hub connection was lost", metadata: ["reason": "\(reason)"])
                }
                setLiveState(.offline)
            } catch HubConnectError.unavailable {
                hubUnavailable = true
                polls = 0
                continue
            } catch VaultError.sessionExpired {
                await endSessionFromServer()
                return
            } catch is CancellationError {
                return
            } catch {
                if Task.isCancelled { return }
                failures += 1
                setLiveState(.offline)
                emit(.problem(Self.liveReason(error)))
            }
            if Task.isCancelled || session == nil { return }
            var generator = SystemRandomNumberGenerator()
            let seconds = options.reconnect.delay(afterFailures: max(failures, 1), unit: Double.random(in: 0..<1, using: &generator))
            await wake.wait(upTo: .milliseconds(Int64(seconds * 1000)))
        }
    }

    static func liveReason(_ error: any Error) -> String {
        if let error = error as? any LocalizedError, let text = error.errorDescription { return text }
        return String(describing: error)
    }

    /// Asks for the account's revision date and syncs when it moved since the last sync or changes
    /// wait here.
    func catchUp() async throws {
        let revision: Int64
        do {
            revision = try await authorized { api, token in try await api.revisionDate(token: token) }
        } catch let error as ServerCallError {
            await recordContact(success: false, certificateProblem: error.certificateProblem)
            throw error
        }
        await recordContact(success: true)
        let pending = try await pendingCount()
        guard syncNeededOnConnect(serverRevision: revision, lastSyncRevision: lastSyncedRevision, pendingCount: pending) else { return }
        let report = try await sync()
        lastSyncedRevision = revision
        emit(.synced(sent: report.resolved, pending: report.stillPending, messages: report.messages))
    }

    /// One hub connection, until it ends.
    func connectHub(_ options: LiveSyncOptions) async throws -> HubConnectionEnd {
        try requireUsableServer()
        let current = try requireSession()
        guard let token = current.tokens?.accessToken else { throw VaultError.notLoggedIn }
        let (userID, device) = try await liveIdentity()
        let configured = await notificationsAddress()
        let secure = configuration.serverURL.hasPrefix("https://") || (configured?.hasPrefix("https://") ?? false)
        let tls = secure ? api.webSocketTLS : nil
        let connection = NotificationsConnection(url: NotificationsConnection.hubURL(baseURL: api.baseURL, configuredNotifications: configured),
                                                 tls: tls, pingInterval: options.pingInterval, logger: logger)
        return try await withThrowingTaskGroup(of: HubConnectionEnd?.self) { group in
            group.addTask {
                try await connection.run(accessToken: token, onOpen: { [weak self] in
                    await self?.hubOpened()
                }, onMessage: { [weak self] message in
                    await self?.applyLive(message, deviceIdentifier: device, userID: userID)
                })
            }
            group.addTask { [weak self] in
                await self?.sendDueChanges(every: options.queueCheckInterval)
                return nil
            }
            // The connection's end decides; the queue's look-out ends with it.
            let end = try await group.next() ?? nil
            group.cancelAll()
            return end ?? .cancelled
        }
    }

    /// While the hub connection is up: every `interval`, a sync when a queued change is due.
    func sendDueChanges(every interval: Duration) async {
        while !Task.isCancelled {
            do {
                try await Task.sleep(for: interval)
            } catch {
                return
            }
            guard liveState == .live, session != nil else { continue }
            do {
                // Most looks find an empty queue: a count, before opening any record.
                guard try await pendingCount() > 0 else { continue }
                let now = clock.now()
                let due = try await pendingChanges().filter {
                    $0.metadata.state == .pending && ($0.metadata.nextAttemptDate.map { $0 <= now } ?? true)
                }
                guard !due.isEmpty else { continue }
                let report = try await sync()
                emit(.synced(sent: report.resolved, pending: report.stillPending, messages: report.messages))
            } catch is CancellationError {
                return
            } catch {
                emit(.problem(Self.liveReason(error)))
            }
        }
    }

    /// The account and this device's identifier, by which live messages are addressed and echoes
    /// (`ContextId`) recognised.
    func liveIdentity() async throws -> (userID: String, device: String) {
        let userID = try requireSession().userID
        let device = try await read { tx in try tx.accounts.find(userID: userID)?.deviceIdentifier } ?? ""
        return (userID, device)
    }

    /// Live means connected and caught up: changes made between the revision check and the
    /// connection are caught by a second look first, so a save made once `.live` is announced is
    /// sent by the queue's own schedule, never by a catch-up still under way. A failed look still
    /// leaves the connection live (its problem is reported; the next message or look-out retries).
    func hubOpened() async {
        do {
            try await catchUp()
        } catch {
            emit(.problem(Self.liveReason(error)))
        }
        setLiveState(.live)
    }

    /// The hub address the server names in `/api/config` (`environment.notifications`), when it names one.
    func notificationsAddress() async -> String? {
        if let hubAddress { return hubAddress.isEmpty ? nil : hubAddress }
        // A server that cannot say (an older one, a failure) gets the self-hosted address; asked again
        // only by a new engine.
        var address = (try? await api.notificationsAddress()) ?? nil
        // The access token travels to that address: only over TLS, or to the API's own server.
        if let named = address, !(named.hasPrefix("https://") || named.hasPrefix(api.baseURL + "/") || named == api.baseURL) {
            logger.warning("the server names a notifications address without TLS on another host; the API's own is used")
            address = nil
        }
        hubAddress = address ?? ""
        return address
    }

    /// Applies one live message with the pull's rules.
    func applyLive(_ message: PushNotification, deviceIdentifier: String, userID: String) async {
        guard session?.userID == userID else { return }
        let action = LiveAction.decide(message, deviceIdentifier: deviceIdentifier, userID: userID)
        do {
            switch action {
            case .ignore:
                return
            case .logOut:
                await endSessionFromServer()
            case .fullSync, .syncFolders:
                let report = try await sync()
                emit(.synced(sent: report.resolved, pending: report.stillPending, messages: report.messages))
            case .fetchItem(let id, let revisionDate):
                try await applyLiveItem(id: id, userID: userID, announced: revisionDate)
            case .removeItem(let id):
                try await removeLiveItem(id: id, userID: userID)
            case .removeFolder(let id):
                try await write { tx in
                    guard !(try tx.queue(of: userID).items()).contains(QueuedItem(kind: .folder, itemID: id)) else { return }
                    try tx.folders(of: userID).remove(id: id)
                }
            }
        } catch {
            emit(.problem(Self.liveReason(error)))
        }
    }

    /// Fetches an item another device changed and stores it, unless a change of this device waits for
    /// it (the resolver meets the two at the next sync) or the server's version may not replace the
    /// local copy (older, lost its key, does not verify: docs/SECURITY.md).
    ///
    /// `announced`: the revision date the message gave. A local copy already at that revision or later
    /// (a duplicate, or a message that arrives after a newer change was pulled) needs no request.
    func applyLiveItem(id: String, userID: String, announced: WireDate? = nil) async throws {
        if let announced {
            let current = try await read { tx -> Bool in
                guard let local = try tx.ciphers(of: userID).find(id: id), let revision = local.revisionDate else { return false }
                return revision >= announced.microsecondsSinceEpoch
            }
            if current { return }
        }
        guard let server = try await reread(id) else {
            // The server no longer shows it to this account (deleted, or no longer shared with it).
            try await removeLiveItem(id: id, userID: userID)
            return
        }
        guard server.id?.lowercased() == id.lowercased() else { return }
        let keys = try requireSession().keys
        let serverNow = onServerClock(clock.now())
        let stored = try await write { tx -> Bool? in
            if try tx.queue(of: userID).items().contains(QueuedItem(kind: .cipher, itemID: id)) { return nil }
            let ciphers = tx.ciphers(of: userID)
            let row = CipherRow(userID: userID, wire: server)
            if let local = try ciphers.find(id: id) {
                if local.json == row.json { return false }
                if let localWire = try? local.wire(), Self.refusal(server: server, local: localWire, keys: keys, serverNow: serverNow) != nil {
                    return false
                }
            }
            try ciphers.store(row)
            return true
        }
        switch stored {
        case nil: emit(.itemKeptForResolution(id: id))
        case true?: emit(.itemChanged(id: id, name: try? await readableItem(id: id)?.name))
        case false?: break
        }
    }

    func removeLiveItem(id: String, userID: String) async throws {
        let name = try? await readableItem(id: id)?.name
        let removed = try await write { tx -> Bool? in
            if try tx.queue(of: userID).items().contains(QueuedItem(kind: .cipher, itemID: id)) { return nil }
            let ciphers = tx.ciphers(of: userID)
            guard try ciphers.find(id: id) != nil else { return false }
            try ciphers.remove(id: id)
            return true
        }
        switch removed {
        case nil: emit(.itemKeptForResolution(id: id))
        case true?: emit(.itemRemoved(id: id, name: name))
        case false?: break
        }
    }

    /// The server ended the session: lock, forget the tokens, tell the listeners.
    func endSessionFromServer() async {
        if let userID = session?.userID {
            _ = try? await write { tx in try tx.accounts.setSealedTokens(nil, userID: userID) }
        }
        session = nil
        nameIndexInMemory = nil
        emit(.loggedOut)
        publishStatus()
    }
}
