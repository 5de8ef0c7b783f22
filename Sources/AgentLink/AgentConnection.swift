import CDescriptorPassing
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A client's connection to a profile's agent: one request (a frame, with descriptors attached as
/// SCM_RIGHTS), one answer. Only POSIX calls and the C library, so that the command line's small
/// front can use it without loading Foundation.
public enum AgentConnection {
    /// Why an exchange with the agent failed.
    public enum Failure: Error, Sendable, Equatable {
        /// The socket's path does not fit a socket address (about 100 bytes).
        case pathTooLong
        /// Nothing answers on the socket (no file, or a file nothing listens on).
        case notRunning
        /// A system call failed: which, and errno.
        case system(call: String, code: Int32)
        /// The agent closed the connection or sent what is not a frame.
        case broken(BrokenReason)
        /// No answer within the read timeout.
        case timedOut
    }

    public enum BrokenReason: Sendable, Equatable {
        case closed
        case descriptorsNotPassed(code: Int32)
        case badFrame(AgentFrame.ReadError)
    }

    /// A socket connected to `path`, close-on-exec.
    public static func connect(_ path: String) throws(Failure) -> Int32 {
        guard let address = SocketCalls.address(path) else { throw .pathTooLong }
        let fd = SocketCalls.makeSocket()
        guard fd >= 0 else { throw .system(call: "socket", code: errno) }
        guard SocketCalls.connect(fd, address) == 0 else {
            let code = errno
            close(fd)
            if code == ENOENT || code == ECONNREFUSED { throw .notRunning }
            throw .system(call: "connect", code: code)
        }
        return fd
    }

    /// Sends `request` on the connected `fd` with `descriptors` attached and returns the first frame
    /// the agent answers.
    public static func exchange(_ fd: Int32, request: [UInt8], descriptors: [Int32] = []) throws(Failure) -> [UInt8] {
        let frame = AgentFrame.encode(request)
        var sent = 0
        if !descriptors.isEmpty {
            sent = frame.withUnsafeBytes { raw in
                descriptors.withUnsafeBufferPointer { fds in
                    vaultsync_send_descriptors(fd, raw.baseAddress, raw.count, fds.baseAddress, Int32(fds.count))
                }
            }
            guard sent > 0 else { throw .broken(.descriptorsNotPassed(code: errno)) }
        }
        guard SocketCalls.writeAll(fd, Array(frame[sent...])) else { throw .broken(.closed) }
        var decoder = AgentFrame.Decoder()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count < 0, errno == EINTR { continue }
            if count < 0, errno == EAGAIN || errno == EWOULDBLOCK { throw .timedOut }
            if count < 0 { throw .system(call: "read", code: errno) }
            if count == 0 { throw .broken(.closed) }
            let frames: [[UInt8]]
            do {
                frames = try decoder.append(buffer[0..<count])
            } catch {
                throw .broken(.badFrame(error))
            }
            if let first = frames.first { return first }
        }
    }
}

/// The POSIX socket calls the agent and its clients share, for Linux and Apple platforms.
public enum SocketCalls {
    /// errno's text.
    public static func errorText(_ code: Int32 = errno) -> String { String(cString: strerror(code)) }

    /// A `sockaddr_un` for `path`, or nil when it does not fit.
    public static func address(_ path: String) -> sockaddr_un? {
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

    /// A Unix stream socket, close-on-exec (and, on Apple platforms, without SIGPIPE); -1 with errno set.
    public static func makeSocket() -> Int32 {
        #if canImport(Glibc)
        return socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
        let fd = socket(AF_UNIX, SOCK_STREAM, 0)
        if fd >= 0 {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            var on: Int32 = 1
            _ = setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &on, socklen_t(MemoryLayout<Int32>.size))
        }
        return fd
        #endif
    }

    public static func bind(_ fd: Int32, _ address: sockaddr_un) -> Int32 {
        withAddress(address) { pointer, length in
            #if canImport(Glibc)
            Glibc.bind(fd, pointer, length)
            #else
            Darwin.bind(fd, pointer, length)
            #endif
        }
    }

    public static func connect(_ fd: Int32, _ address: sockaddr_un) -> Int32 {
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

    /// Writes all of `bytes`; false when the peer has gone (no SIGPIPE: the signal is suppressed).
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
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
}
