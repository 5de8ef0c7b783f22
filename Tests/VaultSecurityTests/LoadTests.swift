import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import Testing
import VaultCrypto
import VaultModels
@testable import VaultServer
import VaultTestSupport

/// The load test's size: `VAULTSYNC_LOAD_SECONDS` (default 60, the issue's CI size) and `VAULTSYNC_LOAD_CLIENTS` (default 50).
enum LoadSize {
    static var seconds: Double { ProcessInfo.processInfo.environment["VAULTSYNC_LOAD_SECONDS"].flatMap(Double.init) ?? 60 }
    static var clients: Int { ProcessInfo.processInfo.environment["VAULTSYNC_LOAD_CLIENTS"].flatMap(Int.init) ?? 50 }
    static let items = 10
    /// A hang guard: the run, plus generous time for setup and the check on a loaded machine.
    static var timeLimitMinutes: Int { 5 + 2 * Int(seconds / 60) }
    static var postgresURL: String? { ProcessInfo.processInfo.environment["VAULTSYNC_TEST_POSTGRES_URL"].flatMap { $0.isEmpty ? nil : $0 } }
}

/// One accepted update: it was based on `base` and produced `revision` holding `value`.
struct AcceptedWrite: Sendable {
    var item: Int
    var base: WireDate
    var revision: WireDate
    var value: String
}

/// What the clients saw.
struct LoadTally: Sendable {
    var accepted: [AcceptedWrite] = []
    /// Updates sent to a node that died before answering: each may or may not have been applied.
    var unanswered: [(item: Int, base: WireDate, value: String)] = []
    /// Requests a killed node never answered (expected; its clients moved to the other nodes).
    var droppedByKilledNode = 0
    var outOfDate = 0
    var otherRefusals: [String] = []
    var serverErrors: [String] = []
    var latencies: [Double] = []
    var requests = 0

    mutating func merge(_ other: LoadTally) {
        accepted += other.accepted
        unanswered += other.unanswered
        droppedByKilledNode += other.droppedByKilledNode
        outOfDate += other.outOfDate
        otherRefusals += other.otherRefusals
        serverErrors += other.serverErrors
        latencies += other.latencies
        requests += other.requests
    }
}

/// 50 raw-HTTP clients (the client's wire protocol: GET, then PUT with `lastKnownRevisionDate`, re-reading
/// after a 400 "out of date") edit 10 shared items as fast as they can.
///
/// The lost-update check: on each item the accepted writes must form one chain — each based on the
/// revision the previous accepted write produced, starting at the item's creation, ending at the final
/// state (revision and value). A silently overwritten update would show as two accepted writes with the
/// same base (a fork) or as a write missing from the chain.
@Suite("Load: 50 concurrent clients editing shared items", .serialized)
struct LoadTests {
    @Test("SQLite: no lost update, no server error", .timeLimit(.minutes(LoadSize.timeLimitMinutes)))
    func sqlite() async throws {
        try await withLiveServer { url in try await run(backend: "SQLite", urls: [url]).expectClean() }
    }

    @Test("PostgreSQL, three vaultsync-server processes on one database, one SIGKILLed half-way: its clients go on on the others, no acknowledged update lost, no server error",
          .timeLimit(.minutes(LoadSize.timeLimitMinutes)))
    func postgres() async throws {
        guard let adminURL = LoadSize.postgresURL else {
            #expect(ProcessInfo.processInfo.environment["CI"] == nil, "CI must export VAULTSYNC_TEST_POSTGRES_URL")
            print("load test on PostgreSQL skipped: VAULTSYNC_TEST_POSTGRES_URL is not set")
            return
        }
        let cluster = try await NodeCluster.start(nodes: 3, adminURL: adminURL)
        do {
            let outcome = try await run(backend: "PostgreSQL, 3 nodes, one killed", urls: cluster.urls,
                                        kill: (after: LoadSize.seconds / 2, node: 1, { cluster.kill(1) }))
            outcome.expectClean()
            #expect(outcome.tally.droppedByKilledNode > 0 || outcome.tally.unanswered.isEmpty)
            #expect(outcome.movedClients > 0, "the killed node's clients moved to the others")
        } catch {
            await cluster.stop()
            throw error
        }
        await cluster.stop()
    }

    /// What a run saw, and what the lost-update check found.
    struct LoadOutcome {
        var tally: LoadTally
        var chainFailures: [String]
        /// Clients that moved to another node after theirs was killed.
        var movedClients = 0

        func expectClean(items: Int = LoadSize.items) {
            #expect(tally.serverErrors.isEmpty, "server errors: \(tally.serverErrors.prefix(10))")
            #expect(tally.otherRefusals.isEmpty, "unexpected refusals: \(tally.otherRefusals.prefix(10))")
            #expect(chainFailures.isEmpty, "lost updates:\n\(chainFailures.joined(separator: "\n"))")
            #expect(tally.accepted.count > items, "the clients made progress")
            #expect(tally.outOfDate > 0, "the clients really competed for the same items")
        }
    }

