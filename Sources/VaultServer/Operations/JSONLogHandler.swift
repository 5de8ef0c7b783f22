import Foundation
import Logging
import Synchronization

/// `--log-format json`: one JSON object per line on standard error, for log collectors:
/// `{"time":"2026-12-03T04:20:00.123Z","level":"info","label":"vaultsync-server","message":"login","user":"…"}`.
/// Metadata becomes top-level fields (a field named like a fixed one is prefixed `meta_`). The server logs no
/// secret in either format (docs/SECURITY.md): this handler only changes the shape.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    private let label: String
    private let write: @Sendable ([UInt8]) -> Void

    /// Lines written one at a time, so that two threads' lines never interleave.
    private static let lock = Mutex(())

    public init(label: String, write: (@Sendable ([UInt8]) -> Void)? = nil) {
        self.label = label
        self.write = write ?? { bytes in
            JSONLogHandler.lock.withLock { _ in FileHandle.standardError.write(Data(bytes)) }
        }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let level = event.level, message = event.message, extra = event.metadata
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        var object: [String: Any] = ["time": formatter.string(from: Date()), "level": level.rawValue, "label": label,
                                     "message": message.description]
        for (key, value) in metadata.merging(extra ?? [:], uniquingKeysWith: { $1 }) {
            object[object[key] == nil ? key : "meta_" + key] = Self.plain(value)
        }
        if let error = event.error { object["error"] = "\(error)" }
        guard var data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else { return }
        data.append(0x0A)
        write(Array(data))
    }

    static func plain(_ value: Logger.Metadata.Value) -> Any {
        switch value {
        case .string(let text): return text
        case .stringConvertible(let value): return value.description
        case .array(let values): return values.map(plain)
        case .dictionary(let values): return values.mapValues(plain)
        }
    }
}
