import AgentLink
import CDescriptorPassing
import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Who is at the other end of a Unix domain socket, as the kernel says (not as the peer claims).
public struct PeerCredentials: Sendable, Equatable {
    public let uid: uid_t
    /// The peer's process id, where the platform tells it (Linux).
    public let pid: pid_t?
}

/// Why the agent's socket could not be served or reached.
public enum AgentSocketError: Error, Sendable, Equatable {
    /// The socket's path does not fit a socket address (about 100 bytes).
    case pathTooLong(String)
    /// The socket's folder can be entered or read by other users, or belongs to another user.
    case folderNotPrivate(String)
    /// An agent already answers on this socket.
    case inUse(String)
    /// Nothing answers on this socket (no agent runs for the profile).
    case notRunning(String)
    /// A system call failed: which, and the error's text.
    case system(String, String)
    /// The other side closed, or sent something that is not a frame.
    case broken(String)
}

extension AgentSocketError: LocalizedError {
    public var errorDescription: String? {
        switch self {
        case .pathTooLong(let path): return "The agent's socket path is too long for a socket address: \(path)."
        case .folderNotPrivate(let path):
            return "The agent's socket folder \(path) is open to other users (it must be yours, with mode 700)."
        case .inUse(let path): return "An agent already runs on \(path)."
        case .notRunning(let path): return "No agent answers on \(path)."
        case .system(let call, let text): return "The agent's socket failed (\(call): \(text))."
        case .broken(let reason): return "The agent's connection broke: \(reason)."
        }
    }
}

/// The agent's own POSIX calls (the shared ones: ``SocketCalls``).
enum UnixSocket {
    static func errorText(_ code: Int32 = errno) -> String { SocketCalls.errorText(code) }

    static func makeSocket() throws(AgentSocketError) -> Int32 {
        let fd = SocketCalls.makeSocket()
        guard fd >= 0 else { throw .system("socket", errorText()) }
        return fd
    }

    /// The peer of a connected socket: SO_PEERCRED on Linux, getpeereid on Apple platforms.
    static func peer(of fd: Int32) -> PeerCredentials? {
        #if canImport(Glibc)
        // struct ucred { pid_t pid; uid_t uid; gid_t gid; } (not in Swift's Glibc module: a GNU extension).
        var credentials: (Int32, UInt32, UInt32) = (0, 0, 0)
        var length = socklen_t(MemoryLayout.size(ofValue: credentials))
        let soPeerCred: Int32 = 17
        guard getsockopt(fd, SOL_SOCKET, soPeerCred, &credentials, &length) == 0 else { return nil }
        return PeerCredentials(uid: credentials.1, pid: credentials.0)
        #else
        var uid: uid_t = 0
        var gid: gid_t = 0
        guard getpeereid(fd, &uid, &gid) == 0 else { return nil }
        return PeerCredentials(uid: uid, pid: nil)
        #endif
    }

    /// Sets how long a read may wait for bytes before it fails with EAGAIN.
    static func setReadTimeout(_ fd: Int32, _ duration: Duration) {
        let microseconds = duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000
        var value = timeval(tv_sec: Int(microseconds / 1_000_000), tv_usec: .init(microseconds % 1_000_000))
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
    }
}

/// The process's standard streams, as the agent lends them to each command it runs.
public enum StandardStreams {
    /// Drops what the C library read ahead from standard input, so nothing of one command's input
    /// reaches the next.
    public static func discardBufferedInput() {
        vaultsync_discard_buffered_input()
    }

    /// Writes out what the C library holds for standard output and error.
    public static func flush() {
        vaultsync_flush_output()
    }

    /// Forgets a failed write on standard output or error (the last command's reader went away).
    public static func clearOutputErrors() {
        vaultsync_clear_output_errors()
    }
}
