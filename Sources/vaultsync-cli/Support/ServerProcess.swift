import Foundation

/// The `vaultsync-server` executable run as a child process, for `vaultsync demo`: the server a person
/// installs, started on a loopback port with a data folder of its own, stopped for real, and started
/// again on the same port with the same data.
///
/// The demo used to link the server's library and run it in-process. Every command paid for that: the
/// server's code (Hummingbird, PostgresNIO and ours) made the executable a quarter larger, and its
/// symbols and type records are bound and scanned at every start (docs/BENCHMARKS.md, measured 2026-11-29).
final class ServerProcess: @unchecked Sendable {
    /// Why the server could not be started.
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    private let executable: URL
    private let dataDirectory: String
    private let logPath: String
    private let lock = NSLock()
    private var process: Process?
    /// `stopNow()` ran (an interrupt): a start that was under way stops the process it made at once.
    private var halted = false
    /// The port it listens on, once it has started (restarts reuse it).
    private(set) var port = 0

    init(executable: URL, dataDirectory: String, logPath: String) {
        self.executable = executable
        self.dataDirectory = dataDirectory
        self.logPath = logPath
    }

    /// `vaultsync-server` beside the running `vaultsync` (a build folder, or where both were installed),
    /// else the first on `PATH`.
    static func locate(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> URL {
        let name = "vaultsync-server"
        let beside = Bundle.main.executableURL?.resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent(name)
        let onPath = (environment["PATH"] ?? "").split(separator: ":").map { URL(fileURLWithPath: String($0)).appendingPathComponent(name) }
        if let found = ([beside].compactMap { $0 } + onPath).first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) {
            return found
        }
        throw Failure(description: "the demo runs the vaultsync-server executable, found neither beside vaultsync nor on PATH; "
                      + "build it with `swift build --product vaultsync-server` (scripts/demo.sh does)")
    }

    var url: String { "http://127.0.0.1:\(port)" }

    /// Starts the server (on the port of its first start, if it had one) and waits until it listens.
    func start() async throws {
        let log = try logFile()
        let offset = log.seekToEndOfFile()
        let child = Process()
        child.executableURL = executable
        child.arguments = ["--host", "127.0.0.1", "--port", String(port), "--data-dir", dataDirectory, "--log-level", "info"]
        // Its settings are the demo's alone: a VAULTSYNC_DATABASE_URL or VAULTSYNC_PORT of the person's shell must
        // not point it at their PostgreSQL or their server's port.
        child.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("VAULTSYNC_") }
        child.standardOutput = log
        child.standardError = log
        child.standardInput = FileHandle.nullDevice
        try child.run()
        let interrupted = lock.withLock {
            process = child
            return halted
        }
        if interrupted {
            stopNow()
            throw Failure(description: "the demo was interrupted while vaultsync-server started")
        }
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            let written = (try? Data(contentsOf: URL(fileURLWithPath: logPath))) ?? Data()
            let text = String(decoding: written.dropFirst(Int(offset)), as: UTF8.self)
            if let port = text.split(separator: "listening on http://127.0.0.1:").dropFirst().first?.prefix(while: \.isNumber), let bound = Int(port) {
                self.port = bound
                return
            }
            guard child.isRunning else {
                lock.withLock { process = nil }
                throw Failure(description: "vaultsync-server stopped before it listened: \(text.split(separator: "\n").suffix(3).joined(separator: " / "))")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        stopNow()
        throw Failure(description: "vaultsync-server did not listen within 60 seconds (its log: \(logPath))")
    }

    /// Stops the server gracefully (SIGTERM) and waits until it has exited; a server that does not stop within
    /// ten seconds is killed.
    func stop() async {
        guard let child = lock.withLock({ process }) else { return }
        child.terminate()
        let deadline = ContinuousClock.now + .seconds(10)
        while child.isRunning, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        if child.isRunning { kill(child.processIdentifier, SIGKILL) }
        child.waitUntilExit()
        lock.withLock { process = nil }
    }

    /// `stop()` for a signal handler: blocks this thread, up to two seconds, then kills.
    func stopNow() {
        guard let child = lock.withLock({ () -> Process? in
            halted = true
            return process
        }) else { return }
        child.terminate()
        let deadline = Date().addingTimeInterval(2)
        while child.isRunning, Date() < deadline { usleep(10_000) }
        if child.isRunning { kill(child.processIdentifier, SIGKILL) }
        child.waitUntilExit()
        lock.withLock { process = nil }
    }

    private func logFile() throws -> FileHandle {
        if !FileManager.default.fileExists(atPath: logPath) {
            guard FileManager.default.createFile(atPath: logPath, contents: nil, attributes: [.posixPermissions: 0o600]) else {
                throw Failure(description: "could not create the server's log \(logPath)")
            }
        }
        guard let handle = FileHandle(forWritingAtPath: logPath) else { throw Failure(description: "could not open the server's log \(logPath)") }
        return handle
    }
}
