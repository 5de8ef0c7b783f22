#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A UTC instant with microsecond precision, as dates travel on the wire (spec §3.7).
///
/// Parsing accepts `YYYY-MM-DDTHH:MM:SS` with 0–9 fractional digits and `Z`, an offset `±hh:mm`, or no
/// zone (UTC, as mobile clients send `0001-01-01T00:00:00`). Digits past microseconds are truncated:
/// dates compare at microsecond precision. Formatting uses Vaultwarden's form, six digits and `Z`.
public struct WireDate: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Microseconds since 1970-01-01T00:00:00Z.
    public var microsecondsSinceEpoch: Int64

    public init(microsecondsSinceEpoch: Int64) {
        self.microsecondsSinceEpoch = microsecondsSinceEpoch
    }

    /// The instant of a Foundation `Date`, rounded to the microsecond.
    public init(_ date: Date) {
        microsecondsSinceEpoch = Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
    }

    /// Milliseconds since the epoch (the `/api/accounts/revision-date` form).
    public init(millisecondsSinceEpoch: Int64) {
        microsecondsSinceEpoch = millisecondsSinceEpoch * 1000
    }

    /// This instant as a Foundation `Date`.
    public var date: Date { Date(timeIntervalSince1970: Double(microsecondsSinceEpoch) / 1_000_000) }

    /// Milliseconds since the epoch, truncated.
    public var millisecondsSinceEpoch: Int64 {
        microsecondsSinceEpoch >= 0 ? microsecondsSinceEpoch / 1000 : (microsecondsSinceEpoch - 999) / 1000
    }

    public static func < (lhs: WireDate, rhs: WireDate) -> Bool {
        lhs.microsecondsSinceEpoch < rhs.microsecondsSinceEpoch
    }

    /// Adds microseconds.
    public func adding(microseconds: Int64) -> WireDate {
        WireDate(microsecondsSinceEpoch: microsecondsSinceEpoch + microseconds)
    }

    public var description: String { iso8601 }

    // MARK: Parsing

    /// Parses an ISO-8601 date as described on the type; `nil` if it is not one.
    public init?(iso8601 text: String) {
        var utf8 = Array(text.utf8)[...]
        func number(_ digits: Int) -> Int? {
            guard utf8.count >= digits else { return nil }
            var value = 0
            for byte in utf8.prefix(digits) {
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            utf8 = utf8.dropFirst(digits)
            return value
        }
        func expect(_ characters: String) -> Bool {
            guard let byte = utf8.first, characters.utf8.contains(byte) else { return false }
            utf8 = utf8.dropFirst()
            return true
        }
        guard let year = number(4), expect("-"), let month = number(2), expect("-"), let day = number(2),
              expect("Tt "), let hour = number(2), expect(":"), let minute = number(2), expect(":"),
              let second = number(2) else { return nil }
        guard (1...12).contains(month), day >= 1, day <= Self.daysIn(month: month, year: year),
              hour < 24, minute < 60, second < 61 else { return nil }
        var micros = 0
        if utf8.first == UInt8(ascii: ".") {
            utf8 = utf8.dropFirst()
            var digits = 0
            while let byte = utf8.first, byte >= 0x30, byte <= 0x39 {
                if digits < 6 { micros = micros * 10 + Int(byte - 0x30) }
                digits += 1
                utf8 = utf8.dropFirst()
            }
            guard (1...9).contains(digits) else { return nil }
            if digits < 6 { for _ in digits..<6 { micros *= 10 } }
        }
        var offsetSeconds = 0
        if let zone = utf8.first {
            if zone == UInt8(ascii: "Z") || zone == UInt8(ascii: "z") {
                utf8 = utf8.dropFirst()
            } else if zone == UInt8(ascii: "+") || zone == UInt8(ascii: "-") {
                utf8 = utf8.dropFirst()
                guard let hours = number(2), expect(":"), let minutes = number(2), hours < 24, minutes < 60 else { return nil }
                offsetSeconds = (hours * 3600 + minutes * 60) * (zone == UInt8(ascii: "+") ? 1 : -1)
            } else {
                return nil
            }
        }
        guard utf8.isEmpty else { return nil }
        let days = Self.daysFromCivil(year: year, month: month, day: day)
        let seconds = Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + second) - Int64(offsetSeconds)
        microsecondsSinceEpoch = seconds * 1_000_000 + Int64(micros)
    }

    /// Six fractional digits and `Z`: `2024-01-30T17:55:36.150123Z`.
    public var iso8601: String {
        let parts = components
        if (0...9999).contains(parts.year) {
            // Fixed width: write the 27 bytes directly (this runs for every date of every cipher written).
            return String(unsafeUninitializedCapacity: 27) { out in
                Self.writeFixedWidth(parts, to: out, at: 0)
                return 27
            }
        }
        func pad(_ value: Int, _ width: Int) -> String {
            let text = String(value)
            return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
        }
        return "\(pad(parts.year, 4))-\(pad(parts.month, 2))-\(pad(parts.day, 2))T\(pad(Int(parts.secondOfDay / 3600), 2)):"
            + "\(pad(Int(parts.secondOfDay % 3600 / 60), 2)):\(pad(Int(parts.secondOfDay % 60), 2)).\(pad(Int(parts.micros), 6))Z"
    }

    /// Appends ``iso8601`` in double quotes, as a JSON string, without making a `String` (the server
    /// writes several per item of every sync).
    public func writeJSON(to out: inout [UInt8]) {
        let parts = components
        guard (0...9999).contains(parts.year) else {
            JSONValue.writeString(iso8601, to: &out)
            return
        }
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 29) { buffer in
            buffer[0] = UInt8(ascii: "\"")
            Self.writeFixedWidth(parts, to: buffer, at: 1)
            buffer[28] = UInt8(ascii: "\"")
            out.append(contentsOf: UnsafeBufferPointer(buffer))
        }
    }

    private struct Components {
        var year: Int, month: Int, day: Int
        var secondOfDay: Int64, micros: Int64
    }

    private var components: Components {
        var seconds = microsecondsSinceEpoch / 1_000_000
        var micros = microsecondsSinceEpoch % 1_000_000
        if micros < 0 {
            micros += 1_000_000
            seconds -= 1
        }
        var days = seconds / 86_400
        var secondOfDay = seconds % 86_400
        if secondOfDay < 0 {
            secondOfDay += 86_400
            days -= 1
        }
        let (year, month, day) = Self.civilFromDays(Int(days))
        return Components(year: year, month: month, day: day, secondOfDay: secondOfDay, micros: micros)
    }

    /// The 27 bytes of a date with a four-digit year, at `offset`.
    private static func writeFixedWidth(_ parts: Components, to out: UnsafeMutableBufferPointer<UInt8>, at offset: Int) {
        func put(_ value: Int, width: Int, at position: Int) {
            var rest = value
            for index in stride(from: offset + position + width - 1, through: offset + position, by: -1) {
                out[index] = UInt8(ascii: "0") + UInt8(rest % 10)
                rest /= 10
            }
        }
        put(parts.year, width: 4, at: 0)
        put(parts.month, width: 2, at: 5)
        put(parts.day, width: 2, at: 8)
        put(Int(parts.secondOfDay / 3600), width: 2, at: 11)
        put(Int(parts.secondOfDay % 3600 / 60), width: 2, at: 14)
        put(Int(parts.secondOfDay % 60), width: 2, at: 17)
        put(Int(parts.micros), width: 6, at: 20)
        for (position, character) in [(4, "-"), (7, "-"), (10, "T"), (13, ":"), (16, ":"), (19, "."), (26, "Z")] as [(Int, Unicode.Scalar)] {
            out[offset + position] = UInt8(ascii: character)
        }
    }

    static func isLeap(_ year: Int) -> Bool { (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    // Howard Hinnant's days-from-civil algorithm (proleptic Gregorian calendar).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    static func civilFromDays(_ days: Int) -> (Int, Int, Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

extension WireDate: Codable {
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let date = WireDate(iso8601: text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not an ISO-8601 date: \(text.prefix(40))"))
        }
        self = date
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(iso8601)
    }
}
