import Foundation

/// The files a command line names for input: `--password-file`, a secret flag's `@FILE`, `--private-key-file`,
/// `add`/`edit --json FILE`.
///
/// Each may be a pipe: `--password-file <(pass show vault)`, `--password @<(gpg -d pw.gpg)`, a FIFO, `/dev/stdin`,
/// the way to give a secret that never touches the disk. They were read with Foundation's file calls, which
/// take only regular files, and every such source was refused as "cannot read" (RELIABILITY bug 83; `import`
/// had the same fix, bug 71). A pipe can be read once only, so each path is read once per run and
/// kept for the run: the master password is asked for more than once by some commands (an unlock, then
/// the proof a two-step change wants).
enum InputFile {
    /// Larger than any value the vault takes (the server allows 10,000 encrypted characters a field): the
    /// bound keeps `@/dev/zero` or `@/dev/urandom` from reading for ever.
    static let limit = 16 << 20

    /// Checks, without reading it, that `path` can be opened for reading and is not a folder: before any
    /// work, so a command never fails half-way for a typo in a path.
    static func check(_ path: String, what: String) throws {
        if path == "-" { return }
        var status = stat()
        guard stat(path, &status) == 0 else { throw CLIError.usage("cannot read \(what) \(path): \(String(cString: strerror(errno)))") }
        if status.st_mode & S_IFMT == S_IFDIR { throw CLIError.usage("\(what) \(path) is a folder, not a file") }
        guard access(path, R_OK) == 0 else { throw CLIError.usage("cannot read \(what) \(path): \(String(cString: strerror(errno)))") }
    }

    /// The whole of `path`: a regular file, a pipe, a FIFO or a device, read to its end (once per run).
    static func bytes(_ path: String, what: String) throws -> [UInt8] {
        if let kept = cache.bytes(of: path) { return kept }
        try check(path, what: what)
        // "-": standard input (`--password-file -`), read to its end like any pipe, and left open.
        let descriptor = path == "-" ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw CLIError.usage("cannot read \(what) \(path): \(String(cString: strerror(errno)))") }
        defer { if descriptor != STDIN_FILENO { close(descriptor) } }
        var result: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR { continue }
                throw CLIError.usage("cannot read \(what) \(path): \(String(cString: strerror(errno)))")
            }
            if count == 0 { break }
            result += buffer[..<count]
            guard result.count <= limit else { throw CLIError.usage("\(what) \(path) is larger than \(limit >> 20) MiB") }
        }
        cache.keep(result, for: path)
        return result
    }

    /// The whole of `path` as text; refused, naming it, when it is not UTF-8 (a value would otherwise be
    /// stored with replacement characters, a password that no longer matches anything).
    static func text(_ path: String, what: String) throws -> String {
        guard let text = String(data: Data(try bytes(path, what: what)), encoding: .utf8) else {
            throw CLIError.usage("\(what) \(path) is not UTF-8 text")
        }
        return text
    }

    private static let cache = Kept()

    /// What each path gave this run.
    private final class Kept: @unchecked Sendable {
        private let lock = NSLock()
        private var contents: [String: [UInt8]] = [:]

        func bytes(of path: String) -> [UInt8]? { lock.withLock { contents[path] } }
        func keep(_ bytes: [UInt8], for path: String) { lock.withLock { contents[path] = bytes } }
    }
}
