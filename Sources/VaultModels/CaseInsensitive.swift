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

    /// `text`'s bytes ASCII-folded, when it is ASCII (a text prepared once for many comparisons).
    public static func foldedASCII(_ text: String) -> [UInt8]? {
        text.utf8.allSatisfy { $0 < 0x80 } ? text.utf8.map(fold) : nil
    }

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

extension CaseInsensitive {
    /// ``CaseInsensitive/equal(_:_:)`` against one text, for many candidates given as UTF-8 bytes (a lookup
    /// walking thousands of names): the text is prepared once, and an ASCII candidate against an ASCII text
    /// is compared without becoming a string.
    public struct Equality: Sendable {
        let text: String
        /// The text's bytes, ASCII-folded, when it is ASCII.
        let folded: [UInt8]?

        public init(_ text: String) {
            self.text = text
            folded = CaseInsensitive.foldedASCII(text)
        }

        public func matches(utf8 candidate: ArraySlice<UInt8>) -> Bool {
            let ascii: Bool? = candidate.withUnsafeBufferPointer { bytes in
                guard let folded, !bytes.contains(where: { $0 >= 0x80 }) else { return nil }
                guard bytes.count == folded.count else { return false }
                for index in 0..<bytes.count where CaseInsensitive.fold(bytes[index]) != folded[index] { return false }
                return true
            }
            return ascii ?? CaseInsensitive.equal(String(decoding: candidate, as: UTF8.self), text)
        }
    }
}

extension CaseInsensitive {
    /// ``CaseInsensitive/contains(_:_:)`` of one text, in many candidates given as UTF-8 bytes (a search
    /// walking the name index's fields): the text is prepared once, and an ASCII candidate is searched
    /// without becoming a string.
    public struct Containment: Sendable {
        let text: String
        /// The text's bytes, ASCII-folded, when it is ASCII.
        let folded: [UInt8]?

        public init(_ text: String) {
            self.text = text
            folded = CaseInsensitive.foldedASCII(text)
        }

        public func found(inUTF8 candidate: ArraySlice<UInt8>) -> Bool {
            let ascii: Bool? = candidate.withUnsafeBufferPointer { bytes in
                guard let folded, !bytes.contains(where: { $0 >= 0x80 }) else { return nil }
                return folded.withUnsafeBufferPointer { CaseInsensitive.containsFolded(bytes, $0) }
            }
            return ascii ?? CaseInsensitive.contains(String(decoding: candidate, as: UTF8.self), text)
        }

        public func found(in candidate: String) -> Bool {
            CaseInsensitive.contains(candidate, text)
        }
    }
}
