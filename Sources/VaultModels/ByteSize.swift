import Foundation

/// Sizes as people write them on a command line (`500MiB`, `1.5GiB`, `104857600`) and as the official
/// server words them in messages (`500 MB`).
public enum ByteSize {
    /// Why a size could not be read.
    public struct ParseError: Error, CustomStringConvertible, Sendable {
        public let text: String
        /// A size that reads as a number but is under one byte (`0`, `0.5`) or too large to hold.
        public var outOfRange = false
        public var description: String {
            if outOfRange { return "\"\(text)\" is out of range: a size is at least 1 byte (e.g. 500MiB)." }
            return "\"\(text)\" is not a size: give a number of bytes, or a number with B, KiB, MiB or GiB (binary) or KB, MB or GB (decimal), e.g. 500MiB."
        }
    }

    private static let units: [(suffix: String, factor: Double)] = [
        ("kib", 1024), ("mib", 1024 * 1024), ("gib", 1024 * 1024 * 1024),
        ("kb", 1000), ("mb", 1_000_000), ("gb", 1_000_000_000),
        ("k", 1024), ("m", 1024 * 1024), ("g", 1024 * 1024 * 1024), ("b", 1),
    ]

    /// Reads `text` as a number of bytes, greater than zero: digits with an optional fraction and unit,
    /// case-insensitive, spaces allowed between them.
    public static func parse(_ text: String) throws -> Int {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        var number = Substring(trimmed)
        var factor = 1.0
        for unit in units where trimmed.hasSuffix(unit.suffix) {
            number = trimmed.dropLast(unit.suffix.count)
            factor = unit.factor
            break
        }
        let digits = number.trimmingCharacters(in: .whitespaces)
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }), digits.filter({ $0 == "." }).count <= 1,
              let value = Double(digits) else { throw ParseError(text: text) }
        let bytes = (value * factor).rounded(.down)
        guard bytes >= 1, bytes < Double(Int64.max / 2) else { throw ParseError(text: text, outOfRange: true) }
        return Int(bytes)
    }

    /// The official server's wording: whole GiB/MiB/KiB as `N GB`/`N MB`/`N KB`, else bytes; `binaryUnits`:
    /// named `GiB`/`MiB`/`KiB`, as the CLI takes them.
    public static func readable(_ bytes: Int, binaryUnits: Bool = false) -> String {
        let units = binaryUnits ? ["GiB", "MiB", "KiB"] : ["GB", "MB", "KB"]
        for (unit, factor) in zip(units, [1 << 30, 1 << 20, 1 << 10]) where bytes >= factor && bytes % factor == 0 {
            return "\(bytes / factor) \(unit)"
        }
        return bytes == 1 ? "1 byte" : "\(bytes) bytes"
    }
}
