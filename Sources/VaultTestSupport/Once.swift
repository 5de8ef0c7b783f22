import Foundation

/// True the first time only, from any task: a hook that must act once.
public final class Once: @unchecked Sendable {
    private let lock = NSLock()
    private var done = false

    public init() {}

    /// True on the first call, false on every later one.
    public func first() -> Bool {
        lock.withLock {
            defer { done = true }
            return !done
        }
    }

    /// Whether `first()` has been called.
    public var fired: Bool { lock.withLock { done } }
}
