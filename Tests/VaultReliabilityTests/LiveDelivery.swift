import Foundation
@testable import VaultClient
import VaultAPI
import VaultModels
import VaultSyncCore
import VaultTestSupport

/// The notifications hub as the simulation plays it (docs/RELIABILITY.md, "Live messages in the
/// simulation"). The in-process server publishes every notification as the hub's JSON record; each
/// goes to the inbox of every device whose connection is up (unlocked, not partitioned) and is lost
/// for the others, as it would be with their connection down. A device hears its inbox when it acts:
/// some messages now, in a shuffled order, some dropped, some twice, the rest later (after newer
/// ones). Whenever a device's connection comes up again (an unlock, a heal) it catches up as the live
/// loop does on every connection: the revision date, and a sync when it moved or changes are queued.
/// All of it is drawn from a sequence of its own (`seed ^ seedMask`), so the steps stay the seed's.
struct LiveDelivery {
    static let seedMask: UInt64 = 0x11FE_0B5E_55ED_CAFE

    /// What a delivered message may meet, per message.
    static let dropRate = 0.1
    static let duplicateRate = 0.1
    /// How likely a message waiting in an inbox is heard at its device's next step (else it waits on).
    static let hearRate = 0.7

    var random: SeededRandom

    init(seed: UInt64) {
        random = SeededRandom(seed: seed ^ Self.seedMask)
    }

    /// Whether the device's hub connection would be up.
    static func connected(_ device: SimDevice) -> Bool {
        !device.locked && !device.partitioned && !device.sessionEnded
    }

    /// Hands what the server published since the last call to the inboxes of the connected devices.
    static func post(_ published: [PublishedNotifications.Published], to devices: [SimDevice]) {
        for device in devices where connected(device) {
            device.liveInbox += published.map(\.record)
        }
    }

    /// The device hears part of its inbox (`all`: every message, still with drops and duplicates);
    /// returns what happened, for the trace (nil: nothing waited).
    mutating func hear(_ device: SimDevice, ledger: Ledger, all: Bool = false) async -> String? {
        guard Self.connected(device), !device.liveInbox.isEmpty else { return nil }
        var heard: [String] = []
        var waiting: [String] = []
        for record in device.liveInbox {
            if all || Double.random(in: 0..<1, using: &random) < Self.hearRate { heard.append(record) } else { waiting.append(record) }
        }
        device.liveInbox = waiting
        var delivered: [String] = []
        var dropped = 0
        var duplicated = 0
        for record in heard {
            if Double.random(in: 0..<1, using: &random) < Self.dropRate {
                dropped += 1
                continue
            }
            delivered.append(record)
            if Double.random(in: 0..<1, using: &random) < Self.duplicateRate {
                delivered.append(record)
                duplicated += 1
            }
        }
        delivered.shuffle(using: &random)
        let types = await apply(delivered, to: device)
        ledger.count("live messages applied", by: delivered.count)
        ledger.count("live messages dropped", by: dropped)
        ledger.count("live messages duplicated", by: duplicated)
        let applied = types.isEmpty ? "none" : types.joined(separator: ", ")
        return "hears \(delivered.count) live message(s) (\(applied); \(dropped) dropped, \(duplicated) twice, \(waiting.count) later)"
    }

    /// The connection came up again: the live loop's catch-up. Returns what happened, for the trace.
    static func reconnect(_ device: SimDevice, ledger: Ledger) async -> String {
        device.liveInbox = []
        await device.engine.setLiveState(.live)
        do {
            try await device.engine.catchUp()
            ledger.count("live catch-ups")
            return "caught up"
        } catch let error as VaultError {
            if case .sessionExpired = error { device.sessionEnded = true }
            return "catching up failed (\(Self.kind(of: error)))"
        } catch {
            return "catching up failed (\(Self.kind(of: error)))"
        }
    }

    /// The connection went down (a partition): saves go to the queue at once, as with the live loop offline.
    static func disconnect(_ device: SimDevice) async {
        device.liveInbox = []
        await device.engine.setLiveState(.offline)
    }

    /// Applies the records through the engine's live path, as the hub connection hands them over;
    /// returns their push types' names in order.
    func apply(_ records: [String], to device: SimDevice) async -> [String] {
        guard let identity = try? await device.engine.liveIdentity() else { return [] }
        var types: [String] = []
        for record in records {
            // The record ends with the separator; the reader takes one without it.
            let text = String(record.dropLast())
            guard case .invocation(let target, let arguments)? = try? HubJSONProtocol.read(text, awaitingHandshake: false) else {
                types.append("unreadable")
                continue
            }
            for message in HubJSONProtocol.notifications(target: target, arguments: arguments) {
                let echo = message.contextID == identity.device
                types.append((PushType(rawValue: message.type).map { "\($0)" } ?? "type \(message.type)") + (echo ? " (own)" : ""))
                await device.engine.applyLive(message, deviceIdentifier: identity.device, userID: identity.userID)
            }
        }
        return types
    }

    /// An error's case without its associated text (which may carry ids or server words).
    static func kind(of error: any Error) -> String {
        String(describing: error).prefix { $0 != "(" }.description
    }
}
