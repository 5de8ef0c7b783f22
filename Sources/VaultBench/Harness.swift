import Foundation

/// One measured figure next to its reference from the same run.
struct BenchResult: Codable {
    var id: String
    var what: String
    var value: Double
    var unit: String
    var reference: Double?
    var referenceWhat: String?
    /// value / reference (for times: how many times slower than the reference).
    var ratio: Double?
    var goal: String
    var met: Bool?
}

/// Options from the command line.
struct BenchOptions {
    var quick = false
    var only: Set<String>? = nil
    var jsonPath = "bench-results.json"
    /// PostgreSQL admin URL for P6's and A1's second backend and L1's two nodes (throwaway databases are created in it).
    var postgresURL = ProcessInfo.processInfo.environment["VAULTSYNC_TEST_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 }

    static func parse(_ arguments: [String]) -> BenchOptions {
        var options = BenchOptions()
        var iterator = arguments.dropFirst().makeIterator()
        while let argument = iterator.next() {
            switch argument {
            case "--quick": options.quick = true
            case "--only": options.only = Set((iterator.next() ?? "").split(separator: ",").map { String($0).uppercased() })
            case "--json": options.jsonPath = iterator.next() ?? options.jsonPath
            case "--postgres": options.postgresURL = iterator.next()
            case "-h", "--help":
                print("""
                usage: VaultBench [--quick] [--only P1,P2,P3,P4,P5,P6,P7,P8,A1,A2,UNLOCK,L,L0,L1,L2,L3] [--json FILE] [--postgres URL]
                Runs VaultSync's benchmarks, each next to its reference in the same run, prints a table and writes JSON.
                --postgres URL (or VAULTSYNC_TEST_POSTGRES_URL): also measure P6 and A1 on PostgreSQL, and L1 across two
                server nodes on one PostgreSQL database, in throwaway databases.
                P7 and P8 run the release vaultsync (and P7 VaultBenchFloor) executables next to this one, L2 the release
                vaultsync-server (swift build -c release builds them).
                P3's reference needs python3 with requests and cryptography (Debian: python3-requests python3-cryptography).
                Build with -c release for meaningful figures.
                """)
                exit(0)
            default:
                FileHandle.standardError.write(Data("unknown argument \(argument)\n".utf8))
                exit(64)
            }
        }
        return options
    }

    func wants(_ id: String) -> Bool { only == nil || only!.contains(id) }
}

/// Seconds taken by `body`.
func measure(_ body: () throws -> Void) rethrows -> Double {
    let clock = ContinuousClock()
    let start = clock.now
    try body()
    let elapsed = clock.now - start
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
}

/// The best of `rounds` runs (the least disturbed by other load on a shared machine).
func bestOf(_ rounds: Int, _ body: () throws -> Void) rethrows -> Double {
    var best = Double.infinity
    for _ in 0..<rounds { best = min(best, try measure(body)) }
    return best
}

/// Times `ours` and `reference` alternately, `rounds` times each, and returns the best of each, so that
/// both see the same machine conditions.
func compare(rounds: Int, ours: () throws -> Void, reference: () throws -> Void) rethrows -> (ours: Double, reference: Double) {
    var bestOurs = Double.infinity
    var bestReference = Double.infinity
    for _ in 0..<rounds {
        bestOurs = min(bestOurs, try measure(ours))
        bestReference = min(bestReference, try measure(reference))
    }
    return (bestOurs, bestReference)
}

func printTable(_ results: [BenchResult]) {
    func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text : text + String(repeating: " ", count: width - text.count)
    }
    func format(_ value: Double) -> String {
        value >= 100 ? String(format: "%.0f", value) : value >= 1 ? String(format: "%.2f", value) : String(format: "%.4f", value)
    }
    print(pad("id", 11) + pad("what", 46) + pad("value", 16) + pad("reference", 16) + pad("ratio", 8) + pad("goal", 18) + "met")
    for result in results {
        let reference = result.reference.map { format($0) + " " + result.unit } ?? "-"
        let ratio = result.ratio.map { String(format: "%.2f", $0) } ?? "-"
        let met = result.met.map { $0 ? "yes" : "NO" } ?? "-"
        print(pad(result.id, 11) + pad(result.what, 46) + pad(format(result.value) + " " + result.unit, 16)
            + pad(reference, 16) + pad(ratio, 8) + pad(result.goal, 18) + met)
    }
}

