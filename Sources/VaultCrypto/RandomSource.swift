#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A source of random bytes for keys and IVs.
///
/// Production code uses ``SystemRandomSource`` (the operating system's CSPRNG). Tests may inject a
/// deterministic source; nothing else should.
public protocol RandomSource: Sendable {
    /// Returns `count` random bytes.
    func bytes(count: Int) -> [UInt8]
}

/// The operating system's cryptographically secure random generator (`getrandom`/`arc4random`).
public struct SystemRandomSource: RandomSource {
    public init() {}

    public func bytes(count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        var out = [UInt8](repeating: 0, count: count)
        var index = 0
        while index < count {
            var word = generator.next()
            withUnsafeBytes(of: &word) { raw in
                for byte in raw where index < count {
                    out[index] = byte
                    index += 1
                }
            }
        }
        return out
    }
}
