import Foundation
import VaultCrypto

/// How far an attachment transfer is, for a progress line (`vaultsync attachment add|get` on a terminal).
public struct AttachmentProgress: Sendable, Equatable {
    public enum Phase: String, Sendable {
        case encrypting, uploading, downloading, decrypting
    }

    public var phase: Phase
    /// Bytes done (of the plaintext while encrypting or decrypting, of the encrypted file on the wire).
    public var done: Int
    public var total: Int

    public init(phase: Phase, done: Int, total: Int) {
        self.phase = phase
        self.done = done
        self.total = total
    }
}

public typealias AttachmentProgressHandler = @Sendable (AttachmentProgress) -> Void

/// An encrypted attachment file (a binary EncString) opened piece by piece.
enum AttachmentFile {
    static let pieceSize = 1 << 20

    /// Verifies the file's MAC over all of it, then decrypts it into `sink`, a piece at a time; returns
    /// the plaintext length. Nothing reaches `sink` unless the whole file is authentic.
    static func decrypt(_ path: String, key: SymmetricCryptoKey, progress: AttachmentProgressHandler?,
                        into sink: (ArraySlice<UInt8>) throws -> Void) throws -> Int {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw VaultError.storage("the attachment's file could not be read (errno \(errno))") }
        defer { close(descriptor) }
        var header = [UInt8](repeating: 0, count: StreamingEncryptor.headerLength)
        guard try readFully(descriptor, into: &header) == header.count else { throw CryptoError.malformedEncString(part: "header", reason: "too short") }
        var verifier = try StreamingVerifier(key: key, header: header)
        var buffer = [UInt8](repeating: 0, count: pieceSize)
        var total = 0
        while true {
            let count = try readFully(descriptor, into: &buffer)
            guard count > 0 else { break }
            verifier.update(buffer[0..<count])
            total += count
        }
        try verifier.verify()
        guard lseek(descriptor, off_t(StreamingEncryptor.headerLength), SEEK_SET) >= 0 else {
            throw VaultError.storage("the attachment's file could not be read (errno \(errno))")
        }
        var decryptor = try StreamingDecryptor(key: key, header: header)
        var written = 0
        var read = 0
        while true {
            let count = try readFully(descriptor, into: &buffer)
            guard count > 0 else { break }
            read += count
            let plain = try decryptor.update(buffer[0..<count])
            try sink(plain[...])
            written += plain.count
            progress?(AttachmentProgress(phase: .decrypting, done: read, total: total))
        }
        let last = try decryptor.finish()
        try sink(last[...])
        return written + last.count
    }

    /// Reads until `buffer` is full or the file ends; returns the count.
    static func readFully(_ descriptor: Int32, into buffer: inout [UInt8]) throws -> Int {
        var filled = 0
        while filled < buffer.count {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress! + filled, $0.count - filled) }
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { throw VaultError.storage("the attachment's file could not be read (errno \(errno))") }
            if count == 0 { break }
            filled += count
        }
        return filled
    }

    /// Opens a regular file for reading; returns its descriptor and size.
    static func openRegularFile(_ path: String) throws -> (Int32, Int) {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw VaultError.storage("\(path) cannot be read") }
        var status = stat()
        guard fstat(descriptor, &status) == 0, (status.st_mode & S_IFMT) == S_IFREG else {
            close(descriptor)
            throw VaultError.storage("\(path) is not a file")
        }
        return (descriptor, Int(status.st_size))
    }

    static func size(_ path: String) -> Int? {
        (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.intValue
    }
}

/// A process-wide allocator setting for executables that move large attachments (the CLI).
public enum ProcessMemory {
    /// glibc's malloc serves blocks above its mmap threshold (128 KiB) with their own mappings, returned
    /// to the system when freed; but each such free raises the threshold (up to 32 MiB), after which the
    /// megabyte pieces of a file transfer come from the heaps of the threads that touch them, which grow
    /// and stay grown. Moving a 500 MiB file then peaked at 145–260 MiB instead of about 50 (VaultBench
    /// A2, docs/BENCHMARKS.md). Fixing the threshold keeps every such piece in a mapping of its own.
    public static func keepLargeBuffersOutOfHeaps() {
        #if os(Linux)
        _ = glibcMallopt(mmapThreshold, 128 * 1024)
        #endif
    }
}

#if os(Linux)
/// glibc's `mallopt` (malloc.h, which Swift's Glibc module does not bring in) and its `M_MMAP_THRESHOLD`.
@_silgen_name("mallopt")
private func glibcMallopt(_ parameter: Int32, _ value: Int32) -> Int32
private let mmapThreshold: Int32 = -3
#endif
