import Foundation
import Hummingbird
import NIOCore

/// The file bytes of an upload body as they arrive: the whole body (`application/octet-stream` and
/// anything but multipart), or the part named `data` of a `multipart/form-data` body (what Bitwarden
/// clients send), with the small text parts before it (the legacy upload's `key`) and the file part's
/// `filename`. Nothing is buffered beyond the bytes of one incoming buffer, a boundary's length and
/// those small parts.
struct UploadFileReader {
    private var multipart: MultipartFileParser?

    /// Most bytes of multipart framing (boundaries, part headers, other small parts) accepted around the file.
    static let multipartAllowance = 64 * 1024

    init(contentType: String) throws {
        guard contentType.lowercased().hasPrefix("multipart/form-data") else { return }
        guard let boundary = MultipartFileParser.boundary(in: contentType) else {
            throw APIError(.badRequest, "The multipart upload's Content-Type has no boundary.")
        }
        multipart = MultipartFileParser(boundary: boundary, fieldName: "data")
    }

    var isMultipart: Bool { multipart != nil }

    /// Whether the file's bytes have begun (always, for a body that is the file).
    var fileStarted: Bool { multipart?.sawFileStart ?? true }

    /// A text part that came before the file (multipart only).
    func field(_ name: String) -> String? { multipart?.fields[name] }

    /// The `filename` of the file part (multipart only).
    var fileName: String? { multipart?.fileName }

    /// Appends the file bytes in `buffer` to `file`.
    mutating func feed(_ buffer: ByteBuffer, into file: inout [UInt8]) throws {
        if multipart == nil {
            file.append(contentsOf: buffer.readableBytesView)
        } else {
            try multipart!.feed(buffer.readableBytesView, into: &file)
        }
    }

    /// Checks that the body held a whole file (for multipart: the `data` part up to its closing boundary).
    func finish() throws {
        guard let multipart else { return }
        guard multipart.sawWholeFile else {
            throw APIError(.badRequest, multipart.sawFileStart
                ? "The multipart upload ended inside the 'data' part (the body was cut off)."
                : "The upload needs a multipart part named 'data'.")
        }
    }
}

/// A streaming `multipart/form-data` reader that keeps the bytes of one named part (RFC 7578): each
/// boundary is searched for in the bytes at hand, and bytes that cannot start a boundary are handed on
/// at once, so memory stays at one incoming buffer plus the boundary's length whatever the part's size.
/// Text parts before the file (no `filename`, at most ``fieldLimit`` bytes) are kept as `fields`.
struct MultipartFileParser {
    private enum State {
        /// Before the first boundary, or in a part other than the wanted one: bytes are dropped.
        case skipping
        /// In the wanted part: bytes are the file.
        case file
        /// In a text part before the file: bytes are kept (up to ``fieldLimit``).
        case field(String)
        /// Just after a boundary: `--` (the end) or CRLF (a part's headers follow).
        case afterBoundary
        case headers
        case done
    }

    /// CRLF `--` boundary: what ends every part. The body is read as if it started with CRLF, so the first
    /// boundary (at the very start, without one) is found the same way.
    private let marker: [UInt8]
    private let fieldName: String
    private var state = State.skipping
    private var pending: [UInt8] = [13, 10]
    private(set) var sawFileStart = false
    private(set) var sawWholeFile = false
    private(set) var fields: [String: String] = [:]
    private(set) var fileName: String?
    private var fieldBytes: [UInt8] = []

    /// Most bytes of one part's headers.
    static let headerLimit = 16 * 1024
    /// Most bytes of a text part that is kept; a longer one is dropped.
    static let fieldLimit = 8 * 1024

    init(boundary: String, fieldName: String) {
        marker = Array("\r\n--\(boundary)".utf8)
        self.fieldName = fieldName
    }

    /// The `boundary` parameter of a multipart Content-Type (quoted or not).
    static func boundary(in contentType: String) -> String? {
        for parameter in contentType.split(separator: ";").dropFirst() {
            let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard pair.count == 2, pair[0].lowercased() == "boundary" else { continue }
            let value = pair[1].trimmingCharacters(in: CharacterSet(charactersIn: "\""))
            return (1...70).contains(value.utf8.count) ? value : nil
        }
        return nil
    }

