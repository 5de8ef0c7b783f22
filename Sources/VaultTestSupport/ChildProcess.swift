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

/// A child process whose standard output is collected as it arrives, to be killed at any moment.
public final class KillableChild: @unchecked Sendable {
    public let process = Process()
    public let output = OutputCollector()
    private let outputPipe = Pipe()
    private let errorPipe = Pipe()

    public init(executable: URL, arguments: [String], environment: [String: String]? = nil) {
        process.executableURL = executable
        process.arguments = arguments
        if let environment { process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 } }
        process.standardOutput = outputPipe
        process.standardError = errorPipe
        let collected = output
        outputPipe.fileHandleForReading.readabilityHandler = { handle in collected.append(handle.availableData) }
    }

    public func run() throws {
        try process.run()
    }

    public var pid: Int32 { process.processIdentifier }

    /// Waits until the output contains `marker`, the child ends, or `seconds` pass.
    public func wait(for marker: String, seconds: Double = 60) async throws {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while !output.text.contains(marker), process.isRunning, ContinuousClock.now < deadline {
            try await Task.sleep(nanoseconds: 5_000_000)
        }
    }

    /// SIGKILL (if still running), then collects the rest of the output; returns the standard error.
    @discardableResult
    public func killAndCollect() -> String {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        outputPipe.fileHandleForReading.readabilityHandler = nil
        output.append(outputPipe.fileHandleForReading.readDataToEndOfFile())
        return String(decoding: errorPipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }

    /// Whether the child died of a signal (rather than ending on its own).
    public var wasKilled: Bool { process.terminationReason == .uncaughtSignal }
}