/// This process's CPU time so far (user + system, every thread), in seconds.
func processCPUSeconds() -> Double {
    var usage = rusage()
    #if canImport(Glibc)
    getrusage(RUSAGE_SELF.rawValue, &usage)
    #else
    getrusage(RUSAGE_SELF, &usage)
    #endif
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

/// The `fraction` percentile (0…1) of `samples` (nearest rank).
func percentile(_ samples: [Double], _ fraction: Double) -> Double {
    guard !samples.isEmpty else { return .nan }
    let sorted = samples.sorted()
    let rank = Int((fraction * Double(sorted.count)).rounded(.up)) - 1
    return sorted[min(max(rank, 0), sorted.count - 1)]
}

/// This process's peak resident set size in MiB: `VmHWM` of /proc/self/status on Linux. Not
/// `ru_maxrss`: Linux carries it across `execve`, so a child spawned by a large parent would report
/// the parent's peak.
func peakRSSMiB() -> Double {
    if let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
       let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
       let kib = Double(line.split(separator: " ").dropFirst().first ?? "") {
        return kib / 1024
    }
    var usage = rusage()
    #if canImport(Glibc)
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_maxrss) / 1024  // KiB on Linux
    #else
    getrusage(RUSAGE_SELF, &usage)
    return Double(usage.ru_maxrss) / 1024 / 1024  // bytes on Darwin
    #endif
}

enum ChildProcessError: Error, CustomStringConvertible {
    case failed(String, status: Int32, stderr: String)
    case unreadable(String, output: String)

    var description: String {
        switch self {
        case .failed(let name, let status, let stderr): return "child \(name) exited with \(status): \(stderr)"
        case .unreadable(let name, let output): return "child \(name) printed no result: \(output.prefix(500))"
        }
    }
}

/// Runs `executable arguments` with `input` as JSON on stdin and decodes the last line of its stdout as
/// `Output`. The benchmark re-executes itself (`--child NAME`) so that a figure's peak RSS is that
/// process's alone, without the server or the load generator of the parent.
func runChild<Input: Encodable, Output: Decodable>(_ name: String, executable: String = "/proc/self/exe",
                                                   arguments: [String]? = nil, input: Input,
                                                   as output: Output.Type) async throws -> Output {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments ?? ["--child", name]
    let stdin = Pipe()
    let stdout = Pipe()
    let stderr = Pipe()
    process.standardInput = stdin
    process.standardOutput = stdout
    process.standardError = stderr
    try process.run()
    try stdin.fileHandleForWriting.write(contentsOf: JSONEncoder().encode(input))
    try stdin.fileHandleForWriting.close()
    // Read both pipes while the child runs (a full pipe would block it), on threads outside Swift's
    // cooperative pool: blocking those would starve the in-process server the child talks to.
    async let outData = offPool { stdout.fileHandleForReading.readDataToEndOfFile() }
    async let errData = offPool { stderr.fileHandleForReading.readDataToEndOfFile() }
    let (out, err) = await (outData, errData)
    await offPool { process.waitUntilExit() }
    let text = String(decoding: out, as: UTF8.self)
    guard process.terminationStatus == 0 else {
        throw ChildProcessError.failed(name, status: process.terminationStatus, stderr: String(decoding: err, as: UTF8.self))
    }
    guard let line = text.split(separator: "\n").last, let value = try? JSONDecoder().decode(Output.self, from: Data(line.utf8)) else {
        throw ChildProcessError.unreadable(name, output: text + String(decoding: err, as: UTF8.self))
    }
    return value
}

/// In a child: reads its input from stdin.
func readChildInput<Input: Decodable>(_ type: Input.Type) throws -> Input {
    try JSONDecoder().decode(Input.self, from: FileHandle.standardInput.readDataToEndOfFile())
}

/// In a child: prints its result as the last line of stdout.
func writeChildOutput<Output: Encodable>(_ value: Output) throws {
    print(String(decoding: try JSONEncoder().encode(value), as: UTF8.self))
}

/// Runs blocking work (reading a child's pipe, waiting for it) on a thread of its own, never on one of
/// Swift's few cooperative threads nor on Dispatch's pool: the in-process server's database queues run
/// on that pool, which has one thread per core, and each blocked read there held one of them until
/// Dispatch noticed and added a thread (0.5–0.9 s into P3's login, the whole wait on the server).
func offPool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread { continuation.resume(returning: body()) }
    }
}
