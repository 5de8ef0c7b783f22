import Foundation
import VaultTestSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A program running at a pseudo-terminal that is its controlling terminal, in a session of its own,
/// as a shell at a terminal window starts it: the test reads the screen's text as it comes, types keys
/// (Ctrl-C is the terminal's interrupt, a SIGINT to the program), and waits for the exit. Reading
/// happens on a thread of its own; every wait is for an event, with a limit that only a failure meets.
final class TerminalSession: @unchecked Sendable {
    private let master: Int32
    let pid: pid_t
    private let lock = NSLock()
    private let changed = NSCondition()
    private var transcript: [UInt8] = []
    private var exitStatus: Int32?

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    init(_ executable: URL, _ arguments: [String], environment: [String: String], columns: UInt16 = 120, rows: UInt16 = 40) throws {
        guard let (master, slavePath) = PTY.open() else { throw Failure(description: "no pseudo-terminal") }
        var size = winsize(ws_row: rows, ws_col: columns, ws_xpixel: 0, ws_ypixel: 0)
        _ = ioctl(master, UInt(TIOCSWINSZ), &size)
        self.master = master
        do {
            pid = try Spawn.start(executable.path, arguments, environment: environment, folder: nil, terminalPath: slavePath)
        } catch {
            close(master)
            throw error
        }
        let reader = Thread { [self] in readUntilExit() }
        reader.start()
    }

    private func readUntilExit() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(master, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            changed.lock()
            transcript += buffer[0..<count]
            changed.broadcast()
            changed.unlock()
        }
        let status = Spawn.wait(pid)
        changed.lock()
        exitStatus = status
        changed.broadcast()
        changed.unlock()
        close(master)
    }

    /// Everything the terminal has shown so far.
    var text: String {
        changed.lock()
        defer { changed.unlock() }
        return String(decoding: transcript, as: UTF8.self)
    }

    /// Waits until the screen has shown `wanted` (after `offset` characters of the transcript, when given);
    /// fails when the program ends first or `limit` passes.
    @discardableResult
    func waitFor(_ wanted: String, after offset: Int = 0, limit: Duration = .seconds(60)) async throws -> String {
        try await waitUntil(limit: limit, what: "\"\(wanted)\"") { text, _ in
            text.dropFirst(offset).contains(wanted)
        }
    }

    /// Types `keys` (bytes as typed: "\u{03}" is Ctrl-C).
    func type(_ keys: String) {
        let bytes = Array(keys.utf8)
        _ = bytes.withUnsafeBytes { write(master, $0.baseAddress, $0.count) }
    }

    /// Waits for the program to end; its exit status (128 + the signal that ended it).
    func exit(limit: Duration = .seconds(60)) async throws -> Int32 {
        _ = try await waitUntil(limit: limit, what: "the exit") { _, status in status != nil }
        return status ?? -1
    }

    /// The exit status, once the program has ended.
    var status: Int32? {
        changed.lock()
        defer { changed.unlock() }
        return exitStatus
    }

    /// Ends the program if it still runs (a failed test's clean-up).
    func end() {
        changed.lock()
        let running = exitStatus == nil
        changed.unlock()
        if running { _ = kill(pid, SIGKILL) }
    }

    private func waitUntil(limit: Duration, what: String, _ condition: @escaping @Sendable (String, Int32?) -> Bool) async throws -> String {
        let deadline = Date().addingTimeInterval(Double(limit.components.seconds) + Double(limit.components.attoseconds) / 1e18)
        return try await withCheckedThrowingContinuation { continuation in
            let waiter = Thread { [self] in
                changed.lock()
                defer { changed.unlock() }
                while true {
                    let text = String(decoding: transcript, as: UTF8.self)
                    if condition(text, exitStatus) { return continuation.resume(returning: text) }
                    if exitStatus != nil {
                        return continuation.resume(throwing: Failure(description: "the program ended (\(exitStatus!)) before \(what):\n\(text)"))
                    }
                    if !changed.wait(until: deadline) {
                        return continuation.resume(throwing: Failure(description: "no \(what) within \(limit):\n\(text)"))
                    }
                }
            }
            waiter.start()
        }
    }
}
