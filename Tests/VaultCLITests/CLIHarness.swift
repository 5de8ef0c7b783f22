import Foundation
import Testing
import VaultModels
import VaultServer
import VaultTestSupport

/// The built `vaultsync` executable.
func vaultsyncExecutable() throws -> URL {
    try helperExecutable("vaultsync")
}

/// What one CLI run printed and how it ended.
struct CLIResult: CustomStringConvertible {
    var status: Int32
    var stdout: String
    var stderr: String

    var description: String { "exit \(status)\nstdout: \(stdout)\nstderr: \(stderr)" }

    /// Standard output parsed as JSON.
    func json() throws -> JSONValue {
        try JSONParser.parse(stdout.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}

/// What a child process printed and how it ended.
struct Finished {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// Runs an executable to its end, as a shell would. The waiting happens on threads of its own, never on
/// a Dispatch worker: on Linux Swift's tasks run on Dispatch's worker threads, whose number is capped,
/// so children blocking two of them each for their whole run (a dozen CLI tests at once) starved every
/// server of this process for as long as the children waited on those servers (the 20 s request timeout).
/// Both pipes are read to their end before waiting (one on another thread), so a full pipe cannot stall
/// the child and nothing printed last is missed.
///
/// A child still running after `limit` is killed (SIGKILL, exit 137) and its standard error says so: a
/// command that never ends fails its test instead of holding the whole run until CI's time runs out.
func runProcess(_ executable: URL, _ arguments: [String], environment: [String: String], folder: String? = nil,
                stdin: String? = nil, limit: Duration = .seconds(600)) async throws -> Finished {
    try await withCheckedThrowingContinuation { continuation in
        let waiter = Thread {
            do {
                // Started without Foundation's Process (see Spawn).
                let input = try Spawn.pipe(), output = try Spawn.pipe(), errors = try Spawn.pipe()
                let pid: pid_t
                do {
                    pid = try Spawn.start(executable.path, arguments, environment: environment, folder: folder,
                                          stdin: input.read, stdout: output.write, stderr: errors.write)
                } catch {
                    for fd in [input.read, input.write, output.read, output.write, errors.read, errors.write] { close(fd) }
                    throw error
                }
                for fd in [input.read, output.write, errors.write] { close(fd) }
                let watch = ChildWatch(pid: pid, limit: limit)
                // A child that exits without reading its input must not stop this thread with SIGPIPE.
                signal(SIGPIPE, SIG_IGN)
                Spawn.writeAll(Array((stdin ?? "").utf8), to: input.write)
                let errorData = DataBox()
                let errorsRead = DispatchSemaphore(value: 0)
                let errorReader = Thread {
                    errorData.data = Spawn.readAll(errors.read)
                    errorsRead.signal()
                }
                errorReader.start()
                let outputData = Spawn.readAll(output.read)
                errorsRead.wait()
                let status = Spawn.wait(pid)
                let killed = watch.reaped()
                continuation.resume(returning: Finished(status: status, stdout: String(decoding: outputData, as: UTF8.self),
                                                        stderr: String(decoding: errorData.data, as: UTF8.self)
                                                            + (killed ? "\n[killed by the test after \(limit): it had not ended]" : "")))
            } catch {
                continuation.resume(throwing: error)
            }
        }
        waiter.start()
    }
}

/// Kills a child that outlives its time limit, unless it has been reaped first (its pid may then be another's).
final class ChildWatch: @unchecked Sendable {
    private let lock = NSLock()
    private let reapedSignal = DispatchSemaphore(value: 0)
    private var done = false
    private var killed = false

    init(pid: pid_t, limit: Duration) {
        Thread { [self] in
            let seconds = Double(limit.components.seconds) + Double(limit.components.attoseconds) / 1e18
            guard reapedSignal.wait(timeout: .now() + seconds) == .timedOut else { return }
            lock.withLock {
                guard !done else { return }
                killed = true
                kill(pid, SIGKILL)
            }
        }.start()
    }

    /// The child was reaped; returns whether this watch killed it.
    func reaped() -> Bool {
        let killed = lock.withLock {
            done = true
            return self.killed
        }
        reapedSignal.signal()
        return killed
    }
}

/// One device: a profile directory (VAULTSYNC_HOME) driven through the real `vaultsync` executable.
struct CLIDevice {
    let home: String
    var environment: [String: String]

    init(home: String = temporaryDirectory("vaultsync-cli") + "/profile", password: String? = nil) {
        self.home = home
        var environment = ProcessInfo.processInfo.environment
        environment["VAULTSYNC_HOME"] = home
        environment["NO_COLOR"] = "1"
        environment.removeValue(forKey: "VAULTSYNC_SESSION")
        // The suites run side by side on two cores: a save is not queued because a loaded machine took 3 s
        // (the default save deadline; its own tests set it).
        environment["VAULTSYNC_SAVE_TIMEOUT"] = "60"
        environment.removeValue(forKey: "VAULTSYNC_PASSWORD")
        // The test servers are on loopback, which a proxy of the machine's would get too (as with curl).
        for name in ["https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY", "no_proxy", "NO_PROXY"] {
            environment.removeValue(forKey: name)
        }
        if let password { environment["VAULTSYNC_PASSWORD"] = password }
        self.environment = environment
    }

    /// Runs `vaultsync ARGS` off the cooperative thread pool (the server under test shares this process).
    func run(_ arguments: [String], stdin: String? = nil, environment extra: [String: String] = [:],
             removing removed: [String] = []) async throws -> CLIResult {
        let executable = try vaultsyncExecutable()
        var environment = self.environment.merging(extra) { _, new in new }
        for key in removed { environment.removeValue(forKey: key) }
        let finalEnvironment = environment
        let finished = try await runProcess(executable, arguments, environment: finalEnvironment, stdin: stdin)
        return CLIResult(status: finished.status, stdout: finished.stdout, stderr: finished.stderr)
    }

    /// Runs `vaultsync ARGS` with its standard output on `/dev/full` (every write fails: a full disk), through
    /// `/bin/sh`, which sets up the redirection and then becomes `vaultsync`.
    func runOntoFullDisk(_ arguments: [String]) async throws -> CLIResult {
        let finished = try await runProcess(URL(fileURLWithPath: "/bin/sh"), ["-c", #"exec "$0" "$@" > /dev/full"#, try vaultsyncExecutable().path] + arguments,
                                            environment: environment)
        return CLIResult(status: finished.status, stdout: finished.stdout, stderr: finished.stderr)
    }

    /// Runs and expects exit status `status` (0 by default), recording the output on failure.
    @discardableResult
    func expect(_ arguments: [String], status: Int32 = 0, stdin: String? = nil, environment extra: [String: String] = [:],
                removing removed: [String] = [], sourceLocation: SourceLocation = #_sourceLocation) async throws -> CLIResult {
        let result = try await run(arguments, stdin: stdin, environment: extra, removing: removed)
        #expect(result.status == status, "vaultsync \(arguments.joined(separator: " ")): \(result)", sourceLocation: sourceLocation)
        return result
    }

    /// Runs a read command with `--json` and parses its output.
    func json(_ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) async throws -> JSONValue {
        let result = try await expect(arguments + ["--json"], sourceLocation: sourceLocation)
        return try result.json()
    }
}

extension JSONValue {
    subscript(key: String) -> JSONValue? { objectValue?[key] }
    subscript(index: Int) -> JSONValue? {
        guard let array = arrayValue, array.indices.contains(index) else { return nil }
        return array[index]
    }
    var count: Int { arrayValue?.count ?? 0 }
}

/// A server and the account the CLI tests use.
struct CLIScenario {
    let server: LiveServer
    let email: String
    let password = "correct horse battery staple"

    static func start(server configure: @escaping @Sendable (inout ServerConfiguration) -> Void = { _ in }) async throws -> CLIScenario {
        let server = LiveServer(configure: configure)
        try await server.start()
        return CLIScenario(server: server, email: "cli-\(UUID().uuidString.prefix(8).lowercased())@example.com")
    }

    /// A device profile pointed at the server (registers the account on first use), with the password in
    /// the environment so every command unlocks for its own run.
    func device(register: Bool = false) async throws -> CLIDevice {
        let device = CLIDevice(password: password)
        try await device.expect(["config", "server", await server.url])
        if register {
            try await device.expect(["register", email, "--kdf-iterations", "100000"])
        } else {
            try await device.expect(["login", email, "--accept-kdf", "pbkdf2:100000"])
        }
        return device
    }

    /// A device that registers the account through a fault proxy in front of the server (the test injects the
    /// faults and stops the proxy).
    func deviceBehindProxy() async throws -> (CLIDevice, FaultProxy) {
        let proxy = FaultProxy(upstream: await server.url)
        try await proxy.start()
        let device = CLIDevice(password: password)
        try await device.expect(["config", "server", await proxy.url])
        try await device.expect(["register", email, "--kdf-iterations", "100000"])
        return (device, proxy)
    }

    func finish(_ devices: [CLIDevice]) async {
        for device in devices { try? FileManager.default.removeItem(atPath: (device.home as NSString).deletingLastPathComponent) }
        await server.destroy()
    }
}

/// The id of the item named `name` in a `list --json` answer.
func itemID(_ list: JSONValue, named name: String) -> String? {
    list.arrayValue?.first { $0["name"]?.stringValue == name }?["id"]?.stringValue
}

/// Standard error's bytes, filled by a reader thread before `DispatchGroup.wait` returns.
private final class DataBox: @unchecked Sendable {
    var data = Data()
}
