import Foundation
import VaultCrypto

/// A server clock frozen when made and moved by the test a 30-second time step at a time, for
/// `ServerConfiguration.now`: each authenticator code belongs to a known step, and a fresh step (the
/// server refuses a step it has already accepted) is one ``nextStep()`` away, without waiting.
public final class SteppedServerClock: @unchecked Sendable {
    private let lock = NSLock()
    private var micros = Int64((Date().timeIntervalSince1970 * 1_000_000).rounded())

    public init() {}

    /// Microseconds since the epoch.
    public var now: Int64 {
        lock.lock()
        defer { lock.unlock() }
        return micros
    }

    /// Moves to the next 30-second step.
    public func nextStep() {
        lock.lock()
        micros += 30_000_000
        lock.unlock()
    }

    /// The authenticator code of `key` (Base32) at the clock's time.
    public func code(_ key: String) throws -> String {
        try TOTP(secretOrURI: key).code(counter: UInt64(now / 1_000_000 / 30))
    }
}
