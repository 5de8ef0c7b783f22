/// Maximum encrypted lengths of item fields, like the official server's `[EncryptedStringLength]`
/// attributes. The server refuses longer values; the client checks before queuing so that a queued
/// change can never be doomed.
public enum EncryptedFieldLimits {
    public static func maximumLength(of path: String) -> Int {
        if path == "name" || path.hasSuffix(".name") || path.hasSuffix("fileName") { return 1000 }
        if path == "notes" { return 10_000 }
        if path.hasSuffix(".uri") { return 10_000 }
        if path.hasSuffix("password") || path.hasSuffix(".value") || path.hasSuffix("privateKey") { return 5_000 }
        return 10_000
    }
}

extension CipherWire {
    /// Fields whose encrypted form is longer than the server accepts, with their limits.
    public var limitViolations: [(path: String, limit: Int, length: Int)] {
        encryptedFields.compactMap { path, value in
            let limit = EncryptedFieldLimits.maximumLength(of: path)
            let length = value.serialized.utf8.count
            return length > limit ? (path, limit, length) : nil
        }
    }
}
