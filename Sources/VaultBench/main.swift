import Foundation

// VaultBench: VaultSync's benchmarks. Every figure is measured next to its reference in the same run
// and reported as a ratio, because the machines are shared and noisy. Run with `-c release`.
let options = BenchOptions.parse(CommandLine.arguments)
var results: [BenchResult] = []
do {
    if options.wants("P4") { results += try CryptoBenchmarks.run(options: options) }
    if options.wants("UNLOCK") { results += try CryptoBenchmarks.unlock(options: options) }
    if options.wants("P2") { results += try await ResolutionBenchmark.run(options: options) }
} catch {
    FileHandle.standardError.write(Data("benchmark failed: \(error)\n".utf8))
    exit(1)
}
printTable(results)
let encoder = JSONEncoder()
encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
try encoder.encode(results).write(to: URL(fileURLWithPath: options.jsonPath))
print("results written to \(options.jsonPath)")
