import Foundation
import Logging
import Synchronization
import Testing
import VaultCrypto
@testable import VaultServer
import VaultTestSupport

/// Several built `vaultsync-server` processes on one new PostgreSQL database, as a deployment runs them:
/// each with its own data folder, all with the same token signing key (`VAULTSYNC_TOKEN_KEY`), started
/// together (so their migrations meet the advisory lock).
final class NodeCluster: Sendable {
    let urls: [String]
    private let processes: [KillableChild]
    private let folder: String
    private let databaseName: String
    private let admin: PostgresDatabase

    private init(urls: [String], processes: [KillableChild], folder: String, databaseName: String, admin: PostgresDatabase) {
        self.urls = urls
        self.processes = processes
        self.folder = folder
        self.databaseName = databaseName
        self.admin = admin
    }

    static func start(nodes: Int, adminURL: String) async throws -> NodeCluster {
        let name = "vs_nodes_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        let admin = try PostgresDatabase(url: adminURL, logger: Logger(label: "cluster-admin"))
        try await admin.executeOutsideTransaction("CREATE DATABASE \(name)")
        var components = try #require(URLComponents(string: adminURL))
        components.path = "/\(name)"
        let databaseURL = try #require(components.string)
        let folder = NSTemporaryDirectory() + "vs-nodes-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let key = Data(SystemRandomSource().bytes(count: 64)).base64EncodedString()
        let processes = try (0..<nodes).map { index in
            let child = KillableChild(executable: try helperExecutable("vaultsync-server"),
                                      arguments: ["--port", "0", "--data-dir", folder + "/node\(index)"],
                                      environment: ["VAULTSYNC_DATABASE_URL": databaseURL, "VAULTSYNC_TOKEN_KEY": key,
                                                    "PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"],
                                      replacingEnvironment: true, folder: folder, collectingStandardError: true)
            try child.run()
            return child
        }
        var urls: [String] = []
        for child in processes {
            try await child.wait(for: "listening on http", seconds: 120)
            guard let port = child.output.text.split(separator: "listening on http://127.0.0.1:").last?.prefix(while: \.isNumber), !port.isEmpty else {
                for other in processes { other.killAndCollect() }
                throw ClusterError.didNotStart(child.output.text)
            }
            urls.append("http://127.0.0.1:\(port)")
        }
        return NodeCluster(urls: urls, processes: processes, folder: folder, databaseName: name, admin: admin)
    }

    enum ClusterError: Error { case didNotStart(String) }

    /// SIGKILL: the node ends at once, mid-request.
    func kill(_ node: Int) {
        processes[node].killAndCollect()
    }

    /// The node's log so far.
    func log(_ node: Int) -> String { processes[node].output.text }

    func stop() async {
        for process in processes { process.killAndCollect() }
        try? await admin.executeOutsideTransaction("DROP DATABASE IF EXISTS \(databaseName) WITH (FORCE)")
        await admin.close()
        try? FileManager.default.removeItem(atPath: folder)
    }
}

/// A count several tasks add to.
final class Counter: Sendable {
    private let state = Mutex(0)
    func add() { state.withLock { $0 += 1 } }
    var value: Int { state.withLock { $0 } }
}