    @Test("the lost-update check finds lost updates when clients skip the concurrency check", .timeLimit(.minutes(5)))
    func checkDetectsLostUpdates() async throws {
        let outcome = try await withLiveServer { url in
            try await run(backend: "SQLite, no lastKnownRevisionDate", urls: [url], seconds: 3, clients: 10, sendsRevision: false)
        }
        #expect(!outcome.chainFailures.isEmpty, "blind overwrites must show as lost updates")
        #expect(outcome.tally.outOfDate == 0)
    }

    /// `kill`: after `after` seconds, `action` kills node `node`; the clients it served move to the next node.
    typealias Kill = (after: Double, node: Int, action: @Sendable () -> Void)

    func run(backend: String, urls: [String], seconds: Double = LoadSize.seconds, clients: Int = LoadSize.clients,
             sendsRevision: Bool = true, kill: Kill? = nil) async throws -> LoadOutcome {
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = clients + 4
        // Generous: this test is about correctness, not latency. Inside the full suite a request's p99 was
        // 20 s; a PUT that times out here after the server applied it would read as a write off the chain.
        // With a node killed, a request its client sends it next waits for the connect timeout (the HTTP client
        // retries a refused connection until then): 10 s there, so that the run does not outlast its length by
        // a minute; a loopback connection to a live node takes far less even on a loaded machine.
        configuration.timeout = .init(connect: .seconds(kill == nil ? 60 : 10), read: .seconds(300))
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        let outcome: LoadOutcome
        do {
            outcome = try await run(backend: backend, urls: urls, client: client, seconds: seconds, clients: clients, sendsRevision: sendsRevision,
                                    kill: kill)
        } catch {
            try? await client.shutdown()
            throw error
        }
        try? await client.shutdown()
        return outcome
    }

