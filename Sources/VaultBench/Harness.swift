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

    static func parse(_ arguments: [String]) -> BenchOptions {
        var options = BenchOptions()
        var iterator = arguments.dropFirst().makeIterator()
        while let argument = iterator.next() {
            switch argument {
            case "--quick": options.quick = true
            case "--only": options.only = Set((iterator.next() ?? "").split(separator: ",").map { String($0).uppercased() })
            case "--json": options.jsonPath = iterator.next() ?? options.jsonPath
            case "-h", "--help":
                print("""
                usage: VaultBench [--quick] [--only P2,P4,UNLOCK] [--json FILE]
                Runs VaultSync's benchmarks, each next to its reference in the same run, prints a table and writes JSON.
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
    print(pad("id", 8) + pad("what", 46) + pad("value", 16) + pad("reference", 16) + pad("ratio", 8) + pad("goal", 18) + "met")
    for result in results {
        let reference = result.reference.map { format($0) + " " + result.unit } ?? "-"
        let ratio = result.ratio.map { String(format: "%.2f", $0) } ?? "-"
        let met = result.met.map { $0 ? "yes" : "NO" } ?? "-"
        print(pad(result.id, 8) + pad(result.what, 46) + pad(format(result.value) + " " + result.unit, 16)
            + pad(reference, 16) + pad(ratio, 8) + pad(result.goal, 18) + met)
    }
}
