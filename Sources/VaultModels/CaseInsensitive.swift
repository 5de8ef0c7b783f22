import Foundation

/// Case-insensitive comparisons of names and searched text, fast for ASCII: text that is ASCII on both
/// sides is compared byte by byte with ASCII case folding; anything else as Foundation compares it (the
/// locale's rules), so a 10,000-item lookup does not pay Foundation's bridging for every plain name.
public enum CaseInsensitive {
    /// `lhs.caseInsensitiveCompare(rhs) == .orderedSame`.
    public static func equal(_ lhs: String, _ rhs: String) -> Bool {
        if let equal = asciiBytes(lhs, rhs, { a, b in a.count == b.count && zip(a, b).allSatisfy { fold($0) == fold($1) } }) { return equal }
        return lhs.caseInsensitiveCompare(rhs) == .orderedSame
    }

    /// `haystack.localizedCaseInsensitiveContains(needle)`; for ASCII text on both sides, ASCII case
    /// folding (which matches whenever the locale's rules do).
    public static func contains(_ haystack: String, _ needle: String) -> Bool {
        if let found = asciiBytes(haystack, needle, { hay, pattern in containsFolded(hay, pattern) }) { return found }
        return haystack.localizedCaseInsensitiveContains(needle)
    }

    static func fold(_ byte: UInt8) -> UInt8 { (65...90).contains(byte) ? byte | 0x20 : byte }

    /// `body` over both strings' UTF-8 bytes when both are ASCII; `nil` otherwise.
    static func asciiBytes(_ lhs: String, _ rhs: String, _ body: (UnsafeBufferPointer<UInt8>, UnsafeBufferPointer<UInt8>) -> Bool) -> Bool? {
        var lhs = lhs, rhs = rhs
        return lhs.withUTF8 { a in
            rhs.withUTF8 { b in
                guard a.allSatisfy({ $0 < 0x80 }), b.allSatisfy({ $0 < 0x80 }) else { return nil }
                return body(a, b)
            }
        }
    }

    static func containsFolded(_ hay: UnsafeBufferPointer<UInt8>, _ pattern: UnsafeBufferPointer<UInt8>) -> Bool {
        guard !pattern.isEmpty else { return false }  // as Foundation: nothing contains the empty string
        guard hay.count >= pattern.count else { return false }
        let first = fold(pattern[0])
        for start in 0...(hay.count - pattern.count) where fold(hay[start]) == first {
            var offset = 1
            while offset < pattern.count, fold(hay[start + offset]) == fold(pattern[offset]) { offset += 1 }
            if offset == pattern.count { return true }
        }
        return false
    }
}
