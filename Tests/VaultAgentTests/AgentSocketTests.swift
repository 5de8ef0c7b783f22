import Foundation
import Logging
import Testing
import AgentLink
@testable import VaultAgent
import VaultTestSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The agent's socket and framing, on real Unix domain sockets (docs/CLI.md, "The agent").
@Suite("Agent socket")
struct AgentSocketTests {
    @Test("frames split anywhere come out whole; a length over the limit is refused from its header alone; a cut frame is reported")
    func framing() throws {
        let messages: [[UInt8]] = [[], Array("{\"a\":1}".utf8), Array(repeating: 0x41, count: 70_000)]
        let stream = messages.flatMap(AgentFrame.encode)
        for piece in [1, 3, 4, 5, 4096, stream.count] {
            var decoder = AgentFrame.Decoder()
            var out: [[UInt8]] = []
            var index = 0
            while index < stream.count {
                out += try decoder.append(stream[index..<min(index + piece, stream.count)])
                index += piece
            }
            try decoder.finish()
            #expect(out == messages, "pieces of \(piece) bytes")
        }
        var huge = AgentFrame.Decoder()
        #expect(throws: AgentFrame.ReadError.tooLarge(announced: 1 << 30)) { _ = try huge.append([0x40, 0, 0, 0]) }
        var cut = AgentFrame.Decoder()
        _ = try cut.append(AgentFrame.encode(Array("hello".utf8)).prefix(6))
        #expect(throws: AgentFrame.ReadError.truncated(received: 6)) { try cut.finish() }
    }

    @Test("many clients at once each get their own answer")
    func concurrentClients() async throws {
        try await withServer { server, _ in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<32 {
                    group.addTask {
                        let answer = try await Self.exchange(server.path, "request \(index)")
                        #expect(answer == "echo: request \(index)")
                    }
                }
                try await group.waitForAll()
            }
        }
    }

    @Test("a 1 GiB length, a client gone mid-request, a half-sent request left silent: each ends its own connection, others are served")
    func badClientsDisturbNoOne() async throws {
        var options = AgentSocketServer.Options()
        options.idleTimeout = .milliseconds(300)
        try await withServer(options) { server, calls in
            // 1 GiB announced: refused from the header, the connection closed.
            let huge = try RawClient(server.path)
            huge.send([0x40, 0, 0, 0])
            let refusal = String(decoding: try huge.readToEnd(), as: UTF8.self)
            #expect(refusal.contains(#""error":"tooLarge""#), "\(refusal)")

            // A client that dies after half a frame.
            let dying = try RawClient(server.path)
            dying.send(Array(AgentFrame.encode(Array("never finished".utf8)).prefix(9)))
            dying.hangUp()

            // A half-sent request, then silence: closed after the idle timeout, without an answer.
            let silent = try RawClient(server.path)
            silent.send(Array(AgentFrame.encode(Array("stalled".utf8)).prefix(5)))
            #expect(try silent.readToEnd().isEmpty, "closed without an answer")

            #expect(try await Self.exchange(server.path, "still here") == "echo: still here")
            #expect(calls.count == 1, "only the whole request reached the handler")
        }
    }

    @Test("the folder must be private; a second agent on a live socket is refused; a stale socket file is taken over")
    func folderAndSocketFile() async throws {
        let root = temporaryDirectory("vaultsync-agent")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let open = root + "/open"
        try FileManager.default.createDirectory(atPath: open, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        let refused = AgentSocketServer(path: open + "/agent.sock", logger: Logger(label: "test"), handler: Self.echo(Calls()))
        #expect(throws: AgentSocketError.folderNotPrivate(open)) { try refused.start() }

        let path = root + "/private/agent.sock"
        let first = AgentSocketServer(path: path, logger: Logger(label: "test"), handler: Self.echo(Calls()))
        try first.start()
        var info = stat()
        #expect(lstat(path, &info) == 0 && info.st_mode & 0o777 == 0o600, "socket mode 600")
        #expect(lstat(root + "/private", &info) == 0 && info.st_mode & 0o777 == 0o700, "folder mode 700")
        let second = AgentSocketServer(path: path, logger: Logger(label: "test"), handler: Self.echo(Calls()))
        #expect(throws: AgentSocketError.inUse(path)) { try second.start() }
        first.stop()
        #expect(throws: AgentSocketError.notRunning(path)) { _ = try AgentSocketClient.exchange(path: path, request: []) }

        // A socket file left by an agent that was killed: nothing answers on it, so a new agent takes the path.
        let fd = try UnixSocket.makeSocket()
        #expect(SocketCalls.bind(fd, try #require(SocketCalls.address(path))) == 0)
        close(fd)
        let third = AgentSocketServer(path: path, logger: Logger(label: "test"), handler: Self.echo(Calls()))
        try third.start()
        defer { third.stop() }
        #expect(try await Self.exchange(path, "after a stale file") == "echo: after a stale file")
    }

    @Test("another user is refused by the peer check, and the handler never runs (as root: the client runs as nobody)")
    func anotherUserRefused() async throws {
        guard getuid() == 0, let setpriv = ["/usr/bin/setpriv", "/bin/setpriv"].first(where: FileManager.default.isExecutableFile),
              let python = ["/usr/bin/python3", "/bin/python3"].first(where: FileManager.default.isExecutableFile) else {
            // Dropping to another user needs root and setpriv; the check itself runs on every connection of every test.
            return
        }
        // A folder and socket others may reach, so that the peer check, not the file system, is what refuses.
        let root = temporaryDirectory("vaultsync-agent-shared")
        defer { try? FileManager.default.removeItem(atPath: root) }
        chmod(root, 0o755)
        var options = AgentSocketServer.Options()
        options.socketMode = 0o666
        options.requirePrivateFolder = false
        let calls = Calls()
        let server = AgentSocketServer(path: root + "/agent.sock", options: options, logger: Logger(label: "test"), handler: Self.echo(calls))
        try server.start()
        defer { server.stop() }
        let script = """
            import socket, sys
            s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
            try:
                s.sendall(b"\\x00\\x00\\x00\\x02hi")
            except OSError:
                pass  # refused before the request was read: the answer is already waiting
            data = b""
            while True:
                try:
                    chunk = s.recv(4096)
                except OSError:
                    break
                if not chunk: break
                data += chunk
            sys.stdout.write(data[4:].decode())
            """
        let result = try await runChild(setpriv, ["--reuid=65534", "--regid=65534", "--clear-groups", python, "-c", script, server.path])
        #expect(result.stdout.contains(#""error":"refused""#), "\(result.stdout) \(result.stderr)")
        #expect(calls.count == 0, "the request never reached the handler")
    }

    // MARK: Set-up

    final class Calls: @unchecked Sendable {
        private let lock = NSLock()
        private var made = 0
        func add() { lock.withLock { made += 1 } }
        var count: Int { lock.withLock { made } }
    }

    static func echo(_ calls: Calls) -> AgentSocketServer.Handler {
        { request, _, _ in
            calls.add()
            return Array("echo: ".utf8) + request
        }
    }

    func withServer(_ options: AgentSocketServer.Options = AgentSocketServer.Options(),
                    _ body: (AgentSocketServer, Calls) async throws -> Void) async throws {
        let root = temporaryDirectory("vaultsync-agent")
        defer { try? FileManager.default.removeItem(atPath: root) }
        let calls = Calls()
        let server = AgentSocketServer(path: root + "/run/agent.sock", options: options, logger: Logger(label: "test"), handler: Self.echo(calls))
        try server.start()
        defer { server.stop() }
        try await body(server, calls)
    }

    /// One exchange, off Swift's thread pool (the client blocks in read).
    static func exchange(_ path: String, _ text: String) async throws -> String {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                do {
                    let answer = try AgentSocketClient.exchange(path: path, request: Array(text.utf8), timeout: .seconds(30))
                    continuation.resume(returning: String(decoding: answer, as: UTF8.self))
                } catch {
                    continuation.resume(throwing: error)
                }
            }.start()
        }
    }
}

