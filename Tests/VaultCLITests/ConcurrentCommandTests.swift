import Foundation
import Testing
import VaultModels
import VaultTestSupport

/// Several `vaultsync` processes at once on one profile, as a person with two terminals (or a script beside
/// them) runs them: every save that says it was saved is kept.
@Suite("CLI: several processes on one profile")
struct ConcurrentCommandTests {
    @Test("edits of one item from three processes at once, online and offline: every field each one set is there", arguments: [true, false])
    func concurrentEdits(online: Bool) async throws {
        let scenario = try await CLIScenario.start()
        let device = try await scenario.device(register: true)
        try await device.expect(["add", "login", "--name", "CF"])
        if !online { await scenario.server.stop() }
        var set: [String] = []
        for round in 1...4 {
            let names = ["a", "b", "c"].map { "\($0)\(round)" }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for name in names {
                    group.addTask { try await device.expect(["edit", "CF", "--field", "\(name)=v"]) }
                }
                try await group.waitForAll()
            }
            set += names
        }
        if !online { try await scenario.server.start() }
        try await device.expect(["sync"])
        let item = try await device.json(["get", "CF"])
        let fields = Set(item["fields"]?.arrayValue?.compactMap { $0["name"]?.stringValue } ?? [])
        #expect(fields == Set(set), "missing: \(Set(set).subtracting(fields).sorted())")
        #expect(try await device.json(["list"]).count == 1, "no backup copy: the saves were one person's, one after another")
        await scenario.finish([device])
    }

    @Test("the same file imported by two processes at once: one import, the other refused as a repeat")
    func concurrentImports() async throws {
        let scenario = try await CLIScenario.start()
        let device = try await scenario.device(register: true)
        let file = temporaryDirectory("vaultsync-import-twice") + "/same.csv"
        let rows = (0..<200).map { "same\($0),https://r\($0).example.com,user\($0),pw\($0)," }
        try (["name,url,username,password,note"] + rows).joined(separator: "\n").write(toFile: file, atomically: true, encoding: .utf8)
        let statuses = try await withThrowingTaskGroup(of: Int32.self) { group in
            for _ in 0..<2 { group.addTask { try await device.run(["import", file, "--format", "chrome-csv", "--no-sync"]).status } }
            return try await group.reduce(into: [Int32]()) { $0.append($1) }
        }
        #expect(statuses.sorted() == [0, 64], "one import, one refused as a repeat: \(statuses)")
        try await device.expect(["sync"])
        #expect(try await device.json(["list"]).count == 200)
        await scenario.finish([device])
    }
}
