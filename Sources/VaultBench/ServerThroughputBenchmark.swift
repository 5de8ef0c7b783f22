import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import VaultModels
import VaultServer
import VaultTestSupport

/// P6: server throughput with an in-benchmark load generator (AsyncHTTPClient, fixed concurrency) on
/// loopback: `GET /api/sync` of a 1,000-item vault, and `PUT /api/ciphers/{id}` with
/// `lastKnownRevisionDate` (every update passes the stale-edit check), on SQLite and, when a URL is
/// given, on PostgreSQL. Client and server share this machine's cores, as with `wrk` on one box.
enum ServerThroughputBenchmark {
    static let concurrency = 16
    static let vaultSize = 1_000

    static func run(options: BenchOptions) async throws -> [BenchResult] {
        let seconds: Double = options.quick ? 2 : 10
        var results: [BenchResult] = []
        results += try await measure(backend: "SQLite", postgresURL: nil, seconds: seconds, goals: true)
        if let adminURL = options.postgresURL {
            let name = "vaultbench_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(12)
            let admin = try PostgresDatabase(url: adminURL, logger: Logger(label: "bench-admin"))
            try await admin.executeOutsideTransaction("CREATE DATABASE \(name)")
            var components = URLComponents(string: adminURL)!
            components.path = "/\(name)"
            do {
                results += try await measure(backend: "PostgreSQL", postgresURL: components.string, seconds: seconds, goals: false)
            } catch {
                try? await admin.executeOutsideTransaction("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
                throw error
            }
            try? await admin.executeOutsideTransaction("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
            await admin.close()
        } else {
            print("P6: PostgreSQL skipped (no --postgres URL and no VAULTSYNC_TEST_POSTGRES_URL)")
        }
        return results
    }

    static func measure(backend: String, postgresURL: String?, seconds: Double, goals: Bool) async throws -> [BenchResult] {
        let server = benchServer(postgresURL: postgresURL)
        try await server.start()
        let url = await server.url
        let account = try await BenchAccount.register(url: url)
        try await account.importItems(vaultSize)
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = concurrency
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        let token = account.accessToken

        // `VAULTSYNC_PERF_CTL` (see ``PerfControl``) profiles one phase: `VAULTSYNC_PERF_P6=sync` (the default) or `put`,
        // on every backend or only on `VAULTSYNC_PERF_BACKEND=SQLite|PostgreSQL`.
        let environment = ProcessInfo.processInfo.environment
        let perf = environment["VAULTSYNC_PERF_BACKEND"].map { $0 == backend } ?? true ? PerfControl.fromEnvironment() : nil
        let perfPhase = environment["VAULTSYNC_PERF_P6"] ?? "sync"

        // Sync: every worker fetches the whole vault again and again.
        if perfPhase == "sync" { perf?.send("enable") }
        defer { perf?.send("disable") }
        let syncs = try await load(seconds: seconds) { _ in
            var request = HTTPClientRequest(url: url + "/api/sync?excludeDomains=true")
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
            let response = try await client.execute(request, timeout: .seconds(30))
            let body = try await response.body.collect(upTo: 64 * 1024 * 1024)
            guard response.status == .ok, body.readableBytes > vaultSize * 500 else { throw LoadError.status(Int(response.status.code)) }
        }

        // Updates: worker w edits the items with index % concurrency == w, each time from the revision
        // the server returned last, so every update passes the stale-edit check.
        let snapshot = try await account.api.sync(token: token)
        let items = try snapshot.ciphers.map { try CipherWire(json: $0, path: "cipher") }
        let ledger = RevisionLedger(items)
        perf?.send(perfPhase == "put" ? "enable" : "disable")
        let updates = try await load(seconds: seconds) { worker in
            let index = ledger.next(worker: worker, workers: concurrency)
            let (id, body) = ledger.body(index)
            var request = HTTPClientRequest(url: url + "/api/ciphers/\(id)")
            request.method = .PUT
            request.headers.add(name: "Authorization", value: "Bearer \(token)")
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: body))
            let response = try await client.execute(request, timeout: .seconds(30))
            let reply = try await response.body.collect(upTo: 1024 * 1024)
            guard response.status == .ok else { throw LoadError.status(Int(response.status.code)) }
            let object = try JSONParser.parseObject(Array(reply.readableBytesView))
            guard let revision = object["revisionDate"]?.stringValue.flatMap(WireDate.init(iso8601:)) else { throw LoadError.status(0) }
            ledger.record(index, revision: revision)
        }
        try await client.shutdown()
        await server.destroy()
        let referenceWhat = "in-benchmark load generator, \(concurrency) concurrent, \(Int(seconds)) s"
        return [
            BenchResult(id: "P6-sync", what: "GET /api/sync, \(vaultSize) items, \(backend)", value: syncs, unit: "req/s",
                        reference: nil, referenceWhat: referenceWhat, ratio: nil, goal: goals ? "≥ 200 req/s" : "report",
                        met: goals ? syncs >= 200 : nil),
            BenchResult(id: "P6-put", what: "PUT /api/ciphers/{id} (stale-edit checked), \(backend)", value: updates, unit: "req/s",
                        reference: nil, referenceWhat: referenceWhat, ratio: nil, goal: goals ? "≥ 2,000 req/s" : "report",
                        met: goals ? updates >= 2_000 : nil),
        ]
    }

    enum LoadError: Error {
        case status(Int)
    }

    /// Runs `concurrency` workers calling `request` until `seconds` pass; returns completed requests per
    /// second. Any failed request fails the benchmark (a throughput of errors is no throughput).
    static func load(seconds: Double, _ request: @escaping @Sendable (Int) async throws -> Void) async throws -> Double {
        let clock = ContinuousClock()
        let deadline = clock.now + .milliseconds(Int(seconds * 1000))
        let start = clock.now
        let done = try await withThrowingTaskGroup(of: Int.self) { group in
            for worker in 0..<concurrency {
                group.addTask {
                    var count = 0
                    while clock.now < deadline {
                        try await request(worker)
                        count += 1
                    }
                    return count
                }
            }
            return try await group.reduce(0, +)
        }
        let elapsed = clock.now - start
        return Double(done) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
    }
}

/// The items the update load edits and the revision each was last seen at (workers own disjoint items).
final class RevisionLedger: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [CipherWire]
    private var cursor: [Int: Int] = [:]

    init(_ items: [CipherWire]) {
        self.items = items
    }

    func next(worker: Int, workers: Int) -> Int {
        lock.lock()
        defer { lock.unlock() }
        let owned = (items.count - worker + workers - 1) / workers
        let step = cursor[worker, default: 0]
        cursor[worker] = step + 1
        return worker + (step % owned) * workers
    }

    func body(_ index: Int) -> (id: String, body: [UInt8]) {
        lock.lock()
        let item = items[index]
        lock.unlock()
        return (item.id!, JSONValue.object(item.requestObject(lastKnownRevisionDate: item.revisionDate)).serialized())
    }

    func record(_ index: Int, revision: WireDate) {
        lock.lock()
        items[index].revisionDate = revision
        lock.unlock()
    }
}
