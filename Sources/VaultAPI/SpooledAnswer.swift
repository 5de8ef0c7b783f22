import Foundation

/// A file with no name that an answer body is written to as it arrives (a vault's `/api/sync`): made in
/// `directory` (the profile's, so it is on the same disk and under the same permissions as the vault)
/// with mode 0600, and unlinked at once, so nothing is left behind by any exit, a crash included. Its
/// contents are what the cache stores anyway: the server's answer, every secret field encrypted.
final class SpoolFile: @unchecked Sendable {
    let descriptor: Int32

    init(directory: String) throws {
        var template = Array((directory + "/.vaultsync-answer-XXXXXX").utf8CString)
        let descriptor = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }  // a new file, 0600
        guard descriptor >= 0 else { throw FileBodyError.unwritable(directory) }
        unlink(template)
        _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        self.descriptor = descriptor
    }

    deinit { close(descriptor) }
}

/// A file mapped read-only, whose pages can be handed back as a parse moves past them: a large answer
/// read from it costs the process a window of pages, not the answer's size (docs/BENCHMARKS.md, P5).
final class MappedFile: @unchecked Sendable {
    private let base: UnsafeMutableRawPointer?
    let count: Int
    /// Pages before this offset were handed back already (only the parse that reads the file moves it).
    private var released = 0
    private static let releaseStep = 4 * 1024 * 1024

    init(descriptor: Int32) throws {
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw FileBodyError.unreadable("the downloaded answer") }
        count = Int(status.st_size)
        guard count > 0 else {
            base = nil
            return
        }
        guard let mapped = mmap(nil, count, PROT_READ, MAP_PRIVATE, descriptor, 0), mapped != MAP_FAILED else {
            throw FileBodyError.unreadable("the downloaded answer")
        }
        base = mapped
    }

    deinit {
        if let base { munmap(base, count) }
    }

    func withBuffer<T>(_ body: (UnsafeBufferPointer<UInt8>) throws -> T) rethrows -> T {
        guard let base else { return try body(UnsafeBufferPointer(start: nil, count: 0)) }
        return try body(UnsafeBufferPointer(start: base.assumingMemoryBound(to: UInt8.self), count: count))
    }

    /// Hands back the whole pages before `offset`, a few MiB at a time: they leave the process's memory
    /// (the kernel keeps them as file cache, which it can drop) and would be read from the file again if
    /// touched, which a parse that has moved past them never does.
    func release(before offset: Int) {
        guard let base, offset - released >= Self.releaseStep else { return }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let end = offset / page * page
        guard end > released else { return }
        _ = madvise(base + released, end - released, MADV_DONTNEED)
        released = end
    }
}
