import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOSSL
import VaultModels
import VaultSyncCore
import WSClient

/// Why the notifications hub could not be used.
public enum HubConnectError: Error, Sendable, Equatable {
    /// The server answered the upgrade with something else (no hub: a 404, a proxy that refuses
    /// WebSockets, or a token it refused): the client falls back to polling.
    case unavailable
    /// The handshake was answered with an error.
    case handshakeRefused(String)
    /// No connection (refused, unreachable, TLS failure, no handshake answer in time).
    case unreachable(String)
}

/// How a hub connection that was open ended.
public enum HubConnectionEnd: Sendable, Equatable {
    /// The server sent a close message (type 7): on shutdown (`allowReconnect`) or when it ended the
    /// session.
    case closedByServer(error: String?, allowReconnect: Bool)
    /// The connection went away without a close message, or nothing came for twice the ping interval.
    case lost(String)
    /// The caller cancelled it.
    case cancelled
}

/// One connection to the notifications hub (docs/PROTOCOL.md, "The notifications hub"): a WebSocket
/// to `…/notifications/hub?access_token=…` speaking the SignalR JSON protocol. It sends the
/// handshake, a ping every `pingInterval`, hands every `ReceiveMessage` to `onMessage`, and returns
/// how the connection ended. The server pings every 15 s, so silence for twice the interval is a
/// connection that is gone (a sleeping laptop, a dead proxy).
public struct NotificationsConnection: Sendable {
    public var url: String
    public var tls: TLSConfiguration?
    public var pingInterval: Duration
    public var handshakeTimeout: Duration
    public var logger: Logger

    public init(url: String, tls: TLSConfiguration? = nil, pingInterval: Duration = .seconds(15), handshakeTimeout: Duration = .seconds(10),
                logger: Logger = Logger(label: "vaultsync.hub")) {
        self.url = url
        self.tls = tls
        self.pingInterval = pingInterval
        self.handshakeTimeout = handshakeTimeout
        self.logger = logger
    }

    /// The hub's WebSocket address for a server: the `environment.notifications` address of
    /// `/api/config` when the server names one (bitwarden.com keeps the hub on another host), else
    /// `/notifications/hub` under the base URL; `http` becomes `ws` and `https` `wss`.
    public static func hubURL(baseURL: String, configuredNotifications: String?) -> String {
        var base = configuredNotifications.flatMap { $0.isEmpty ? nil : $0 } .map { $0 + "/hub" } ?? baseURL + "/notifications/hub"
        while base.hasSuffix("//hub") { base = String(base.dropLast(5)) + "/hub" }
        if base.hasPrefix("https://") { return "wss://" + base.dropFirst(8) }
        if base.hasPrefix("http://") { return "ws://" + base.dropFirst(7) }
        return base
    }

    /// Connects with `accessToken` and runs until the connection ends. `onOpen` is called once the
    /// handshake is answered; `onMessage` for each notification, in order (the next record is read
    /// when it returns). Throws ``HubConnectError`` when no connection was opened.
    public func run(accessToken: String, onOpen: @escaping @Sendable () async -> Void,
                    onMessage: @escaping @Sendable (PushNotification) async -> Void) async throws -> HubConnectionEnd {
        let separator = url.contains("?") ? "&" : "?"
        let address = url + separator + "access_token=" + (accessToken.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(.init(charactersIn: "-._~"))) ?? accessToken)
        let state = NIOLockedValueBox(RunState())
        var configuration = WebSocketClientConfiguration()
        configuration.maxFrameSize = 1 << 20
        configuration.autoPing = .disabled
        let (pingInterval, handshakeTimeout, logger) = (self.pingInterval, self.handshakeTimeout, self.logger)
        do {
            _ = try await WebSocketClient.connect(url: address, configuration: configuration, tlsConfiguration: tls, logger: logger) { inbound, outbound, _ in
                try await outbound.write(.text(HubJSONProtocol.handshake))
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask {
                        var carry = ""
                        var awaitingHandshake = true
                        for try await message in inbound.messages(maxSize: 1 << 20) {
                            guard case .text(let text) = message else { continue }
                            state.withLockedValue { $0.lastHeard = .now }
                            for record in HubJSONProtocol.split(text, carry: &carry) where !record.isEmpty {
                                let read: HubJSONProtocol.Record
                                do {
                                    read = try HubJSONProtocol.read(record, awaitingHandshake: awaitingHandshake)
                                } catch {
                                    logger.debug("hub record skipped", metadata: ["error": "\(error)"])
                                    continue
                                }
                                switch read {
                                case .handshake(let error):
                                    awaitingHandshake = false
                                    if let error {
                                        state.withLockedValue { $0.end = .refused(error) }
                                        return
                                    }
                                    state.withLockedValue { $0.opened = true }
                                    await onOpen()
                                case .invocation(let target, let arguments):
                                    for notification in HubJSONProtocol.notifications(target: target, arguments: arguments) {
                                        await onMessage(notification)
                                    }
                                case .close(let error, let allowReconnect):
                                    state.withLockedValue { $0.end = .closed(error, allowReconnect) }
                                    return
                                case .ping, .other:
                                    continue
                                }
                            }
                        }
                        state.withLockedValue { if $0.end == nil { $0.end = .lost("the server closed the connection") } }
                    }
                    group.addTask {
                        let started = ContinuousClock.now
                        while !Task.isCancelled {
                            let opened = state.withLockedValue { $0.opened }
                            let wait = opened ? pingInterval : min(pingInterval, handshakeTimeout)
                            try await Task.sleep(for: wait)
                            let (isOpen, heard) = state.withLockedValue { ($0.opened, $0.lastHeard) }
                            if !isOpen, ContinuousClock.now - started >= handshakeTimeout {
                                state.withLockedValue { if $0.end == nil { $0.end = .lost("no answer to the handshake") } }
                                return
                            }
                            if let heard, ContinuousClock.now - heard > pingInterval * 2 {
                                state.withLockedValue { if $0.end == nil { $0.end = .lost("nothing heard for \(pingInterval * 2)") } }
                                return
                            }
                            if isOpen { try await outbound.write(.text(HubJSONProtocol.ping)) }
                        }
                    }
                    // The first task to finish decides; the other is stopped.
                    _ = try await group.next()
                    group.cancelAll()
                }
                try? await outbound.close(.normalClosure, reason: nil)
            }
        } catch is CancellationError {
            return .cancelled
        } catch let error as WebSocketClientError where error == .webSocketUpgradeFailed {
            throw HubConnectError.unavailable
        } catch {
            if Task.isCancelled { return .cancelled }
            let opened = state.withLockedValue { $0.opened }
            guard opened else { throw HubConnectError.unreachable(String(describing: error)) }
            return .lost(String(describing: error))
        }
        if Task.isCancelled { return .cancelled }
        let (opened, end) = state.withLockedValue { ($0.opened, $0.end) }
        switch end {
        case .refused(let message): throw HubConnectError.handshakeRefused(message)
        case .closed(let error, let allowReconnect): return .closedByServer(error: error, allowReconnect: allowReconnect)
        case .lost(let reason):
            guard opened else { throw HubConnectError.unreachable(reason) }
            return .lost(reason)
        case nil:
            guard opened else { throw HubConnectError.unreachable("the connection closed before the handshake's answer") }
            return .lost("the connection closed")
        }
    }

    struct RunState: Sendable {
        enum End: Sendable, Equatable {
            case refused(String)
            case closed(String?, Bool)
            case lost(String)
        }

        var opened = false
        var lastHeard: ContinuousClock.Instant?
        var end: End?
    }
}
