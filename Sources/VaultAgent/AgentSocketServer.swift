import AgentLink
import CDescriptorPassing
import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The agent's side of its Unix domain socket (docs/CLI.md, "The agent"): one thread accepts, one
/// thread per connection reads frames (``AgentFrame``) and writes the handler's answer to each.
///
/// What keeps one client from disturbing the others or reaching the vault:
/// - the folder is the user's own with mode 700 and the socket has mode 600, and the kernel's word on
///   the peer (SO_PEERCRED, getpeereid) is checked on every connection: another user's is answered
///   with a refusal, logged, and closed before a byte of its request is read;
/// - a length over ``AgentFrame/maximumLength`` is refused before anything is allocated for it;
/// - a connection silent for ``Options/idleTimeout`` (a half-sent request, a client stopped in a
///   debugger) is closed; a client that dies mid-request only ends its own connection.
public final class AgentSocketServer: @unchecked Sendable {
    /// Answers one request (a frame's bytes) from a peer that passed the checks, with the file
    /// descriptors that came with it (SCM_RIGHTS; a command's standard input, output and error). The
    /// server closes them once the answer is written: a handler that keeps one dups it.
    public typealias Handler = @Sendable (_ request: [UInt8], _ peer: PeerCredentials, _ descriptors: [Int32]) async -> [UInt8]

    public struct Options: Sendable {
        /// How long a connection may stay silent, inside a request or between two.
        public var idleTimeout: Duration = .seconds(30)
        /// The only user whose connections are served (this process's).
        public var allowedUID: uid_t = getuid()
        /// The socket file's mode.
        var socketMode: mode_t = 0o600
        /// Whether the folder must be private (mode 700, this user's). Only tests that connect as
        /// another user turn it off, so that the peer check, not the file system, is what refuses.
        var requirePrivateFolder = true

        public init() {}
    }

    public let path: String
    private let options: Options
    private let logger: Logger
    private let handler: Handler
    private let lock = NSLock()
    private var listener: Int32 = -1
    private var connections: Set<Int32> = []
    private var stopped = false
    /// Requests being answered: the handler runs or its answer is being written.
    private var answering = 0

    public init(path: String, options: Options = Options(), logger: Logger, handler: @escaping Handler) {
        self.path = path
        self.options = options
        self.logger = logger
        self.handler = handler
    }

    /// Makes the folder if needed, checks it, takes over a socket file no agent answers on, binds and
    /// starts accepting.
    public func start() throws(AgentSocketError) {
        guard let address = SocketCalls.address(path) else { throw .pathTooLong(path) }
        let folder = (path as NSString).deletingLastPathComponent
        try Self.preparePrivateFolder(folder, required: options.requirePrivateFolder)
        if FileManager.default.fileExists(atPath: path) {
            if (try? AgentSocketClient.connectable(path)) == true { throw .inUse(path) }
            unlink(path)
        }
        let fd = try UnixSocket.makeSocket()
        guard SocketCalls.bind(fd, address) == 0 else {
            let text = UnixSocket.errorText()
            close(fd)
            throw .system("bind \(path)", text)
        }
        chmod(path, options.socketMode)
        guard listen(fd, 64) == 0 else {
            let text = UnixSocket.errorText()
            close(fd)
            unlink(path)
            throw .system("listen", text)
        }
        lock.withLock { listener = fd }
        let acceptor = Thread { [self] in acceptLoop(fd) }
        acceptor.name = "vaultsync-agent-accept"
        acceptor.start()
    }