    func run(backend: String, urls: [String], client: HTTPClient, seconds duration: Double, clients: Int,
             sendsRevision: Bool, kill: Kill?) async throws -> LoadOutcome {
        let account = try await FuzzAccount.make(urls[0])
        let key = account.keys.userKey
        // Items without an item key: notes are encrypted with the user key, so the check can read them.
        var initial: [(id: String, revision: WireDate)] = []
        for index in 0..<LoadSize.items {
            var view = CipherView(type: .login, name: "shared \(index)")
            view.notes = "initial"
            let reply = try await rawRequest(urls[0], .POST, "/api/ciphers", token: account.token, body: try view.encrypted(with: account.keys).jsonBytes())
            let wire = try CipherWire(json: try #require(reply.object), path: "$")
            initial.append((try #require(wire.id), try #require(wire.revisionDate)))
        }
        let ids = initial.map(\.id)
        let token = account.token
        let deadline = ContinuousClock.now + .seconds(duration)
        let started = ContinuousClock.now
        let killed = Flag()
        let killer = kill.map { kill in
            Task {
                try await Task.sleep(for: .seconds(kill.after))
                killed.set()
                kill.action()
            }
        }
        let moved = Counter()

        let tally = await withTaskGroup(of: LoadTally.self) { group in
            for clientIndex in 0..<clients {
                group.addTask {
                    var node = clientIndex % urls.count
                    var url = urls[node]
                    var tally = LoadTally()
                    var sequence = 0
                    var generator = SystemRandomNumberGenerator()
                    func timed(_ method: HTTPMethod, _ path: String, body: [UInt8]? = nil) async -> (Int, [UInt8])? {
                        var request = HTTPClientRequest(url: url + path)
                        request.method = method
                        request.headers.add(name: "Authorization", value: "Bearer \(token)")
                        if let body {
                            request.headers.add(name: "Content-Type", value: "application/json")
                            request.body = .bytes(ByteBuffer(bytes: body))
                        }
                        let start = ContinuousClock.now
                        tally.requests += 1
                        do {
                            let response = try await client.execute(request, timeout: .seconds(300))
                            let bytes = try await response.body.collect(upTo: 16 * 1024 * 1024)
                            let elapsed = ContinuousClock.now - start
                            tally.latencies.append(Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1000)
                            let status = Int(response.status.code)
                            if status >= 500 { tally.serverErrors.append("\(method) \(path): \(status)") }
                            return (status, Array(bytes.readableBytesView))
                        } catch {
                            // The killed node's requests end without an answer: the client moves to the next node.
                            if let kill, node == kill.node, killed.isSet {
                                tally.droppedByKilledNode += 1
                                if method == .PUT, let body, let wire = try? CipherWire(jsonBytes: body, path: "$"),
                                   let base = wire.lastKnownRevisionDate, let item = ids.firstIndex(of: wire.id ?? "") {
                                    tally.unanswered.append((item, base, "client \(clientIndex) write \(sequence)"))
                                }
                                node = (node + 1) % urls.count
                                url = urls[node]
                                moved.add()
                                return nil
                            }
                            tally.serverErrors.append("\(method) \(path): no answer (\(error))")
                            return nil
                        }
                    }
                    while ContinuousClock.now < deadline {
                        let item = Int.random(in: 0..<ids.count, using: &generator)
                        guard let (status, body) = await timed(.GET, "/api/ciphers/\(ids[item])"), status == 200,
                              var wire = try? CipherWire(jsonBytes: body, path: "$"), let base = wire.revisionDate else { continue }
                        sequence += 1
                        let value = "client \(clientIndex) write \(sequence)"
                        guard let notes = try? EncString.encrypt(value, key: key) else { continue }
                        wire.notes = notes
                        wire.lastKnownRevisionDate = sendsRevision ? base : nil
                        guard let (putStatus, putBody) = await timed(.PUT, "/api/ciphers/\(ids[item])", body: wire.jsonBytes()) else { continue }
                        switch putStatus {
                        case 200:
                            guard let saved = try? CipherWire(jsonBytes: putBody, path: "$"), let revision = saved.revisionDate else {
                                tally.otherRefusals.append("200 without an item")
                                continue
                            }
                            tally.accepted.append(AcceptedWrite(item: item, base: base, revision: revision, value: value))
                        case 400 where String(decoding: putBody, as: UTF8.self).contains("out of date"):
                            tally.outOfDate += 1  // someone else's write landed first: re-read and try again
                        default:
                            tally.otherRefusals.append("\(putStatus): \(String(decoding: putBody.prefix(200), as: UTF8.self))")
                        }
                    }
                    return tally
                }
            }
            var total = LoadTally()
            for await partial in group { total.merge(partial) }
            return total
        }
        let elapsed = ContinuousClock.now - started
        killer?.cancel()

        // The lost-update check, item by item.
        var chainFailures: [String] = []
        for (index, item) in initial.enumerated() {
            let writes = tally.accepted.filter { $0.item == index }
            let unanswered = tally.unanswered.filter { $0.item == index }
            let byBase = Dictionary(grouping: writes, by: \.base)
            for (base, forks) in byBase where forks.count > 1 {
                chainFailures.append("item \(index): \(forks.count) accepted writes based on \(base.iso8601): \(forks.map(\.value))")
            }
            // Updates based on a revision no acknowledged write produced: only an unanswered update (sent to the
            // killed node, applied before it died) can have produced it.
            let known = Set(writes.map(\.revision) + [item.revision])
            var orphans = writes.filter { !known.contains($0.base) }.sorted { $0.base < $1.base }
            var revision = item.revision
            var value = "initial"
            var length = 0
            while true {
                if let next = byBase[revision]?.first {
                    revision = next.revision
                    value = next.value
                    length += 1
                } else if unanswered.contains(where: { $0.base == revision }), let gap = orphans.firstIndex(where: { $0.base > revision }) {
                    // The chain went on through an unanswered update (or several) to the next write based on an unknown revision.
                    let next = orphans.remove(at: gap)
                    revision = next.revision
                    value = next.value
                    length += 1
                } else {
                    break
                }
            }
            if length != writes.count { chainFailures.append("item \(index): chain of \(length) for \(writes.count) accepted writes") }
            let final = try await rawRequest(urls[0], .GET, "/api/ciphers/\(item.id)", token: token)
            let wire = try CipherWire(json: try #require(final.object), path: "$")
            let finalValue = try wire.notes?.decryptString(key: key)
            if wire.revisionDate != revision {
                // The last update may be an unanswered one, applied on top of the chain's end.
                if !(unanswered.contains { $0.base == revision && $0.value == finalValue }) {
                    chainFailures.append("item \(index): final revision differs from the chain's end")
                }
            } else if finalValue != value {
                chainFailures.append("item \(index): final value is not the last accepted write")
            }
        }
        let sorted = tally.latencies.sorted()
        func percentile(_ p: Double) -> Double { sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        print(String(format: "load %@: %d clients × %.0f s: %d requests (%.0f/s), %d accepted updates, %d out-of-date refusals, %d other refusals, %d server errors; latency p50 %.1f ms, p99 %.1f ms, max %.1f ms",
                     backend, clients, seconds, tally.requests, Double(tally.requests) / seconds, tally.accepted.count, tally.outOfDate,
                     tally.otherRefusals.count, tally.serverErrors.count, percentile(0.5), percentile(0.99), sorted.last ?? 0))
        if kill != nil {
            print("load \(backend): \(tally.droppedByKilledNode) requests unanswered by the killed node, \(tally.unanswered.count) of them updates, \(moved.value) clients moved")
        }
        return LoadOutcome(tally: tally, chainFailures: chainFailures, movedClients: moved.value)
    }
}
