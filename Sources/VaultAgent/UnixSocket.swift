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

/// The POSIX calls behind the agent's socket, for Linux and Apple platforms.
enum UnixSocket {
    static func errorText(_ code: Int32 = errno) -> String { String(cString: strerror(code)) }

    /// A `sockaddr_un` for `path`, or nil when it does not fit.
    static func address(_ path: String) -> sockaddr_un? {
        var address = sockaddr_un()
        #if canImport(Darwin)
        address.sun_len = UInt8(MemoryLayout<sockaddr_un>.size)
        #endif
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < capacity else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return address
    }

    static func makeSocket() throws(AgentSocketError) -> Int32 {
        #if canImport(Glibc)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
        let fd = socket(AF_UNIX, SOCK_STREAM, 0)
        if fd >= 0 {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            var on: Int32 = 1
            _ = setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &on, socklen_t(MemoryLayout<Int32>.size))
        }
        #endif
        guard fd >= 0 else { throw .system("socket", errorText()) }
        return fd
    }

    static func bind(_ fd: Int32, _ address: sockaddr_un) -> Int32 {
        withAddress(address) { pointer, length in
            #if canImport(Glibc)
            Glibc.bind(fd, pointer, length)
            #else
            Darwin.bind(fd, pointer, length)
            #endif
        }
    }

    static func connect(_ fd: Int32, _ address: sockaddr_un) -> Int32 {
        withAddress(address) { pointer, length in
            #if canImport(Glibc)
            Glibc.connect(fd, pointer, length)
            #else
            Darwin.connect(fd, pointer, length)
            #endif
        }
    }

    /// Calls `call` with `address` as the `sockaddr` pointer and length the socket calls take.
    private static func withAddress(_ address: sockaddr_un, _ call: (UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
        var address = address
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { call($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
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

    /// Writes all of `bytes`; false when the peer has gone (no SIGPIPE: the signal is suppressed).
    static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { raw -> Int in
                #if canImport(Glibc)
                send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
                #else
                send(fd, raw.baseAddress! + offset, raw.count - offset, 0)
                #endif
            }
            if written < 0, errno == EINTR { continue }
            guard written > 0 else { return false }
            offset += written
        }
        return true
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
