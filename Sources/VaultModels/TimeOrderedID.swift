import Foundation

/// Temporary ids of items and folders made on this device: lowercase UUIDs of version 7 (RFC 9562), whose
/// first 48 bits are the time in milliseconds, the next 12 the fraction of that millisecond, and the last 62 free
/// bits random (docs/ARCHITECTURE.md, "Time-ordered ids").
///
/// Ids made one after another sort one after another, so a B-tree keyed by them grows at its end: a bulk
/// create of 500 items writes a few index pages instead of about one random page per item and index
/// (docs/BENCHMARKS.md, measured 2026-11-28). Every reader treats an id as an opaque UUID string, of any version.
public enum TimeOrderedID {
    /// An id for something made at `microseconds` since 1970 (clamped to the 48 bits of milliseconds the layout
    /// has). The 12 bits after the version hold the fraction of the millisecond (RFC 9562's method 3), so ids
    /// made at increasing microseconds sort in that order even within one millisecond: an import gives its
    /// items consecutive microseconds, and they sit side by side.
    public static func make(microseconds: Int64) -> String {
        let clamped = max(microseconds, 0)
        let fraction = UInt64(clamped % 1000) * 4096 / 1000
        var generator = SystemRandomNumberGenerator()
        return make(milliseconds: clamped / 1000, random: (fraction, generator.next()))
    }

    /// The layout: time (48 bits, big-endian), version 7 (4 bits), random (12 bits), variant `10` (2 bits), random (62 bits).
    static func make(milliseconds: Int64, random: (UInt64, UInt64)) -> String {
        let time = UInt64(min(max(milliseconds, 0), (1 << 48) - 1))
        let high = time << 16 | 0x7000 | random.0 & 0x0FFF
        let low = 0x8000_0000_0000_0000 | random.1 & 0x3FFF_FFFF_FFFF_FFFF
        func byte(_ value: UInt64, _ index: Int) -> UInt8 { UInt8(truncatingIfNeeded: value >> (56 - 8 * index)) }
        let uuid = UUID(uuid: (byte(high, 0), byte(high, 1), byte(high, 2), byte(high, 3), byte(high, 4), byte(high, 5), byte(high, 6), byte(high, 7),
                               byte(low, 0), byte(low, 1), byte(low, 2), byte(low, 3), byte(low, 4), byte(low, 5), byte(low, 6), byte(low, 7)))
        return uuid.uuidString.lowercased()
    }

    /// The milliseconds an id of this layout was made at; `nil` for any other id (another version, or not a UUID).
    public static func milliseconds(of id: String) -> Int64? {
        guard let uuid = UUID(uuidString: id)?.uuid, uuid.6 >> 4 == 7, uuid.8 >> 6 == 2 else { return nil }
        return [uuid.0, uuid.1, uuid.2, uuid.3, uuid.4, uuid.5].reduce(Int64(0)) { $0 << 8 | Int64($1) }
    }
}

/// The text form of a UUID, checked by its bytes (a lookup by id is a hot path: no parsing, no regular
/// expression), and its lowercase form (`8-4-4-4-12` hexadecimal digits) to and from its 16 bytes, both ways,
/// exactly: text that is not in that form is not a UUID for ``bytes(_:)`` (so the round trip always gives back
/// the same text).
public enum UUIDText {
    static let digits = Array("0123456789abcdef".utf8)

    public static func bytes(_ text: String) -> [UInt8]? {
        guard let uuid = UUID(uuidString: text), uuid.uuidString.lowercased() == text else { return nil }
        return withUnsafeBytes(of: uuid.uuid) { Array($0) }
    }

    /// The text of 16 bytes, written digit by digit (`UUID.uuidString.lowercased()` costs a few times as
    /// much, and a search parses every id of the name index).
    public static func text(_ bytes: ArraySlice<UInt8>) -> String? {
        guard bytes.count == 16 else { return nil }
        return String(unsafeUninitializedCapacity: 36) { buffer in
            var position = 0
            for (offset, byte) in bytes.enumerated() {
                if offset == 4 || offset == 6 || offset == 8 || offset == 10 {
                    buffer[position] = UInt8(ascii: "-")
                    position += 1
                }
                buffer[position] = digits[Int(byte >> 4)]
                buffer[position + 1] = digits[Int(byte & 0x0F)]
                position += 2
            }
            return position
        }
    }

    /// Whether `text` is 8-4-4-4-12 hexadecimal digits; lower case only when `lowercaseOnly` (bw's test for an id).
    public static func isUUID(_ text: String, lowercaseOnly: Bool = false) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count == 36 else { return false }
        for (index, byte) in bytes.enumerated() {
            if [8, 13, 18, 23].contains(index) {
                guard byte == UInt8(ascii: "-") else { return false }
            } else {
                guard isLowerHex(byte) || (!lowercaseOnly && (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)) else { return false }
            }
        }
        return true
    }

    public static func isLowerHex(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
    }
}
