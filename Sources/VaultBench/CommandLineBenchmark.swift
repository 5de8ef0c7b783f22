import AgentLink
import AsyncHTTPClient
import LocalHTTP
import NIOCore
import Foundation
import VaultTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// P7: what a person waits for at the command line. The real release `vaultsync` executable, a new
/// process per command as a shell runs it (spawned, its output read through a pipe, waited for), on a
/// 10,000-item vault synced into a real profile and unlocked with a session (`VAULTSYNC_SESSION`).
/// The floor is `VaultBenchFloor`, a separate small executable that opens the same database read-only
/// and decrypts one known row (or every name), timed in the same rounds, alternating.
enum CommandLineBenchmark {
    /// Why the rows could not be measured (an executable is missing).
    struct Unavailable: Error, CustomStringConvertible {
        var description: String
    }

    static func run(options: BenchOptions) async throws -> [BenchResult] {
        let rounds = options.quick ? 10 : 40
        let vaultSize = 10_000
        let cli: String, floor: String
        do {
            // VAULTSYNC_P7_CLI: another vaultsync executable (an older build, to compare under the same load).
            cli = try ProcessInfo.processInfo.environment["VAULTSYNC_P7_CLI"] ?? executable("vaultsync")
            floor = try executable("VaultBenchFloor")
        } catch {
            print("P7 skipped: \(error)")
            return ["P7-get", "P7-list", "P7-add", "P7-add-off"].map {
                BenchResult(id: $0, what: "skipped: \(error)", value: 0, unit: "ms", goal: "-", met: nil)
            }
        }

        let (server, url, account) = try await BenchAccount.serverWithVault(items: vaultSize)
        let profile = temporaryDirectory("vaultsync-bench-p7")
        let keep = ProcessInfo.processInfo.environment["VAULTSYNC_P7_KEEP"] != nil
        defer { if !keep { try? FileManager.default.removeItem(atPath: profile) } }
        let environment = try await loggedInEnvironment(cli, profile: profile, url: url, account: account)
        if keep {
            print("P7: profile kept: VAULTSYNC_HOME=\(profile) VAULTSYNC_SESSION=\(environment["VAULTSYNC_SESSION"]!) (server \(url) stops at the end)")
        }

        // A known item, found as a person would: by its name.
        let index = 4_242
        let name = try account.item(index).name
        let password = try account.item(index).login!.password!
        let listed = try await command(cli, ["list", "--search", name, "--json"], environment: environment)
        guard let id = listed.split(separator: "\"").drop(while: { $0 != "id" }).dropFirst(2).first.map(String.init) else {
            throw Unavailable(description: "list found no \(name): \(listed)")
        }
        let search = "site123.example"  // 10 of the 10,000 names (and their URIs)

        // Each figure next to its floor, alternating, after one warm-up run of each (the page cache).
        func timed(_ arguments: [String], floorArguments: [String]?, expect: (String) -> Bool) async throws -> (ours: Samples, floor: Samples) {
            var ours = Samples(), reference = Samples()
            for round in 0...rounds {
                let run = try await timedCommand(cli, arguments, environment: environment)
                guard expect(run.output) else { throw Unavailable(description: "vaultsync \(arguments.joined(separator: " ")) printed \(run.output.prefix(300))") }
                if round > 0 { ours.add(run) }
                if let floorArguments {
                    let floorRun = try await timedCommand(floor, floorArguments, environment: environment)
                    if round > 0 { reference.add(floorRun) }
                }
            }
            return (ours, reference)
        }
        let get = try await timed(["get", name, "--field", "password"], floorArguments: ["get", id]) { $0 == password + "\n" }
        let list = try await timed(["list", "--search", search], floorArguments: ["names"]) { $0.split(separator: "\n").count >= 10 }
        var added = 0
        func add() async throws -> (seconds: Double, output: String, cpu: Double) {
            added += 1
            let run = try await timedCommand(cli, ["add", "login", "--name", "P7 added \(added)", "--username", "p7@example.com",
                                                   "--uri", "https://p7.example"], environment: environment)
            guard run.output.hasPrefix("Added") else { throw Unavailable(description: "add printed \(run.output.prefix(300))") }
            return run
        }
        var addUp = Samples(), addDown = Samples()
        for round in 0...rounds {
            let run = try await add()
            if round > 0 { addUp.add(run) }
        }
        let agentRows = try await throughAgent(cli: cli, profile: profile, environment: environment, account: account, rounds: rounds,
                                               get: (name, password), search: search, add: add)
        var bwEnvironment = environment
        bwEnvironment["BW_SESSION"] = environment["VAULTSYNC_SESSION"]
        bwEnvironment.removeValue(forKey: "VAULTSYNC_SESSION")
        let serveRows = try await serveThroughput(cli: cli, environment: bwEnvironment, id: id, seconds: options.quick ? 3 : 10)
        await server.destroy()
        for round in 0...rounds {
            let run = try await add()
            if round > 0 { addDown.add(run) }
        }

        let load = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)).map { $0.split(separator: " ").prefix(3).joined(separator: " ") } ?? "?"
        print("P7: \(rounds) runs per command, \(vaultSize) items; load average at the end \(load)")
        for (label, samples) in [("get", get.ours), ("floor get", get.floor), ("list --search", list.ours), ("floor names", list.floor),
                                 ("add, server up", addUp), ("add, unreachable", addDown)] {
            print(String(format: "P7 %@: wall p50 %.1f ms, p90 %.1f ms; CPU (user + system) p50 %.1f ms", label,
                         samples.wall(0.5), samples.wall(0.9), samples.cpu(0.5)))
        }
        func what(_ text: String, _ samples: Samples) -> String {
            text + String(format: " (p90 %.0f, CPU %.0f ms)", samples.wall(0.9), samples.cpu(0.5))
        }
        return agentRows + serveRows + [
            BenchResult(id: "P7-get", what: what("get NAME --field password, p50", get.ours), value: get.ours.wall(0.5), unit: "ms",
                        reference: get.floor.wall(0.5), referenceWhat: "VaultBenchFloor: session, read-only open, one row decrypted, p50",
                        ratio: get.ours.wall(0.5) / get.floor.wall(0.5), goal: "≤ 50 ms, ≤ 3× floor",
                        met: get.ours.wall(0.5) <= 50 && get.ours.wall(0.5) / get.floor.wall(0.5) <= 3),
            BenchResult(id: "P7-list", what: what("list --search TEXT, p50", list.ours), value: list.ours.wall(0.5), unit: "ms",
                        reference: list.floor.wall(0.5), referenceWhat: "VaultBenchFloor: session, read-only open, every name decrypted, p50",
                        ratio: list.ours.wall(0.5) / list.floor.wall(0.5), goal: "≤ 150 ms", met: list.ours.wall(0.5) <= 150),
            BenchResult(id: "P7-add", what: what("add login, server up, p50", addUp), value: addUp.wall(0.5), unit: "ms",
                        goal: "≤ 100 ms", met: addUp.wall(0.5) <= 100),
            BenchResult(id: "P7-add-off", what: what("add login, server unreachable, p50", addDown), value: addDown.wall(0.5), unit: "ms",
                        goal: "≤ 100 ms", met: addDown.wall(0.5) <= 100),
        ]
    }

    /// G1: the same commands with the profile's agent running (`vaultsync agent start`), a new process per
    /// command as before, next to the direct mode (`VAULTSYNC_AGENT=off`, the same profile and session) and
    /// the floor, `VaultBenchSocketFloor`: a Swift program that loads only the runtime, sends one request
    /// over the agent's socket and prints the answer. Each round runs the three, alternating.
    static func throughAgent(cli: String, profile: String, environment: [String: String], account: BenchAccount, rounds: Int,
                             get: (name: String, password: String), search: String,
                             add: () async throws -> (seconds: Double, output: String, cpu: Double)) async throws -> [BenchResult] {
        let socketFloor: String
        do {
            socketFloor = try executable("VaultBenchSocketFloor")
        } catch {
            print("G1 skipped: \(error)")
            return ["G1-get", "G1-list", "G1-add", "B1-get", "B1-list"].map {
                BenchResult(id: $0, what: "skipped: \(error)", value: 0, unit: "ms", goal: "-", met: nil)
            }
        }
        var starting = environment
        starting["VAULTSYNC_PASSWORD"] = account.password
        _ = try await command(cli, ["agent", "start"], environment: starting)
        var direct = environment
        direct["VAULTSYNC_AGENT"] = "off"
        let socket = AgentLocation.socketPath(profileDirectory: profile, environment: environment)
        var viaAgent = Samples(), directly = Samples(), floor = Samples(), listed = Samples(), added = Samples(), afterAdd = Samples()
        let getArguments = ["get", get.name, "--field", "password"]
        // As P7: each command in rounds of its own (get, the direct get and the floor alternating; then list;
        // then add), and beside them `get` right after an `add` (the name index catches up with the new row).
        do {
            for round in 0...rounds {
                let agentRun = try await timedCommand(cli, getArguments, environment: environment)
                let directRun = try await timedCommand(cli, getArguments, environment: direct)
                let floorRun = try await timedCommand(socketFloor, [socket], environment: environment)
                guard agentRun.output == get.password + "\n", directRun.output == agentRun.output, floorRun.output.contains("\"locked\"") else {
                    throw Unavailable(description: "G1: get printed \(agentRun.output.prefix(100)) / \(directRun.output.prefix(100)); the floor \(floorRun.output.prefix(200))")
                }
                if round > 0 {
                    viaAgent.add(agentRun)
                    directly.add(directRun)
                    floor.add(floorRun)
                }
            }
            for round in 0...rounds {
                let listRun = try await timedCommand(cli, ["list", "--search", search], environment: environment)
                guard listRun.output.split(separator: "\n").count >= 10 else { throw Unavailable(description: "G1: list printed \(listRun.output.prefix(300))") }
                if round > 0 { listed.add(listRun) }
            }
            for round in 0...rounds {
                let addRun = try await add()
                let getRun = try await timedCommand(cli, getArguments, environment: environment)
                guard getRun.output == get.password + "\n" else { throw Unavailable(description: "G1: get after add printed \(getRun.output.prefix(100))") }
                if round > 0 {
                    added.add(addRun)
                    afterAdd.add(getRun)
                }
            }
        } catch {
            _ = try? await command(cli, ["agent", "stop"], environment: environment)
            throw error
        }
        // B1: bw's surface (a link named bw), through the agent, then without it (the same session, as BW_SESSION).
        let linkFolder = temporaryDirectory("vaultsync-bench-bw")
        defer { try? FileManager.default.removeItem(atPath: linkFolder) }
        let bw = linkFolder + "/bw"
        try FileManager.default.createSymbolicLink(atPath: bw, withDestinationPath: cli)
        var bwEnvironment = environment
        bwEnvironment["BW_SESSION"] = environment["VAULTSYNC_SESSION"]
        bwEnvironment.removeValue(forKey: "VAULTSYNC_SESSION")
        func bwRounds(_ environment: [String: String]) async throws -> (get: Samples, list: Samples) {
            var gets = Samples(), lists = Samples()
            for round in 0...rounds {
                let getRun = try await timedCommand(bw, ["get", "password", get.name], environment: environment)
                let listRun = try await timedCommand(bw, ["list", "items", "--search", search], environment: environment)
                guard getRun.output == get.password, listRun.output.hasPrefix("[{"), listRun.output.components(separatedBy: "\"object\":\"item\"").count > 10 else {
                    throw Unavailable(description: "B1: bw get printed \(getRun.output.prefix(100)); bw list \(listRun.output.prefix(200))")
                }
                if round > 0 {
                    gets.add(getRun)
                    lists.add(listRun)
                }
            }
            return (gets, lists)
        }
        let bwAgent: (get: Samples, list: Samples)
        do {
            bwAgent = try await bwRounds(bwEnvironment)
        } catch {
            _ = try? await command(cli, ["agent", "stop"], environment: environment)
            throw error
        }
        let status = try await command(cli, ["agent", "status"], environment: environment)
        _ = try await command(cli, ["agent", "stop"], environment: environment)
        let bwDirect = try await bwRounds(bwEnvironment)
        guard status.contains("vault           unlocked") else { throw Unavailable(description: "G1: the agent was not unlocked at the end: \(status)") }
        print("G1: \(rounds) rounds through the agent, the P7 vault")
        for (label, samples) in [("get through the agent", viaAgent), ("get, VAULTSYNC_AGENT=off", directly), ("socket floor", floor),
                                 ("list --search through the agent", listed), ("add through the agent, server up", added),
                                 ("get right after an add, through the agent", afterAdd)] {
            print(String(format: "G1 %@: wall p50 %.1f ms, p90 %.1f ms; CPU (user + system) p50 %.1f ms", label,
                         samples.wall(0.5), samples.wall(0.9), samples.cpu(0.5)))
        }
        for (label, samples) in [("bw get password through the agent", bwAgent.get), ("bw get password, no agent", bwDirect.get),
                                 ("bw list items --search through the agent", bwAgent.list), ("bw list items --search, no agent", bwDirect.list)] {
            print(String(format: "B1 %@: wall p50 %.1f ms, p90 %.1f ms; CPU (user + system) p50 %.1f ms", label,
                         samples.wall(0.5), samples.wall(0.9), samples.cpu(0.5)))
        }
        let getP50 = viaAgent.wall(0.5), floorP50 = floor.wall(0.5)
        return [
            BenchResult(id: "B1-get", what: String(format: "bw get password NAME through the agent, p50 (no agent: %.1f ms)", bwDirect.get.wall(0.5)),
                        value: bwAgent.get.wall(0.5), unit: "ms", goal: "≤ 50 ms", met: bwAgent.get.wall(0.5) <= 50),
            BenchResult(id: "B1-list", what: String(format: "bw list items --search TEXT through the agent, p50 (no agent: %.1f ms)", bwDirect.list.wall(0.5)),
                        value: bwAgent.list.wall(0.5), unit: "ms", goal: "≤ 50 ms", met: bwAgent.list.wall(0.5) <= 50),
            BenchResult(id: "G1-get", what: String(format: "get NAME --field password through the agent, p50 (direct %.1f ms, p90 %.0f)", directly.wall(0.5), viaAgent.wall(0.9)),
                        value: getP50, unit: "ms", reference: floorP50,
                        referenceWhat: "VaultBenchSocketFloor: one request over the agent's socket, answer printed, p50",
                        ratio: getP50 / floorP50, goal: "≤ 10 ms, ≤ 2× floor", met: getP50 <= 10 && getP50 / floorP50 <= 2),
            BenchResult(id: "G1-list", what: String(format: "list --search TEXT through the agent, p50 (p90 %.0f)", listed.wall(0.9)),
                        value: listed.wall(0.5), unit: "ms", goal: "≤ 20 ms", met: listed.wall(0.5) <= 20),
            BenchResult(id: "G1-get-after-add", what: "get NAME --field password right after an add, through the agent, p50",
                        value: afterAdd.wall(0.5), unit: "ms", goal: "report", met: nil),
            BenchResult(id: "G1-add", what: String(format: "add login through the agent, server up, p50 (p90 %.0f)", added.wall(0.9)),
                        value: added.wall(0.5), unit: "ms", goal: "≤ 25 ms", met: added.wall(0.5) <= 25),
        ]
    }

    /// B2: `bw serve` (the release executable, unlocked by BW_SESSION) answering GET /object/item/{id} to the
    /// in-benchmark load generator (P6's: 16 concurrent keep-alive connections), next to its floor: the same
    /// HTTP server (LocalHTTP) in this process answering the same bytes from memory, with the same generator.
    static func serveThroughput(cli: String, environment: [String: String], id: String, seconds: Double) async throws -> [BenchResult] {
        let child = KillableChild(executable: URL(fileURLWithPath: cli), arguments: ["bw", "serve", "--hostname", "127.0.0.1", "--port", "0"],
                                  environment: environment, replacingEnvironment: true)
        try child.run()
        defer { child.killAndCollect() }
        try await child.wait(for: "Listening on 127.0.0.1:")
        guard let line = child.output.text.split(separator: "\n").first(where: { $0.hasPrefix("Listening on 127.0.0.1:") }),
              let port = Int(line.dropFirst("Listening on 127.0.0.1:".count)) else {
            throw Unavailable(description: "B2: bw serve printed \(child.output.text.prefix(300))")
        }
        var configuration = HTTPClient.Configuration()
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = ServerThroughputBenchmark.concurrency
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        defer { _ = client.shutdown() }
        @Sendable func get(_ url: String) async throws -> ByteBuffer {
            let response = try await client.execute(HTTPClientRequest(url: url), timeout: .seconds(30))
            let body = try await response.body.collect(upTo: 1 << 20)
            guard response.status == .ok else { throw ServerThroughputBenchmark.LoadError.status(Int(response.status.code)) }
            return body
        }
        let url = "http://127.0.0.1:\(port)/object/item/\(id)"
        let answer = try await get(url)
        guard String(buffer: answer).contains("\"id\":\"\(id)\""), String(buffer: answer).hasPrefix("{\"success\":true") else {
            throw Unavailable(description: "B2: GET /object/item answered \(String(buffer: answer).prefix(300))")
        }
        let served = try await ServerThroughputBenchmark.load(seconds: seconds) { _ in
            guard try await get(url).readableBytes == answer.readableBytes else { throw ServerThroughputBenchmark.LoadError.status(0) }
        }
        let floorServer = try await LocalHTTPServer.bind(host: "127.0.0.1", port: 0)
        let bytes = Array(answer.readableBytesView)
        let serving = Task { await floorServer.serve { _ in LocalHTTPResponse(status: 200, headers: [("Content-Type", "application/json; charset=utf-8")], body: bytes) } }
        defer {
            floorServer.close()
            serving.cancel()
        }
        let floorURL = "http://127.0.0.1:\(floorServer.port)/object/item/\(id)"
        let floor = try await ServerThroughputBenchmark.load(seconds: seconds) { _ in
            guard try await get(floorURL).readableBytes == answer.readableBytes else { throw ServerThroughputBenchmark.LoadError.status(0) }
        }
        print(String(format: "B2 bw serve GET /object/item/{id}: %.0f req/s; the same bytes from LocalHTTP in the benchmark: %.0f req/s", served, floor))
        return [
            BenchResult(id: "B2-serve", what: "bw serve: GET /object/item/{id}, 16 concurrent, the P7 vault", value: served, unit: "req/s",
                        reference: floor, referenceWhat: "the same HTTP server answering the same bytes from memory, same load generator",
                        ratio: served / floor, goal: "≥ 1,000 req/s", met: served >= 1_000),
        ]
    }

    /// A release executable built next to this one.
    static func executable(_ name: String) throws -> String {
        let folder = URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
                         ?? CommandLine.arguments[0]).deletingLastPathComponent().path
        guard FileManager.default.isExecutableFile(atPath: folder + "/" + name) else {
            throw Unavailable(description: "\(name) is not built next to VaultBench (swift build -c release --product \(name))")
        }
        return folder + "/" + name
    }

    /// The environment a shell passes on after `vaultsync config server URL` and `vaultsync login` in
    /// `profile`: its own, with the profile and the session, and nothing of ours that changes the CLI.
    static func loggedInEnvironment(_ cli: String, profile: String, url: String, account: BenchAccount) async throws -> [String: String] {
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("VAULTSYNC_") }
        environment["VAULTSYNC_HOME"] = profile
        environment["NO_COLOR"] = "1"
        var setup = environment
        setup["VAULTSYNC_PASSWORD"] = account.password
        _ = try await command(cli, ["config", "server", url], environment: setup)
        let login = try await command(cli, ["login", account.email, "--accept-kdf", "pbkdf2:\(BenchAccount.kdf.iterations)"], environment: setup)
        guard let line = login.split(separator: "\n").first(where: { $0.hasPrefix("export VAULTSYNC_SESSION=") }) else {
            throw Unavailable(description: "login printed no session: \(login)")
        }
        environment["VAULTSYNC_SESSION"] = String(line.dropFirst("export VAULTSYNC_SESSION=\"".count).dropLast())
        return environment
    }

    /// One command's runs: wall and CPU times in seconds.
    struct Samples {
        var walls: [Double] = []
        var cpus: [Double] = []

        mutating func add(_ run: (seconds: Double, output: String, cpu: Double)) {
            walls.append(run.seconds)
            cpus.append(run.cpu)
        }

        /// Milliseconds at this percentile.
        func wall(_ fraction: Double) -> Double { percentile(walls, fraction) * 1000 }
        func cpu(_ fraction: Double) -> Double { percentile(cpus, fraction) * 1000 }
    }

    /// Runs a command to its end; its standard output, or an error with its standard error.
    static func command(_ executable: String, _ arguments: [String], environment: [String: String]) async throws -> String {
        try await timedCommand(executable, arguments, environment: environment).output
    }

    /// Runs a command as a shell does for `$(command)`: spawned with its standard output on a pipe that
    /// is read to the end, then waited for. The time is from the spawn to the end of the wait. Blocking,
    /// so on a Dispatch thread: the in-process server must keep its threads.
    static func timedCommand(_ executable: String, _ arguments: [String], environment: [String: String]) async throws -> (seconds: Double, output: String, cpu: Double) {
        let result: Result<(Double, String, Double), any Error> = await offPool {
            do {
                let out = try Spawn.pipe(), err = try Spawn.pipe()
                let devNull = open("/dev/null", O_RDONLY | O_CLOEXEC)
                defer { close(devNull) }
                let clock = ContinuousClock()
                let start = clock.now
                let pid = try Spawn.start(executable, arguments, environment: environment, folder: nil,
                                          stdin: devNull, stdout: out.write, stderr: err.write)
                close(out.write)
                close(err.write)
                // Standard error on another thread (of its own, as for `offPool`): a child blocked on a
                // full pipe would never end.
                let group = DispatchGroup()
                let errFD = err.read
                let box = DataBox()
                group.enter()
                Thread.detachNewThread {
                    box.data = Spawn.readAll(errFD)
                    group.leave()
                }
                let output = Spawn.readAll(out.read)
                // wait4: the child's CPU time too (user + system), which moves much less with the
                // machine's load than the wall time does.
                var raw: Int32 = 0
                var usage = rusage()
                while wait4(pid, &raw, 0, &usage) < 0 && errno == EINTR {}
                let elapsed = clock.now - start
                let status = raw & 0x7F == 0 ? (raw >> 8) & 0xFF : 128 + (raw & 0x7F)
                let cpu = Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
                    + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
                group.wait()
                guard status == 0 else {
                    throw Unavailable(description: "\(executable.split(separator: "/").last!) \(arguments.prefix(2).joined(separator: " ")) exited with \(status): \(String(decoding: box.data, as: UTF8.self).prefix(500))")
                }
                let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
                return .success((seconds, String(decoding: output, as: UTF8.self), cpu))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// Standard error's bytes, handed from its reading thread (read after the group's wait).
    final class DataBox: @unchecked Sendable {
        var data = Data()
    }
}
