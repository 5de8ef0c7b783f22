import Foundation
import Logging
import Testing
import VaultModels
@testable import VaultServer
import VaultTestSupport

/// `vaultsync watch` as a person runs it: the built executable at a terminal of its own (Ctrl-C is the
/// terminal's interrupt), against real servers over real sockets (docs/CLI.md, "Live sync: `watch`").
@Suite("vaultsync watch")
struct WatchCommandTests {
    @Test("at a terminal: another device's change appears without a sync, `status` says live, Ctrl-C stops it cleanly")
    func watchAtTerminal() async throws {
        let scenario = try await CLIScenario.start()
        let a = try await scenario.device(register: true)
        let b = try await scenario.device()
        defer { Task { await scenario.finish([a, b]) } }
        let watch = try TerminalSession(try vaultsyncExecutable(), ["watch"], environment: b.environment)
        defer { watch.end() }
        try await watch.waitFor("live: connected to the server's notifications")
        let status = try await b.expect(["status"])
        #expect(status.stdout.contains("live sync       live (vaultsync watch, pid \(watch.pid))"), "\(status)")

        var shown = watch.text.count
        try await a.expect(["add", "login", "--name", "GitHub", "--username", "alice"])
        try await watch.waitFor("\"GitHub\" updated on another device", after: shown)
        // B's local copy holds it, with nobody having asked for a sync.
        let list = try await b.json(["list"])
        #expect(itemID(list, named: "GitHub") != nil, "\(list)")

        shown = watch.text.count
        try await a.expect(["edit", "GitHub", "--username", "alice@example.com"])
        try await watch.waitFor("\"GitHub\" updated on another device", after: shown)
        shown = watch.text.count
        try await a.expect(["delete", "GitHub", "--permanent"])
        try await watch.waitFor("\"GitHub\" deleted on another device", after: shown)

        watch.type("\u{03}")
        let exit = try await watch.exit()
        #expect(exit == 0, "Ctrl-C ends it as asked: \(watch.text)")
        #expect(watch.text.contains("stopped"), "\(watch.text)")
        let after = try await b.expect(["status"])
        #expect(after.stdout.contains("live sync       not running"), "nothing keeps the copy live any more: \(after)")
    }

    @Test("two vaultsync-server processes on one PostgreSQL: a change saved through node 1 reaches a watch connected to node 2")
    func twoServerProcesses() async throws {
        guard let adminURL = ProcessInfo.processInfo.environment["VAULTSYNC_TEST_POSTGRES_URL"].flatMap({ $0.isEmpty ? nil : $0 }) else {
            return
        }
        let folder = NSTemporaryDirectory() + "vaultsync-nodes-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let name = "vs_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let admin = try PostgresDatabase(url: adminURL, logger: Logger(label: "test-admin"))
        try await admin.executeOutsideTransaction("CREATE DATABASE \(name)")
        var components = try #require(URLComponents(string: adminURL))
        components.path = "/\(name)"
        let keyFile = folder + "/token.key"
        try Data((Data((0..<64).map { UInt8(($0 * 7) & 0xFF) }).base64EncodedString() + "\n").utf8).write(to: URL(fileURLWithPath: keyFile))
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("VAULTSYNC_") }
        environment["VAULTSYNC_DATABASE_URL"] = try #require(components.url).absoluteString
        environment["VAULTSYNC_PORT"] = "0"
        var nodes: [KillableChild] = []
        defer {
            for node in nodes { kill(node.pid, SIGKILL) }
            try? FileManager.default.removeItem(atPath: folder)
        }
        var urls: [String] = []
        for index in 1...2 {
            let nodeFolder = folder + "/node\(index)"
            try FileManager.default.createDirectory(atPath: nodeFolder, withIntermediateDirectories: true)
            let (node, log) = try await ServerExecutableTests.startServer(in: nodeFolder, environment: environment,
                                                                          arguments: ["--token-key-file", keyFile])
            nodes.append(node)
            urls.append(try #require(Self.listeningURL(log.text), "\(log.text)"))
        }
        let email = "nodes-\(UUID().uuidString.prefix(8).lowercased())@example.com"
        let a = CLIDevice(password: "correct horse battery staple")
        try await a.expect(["config", "server", urls[0]])
        try await a.expect(["register", email, "--kdf-iterations", "100000"])
        let b = CLIDevice(password: "correct horse battery staple")
        try await b.expect(["config", "server", urls[1]])
        try await b.expect(["login", email, "--accept-kdf", "pbkdf2:100000"])

        let watch = try TerminalSession(try vaultsyncExecutable(), ["watch", "--json"], environment: b.environment)
        defer { watch.end() }
        try await watch.waitFor(#""state":"live""#)
        let shown = watch.text.count
        try await a.expect(["add", "login", "--name", "Across nodes", "--username", "alice"])
        try await watch.waitFor(#""name":"Across nodes""#, after: shown)
        #expect(watch.text.dropFirst(shown).contains(#""event":"itemChanged""#), "\(watch.text)")
        watch.type("\u{03}")
        #expect(try await watch.exit() == 0, "\(watch.text)")

        for node in nodes { kill(node.pid, SIGTERM) }
        for node in nodes { #expect(await waitUntil { !node.isRunning }, "node \(node.pid) stops on SIGTERM") }
        nodes = []
        try? await admin.executeOutsideTransaction("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        await admin.close()
        for device in [a, b] { try? FileManager.default.removeItem(atPath: (device.home as NSString).deletingLastPathComponent) }
    }

    /// The address in the server's start line (`vaultsync-server listening on http://127.0.0.1:PORT; storing …`).
    static func listeningURL(_ log: String) -> String? {
        guard let range = log.range(of: "vaultsync-server listening on ") else { return nil }
        return String(log[range.upperBound...].prefix { $0 != ";" && !$0.isWhitespace })
    }
}
