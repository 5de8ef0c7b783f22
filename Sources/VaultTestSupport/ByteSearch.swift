import Foundation

/// Whether `needle` occurs in `haystack` (memchr for the first byte, memcmp for the rest: fast even in
/// debug builds, for scanning whole database files for secrets).
public func byteSearch(_ haystack: UnsafeRawBufferPointer, contains needle: UnsafeRawBufferPointer) -> Bool {
    guard let hay = haystack.baseAddress, let pattern = needle.baseAddress, needle.count > 0, haystack.count >= needle.count else { return false }
    let first = Int32(needle[0])
    var offset = 0
    let last = haystack.count - needle.count
    while offset <= last {
        guard let found = memchr(hay + offset, first, last - offset + 1) else { return false }
        let position = hay.distance(to: UnsafeRawPointer(found))
        if memcmp(hay + position, pattern, needle.count) == 0 { return true }
        offset = position + 1
    }
    return false
}

/// The bytes of a file that an SQLite connection of this process may have open, read by a child
/// process (`cat`), or nil if it cannot be read.
///
/// Reading such a file directly (`Data(contentsOf:)`, `FileManager.contents(atPath:)`) opens and
/// closes a descriptor on it, and closing any descriptor drops every POSIX advisory lock this process
/// holds on that file (SQLite's own connections included; see "How To Corrupt An SQLite Database
/// File", §2.2). Another process opening the database next (the crash tests' killed child, a second
/// CLI run) then believes it is alone, resets the WAL index under live readers and corrupts the file.
/// A child process's descriptors are its own, so its closing them leaves ours untouched.
public func readFileKeepingLocks(_ path: String) -> Data? {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/cat")
    process.arguments = ["--", path]
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    do { try process.run() } catch { return nil }
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return process.terminationStatus == 0 ? data : nil
}

/// Reads files that SQLite connections of this process may have open, many times over, without a
/// child process per read: each file's descriptor stays open until ``closeAll()``, so no close can
/// drop this process's locks (see ``readFileKeepingLocks(_:)``). A file replaced under its name (SQLite
/// deletes and recreates `-wal` files) gets a new descriptor; the old one stays open too.
///
/// Call ``closeAll()`` only once this process has no SQLite connection left on the files (after the
/// engine shut down); until then, or if it is never called, the descriptors stay open.
public final class LockKeepingReader: @unchecked Sendable {
    private struct Kept {
        var descriptor: Int32
        var device: UInt64
        var inode: UInt64
    }

    private let lock = NSLock()
    private var kept: [String: [Kept]] = [:]

    public init() {}

    /// The file's bytes, or nil if it does not exist or cannot be read.
    public func read(_ path: String) -> Data? {
        lock.withLock {
            var status = stat()
            guard stat(path, &status) == 0 else { return nil }
            let device = UInt64(status.st_dev), inode = UInt64(status.st_ino)
            let descriptor: Int32
            if let known = kept[path]?.first(where: { $0.device == device && $0.inode == inode }) {
                descriptor = known.descriptor
            } else {
                descriptor = open(path, O_RDONLY | O_CLOEXEC)
                guard descriptor >= 0 else { return nil }
                // Kept even if it turns out to be another file than the one stat saw (replaced in between).
                var opened = stat()
                _ = fstat(descriptor, &opened)
                kept[path, default: []].append(Kept(descriptor: descriptor, device: UInt64(opened.st_dev), inode: UInt64(opened.st_ino)))
            }
            return Self.readAll(descriptor)
        }
    }

    /// Every byte from offset 0 to the end, by `pread` (the descriptor's offset is not used).
    private static func readAll(_ descriptor: Int32) -> Data? {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { return nil }
        var bytes = [UInt8](repeating: 0, count: max(Int(status.st_size), 0) + 4_096)
        var filled = 0
        while true {
            if filled == bytes.count { bytes.append(contentsOf: repeatElement(0, count: bytes.count)) }
            let count = bytes.withUnsafeMutableBytes { buffer in
                pread(descriptor, buffer.baseAddress! + filled, buffer.count - filled, off_t(filled))
            }
            if count < 0 {
                if errno == EINTR { continue }
                return nil
            }
            if count == 0 { break }
            filled += count
        }
        return Data(bytes[..<filled])
    }

    /// Closes every descriptor (see the type's note on when that is safe).
    public func closeAll() {
        lock.withLock {
            for descriptor in kept.values.joined() { close(descriptor.descriptor) }
            kept = [:]
        }
    }
}
