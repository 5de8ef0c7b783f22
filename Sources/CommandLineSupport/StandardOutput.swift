#if canImport(Glibc)
@preconcurrency import Glibc
#elseif canImport(Musl)
@preconcurrency import Musl
#elseif canImport(Darwin)
@preconcurrency import Darwin
#endif

/// A command's output on standard output, with its failures seen. `print` and Foundation's non-throwing
/// `FileHandle.write` drop a failed write (a full disk: `vaultsync generate > pw.txt` exited 0 with an empty
/// file) or trap (`export > /dev/full` died with SIGILL); RELIABILITY bug 70.
public enum StandardOutput {
    /// A write to standard output that failed, with the system's reason.
    public struct Failure: Error, CustomStringConvertible {
        public let reason: String
        public var description: String { "cannot write to standard output: \(reason)" }
    }

    /// Writes `bytes` after whatever `print` buffered before them.
    public static func write(_ bytes: [UInt8]) throws {
        if fflush(stdout) != 0 { throw Failure(reason: String(cString: strerror(errno))) }
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { buffer in writeToStandardOutput(buffer.baseAddress! + offset, buffer.count - offset) }
            if written < 0 {
                if errno == EINTR { continue }
                throw Failure(reason: String(cString: strerror(errno)))
            }
            offset += written
        }
    }

    /// Sends on what `print` buffered; the failure, when any write to standard output failed.
    public static func finish() -> Failure? {
        if fflush(stdout) != 0 { return Failure(reason: String(cString: strerror(errno))) }
        // An earlier flush failed (line-buffered output flushes at each line end), and its errno is gone.
        if ferror(stdout) != 0 { return Failure(reason: "a write failed (a full disk, or a reader that went away)") }
        return nil
    }

    /// Ends the process with exit 1 and the reason on standard error when ``finish()`` finds a failed write.
    public static func exitIfUnwritten() {
        guard let failure = finish() else { return }
        fputs("error: \(failure)\n", stderr)
        exit(1)
    }
}

/// The system's `write(2)` to standard output (named apart: inside ``StandardOutput`` `write` is its own method).
private func writeToStandardOutput(_ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    write(STDOUT_FILENO, bytes, count)
}
