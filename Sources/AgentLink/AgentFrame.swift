/// The agent socket's framing (docs/CLI.md, "The agent"): each message is a 4-byte big-endian length,
/// then that many bytes (a JSON object). A reader never trusts the length: one above
/// ``maximumLength`` is refused before anything is read or allocated for it, so a client that
/// announces 1 GiB costs the agent four bytes of reading.
public enum AgentFrame {
    /// The largest message either side sends: a command's output of a 10,000-item vault fits many times over.
    public static let maximumLength = 16 * 1024 * 1024

    public enum ReadError: Error, Sendable, Equatable {
        /// The announced length is over ``AgentFrame/maximumLength``.
        case tooLarge(announced: Int)
        /// The stream ended inside a frame (after `received` of its bytes).
        case truncated(received: Int)
    }

    /// `payload` with its length in front.
    public static func encode(_ payload: [UInt8]) -> [UInt8] {
        let length = UInt32(payload.count)
        return [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)] + payload
    }

    /// The length a 4-byte header announces.
    public static func length(ofHeader header: [UInt8]) -> Int {
        precondition(header.count == 4)
        return Int(header[0]) << 24 | Int(header[1]) << 16 | Int(header[2]) << 8 | Int(header[3])
    }

    /// Frames out of a byte stream as it arrives, in pieces of any size.
    public struct Decoder: Sendable {
        private var buffer: [UInt8] = []
        private let maximum: Int

        public init(maximumLength: Int = AgentFrame.maximumLength) {
            maximum = maximumLength
        }

        /// Adds received bytes; returns every frame now complete, in order.
        public mutating func append(_ bytes: some Sequence<UInt8>) throws(ReadError) -> [[UInt8]] {
            buffer.append(contentsOf: bytes)
            var frames: [[UInt8]] = []
            var start = 0
            while buffer.count - start >= 4 {
                let length = AgentFrame.length(ofHeader: Array(buffer[start..<start + 4]))
                guard length <= maximum else { throw .tooLarge(announced: length) }
                guard buffer.count - start - 4 >= length else { break }
                frames.append(Array(buffer[start + 4..<start + 4 + length]))
                start += 4 + length
            }
            buffer.removeFirst(start)
            return frames
        }

        /// The end of the stream: an error when it ended inside a frame.
        public func finish() throws(ReadError) {
            if !buffer.isEmpty { throw .truncated(received: buffer.count) }
        }
    }
}
