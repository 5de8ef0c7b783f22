#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Strict standard base64 with padding (RFC 4648 §4), as Bitwarden writes it.
///
/// A small table-driven codec over UTF-8 bytes: EncStrings are parsed on every decryption, and going
/// through `String`/`Data(base64Encoded:)` cost more than the AES and HMAC work itself.
public enum Base64 {
    private static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    private static let decodeTable: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (index, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(index) }
        return table
    }()

    /// Decodes padded standard base64; `nil` if the text is not exactly that (wrong length, bad
    /// characters, misplaced padding, or non-zero trailing bits).
    public static func decode(_ input: UnsafeBufferPointer<UInt8>) -> Data? {
        guard let outputCount = decodedLength(input) else { return nil }
        if outputCount == 0 { return Data() }
        var output = Data(count: outputCount)
        let ok = output.withUnsafeMutableBytes { raw in walk(input, decodedLength: outputCount, into: raw.bindMemory(to: UInt8.self)) }
        return ok ? output : nil
    }

    /// Decodes two or three parts (each padded standard base64) into one buffer, one after the other: one
    /// allocation where decoding them apart made three. `nil` if a part is not valid. Returns the buffer
    /// and where the first two parts end in it.
    public static func decodeJoined(_ first: UnsafeBufferPointer<UInt8>, _ second: UnsafeBufferPointer<UInt8>,
                                    _ third: UnsafeBufferPointer<UInt8>?) -> (bytes: Data, firstEnd: Int, secondEnd: Int)? {
        guard let one = decodedLength(first), let two = decodedLength(second) else { return nil }
        let three = third.map(decodedLength) ?? 0
        guard let three else { return nil }
        var output = Data(count: one + two + three)
        let ok = output.withUnsafeMutableBytes { raw -> Bool in
            let out = raw.bindMemory(to: UInt8.self)
            return walk(first, decodedLength: one, into: UnsafeMutableBufferPointer(rebasing: out[0..<one]))
                && walk(second, decodedLength: two, into: UnsafeMutableBufferPointer(rebasing: out[one..<(one + two)]))
                && (third.map { walk($0, decodedLength: three, into: UnsafeMutableBufferPointer(rebasing: out[(one + two)...])) } ?? true)
        }
        return ok ? (output, one, one + two) : nil
    }

    /// The length `input` decodes to, after checking it is valid padded base64 without decoding it
    /// (EncStrings are validated far more often than decrypted).
    public static func validatedLength(_ input: UnsafeBufferPointer<UInt8>) -> Int? {
        guard let length = decodedLength(input), walk(input, decodedLength: length, into: nil) else { return nil }
        return length
    }

    /// The decoded length implied by the text's length and padding, `nil` if the length is not a multiple of 4.
    private static func decodedLength(_ input: UnsafeBufferPointer<UInt8>) -> Int? {
        let count = input.count
        guard count % 4 == 0 else { return nil }
        if count == 0 { return 0 }
        var padding = 0
        if input[count - 1] == UInt8(ascii: "=") { padding += 1 }
        if input[count - 2] == UInt8(ascii: "=") { padding += 1 }
        return count / 4 * 3 - padding
    }

    /// Checks every quantum and, given `out`, writes the decoded bytes; `false` on any invalid character,
    /// misplaced padding or non-zero trailing bits.
    private static func walk(_ input: UnsafeBufferPointer<UInt8>, decodedLength: Int, into out: UnsafeMutableBufferPointer<UInt8>?) -> Bool {
        let count = input.count
        let padding = count / 4 * 3 - decodedLength
        return decodeTable.withUnsafeBufferPointer { table in
            var o = 0
            var i = 0
            while i < count {
                let last = i + 4 == count
                let c0 = table[Int(input[i])], c1 = table[Int(input[i + 1])]
                let p2 = last && padding == 2
                let p3 = last && padding >= 1
                let c2 = p2 ? 0 : table[Int(input[i + 2])]
                let c3 = p3 ? 0 : table[Int(input[i + 3])]
                if (c0 | c1 | c2 | c3) & 0xC0 != 0 { return false }
                if p2, c1 & 0x0F != 0 { return false }
                if p3, !p2, c2 & 0x03 != 0 { return false }
                if let out {
                    let triple = UInt32(c0) << 18 | UInt32(c1) << 12 | UInt32(c2) << 6 | UInt32(c3)
                    out[o] = UInt8(truncatingIfNeeded: triple >> 16)
                    if !p2 { out[o + 1] = UInt8(truncatingIfNeeded: triple >> 8) }
                    if !p3 { out[o + 2] = UInt8(truncatingIfNeeded: triple) }
                }
                o += 3
                i += 4
            }
            return true
        }
    }

    /// Decodes the UTF-8 bytes of a string.
    public static func decode<S: StringProtocol>(_ text: S) -> Data? {
        var copy = String(text)
        return copy.withUTF8 { decode($0) }
    }

    /// The length of the padded encoding of `count` bytes.
    static func encodedLength(_ count: Int) -> Int { (count + 2) / 3 * 4 }

    /// Encodes `input` into `output` starting at `offset`; returns the offset after the last byte written.
    /// `output` must have room for ``encodedLength(_:)`` bytes.
    static func encode(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableBufferPointer<UInt8>, at offset: Int) -> Int {
        alphabet.withUnsafeBufferPointer { table in
            var o = offset
            var i = 0
            let count = input.count
            while i + 3 <= count {
                let triple = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8 | UInt32(input[i + 2])
                output[o] = table[Int(triple >> 18 & 0x3F)]
                output[o + 1] = table[Int(triple >> 12 & 0x3F)]
                output[o + 2] = table[Int(triple >> 6 & 0x3F)]
                output[o + 3] = table[Int(triple & 0x3F)]
                o += 4
                i += 3
            }
            let rest = count - i
            if rest > 0 {
                let b1 = rest == 2 ? UInt32(input[i + 1]) : 0
                let triple = UInt32(input[i]) << 16 | b1 << 8
                output[o] = table[Int(triple >> 18 & 0x3F)]
                output[o + 1] = table[Int(triple >> 12 & 0x3F)]
                output[o + 2] = rest == 2 ? table[Int(triple >> 6 & 0x3F)] : UInt8(ascii: "=")
                output[o + 3] = UInt8(ascii: "=")
                o += 4
            }
            return o
        }
    }

    /// Formats `prefix` followed by the encodings of `parts` joined by `separator`, in one allocation.
    static func join(prefix: StaticString, parts: [Data], separator: UInt8) -> String {
        var total = prefix.utf8CodeUnitCount + max(parts.count - 1, 0)
        for part in parts { total += encodedLength(part.count) }
        return String(unsafeUninitializedCapacity: total) { buffer in
            var offset = 0
            for index in 0..<prefix.utf8CodeUnitCount {
                buffer[offset] = prefix.utf8Start[index]
                offset += 1
            }
            for (index, part) in parts.enumerated() {
                if index > 0 {
                    buffer[offset] = separator
                    offset += 1
                }
                offset = part.withUnsafeBytes { encode($0, into: buffer, at: offset) }
            }
            return offset
        }
    }

    /// Encodes bytes as padded standard base64.
    public static func encode<Bytes: DataProtocol>(_ bytes: Bytes) -> String {
        join(prefix: "", parts: [Data(bytes)], separator: 0)
    }
}