    /// Stops accepting, ends every open connection once its current answer is written, and removes the socket file.
    public func stop() {
        let (fd, open) = lock.withLock { () -> (Int32, Set<Int32>) in
            stopped = true
            defer { listener = -1 }
            return (listener, connections)
        }
        if fd >= 0 {
            // Woken, not closed here: the accepting thread closes it when it leaves, so its number cannot be
            // reused (by the next server's socket) while that thread may still call accept on it.
            shutdown(fd, Int32(SHUT_RDWR))
            unlink(path)
        }
        // Reading ends on each open connection; an answer being written still goes out (the answer to a
        // `stop` request is written after the request that stops the agent).
        for connection in open { shutdown(connection, Int32(SHUT_RD)) }
        // The answers under way are written before the process may end (the one to `stop` among them).
        let deadline = Date().addingTimeInterval(5)
        while lock.withLock({ answering }) > 0, Date() < deadline { usleep(2_000) }
    }

    /// The folder exists (made with mode 700 when missing), belongs to this user and admits nobody else.
    static func preparePrivateFolder(_ folder: String, required: Bool) throws(AgentSocketError) {
        if !FileManager.default.fileExists(atPath: folder) {
            do {
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true,
                                                        attributes: [.posixPermissions: 0o700])
            } catch {
                throw .system("mkdir \(folder)", "\(error)")
            }
        }
        guard required else { return }
        var info = stat()
        guard lstat(folder, &info) == 0 else { throw .system("stat \(folder)", UnixSocket.errorText()) }
        let isFolder = (info.st_mode & S_IFMT) == S_IFDIR
        guard isFolder, info.st_uid == getuid(), info.st_mode & 0o077 == 0 else { throw .folderNotPrivate(folder) }
    }

    private func acceptLoop(_ fd: Int32) {
        while true {
            let connection = accept(fd, nil, nil)
            if connection < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                // The listener was closed (stop), or the process is out of descriptors: the latter is
                // logged and retried after a breath, so one burst of clients does not end the agent.
                if lock.withLock({ stopped }) {
                    close(fd)
                    return
                }
                logger.warning("the agent could not accept a connection", metadata: ["error": "\(UnixSocket.errorText())"])
                usleep(50_000)
                continue
            }
            _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
            let admitted = lock.withLock { () -> Bool in
                guard !stopped else { return false }
                connections.insert(connection)
                return true
            }
            guard admitted else {
                close(connection)
                close(fd)
                return
            }
            let worker = Thread { [self] in
                serve(connection)
                lock.withLock { _ = connections.remove(connection) }
                close(connection)
            }
            worker.name = "vaultsync-agent-connection"
            worker.start()
        }
    }

    /// Reads frames until the client closes, goes silent, breaks the framing or is refused.
    private func serve(_ connection: Int32) {
        guard let peer = UnixSocket.peer(of: connection) else {
            logger.warning("the agent could not tell who connected; refused")
            return
        }
        guard peer.uid == options.allowedUID else {
            logger.warning("the agent refused a connection from another user",
                           metadata: ["uid": "\(peer.uid)", "pid": "\(peer.pid.map(String.init) ?? "-")"])
            _ = SocketCalls.writeAll(connection, AgentFrame.encode(Self.errorReply("refused", "This agent serves its own user only.")))
            return
        }
        UnixSocket.setReadTimeout(connection, options.idleTimeout)
        var decoder = AgentFrame.Decoder()
        var buffer = [UInt8](repeating: 0, count: 65_536)
        // Descriptors arrive with a request's first bytes and go with the next request completed.
        var descriptors: [Int32] = []
        defer { for descriptor in descriptors { close(descriptor) } }
        while true {
            var passed = [Int32](repeating: -1, count: Self.maximumDescriptors)
            var passedCount: Int32 = 0
            let count = vaultsync_receive_descriptors(connection, &buffer, buffer.count, &passed, Int32(passed.count), &passedCount)
            descriptors += passed.prefix(Int(max(0, passedCount)))
            if count < 0, errno == EINTR { continue }
            if count < 0 {
                // EAGAIN: silent past the idle timeout; anything else: the connection broke.
                logger.debug("agent connection closed", metadata: ["reason": "\(UnixSocket.errorText())"])
                return
            }
            if count == 0 {
                do {
                    try decoder.finish()
                } catch {
                    logger.debug("agent client left inside a request", metadata: ["error": "\(error)"])
                }
                return
            }
            let frames: [[UInt8]]
            do {
                frames = try decoder.append(buffer[0..<count])
            } catch {
                logger.warning("the agent refused a request", metadata: ["error": "\(error)"])
                _ = SocketCalls.writeAll(connection, AgentFrame.encode(Self.errorReply("tooLarge", "The request is larger than the agent takes.")))
                return
            }
            for frame in frames {
                lock.withLock { answering += 1 }
                let given = descriptors
                descriptors = []
                let answer = Self.run(handler, frame, peer, given)
                for descriptor in given { close(descriptor) }
                let written = SocketCalls.writeAll(connection, AgentFrame.encode(answer))
                lock.withLock { answering -= 1 }
                guard written else { return }
            }
        }
    }

    /// Runs the async handler from this connection's own thread (not a thread of Swift's pool, which may wait here).
    private static func run(_ handler: @escaping Handler, _ frame: [UInt8], _ peer: PeerCredentials, _ descriptors: [Int32]) -> [UInt8] {
        let done = DispatchSemaphore(value: 0)
        let answer = AnswerBox()
        Task {
            answer.set(await handler(frame, peer, descriptors))
            done.signal()
        }
        done.wait()
        return answer.value
    }

    /// The most descriptors one request brings (standard input, output, error); more are closed.
    static let maximumDescriptors = 3

    /// The agent's own answer when a request cannot reach the handler: `{"error": code, "message": text}`.
    /// The codes and texts are fixed: nothing of the request is echoed.
    static func errorReply(_ code: String, _ message: String) -> [UInt8] {
        Array(#"{"error":"\#(code)","message":"\#(message)"}"#.utf8)
    }
}

