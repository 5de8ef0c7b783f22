import Foundation
import VaultModels
import VaultTestSupport

/// P8: importing a 10,000-item export offline, then syncing, as a person does it at the command line:
/// the release `vaultsync` executable, a new process per command, on a profile logged in to a real
/// server with an empty vault. The server is stopped for the import (it is queued on this device, its
/// sync attempt refused at once) and started again on the same port for `vaultsync sync`.
enum ImportBenchmark {
    static func run(options: BenchOptions) async throws -> [BenchResult] {
        let count = 10_000
        let cli: String
        do {
            // VAULTSYNC_P7_CLI: another vaultsync executable (as for P7: an older build, to compare under the same load).
            cli = try ProcessInfo.processInfo.environment["VAULTSYNC_P7_CLI"] ?? CommandLineBenchmark.executable("vaultsync")
        } catch {
            print("P8 skipped: \(error)")
            return [BenchResult(id: "P8-import", what: "skipped: \(error)", value: 0, unit: "s", goal: "-", met: nil)]
        }
        let server = benchServer()
        try await server.start()
        defer { Task { await server.destroy() } }
        let url = await server.url
        let account = try await BenchAccount.register(url: url)
        let profile = temporaryDirectory("vaultsync-bench-p8")
        defer { try? FileManager.default.removeItem(atPath: profile) }
        let environment = try await CommandLineBenchmark.loggedInEnvironment(cli, profile: profile, url: url, account: account)
        let file = profile + "/export.json"
        try Data(exportJSON(count)).write(to: URL(fileURLWithPath: file))

        await server.stop()
        let imported = try await CommandLineBenchmark.timedCommand(cli, ["import", file, "--format", "bitwarden-json", "--json"], environment: environment)
        let importJSON = try JSONParser.parseObject(Array(imported.output.utf8))
        guard importJSON["imported"]?.intValue == count, importJSON["synced"]?.boolValue == false else {
            throw CommandLineBenchmark.Unavailable(description: "import printed \(imported.output.prefix(300))")
        }
        try await server.start()
        // VAULTSYNC_P8_PERF=FILE: the sync runs under `perf record -g -o FILE` (the profile of what it waits for).
        let perf = ProcessInfo.processInfo.environment["VAULTSYNC_P8_PERF"]
        let synced = try await CommandLineBenchmark.timedCommand(perf == nil ? cli : "/usr/bin/perf",
                                                                 (perf.map { ["record", "-g", "-o", $0, "--", cli] } ?? []) + ["sync", "--json"],
                                                                 environment: environment)
        let syncJSON = try JSONParser.parseObject(Array(synced.output.utf8))
        // The folders are created one by one, the items in bulk: every queued change is settled.
        guard syncJSON["stillPending"]?.intValue == 0, syncJSON["needsAttention"]?.intValue == 0,
              let resolved = syncJSON["resolved"]?.intValue, resolved >= count else {
            throw CommandLineBenchmark.Unavailable(description: "sync printed \(synced.output.prefix(300))")
        }
        let onServer = try await account.api.rawJSON(.GET, "/api/sync", token: account.accessToken, body: nil)
        guard onServer["ciphers"]?.arrayValue?.count == count else {
            throw CommandLineBenchmark.Unavailable(description: "the server holds \(onServer["ciphers"]?.arrayValue?.count ?? -1) items after the sync")
        }
        let total = imported.seconds + synced.seconds
        print(String(format: "P8: import of %d items, server stopped: %.2f s (CPU %.2f s); sync: %.2f s (CPU %.2f s); %d changes resolved",
                     count, imported.seconds, imported.cpu, synced.seconds, synced.cpu, resolved))
        return [BenchResult(id: "P8-import", what: String(format: "import %d offline (%.1f s) + sync (%.1f s)", count, imported.seconds, synced.seconds),
                            value: total, unit: "s", goal: "≤ 10 s", met: total <= 10)]
    }

    /// A Bitwarden JSON export (unencrypted) of `count` logins in 10 folders, with the benchmark vault's
    /// typical fields (a URI, username and password each; a note and a custom field on every fourth).
    static func exportJSON(_ count: Int) -> [UInt8] {
        let folders: [JSONValue] = (0..<10).map { index in
            .object(["id": .string(folderID(index)), "name": .string("Imported folder \(index)")])
        }
        let items: [JSONValue] = (0..<count).map { index in
            var item: JSONObject = [
                "id": .string(String(format: "c0000000-0000-4000-8000-%012d", index)),
                "type": .int(1),
                "name": .string("Imported \(index) at site\(index % 977).example"),
                "folderId": .string(folderID(index % 10)),
                "favorite": .bool(false),
                "login": .object([
                    "uris": .array([.object(["uri": .string("https://login.site\(index % 977).example/account/\(index)"), "match": .null])]),
                    "username": .string("user\(index)@mail.example"),
                    "password": .string("pw-\(index)-\(String(index * 7919, radix: 36))-xK9!"),
                    "totp": .null,
                ]),
            ]
            if index % 4 == 0 {
                item["notes"] = .string("Recovery codes: " + (0..<8).map { String(($0 + 1) * 104_729 &* (index + 1) % 1_000_000) }.joined(separator: " "))
                item["fields"] = .array([.object(["name": .string("PIN"), "value": .string(String(index % 10_000)), "type": .int(0), "linkedId": .null])])
            }
            return .object(item)
        }
        return JSONValue.object(["encrypted": .bool(false), "folders": .array(folders), "items": .array(items)]).serialized()
    }

    static func folderID(_ index: Int) -> String { String(format: "f0000000-0000-4000-8000-%012d", index) }
}
