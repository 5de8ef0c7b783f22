import Foundation
import Testing
import VaultExchange
import VaultModels
import VaultTestSupport

/// A fixture of the format tests (Tests/VaultExchangeTests/Fixtures), as a user's file.
func exchangeFixture(_ name: String) -> String {
    URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("VaultExchangeTests/Fixtures/\(name)").path
}

/// An item without what a vault gives it anew (ids, folder ids, and the creation and revision dates,
/// which the server assigns on create, as Bitwarden's does), for comparing exports of two accounts.
func portable(_ view: CipherView) -> CipherView {
    view.with {
        $0.id = nil
        $0.folderId = nil
        $0.creationDate = nil
        $0.revisionDate = nil
    }
}

@Suite("CLI: import and export", .serialized)
struct ImportExportCommandTests {
    /// RELIABILITY bug 70: on a full disk `generate > pw.txt` and `get --field password > f` exited 0 with nothing
    /// written, and `export > f` trapped (SIGILL).
    @Test("output that cannot be written (a full disk) is an error, exit 1, for every command that prints",
          .enabled(if: FileManager.default.fileExists(atPath: "/dev/full"), "no /dev/full here"))
    func fullDisk() async throws {
        let scenario = try await CLIScenario.start()
        let a = try await scenario.device(register: true)
        try await a.expect(["add", "login", "--name", "Bank", "--username", "alice", "--password", "-"], stdin: "hunter2\n")
        for arguments in [["generate"], ["list"], ["list", "--json"], ["get", "Bank", "--field", "password"],
                          ["export", "--format", "json"], ["export", "--format", "csv"]] {
            let result = try await a.runOntoFullDisk(arguments)
            // The reason is the system's when the failed write is the last one; with line-buffered output (stdbuf, as
            // the test script runs) an earlier line's flush failed and its reason is gone.
            #expect(result.status == 1 && (result.stderr.contains("cannot write to standard output: No space left on device")
                                           || result.stderr.contains("cannot write to standard output: a write failed (a full disk")),
                    "vaultsync \(arguments.joined(separator: " ")): \(result)")
            #expect(!result.stderr.contains("Fatal error"), "\(result)")
        }
        // "-" is standard output (it wrote a plaintext file named "-"), and an empty name is a usage error.
        let dashed = try await a.expect(["export", "--format", "json", "--output", "-"])
        #expect(dashed.stdout.contains("\"Bank\""), "\(dashed)")
        #expect(!FileManager.default.fileExists(atPath: FileManager.default.currentDirectoryPath + "/-"))
        try await a.expect(["export", "--format", "json", "--output", ""], status: 64)
        await scenario.finish([a])
    }

    /// RELIABILITY bug 71: an import from a pipe (`<(gpg -d …)`, `-`, /dev/stdin) was refused ("cannot read"), so a
    /// decrypted export had to be written to disk first.
    @Test("import reads standard input (-) and pipes; a folder or a missing file is named as such, exit 64")
    func importFromAPipe() async throws {
        let scenario = try await CLIScenario.start()
        let a = try await scenario.device(register: true)
        let piped = try await a.expect(["import", "-", "--format", "chrome-csv", "--no-sync"],
                                       stdin: "name,url,username,password\nPiped,https://piped.example,alice,hunter2\n")
        #expect(piped.stdout.contains("Imported 1 item"), "\(piped)")
        #expect(try await a.expect(["get", "Piped", "--field", "password"]).stdout == "hunter2\n")
        try await a.expect(["import", "/dev/stdin", "--format", "chrome-csv", "--no-sync"],
                           stdin: "name,url,username,password\nFrom dev stdin,https://other.example,bob,secret\n")
        #expect(try await a.json(["list"]).count == 2)
        let directory = (a.home as NSString).deletingLastPathComponent
        let folder = try await a.expect(["import", directory, "--format", "chrome-csv"], status: 64)
        #expect(folder.stderr.contains("is a folder, not a file"), "\(folder)")
        let missing = try await a.expect(["import", directory + "/missing.csv", "--format", "chrome-csv"], status: 64)
        #expect(missing.stderr.contains("no file"), "\(missing)")
        // Two equal entries of one file (one login in two groups) are two items, not "already in the vault".
        let twice = try await a.expect(["import", "-", "--format", "keepassxc-csv", "--no-sync"], stdin: """
            "Group","Title","Username","Password","URL","Notes"
            "Root/Work","Mail","me","pw","https://mail.example",""
            "Root/Personal","Mail","me","pw","https://mail.example",""

            """)
        #expect(twice.stdout.contains("Imported 2 items"), "\(twice)")
        // The same file again is refused as what it is: all of it is in the vault now.
        let again = try await a.expect(["import", "-", "--format", "keepassxc-csv", "--no-sync"], status: 64, stdin: """
            "Group","Title","Username","Password","URL","Notes"
            "Root/Work","Mail","me","pw","https://mail.example",""

            """)
        #expect(again.stderr.contains("already in the vault"), "\(again)")
        let both = try await a.expect(["import", "-", "--format", "bitwarden-json", "--file-password-stdin"], status: 64, stdin: "{}")
        #expect(both.stderr.contains("cannot both come from standard input"), "\(both)")
        await scenario.finish([a])
    }

    @Test("import offline in one go, refuse a second import, sync, export 0600, round trip into a fresh account")
    func roundTrip() async throws {
        let scenario = try await CLIScenario.start()
        let a = try await scenario.device(register: true)
        let directory = (a.home as NSString).deletingLastPathComponent
        let original = try BitwardenJSON.read(try String(contentsOfFile: exchangeFixture("bitwarden.json"), encoding: .utf8))

        // Offline: everything is stored and queued; the summary counts each type and names what was skipped.
        await scenario.server.stop()
        let summary = try await a.json(["import", exchangeFixture("bitwarden.json"), "--format", "bitwarden-json"])
        #expect(summary["imported"]?.intValue == 5)
        #expect(summary["byType"]?["login"]?.intValue == 1 && summary["byType"]?["card"]?.intValue == 1)
        #expect(summary["foldersCreated"]?.arrayValue?.compactMap(\.stringValue) == ["Work", "Work/Servers", "Empty folder"])
        #expect(summary["skipped"]?[0]?["entry"]?.stringValue == "item 6 (Bank account from a newer client)")
        #expect(summary["synced"]?.boolValue == false && summary["pending"]?.intValue == 8)
        #expect(try await a.json(["list"]).count == 5)

        // The same file again: refused, nothing imported, the way out named.
        let again = try await a.expect(["import", exchangeFixture("bitwarden.json"), "--format", "bitwarden-json"], status: 64)
        #expect(again.stderr.contains("5 of the 5 items") && again.stderr.contains("--skip-duplicates"))
        #expect(try await a.json(["list"]).count == 5)
        let skipped = try await a.json(["import", exchangeFixture("bitwarden.json"), "--format", "bitwarden-json", "--skip-duplicates"])
        #expect(skipped["imported"]?.intValue == 0 && skipped["duplicatesSkipped"]?.intValue == 5)
        #expect(skipped["foldersMatched"]?.count == 3 && skipped["foldersCreated"]?.count == 0)

        try await scenario.server.start()
        try await a.expect(["sync"])
        #expect(try await a.json(["pending"]).count == 0)

        // Export: mode 0600, never over an existing file.
        let exported = directory + "/export.json"
        try await a.expect(["export", "--format", "json", "--output", exported])
        let mode = try FileManager.default.attributesOfItem(atPath: exported)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let refused = try await a.expect(["export", "--format", "json", "--output", exported], status: 64)
        #expect(refused.stderr.contains("exists already"))
        // A symbolic link to nothing is not followed, and counts as a file that exists (RELIABILITY bug 66: exit 1).
        let dangling = directory + "/dangling.json"
        try FileManager.default.createSymbolicLink(atPath: dangling, withDestinationPath: directory + "/nowhere.json")
        let viaLink = try await a.expect(["export", "--format", "json", "--output", dangling], status: 64)
        #expect(viaLink.stderr.contains("exists already"), "\(viaLink.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory + "/nowhere.json"))
        let fromA = try BitwardenJSON.read(try String(contentsOfFile: exported, encoding: .utf8))
        #expect(fromA.items.map { portable($0.view) }.sorted(by: { $0.name < $1.name })
            == original.items.map { portable($0.view) }.sorted(by: { $0.name < $1.name }))

        // A fresh account imports A's export; its own export has every field equal.
        let other = CLIScenario(server: scenario.server, email: "other-\(UUID().uuidString.prefix(8).lowercased())@example.com")
        let b = try await other.device(register: true)
        let imported = try await b.json(["import", exported, "--format", "bitwarden-json"])
        #expect(imported["imported"]?.intValue == 5 && imported["synced"]?.boolValue == true && imported["pending"]?.intValue == 0)
        let fromB = try BitwardenJSON.read(try await b.expect(["export", "--format", "json"]).stdout)
        #expect(fromB.items.map { portable($0.view) } == fromA.items.map { portable($0.view) })
        #expect(fromB.items.map(\.folderName) == fromA.items.map(\.folderName))

        // Password-protected: the password from the environment; a wrong one is refused and imports nothing.
        let encrypted = directory + "/export.enc.json"
        try await a.expect(["export", "--format", "encrypted-json", "--output", encrypted], environment: ["VAULTSYNC_FILE_PASSWORD": "file pw"])
        let text = try String(contentsOfFile: encrypted, encoding: .utf8)
        #expect(text.contains("\"passwordProtected\": true") && !text.contains("Zürich router"))
        let third = CLIScenario(server: scenario.server, email: "third-\(UUID().uuidString.prefix(8).lowercased())@example.com")
        let c = try await third.device(register: true)
        let wrong = try await c.expect(["import", encrypted, "--format", "bitwarden-json"], status: 3, environment: ["VAULTSYNC_FILE_PASSWORD": "nope"])
        #expect(wrong.stderr.contains("password does not open"))
        try await c.expect(["import", encrypted, "--format", "bitwarden-json"], status: 64)  // no password, no terminal
        try await c.expect(["import", encrypted, "--format", "bitwarden-json", "--file-password-stdin"], stdin: "file pw\n")
        let fromC = try BitwardenJSON.read(try await c.expect(["export", "--format", "json"]).stdout)
        #expect(fromC.items.map { portable($0.view) } == fromA.items.map { portable($0.view) })

        // CSV carries logins and notes, and says what it left out.
        let csv = try await a.expect(["export", "--format", "csv"])
        #expect(csv.stdout.hasPrefix("folder,favorite,type,name,notes,fields,reprompt,login_uri,login_username,login_password,login_totp\r\n"))
        #expect(csv.stderr.contains("3 item(s) that CSV cannot carry"))
        // To a file, the count is of the items the file holds.
        let csvFile = directory + "/export.csv"
        let written = try await a.expect(["export", "--format", "csv", "--output", csvFile])
        let total = fromA.items.count
        #expect(written.stderr.contains("exported \(total - 3) item"), "\(written)")
        await scenario.finish([a, b, c])
    }

    @Test("a malformed file is refused naming its entry, and imports nothing")
    func malformed() async throws {
        let scenario = try await CLIScenario.start()
        let device = try await scenario.device(register: true)
        let directory = (device.home as NSString).deletingLastPathComponent
        let file = directory + "/broken.json"
        // The second item is broken: the first must not be imported either.
        try Data(#"{"items": [{"type": 1, "name": "Fine", "login": {}}, {"type": 1, "name": "Broken", "login": {"uris": 5}}]}"#.utf8)
            .write(to: URL(fileURLWithPath: file))
        let result = try await device.expect(["import", file, "--format", "bitwarden-json"], status: 65)
        #expect(result.stderr.contains("item 2 (Broken)"))
        #expect(try await device.json(["list"]).count == 0)
        #expect(try await device.json(["pending"]).count == 0)
        try await device.expect(["import", directory + "/missing.json", "--format", "bitwarden-json"], status: 64)
        try await device.expect(["import", file, "--format", "word-doc"], status: 64)
        await scenario.finish([device])
    }

    /// RELIABILITY bug 76 (left open by bug 73): a KeePassXC file has every column `chrome-csv` requires, so
    /// `--format chrome-csv` imported it silently, the titles and groups becoming custom fields.
    @Test("a CSV file of one format named as another is refused, exit 65, naming the format it is; nothing imported")
    func csvOfAnotherFormat() async throws {
        let scenario = try await CLIScenario.start()
        let device = try await scenario.device(register: true)
        let wrong = try await device.expect(["import", exchangeFixture("keepassxc.csv"), "--format", "chrome-csv", "--no-sync"], status: 65)
        #expect(wrong.stderr.contains("keepassxc-csv") && wrong.stderr.contains("--format keepassxc-csv")
                    && wrong.stderr.contains("nothing was imported"), "\(wrong.stderr)")
        #expect(try await device.json(["list"]).count == 0)
        #expect(try await device.json(["pending"]).count == 0)
        try await device.expect(["import", exchangeFixture("firefox.csv"), "--format", "chrome-csv", "--no-sync"], status: 65)
        try await device.expect(["import", exchangeFixture("chrome.csv"), "--format", "firefox-csv", "--no-sync"], status: 65)
        #expect(try await device.json(["list"]).count == 0)
        // Named as what it is, it imports.
        try await device.expect(["import", exchangeFixture("keepassxc.csv"), "--format", "keepassxc-csv", "--no-sync"])
        #expect(try await device.json(["list"]).count > 0)
        await scenario.finish([device])
    }

    /// One account and one device for all six files, one after the other: each CLI run derives the master
    /// key (and each account costs the server a slow hash), so six scenarios in parallel would starve the
    /// servers of the tests running beside this one on a 2-core machine.
    @Test("each CSV format imports through the CLI offline: the items and folders the reader finds, nothing else")
    func csvFormats() async throws {
        let scenario = try await CLIScenario.start()
        let device = try await scenario.device(register: true)
        await scenario.server.stop()
        var total = 0
        for (file, format) in [("bitwarden.csv", "bitwarden-csv"), ("keepassxc.csv", "keepassxc-csv"), ("chrome.csv", "chrome-csv"),
                               ("firefox.csv", "firefox-csv"), ("1password.csv", "1password-csv"), ("1password7.csv", "1password-csv")] {
            let expected = try CSVImporter.read(try String(contentsOfFile: exchangeFixture(file), encoding: .utf8),
                                                format: try #require(ImportFormat(rawValue: format)))
            let summary = try await device.json(["import", exchangeFixture(file), "--format", format, "--allow-duplicates"])
            #expect(summary["imported"]?.intValue == expected.items.count, "\(file)")
            #expect(summary["skipped"]?.count == expected.skipped.count, "\(file)")
            total += expected.items.count
            let names = Set(try await device.json(["list"]).arrayValue?.compactMap { $0["name"]?.stringValue } ?? [])
            #expect(Set(expected.items.map(\.view.name)).isSubset(of: names), "\(file)")
        }
        #expect(try await device.json(["list"]).count == total)
        let folders = try await device.json(["folder", "list"]).arrayValue?.compactMap { $0["name"]?.stringValue } ?? []
        for name in ["Work", "Work/Servers", "Personal"] { #expect(folders.contains(name), "\(name) in \(folders)") }
        await scenario.finish([device])
    }
}
