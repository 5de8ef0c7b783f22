import Foundation

// VaultBench: VaultSync's benchmarks. Every figure is measured next to its reference in the same run
// and reported as a ratio, because the machines are shared and noisy. Run with `-c release`.

// Hidden subcommand: a benchmark re-executes itself for a figure that needs a process of its own
// (peak RSS without the server and the load generator of the parent).
if CommandLine.arguments.count >= 3, CommandLine.arguments[1] == "--child" {
    do {
        switch CommandLine.arguments[2] {
        case "p3": try await FullSyncBenchmark.child()
        case "p5": try await QueueMemoryBenchmark.child()
        case "a1": try await AttachmentBenchmark.child()
        case "a2": try await ClientAttachmentBenchmark.child()
        default: throw ChildProcessError.unreadable(CommandLine.arguments[2], output: "unknown child")
        }
        exit(0)
    } catch {
        FileHandle.standardError.write(Data("child failed: \(error)\n".utf8))
        exit(1)
    }
}

let options = BenchOptions.parse(CommandLine.arguments)
var results: [BenchResult] = []
let started = ContinuousClock.now
do {
    if options.wants("P4") { results += try CryptoBenchmarks.run(options: options) }
    if options.wants("UNLOCK") { results += try CryptoBenchmarks.unlock(options: options) }
    if options.wants("ARGON2") { results += [try CryptoBenchmarks.argon2(options: options)] }
    if options.wants("P1") { results += try await OfflineSaveBenchmark.run(options: options) }
    if options.wants("P3") { results += try await FullSyncBenchmark.run(options: options) }
    if options.wants("P6") { results += try await ServerThroughputBenchmark.run(options: options) }
    if options.wants("P2") { results += try await ResolutionBenchmark.run(options: options) }
    if options.wants("P5") { results += try await QueueMemoryBenchmark.run(options: options) }
    if options.wants("A1") { results += try await AttachmentBenchmark.run(options: options) }
    if options.wants("A2") { results += try await ClientAttachmentBenchmark.run(options: options) }
    if options.wants("P7") { results += try await CommandLineBenchmark.run(options: options) }
    if options.wants("P8") { results += try await ImportBenchmark.run(options: options) }
    if options.wants("L") || options.wants("L0") || options.wants("L1") { results += try await LiveBenchmark.run(options: options) }
    if options.wants("L") || options.wants("L2") { results += try await HubScaleBenchmark.run(options: options) }
    if options.wants("L") || options.wants("L3") { results += try await ReconnectBenchmark.run(options: options) }
} catch {
    FileHandle.standardError.write(Data("benchmark failed: \(error)\n".utf8))
    exit(1)
}
printTable(results)
print("total time: \(ContinuousClock.now - started)")
let encoder = JSONEncoder()
encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
try encoder.encode(results).write(to: URL(fileURLWithPath: options.jsonPath))
print("results written to \(options.jsonPath)")