/// A client that writes raw bytes, for requests no well-behaved client sends.
final class RawClient: @unchecked Sendable {
    private var fd: Int32

    init(_ path: String) throws {
        fd = try AgentSocketClient.connected(path)
        UnixSocket.setReadTimeout(fd, .seconds(30))
    }

    func send(_ bytes: [UInt8]) {
        _ = SocketCalls.writeAll(fd, bytes)
    }

    /// Everything the agent sends until it closes the connection.
    func readToEnd() throws -> [UInt8] {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count < 0, errno == EINTR { continue }
            if count < 0 { throw AgentSocketError.broken(UnixSocket.errorText()) }
            if count == 0 { return received }
            received += buffer[0..<count]
        }
    }

    /// Ends the connection from this side (a client that dies).
    func hangUp() {
        if fd >= 0 { closeDescriptor(fd) }
        fd = -1
    }

    deinit { hangUp() }
}

private func closeDescriptor(_ fd: Int32) {
    _ = close(fd)
}

/// Runs `executable` to its end; its standard output and error.
func runChild(_ executable: String, _ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
    try await withCheckedThrowingContinuation { continuation in
        Thread {
            do {
                let output = try Spawn.pipe()
                let errors = try Spawn.pipe()
                let input = open("/dev/null", O_RDONLY)
                let pid = try Spawn.start(executable, arguments, environment: ["PATH": "/usr/bin:/bin"], folder: nil,
                                          stdin: input, stdout: output.write, stderr: errors.write)
                close(input)
                close(output.write)
                close(errors.write)
                let errorText = ErrorText()
                let errorReader = Thread { errorText.set(Spawn.readAll(errors.read)) }
                errorReader.start()
                let stdout = Spawn.readAll(output.read)
                let status = Spawn.wait(pid)
                while !errorText.done { usleep(1_000) }
                continuation.resume(returning: (status, String(decoding: stdout, as: UTF8.self), errorText.text))
            } catch {
                continuation.resume(throwing: error)
            }
        }.start()
    }
}

private final class ErrorText: @unchecked Sendable {
    private let lock = NSLock()
    private var data: Data?
    func set(_ value: Data) { lock.withLock { data = value } }
    var done: Bool { lock.withLock { data != nil } }
    var text: String { lock.withLock { String(decoding: data ?? Data(), as: UTF8.self) } }
}
