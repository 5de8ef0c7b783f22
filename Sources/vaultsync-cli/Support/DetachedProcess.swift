import Foundation
import ProcessSpawn
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

    /// Starts `executable`; returns its process id.
    static func start(executable: String, arguments: [String], environment: [String: String], standardInput: String,
                      logPath: String) throws -> pid_t {
        let input = try Spawn.pipe()
        let log = open(logPath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard log >= 0 else {
            close(input.read)
            close(input.write)
            throw Failed(description: "cannot open \(logPath): \(String(cString: strerror(errno)))")
        }
        defer {
            close(input.read)
            close(log)
        }
        let pid: pid_t
        do {
            pid = try Spawn.start(executable, arguments, environment: environment, stdin: input.read, stdout: log, stderr: log,
                                  newSession: true)
        } catch {
            close(input.write)
            throw Failed(description: "cannot start \(executable): \(error)")
        }
        Spawn.writeAll(Array(standardInput.utf8), to: input.write)
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
/// dumpable, which also keeps other processes of the user from attaching a debugger or reading its memory;
/// and, where the system lets it, its memory locked so that no page of it (the keys among them) is
/// written to swap.
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

    /// Whether the memory could be locked: mlockall(MCL_CURRENT | MCL_FUTURE | MCL_ONFAULT) on Linux, pages
    /// locked as they are first used (locking every reserved page at once would make the thread stacks'
    /// reservations resident). Only where no limit applies (RLIMIT_MEMLOCK unlimited, or root, whose
    /// CAP_IPC_LOCK passes it): under the usual 8 MiB limit, MCL_FUTURE would make the agent's allocations
    /// fail once it is reached. Apple platforms have no mlockall.
    static func lockMemory() -> Bool {
        #if canImport(Glibc)
        var limit = rlimit()
        let memoryLockLimit = __rlimit_resource_t(8)  // RLIMIT_MEMLOCK (a macro Swift does not import)
        guard getrlimit(memoryLockLimit, &limit) == 0 else { return false }
        guard limit.rlim_cur == rlim_t.max || geteuid() == 0 else { return false }  // rlim_t.max: RLIM_INFINITY
        let current: Int32 = 1, future: Int32 = 2, onFault: Int32 = 4
        return mlockall(current | future | onFault) == 0
        #else
        return false
        #endif
    }
}
