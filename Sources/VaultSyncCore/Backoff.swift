/// Retry timing for queued changes: exponential with jitter, capped (seed 004 §1.3, with jitter so
/// that many devices coming back at once do not retry in step).
public struct Backoff: Sendable, Equatable {
    public var base: Double
    public var cap: Double
    /// After this many attempts a change needs the user's attention instead of more retries.
    public var maximumAttempts: Int

    public init(base: Double = 2, cap: Double = 3600, maximumAttempts: Int = 12) {
        self.base = base
        self.cap = cap
        self.maximumAttempts = maximumAttempts
    }

    /// Seconds to wait after `attempts` failed attempts; `unit` is a random number in [0, 1).
    /// Delay = min(cap, base · 2^(attempts−1)) · (0.5 + unit/2) ("equal jitter": never less than half).
    public func delay(afterAttempts attempts: Int, unit: Double) -> Double {
        guard attempts > 0 else { return 0 }
        let exponent = min(attempts - 1, 40)
        let ceiling = min(cap, base * Double(1 << exponent))
        return ceiling * (0.5 + min(max(unit, 0), 1) / 2)
    }

    /// Whether `attempts` failures are enough to stop retrying automatically.
    public func isExhausted(afterAttempts attempts: Int) -> Bool { attempts >= maximumAttempts }
}
