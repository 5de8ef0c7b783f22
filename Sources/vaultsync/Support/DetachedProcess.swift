import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Starting the agent in the background: a session of its own (no terminal: closing the terminal that
/// started it neither stops nor locks it), standard input a pipe that carries what the parent hands it
/// once (the password), standard output and error appended to a log file (mode 600), and no other
/// descriptor of the parent.
enum DetachedProcess {
    struct Failed: Error, CustomStringConvertible {
        var description: String
    }

    /// This executable's path.
    static func currentExecutable() -> String {
        #if os(Linux)
        if let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") { return path }
        #endif
        return Bundle.main.executablePath ?? CommandLine.arguments[0]
    }

    typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32

    /// Starts `executable`; returns its process id.
    static func start(executable: String, arguments: [String], environment: [String: String], standardInput: String,
                      logPath: String) throws -> pid_t {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { throw Failed(description: "pipe: \(String(cString: strerror(errno)))") }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        let log = open(logPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard log >= 0 else {
            close(ends[0])
            close(ends[1])
            throw Failed(description: "cannot open \(logPath): \(String(cString: strerror(errno)))")
        }
        defer {
            close(ends[0])
            close(log)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, ends[0], 0)
        posix_spawn_file_actions_adddup2(&actions, log, 1)
        posix_spawn_file_actions_adddup2(&actions, log, 2)
        #if canImport(Glibc)
        if let symbol = dlsym(dlopen(nil, RTLD_NOW), "posix_spawn_file_actions_addclosefrom_np") {
            _ = unsafeBitCast(symbol, to: AddCloseFrom.self)(&actions, 3)
        }
        #endif
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var all = sigset_t(), none = sigset_t()
        sigfillset(&all)
        sigemptyset(&none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setsigmask(&attributes, &none)
        #if canImport(Glibc)
        // POSIX_SPAWN_SETSID (glibc's spawn.h; not in Swift's Glibc module).
        let setSID: Int32 = 0x80
        #else
        let setSID = Int32(POSIX_SPAWN_SETSID)
        #endif
        posix_spawnattr_setflags(&attributes, Int16(Int32(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK) | setSID))
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            argv.forEach { free($0) }
            envp.forEach { free($0) }
        }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard result == 0 else {
            close(ends[1])
            throw Failed(description: "cannot start \(executable): \(String(cString: strerror(result)))")
        }
        let bytes = Array(standardInput.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { write(ends[1], $0.baseAddress! + offset, $0.count - offset) }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { break }
            offset += written
        }
        close(ends[1])
        return pid
    }

    /// The child's exit status once it has ended (reaped), nil while it runs.
    static func exitStatus(_ pid: pid_t) -> Int32? {
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == pid else { return nil }
        let signal = status & 0x7F
        return signal == 0 ? (status >> 8) & 0xFF : 128 + signal
    }
}

/// What the agent does to its own process so the keys it holds stay in it: no core file, and (Linux) not
/// dumpable, which also keeps other processes of the user from attaching a debugger or reading its memory.
enum AgentHardening {
    typealias Prctl = @convention(c) (Int32, UInt, UInt, UInt, UInt) -> Int32

    static func apply() {
        var none = rlimit(rlim_cur: 0, rlim_max: 0)
        #if canImport(Glibc)
        _ = setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &none)
        // PR_SET_DUMPABLE = 4 (prctl is variadic, so it is called through its address).
        if let symbol = dlsym(dlopen(nil, RTLD_NOW), "prctl") {
            _ = unsafeBitCast(symbol, to: Prctl.self)(4, 0, 0, 0, 0)
        }
        #else
        _ = setrlimit(RLIMIT_CORE, &none)
        #endif
    }
}
