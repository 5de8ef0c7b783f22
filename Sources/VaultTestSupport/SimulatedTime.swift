import Foundation
import VaultCrypto

/// The one clock of a deterministic simulation: nothing reads the machine's time.
///
/// The world's time moves only when the simulation advances it (between steps). The server's clock
/// moves by a tick before each request it answers (and by a fault's delay), never below the world's
/// time, so each of its writes has a revision date of its own. Devices read the world's time through
/// clocks of their own that tick on every read (see the simulation's device clock).
public final class SimulatedTime: @unchecked Sendable {
    private let lock = NSLock()
    private var world: Int64
    private var server: Int64

    /// 2026-01-01T00:00:00Z, in microseconds since the epoch: every world starts there.
    public static let start: Int64 = 1_767_225_600_000_000

    public init(startingAt microseconds: Int64 = SimulatedTime.start) {
        world = microseconds
        server = microseconds
    }

    /// The world's time, in microseconds since the epoch.
    public var worldMicroseconds: Int64 { lock.withLock { world } }

    /// Moves the world's time forward.
    public func advance(microseconds: Int64) {
        lock.withLock { world += max(0, microseconds) }
    }

    /// The server's clock, in microseconds since the epoch (for `ServerConfiguration.now`).
    public var serverMicroseconds: Int64 { lock.withLock { server } }

    /// Moves the server's clock forward by `microseconds`, and at least to the world's time.
    public func tickServer(microseconds: Int64) {
        lock.withLock { server = max(server + microseconds, world) }
    }
}

/// A seeded random source (``SeededRandom``) for an engine's keys, IVs and backoff jitter: the same
/// seed gives the same bytes, in the order they are asked for.
public final class SeededRandomSource: RandomSource, @unchecked Sendable {
    private let lock = NSLock()
    private var generator: SeededRandom

    public init(seed: UInt64) {
        generator = SeededRandom(seed: seed)
    }

    public func bytes(count: Int) -> [UInt8] {
        lock.withLock {
            var out: [UInt8] = []
            out.reserveCapacity(count + 7)
            while out.count < count {
                withUnsafeBytes(of: generator.next().littleEndian) { out.append(contentsOf: $0) }
            }
            return Array(out.prefix(count))
        }
    }
}