    mutating func feed(_ bytes: ByteBufferView, into file: inout [UInt8]) throws {
        if case .done = state { return }  // the epilogue is ignored
        pending.append(contentsOf: bytes)
        var start = 0
        defer { pending.removeFirst(start) }
        while true {
            switch state {
            case .skipping, .file, .field:
                let found = Self.find(marker, in: pending, from: start)
                // Without a boundary, everything but a tail that could be the start of one is settled.
                let end = found ?? max(start, pending.count - (marker.count - 1))
                switch state {
                case .file: file.append(contentsOf: pending[start..<end])
                case .field: if fieldBytes.count <= Self.fieldLimit { fieldBytes.append(contentsOf: pending[start..<end]) }
                default: break
                }
                guard let found else {
                    start = end
                    return
                }
                switch state {
                case .file: sawWholeFile = true
                case .field(let name):
                    if fieldBytes.count <= Self.fieldLimit { fields[name] = String(decoding: fieldBytes, as: UTF8.self) }
                    fieldBytes = []
                default: break
                }
                start = found + marker.count
                state = .afterBoundary
            case .afterBoundary:
                guard pending.count - start >= 2 else { return }
                if pending[start] == UInt8(ascii: "-"), pending[start + 1] == UInt8(ascii: "-") {
                    state = .done
                    start = pending.count
                    return
                }
                guard pending[start] == 13, pending[start + 1] == 10 else {
                    throw APIError(.badRequest, "The multipart upload is malformed: a boundary is not followed by a line break.")
                }
                start += 2
                state = .headers
            case .headers:
                guard let end = Self.find([13, 10, 13, 10], in: pending, from: start) else {
                    guard pending.count - start <= Self.headerLimit else {
                        throw APIError(.badRequest, "The multipart upload is malformed: a part's headers are longer than \(Self.headerLimit) bytes.")
                    }
                    return
                }
                let headers = String(decoding: pending[start..<end], as: UTF8.self)
                start = end + 4
                let name = Self.dispositionParameter("name", in: headers)
                if !sawFileStart, name == fieldName {
                    sawFileStart = true
                    fileName = Self.dispositionParameter("filename", in: headers)
                    state = .file
                } else if !sawFileStart, let name, Self.dispositionParameter("filename", in: headers) == nil {
                    state = .field(name)
                } else {
                    state = .skipping
                }
            case .done:
                start = pending.count
                return
            }
        }
    }

    /// A parameter (`name`, `filename`) of a part's Content-Disposition header.
    static func dispositionParameter(_ wanted: String, in headers: String) -> String? {
        for line in headers.split(separator: "\r\n") {
            let header = line.split(separator: ":", maxSplits: 1)
            guard header.count == 2, header[0].trimmingCharacters(in: .whitespaces).lowercased() == "content-disposition" else { continue }
            for parameter in header[1].split(separator: ";").dropFirst() {
                let pair = parameter.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                if pair.count == 2, pair[0].lowercased() == wanted { return pair[1].trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }
            }
        }
        return nil
    }

    /// The first position of `needle` in `haystack` at or after `from` (memchr for its first byte, then memcmp:
    /// fast in debug builds too).
    static func find(_ needle: [UInt8], in haystack: [UInt8], from: Int) -> Int? {
        guard haystack.count - from >= needle.count else { return nil }
        return haystack.withUnsafeBytes { hay -> Int? in
            needle.withUnsafeBytes { pattern -> Int? in
                guard let base = hay.baseAddress, let first = pattern.first, let patternBase = pattern.baseAddress else { return nil }
                var position = from
                let last = hay.count - pattern.count
                while position <= last {
                    guard let hit = memchr(base + position, Int32(first), last - position + 1) else { return nil }
                    let offset = base.distance(to: UnsafeRawPointer(hit))
                    if memcmp(base + offset, patternBase, pattern.count) == 0 { return offset }
                    position = offset + 1
                }
                return nil
            }
        }
    }
}
