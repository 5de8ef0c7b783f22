import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One exchange of a terminal conversation: when `prompt` has appeared (after the previous answer),
/// type `answer()` and Enter. The answer is computed then, so it can be something the program
/// caused meanwhile (a code it had mailed).
struct TerminalStep: Sendable {
    var prompt: String
    /// Gets what the terminal has shown so far.
    var answer: @Sendable (String) -> String

    init(prompt: String, answer: @escaping @Sendable (String) -> String) {
        self.prompt = prompt
        self.answer = answer
    }

    init(prompt: String, answer: @escaping @Sendable () -> String) {
        self.prompt = prompt
        self.answer = { _ in answer() }
    }
}

/// The C library's pseudo-terminal calls, looked up at run time (Swift's Glibc module leaves them out
/// of its headers' default feature set).
enum PTY {
    typealias OpenPT = @convention(c) (Int32) -> Int32
    typealias FDCall = @convention(c) (Int32) -> Int32
    typealias Name = @convention(c) (Int32) -> UnsafeMutablePointer<CChar>?

    static func symbol<T>(_ name: String, as type: T.Type) -> T? {
        #if canImport(Glibc)
        let handle = dlopen(nil, RTLD_NOW)
        #else
        let handle = UnsafeMutableRawPointer(bitPattern: -2)  // RTLD_DEFAULT
        #endif
        guard let pointer = dlsym(handle, name) else { return nil }
        return unsafeBitCast(pointer, to: type)
    }

    /// A new pseudo-terminal: the master's descriptor and the slave's path.
    static func open() -> (master: Int32, slavePath: String)? {
        guard let openpt = symbol("posix_openpt", as: OpenPT.self), let grant = symbol("grantpt", as: FDCall.self),
              let unlock = symbol("unlockpt", as: FDCall.self), let name = symbol("ptsname", as: Name.self) else { return nil }
        let master = openpt(O_RDWR | O_NOCTTY)
        guard master >= 0 else { return nil }
        guard grant(master) == 0, unlock(master) == 0, let path = name(master) else {
            close(master)
            return nil
        }
        return (master, String(cString: path))
    }
}

/// How a program run on a terminal ended, and everything the terminal showed (typed answers are
/// echoed, except where the program turned echo off).
struct TerminalRun: CustomStringConvertible {
    var status: Int32
    var transcript: String
    /// How many steps were answered.
    var answered: Int
    /// The program was still waiting after the time limit and was killed (a prompt never came, or
    /// an answer was lost).
    var killedWaiting = false

    var description: String { "exit \(status), \(answered) answers\(killedWaiting ? ", killed while waiting" : "")\n\(transcript)" }
}

private final class KilledFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var killed = false

    func set() {
        lock.lock()
        killed = true
        lock.unlock()
    }

    var value: Bool {
        lock.lock()
        defer { lock.unlock() }
        return killed
    }
}

/// Runs an executable with a pseudo-terminal as its standard input, output and error, as a person
/// at a terminal runs it, and answers its prompts in order. Reading and waiting happen on a thread
/// of its own (see ``runProcess``). The run ends when the program exits, or after `limit` (a failure
/// the result reports, not a hang).
func runOnTerminal(_ executable: URL, _ arguments: [String], environment: [String: String],
                   conversation: [TerminalStep], limit: DispatchTimeInterval = .seconds(120)) async throws -> TerminalRun {
    try await withCheckedThrowingContinuation { continuation in
        let worker = Thread {
            guard let (master, slavePath) = PTY.open() else {
                continuation.resume(throwing: CocoaError(.fileReadUnknown))
                return
            }
            let slave = open(slavePath, O_RDWR | O_NOCTTY)
            guard slave >= 0 else {
                close(master)
                continuation.resume(throwing: CocoaError(.fileReadUnknown))
                return
            }
            let process = Process()
            process.executableURL = executable
            process.arguments = arguments
            process.environment = environment
            let terminal = FileHandle(fileDescriptor: slave, closeOnDealloc: false)
            process.standardInput = terminal
            process.standardOutput = terminal
            process.standardError = terminal
            do {
                try process.run()
            } catch {
                close(slave)
                close(master)
                continuation.resume(throwing: error)
                return
            }
            // Only the child holds the terminal now: reading the master ends (EIO) when it exits.
            close(slave)
            // A prompt that never comes (or an answer the program never reads) would leave the child
            // waiting for ever: after `limit` it is killed, and the run reports it instead of hanging.
            let finished = DispatchSemaphore(value: 0)
            let killed = KilledFlag()
            let watchdog = Thread {
                if finished.wait(timeout: .now() + limit) == .timedOut {
                    killed.set()
                    process.terminate()
                }
            }
            watchdog.start()
            defer { finished.signal() }
            var transcript: [UInt8] = []
            var searchFrom = 0
            var step = 0
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = read(master, &buffer, buffer.count)
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                transcript += buffer[0..<count]
                while step < conversation.count {
                    let unread = String(decoding: transcript[searchFrom...], as: UTF8.self)
                    guard unread.contains(conversation[step].prompt) else { break }
                    let line = Array((conversation[step].answer(String(decoding: transcript, as: UTF8.self)) + "\n").utf8)
                    _ = line.withUnsafeBytes { write(master, $0.baseAddress, $0.count) }
                    searchFrom = transcript.count
                    step += 1
                }
            }
            process.waitUntilExit()
            close(master)
            continuation.resume(returning: TerminalRun(status: process.terminationStatus,
                                                       transcript: String(decoding: transcript, as: UTF8.self), answered: step,
                                                       killedWaiting: killed.value))
        }
        worker.start()
    }
}

extension CLIDevice {
    /// Runs `vaultsync ARGS` on a pseudo-terminal, answering `conversation`.
    func runOnTerminal(_ arguments: [String], conversation: [TerminalStep], environment extra: [String: String] = [:],
                       removing removed: [String] = []) async throws -> TerminalRun {
        var environment = self.environment.merging(extra) { _, new in new }
        for key in removed { environment.removeValue(forKey: key) }
        return try await VaultCLITests.runOnTerminal(try vaultsyncExecutable(), arguments, environment: environment, conversation: conversation)
    }
}
