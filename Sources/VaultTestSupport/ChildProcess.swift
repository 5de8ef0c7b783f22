import Foundation

/// A test helper executable that is not built.
public struct HelperNotBuilt: Error, CustomStringConvertible {
    public var name: String
    public var description: String { "\(name) is not built; run `swift build --build-tests` first" }
}

/// A built helper executable (like `vaultsync-crash-helper`) next to the test bundle.
public func helperExecutable(_ name: String) throws -> URL {
    let candidates = [
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent(),
        Bundle.main.bundleURL.deletingLastPathComponent(),
        URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(".build/debug"),
    ]
    for directory in candidates {
        let url = directory.appendingPathComponent(name)
        if FileManager.default.isExecutableFile(atPath: url.path) { return url }
    }
    throw HelperNotBuilt(name: name)
}

/// Collects a child's output from the pipe's handler thread.
public final class OutputCollector: @unchecked Sendable {
    private let lock = NSLock()
    private var data = Data()

    public init() {}

    public func append(_ more: Data) {
        lock.lock()
        data.append(more)
        lock.unlock()
    }

    public var text: String {
        lock.lock()
        defer { lock.unlock() }
        return String(decoding: data, as: UTF8.self)
    }
}

/// A child process whose standard output (or standard error) is collected as it arrives, to be killed at any moment.
/// Started with ``Spawn`` (posix_spawn, only descriptors 0–2 passed on) and waited for with `waitpid` on
/// threads of its own: Foundation's `Process` watches its children through a Dispatch source, and
/// libdispatch crashed the whole test process in `_dispatch_event_loop_drain` while a test waited on
/// one (docs/RELIABILITY.md).
public final class KillableChild: @unchecked Sendable {
    public let output = OutputCollector()
    private let executable: URL
    private let arguments: [String]
    private let environment: [String: String]
    private let folder: String?
    /// Collect standard error into ``output`` (and keep standard output aside) instead: for a child that logs
    /// there, as `vaultsync-server` does.
    private let collectsStandardError: Bool
    private let lock = NSLock()
    private var processID: pid_t = 0
    private var ended: (status: Int32, signaled: Bool)?
    private var errors = Data()
    private let finished = DispatchGroup()

    /// `environment` is added to this process's, or, with `replacingEnvironment`, is the child's whole environment.
    public init(executable: URL, arguments: [String], environment: [String: String]? = nil, replacingEnvironment: Bool = false,
                folder: String? = nil, collectingStandardError: Bool = false) {
        self.executable = executable
        self.arguments = arguments
        self.environment = replacingEnvironment ? environment ?? [:] : ProcessInfo.processInfo.environment.merging(environment ?? [:]) { $1 }
        self.folder = folder
        collectsStandardError = collectingStandardError
    }

    public func run() throws {
        let input = try Spawn.pipe(), collectedPipe = try Spawn.pipe(), otherPipe = try Spawn.pipe()
        let (stdout, stderr) = collectsStandardError ? (otherPipe, collectedPipe) : (collectedPipe, otherPipe)
        let pid: pid_t
        do {
            pid = try Spawn.start(executable.path, arguments, environment: environment, folder: folder,
                                  stdin: input.read, stdout: stdout.write, stderr: stderr.write)
        } catch {
            for fd in [input.read, input.write, stdout.read, stdout.write, stderr.read, stderr.write] { close(fd) }
            throw error
        }
        for fd in [input.read, input.write, stdout.write, stderr.write] { close(fd) }
        lock.withLock { processID = pid }
        let collected = output
        finished.enter()
        Thread {
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = read(collectedPipe.read, &buffer, buffer.count)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                collected.append(Data(buffer[0..<count]))
            }
            close(collectedPipe.read)
            self.finished.leave()
        }.start()
        finished.enter()
        Thread {
            let data = Spawn.readAll(otherPipe.read)
            self.lock.withLock { self.errors = data }
            self.finished.leave()
        }.start()
        finished.enter()
        Thread {
            let result = Spawn.waitRaw(pid)
            self.lock.withLock { self.ended = result }
            self.finished.leave()
        }.start()
    }

    public var pid: Int32 { lock.withLock { processID } }

    /// Started and not ended yet.
    public var isRunning: Bool { lock.withLock { processID != 0 && ended == nil } }

    /// Ended on its own with exit status 0.
    public var exitedCleanly: Bool { lock.withLock { ended.map { !$0.signaled && $0.status == 0 } ?? false } }

    /// Waits until the output contains `marker`, the child ends, or `seconds` pass.
    public func wait(for marker: String, seconds: Double = 60) async throws {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while !output.text.contains(marker), isRunning, ContinuousClock.now < deadline {
            try await Task.sleep(nanoseconds: 5_000_000)
        }
    }

    /// SIGKILL (if still running), then collects the rest of the output; returns what was not collected (the
    /// standard error, or the standard output for a child whose standard error is collected).
    @discardableResult
    public func killAndCollect() -> String {
        if isRunning { kill(pid, SIGKILL) }
        finished.wait()
        return String(decoding: lock.withLock { errors }, as: UTF8.self)
    }

    /// Whether the child died of a signal (rather than ending on its own).
    public var wasKilled: Bool { lock.withLock { ended?.signaled ?? false } }
}