private final class AnswerBox: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [UInt8] = []

    func set(_ value: [UInt8]) { lock.withLock { stored = value } }
    var value: [UInt8] { lock.withLock { stored } }
}

/// The command's side of the agent's socket: one request, one answer.
public enum AgentSocketClient {
    /// Sends `request` (with `descriptors` attached, SCM_RIGHTS) and returns the answer; `timeout` bounds
    /// each wait for the agent, `nil` waits as long as the agent works (a command it runs).
    public static func exchange(path: String, request: [UInt8], descriptors: [Int32] = [],
                                timeout: Duration? = .seconds(60)) throws(AgentSocketError) -> [UInt8] {
        let fd = try connected(path)
        defer { close(fd) }
        if let timeout { UnixSocket.setReadTimeout(fd, timeout) }
        do {
            return try AgentConnection.exchange(fd, request: request, descriptors: descriptors)
        } catch {
            throw AgentSocketError(error, path: path, timeout: timeout)
        }
    }

    /// Whether an agent accepts connections on `path`.
    public static func connectable(_ path: String) throws(AgentSocketError) -> Bool {
        do {
            close(try connected(path))
            return true
        } catch .notRunning {
            return false
        }
    }

    /// A socket connected to `path`.
    static func connected(_ path: String) throws(AgentSocketError) -> Int32 {
        do {
            return try AgentConnection.connect(path)
        } catch {
            throw AgentSocketError(error, path: path, timeout: nil)
        }
    }
}

extension AgentSocketError {
    init(_ failure: AgentConnection.Failure, path: String, timeout: Duration?) {
        switch failure {
        case .pathTooLong: self = .pathTooLong(path)
        case .notRunning: self = .notRunning(path)
        case .system(let call, let code): self = .system("\(call) \(path)", SocketCalls.errorText(code))
        case .timedOut: self = .broken("no answer within \(timeout ?? .zero)")
        case .broken(.closed): self = .broken("the agent closed the connection")
        case .broken(.descriptorsNotPassed(let code)): self = .broken("the descriptors could not be passed: \(SocketCalls.errorText(code))")
        case .broken(.badFrame(let error)): self = .broken("\(error)")
        }
    }
}
