import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Starting a child without Foundation's `Process`, for the CLI (the editor, the clipboard tools, the
/// agent) and the tests alike.
///
/// Not `Process`: on Linux (Swift 6.3.1) its `run()` over-reads `/proc/self/fd` entries and its exit
/// monitoring goes through a Dispatch source, and both crashed the whole test process in full runs
/// (docs/RELIABILITY.md); and it puts the child in a process group of its own, outside the terminal's
/// foreground group, so a full-screen editor reading the terminal is stopped by it (SIGTTIN) on a blank
/// screen. Here: `posix_spawn` with the three standard descriptors given (or this process's own), every
/// other descriptor closed in the child (no child keeps another child's pipe or a server's socket
/// open), every signal at its default, and `waitpid` on the caller's own thread.
public enum Spawn {
    public struct Failed: Error, CustomStringConvertible {
        public var description: String
    }

    /// A pipe whose two ends are closed in every child unless given to it as 0, 1 or 2.
    public static func pipe() throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [0, 0]
        guard systemPipe(&fds) == 0 else { throw Failed(description: "pipe: \(errno)") }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        return (fds[0], fds[1])
    }

    private static func systemPipe(_ fds: UnsafeMutablePointer<Int32>) -> Int32 {
        #if canImport(Glibc)
        Glibc.pipe(fds)
        #else
        Darwin.pipe(fds)
        #endif
    }

    typealias AddChdir = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32
    typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32

    /// Starts `executable` with `arguments`, `environment`, in `folder`, with `stdin`, `stdout` and
    /// `stderr` as its descriptors 0, 1 and 2. Returns its process id.
    public static func start(_ executable: String, _ arguments: [String], environment: [String: String], folder: String?,
                      stdin: Int32, stdout: Int32, stderr: Int32) throws -> pid_t {
        try start(executable, arguments, environment: environment, folder: folder, descriptors: .given(stdin, stdout, stderr),
                  newSession: false)
    }

    /// Starts `executable` with this process's standard descriptors, in this process's group: a child run
    /// in the foreground of the terminal this process runs at (an editor), which the terminal's Ctrl-C
    /// reaches as it reaches this process. With `newSession`, in a session of its own instead (no
    /// controlling terminal: the agent, which closing the terminal must not stop).
    public static func start(_ executable: String, _ arguments: [String], environment: [String: String], folder: String? = nil,
                             stdin: Int32 = 0, stdout: Int32 = 1, stderr: Int32 = 2, newSession: Bool) throws -> pid_t {
        try start(executable, arguments, environment: environment, folder: folder,
                  descriptors: .given(stdin, stdout, stderr), newSession: newSession)
    }

    /// Starts `executable` in a session of its own whose controlling terminal is the pseudo-terminal
    /// `terminalPath` (its descriptors 0, 1 and 2), as a shell starts a program at a terminal: the
    /// terminal's Ctrl-C is a SIGINT to it, `/dev/tty` is that terminal, and a program it starts in the
    /// foreground (an editor) may take the terminal over. Returns its process id.
    public static func start(_ executable: String, _ arguments: [String], environment: [String: String], folder: String?,
                             terminalPath: String) throws -> pid_t {
        try start(executable, arguments, environment: environment, folder: folder, descriptors: .terminal(terminalPath),
                  newSession: true)
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
                      descriptors: Descriptors, newSession: Bool) throws -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        switch descriptors {
        case .given(let stdin, let stdout, let stderr):
            // A descriptor already in its place is left alone (dup2 onto itself would not clear a
            // close-on-exec flag, and it has none: 0, 1 and 2 are inherited).
            for (descriptor, target) in [(stdin, Int32(0)), (stdout, 1), (stderr, 2)] {
                if descriptor != target {
                    posix_spawn_file_actions_adddup2(&actions, descriptor, target)
                } else {
                    #if canImport(Darwin)
                    // POSIX_SPAWN_CLOEXEC_DEFAULT (below) closes what the actions do not name.
                    posix_spawn_file_actions_addinherit_np(&actions, target)
                    #endif
                }
            }
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
        #if canImport(Glibc)
        guard let closeFrom = dlsym(dlopen(nil, RTLD_NOW), "posix_spawn_file_actions_addclosefrom_np") else {
            throw Failed(description: "posix_spawn_file_actions_addclosefrom_np is missing (glibc 2.34 or later is needed)")
        }
        guard unsafeBitCast(closeFrom, to: AddCloseFrom.self)(&actions, 3) == 0 else { throw Failed(description: "closefrom action") }
        #endif
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
        var flags = Int32(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK)
        if newSession { flags |= Self.setSID }
        #if canImport(Darwin)
        // Darwin's way to close every descriptor not named in the file actions.
        flags |= Int32(POSIX_SPAWN_CLOEXEC_DEFAULT)
        #endif
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

extension Spawn {
    /// A signal's name as `kill -l` and the shells print it ("SIGINT"), or its number.
    public static func signalName(_ number: Int32) -> String {
        let names: [Int32: String] = [SIGHUP: "SIGHUP", SIGINT: "SIGINT", SIGQUIT: "SIGQUIT", SIGILL: "SIGILL", SIGABRT: "SIGABRT",
                                      SIGKILL: "SIGKILL", SIGSEGV: "SIGSEGV", SIGPIPE: "SIGPIPE", SIGALRM: "SIGALRM",
                                      SIGTERM: "SIGTERM", SIGBUS: "SIGBUS", SIGUSR1: "SIGUSR1", SIGUSR2: "SIGUSR2"]
        return names[number] ?? "signal \(number)"
    }
}
