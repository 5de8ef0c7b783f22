import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Starting a child without Foundation's `Process`: on Linux (Swift 6.3.1) its `run()` over-reads
/// `/proc/self/fd` entries and its exit monitoring goes through a Dispatch source, and both crashed
/// the whole test process in full runs (docs/RELIABILITY.md). Here: `posix_spawn` with the three
/// standard descriptors given and every other descriptor closed in the child (no child keeps another
/// child's pipe or a test server's socket open), and `waitpid` on the caller's own thread.
public enum Spawn {
    public struct Failed: Error, CustomStringConvertible {
        public var description: String
    }

    /// A pipe whose two ends are closed in every child unless given to it as 0, 1 or 2.
    public static func pipe() throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [0, 0]
        guard Glibc.pipe(&fds) == 0 else { throw Failed(description: "pipe: \(errno)") }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        return (fds[0], fds[1])
    }

    typealias AddChdir = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
    typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32

    /// Starts `executable` with `arguments`, `environment`, in `folder`, with `stdin`, `stdout` and
    /// `stderr` as its descriptors 0, 1 and 2. Returns its process id.
    public static func start(_ executable: String, _ arguments: [String], environment: [String: String], folder: String?,
                      stdin: Int32, stdout: Int32, stderr: Int32) throws -> pid_t {
        try start(executable, arguments, environment: environment, folder: folder, descriptors: .given(stdin, stdout, stderr))
    }

    /// Starts `executable` in a session of its own whose controlling terminal is the pseudo-terminal
    /// `terminalPath` (its descriptors 0, 1 and 2), as a shell starts a program at a terminal: the
    /// terminal's Ctrl-C is a SIGINT to it, `/dev/tty` is that terminal, and a program it starts in the
    /// foreground (an editor) may take the terminal over. Returns its process id.
    public static func start(_ executable: String, _ arguments: [String], environment: [String: String], folder: String?,
                             terminalPath: String) throws -> pid_t {
        try start(executable, arguments, environment: environment, folder: folder, descriptors: .terminal(terminalPath))
    }

    /// glibc's POSIX_SPAWN_SETSID (spawn.h; not in Swift's Glibc module, which leaves out the GNU additions).
    #if canImport(Glibc)
    static let setSID: Int32 = 0x80
    #else
    static let setSID: Int32 = Int32(POSIX_SPAWN_SETSID)
    #endif

    enum Descriptors {
        case given(Int32, Int32, Int32)
        case terminal(String)
    }

    static func start(_ executable: String, _ arguments: [String], environment: [String: String], folder: String?,
                      descriptors: Descriptors) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        switch descriptors {
        case .given(let stdin, let stdout, let stderr):
            posix_spawn_file_actions_adddup2(&actions, stdin, 0)
            posix_spawn_file_actions_adddup2(&actions, stdout, 1)
            posix_spawn_file_actions_adddup2(&actions, stderr, 2)
        case .terminal(let path):
            // glibc runs setsid (POSIX_SPAWN_SETSID, below) before the file actions: opening the terminal
            // without O_NOCTTY then makes it the new session's controlling terminal.
            posix_spawn_file_actions_addopen(&actions, 0, path, O_RDWR, 0)
            posix_spawn_file_actions_adddup2(&actions, 0, 1)
            posix_spawn_file_actions_adddup2(&actions, 0, 2)
        }
        // Nothing else of this process goes to the child: SwiftNIO's sockets are not close-on-exec, so a
        // child otherwise kept every test server's listening socket open for as long as it ran, and a
        // test that stopped its server and started it again on its port found the port taken ("Address
        // already in use", in a full run and in CI). glibc ≥ 2.34, looked up at run time like addchdir.
        guard let closeFrom = dlsym(dlopen(nil, RTLD_NOW), "posix_spawn_file_actions_addclosefrom_np") else {
            throw Failed(description: "posix_spawn_file_actions_addclosefrom_np is missing (glibc 2.34 or later is needed)")
        }
        guard unsafeBitCast(closeFrom, to: AddCloseFrom.self)(&actions, 3) == 0 else { throw Failed(description: "closefrom action") }
        if let folder {
            // glibc ≥ 2.29; not in Swift's Glibc module, so looked up at run time.
            guard let symbol = dlsym(dlopen(nil, RTLD_NOW), "posix_spawn_file_actions_addchdir_np") else {
                throw Failed(description: "posix_spawn_file_actions_addchdir_np is missing")
            }
            let addChdir = unsafeBitCast(symbol, to: AddChdir.self)
            guard addChdir(&actions, folder) == 0 else { throw Failed(description: "chdir action for \(folder)") }
        }
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        // Every signal at its default and none blocked in the child, as a shell starts it: a child
        // inherits ignored signals (this process ignores SIGPIPE) and the spawning thread's mask.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var all = sigset_t(), none = sigset_t()
        sigfillset(&all)
        sigemptyset(&none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setsigmask(&attributes, &none)
        var flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK
        if case .terminal = descriptors { flags |= Self.setSID }
        posix_spawnattr_setflags(&attributes, Int16(flags))
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard result == 0 else { throw Failed(description: "posix_spawn \(executable): \(String(cString: strerror(result)))") }
        return pid
    }

    /// Waits for `pid` to end: its exit status, or 128 + the signal that ended it.
    public static func wait(_ pid: pid_t) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let signal = status & 0x7F
        return signal == 0 ? (status >> 8) & 0xFF : 128 + signal
    }

    /// Waits for `pid` to end: its exit status, and whether a signal ended it (then `status` is the signal).
    public static func waitRaw(_ pid: pid_t) -> (status: Int32, signaled: Bool) {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let signal = status & 0x7F
        return signal == 0 ? ((status >> 8) & 0xFF, false) : (signal, true)
    }

    /// Everything readable from `fd` until end of file; closes it.
    public static func readAll(_ fd: Int32) -> Data {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            data.append(contentsOf: buffer[0..<count])
        }
        close(fd)
        return data
    }

    /// Writes all of `bytes` to `fd` (a child that stops reading early is not an error); closes it.
    public static func writeAll(_ bytes: [UInt8], to fd: Int32) {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { break }
            offset += written
        }
        close(fd)
    }
}
