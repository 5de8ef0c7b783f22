import Foundation
import Testing
import VaultTestSupport

/// Finding items as people type them, and `list` as a person reads it at a terminal, through the built
/// executable (docs/CLI.md, "Finding an item").
@Suite("Finding items and reading lists")
struct FindingItemsTests {
    /// A registered device holding two logins named GitHub (alice, bob), Bank (carol) and a note.
    static func deviceWithItems() async throws -> (CLIScenario, CLIDevice) {
        let scenario = try await CLIScenario.start()
        let device = try await scenario.device(register: true)
        try await addItems(device)
        return (scenario, device)
    }

    static func addItems(_ device: CLIDevice) async throws {
        try await device.expect(["add", "login", "--name", "GitHub", "--username", "alice", "--uri", "https://github.com/login"])
        try await device.expect(["add", "login", "--name", "GitHub", "--username", "bob", "--uri", "https://github.com"])
        try await device.expect(["add", "login", "--name", "Bank", "--username", "carol", "--uri", "https://www.bank.co.uk/login"])
        try await device.expect(["add", "note", "--name", "Old git notes", "--notes", "nothing secret"])
    }

    @Test("a beginning, a part, an address: each finds the item; several are listed with username and URI, and a username picks one")
    func findsAsTyped() async throws {
        let (scenario, device) = try await Self.deviceWithItems()
        defer { Task { await scenario.finish([device]) } }

        #expect(try await device.expect(["get", "ban", "--field", "username"]).stdout == "carol\n", "a beginning of the name")
        #expect(try await device.expect(["get", "ANK", "--field", "username"]).stdout == "carol\n", "a part of it, any case")
        #expect(try await device.expect(["get", "online.bank.co.uk", "--field", "username"]).stdout == "carol\n",
                "an address whose base domain one of its URIs has")

        let two = try await device.run(["get", "githu"])
        #expect(two.status == 5, "\(two)")
        #expect(two.stderr.contains("\"githu\" matches 2 items"), "\(two)")
        for expected in ["alice", "bob", "https://github.com/login"] { #expect(two.stderr.contains(expected), "\(two)") }

        #expect(try await device.expect(["get", "GitHub", "alice", "--field", "username"]).stdout == "alice\n")
        #expect(try await device.expect(["get", "github.com", "bob", "--field", "username"]).stdout == "bob\n")
        #expect(try await device.expect(["get", "https://github.com/login", "al", "--field", "username"]).stdout == "alice\n",
                "a full URL, a username's beginning")
        let byURL = try await device.run(["get", "https://gist.github.com/x"])
        #expect(byURL.status == 5 && byURL.stderr.contains("matches 2 items"), "both GitHub logins match the base domain: \(byURL)")

        let noUser = try await device.run(["get", "GitHub", "dave"])
        #expect(noUser.status == 4 && noUser.stderr.contains("No item matches \"GitHub\" with the username \"dave\""), "\(noUser)")
        let nothing = try await device.run(["get", "gitlab.com"])
        #expect(nothing.status == 4 && nothing.stderr.contains("No item matches \"gitlab.com\""), "\(nothing)")
    }

    @Test("list --search puts the best matches first: names starting with the text before names holding it")
    func searchRanks() async throws {
        let (scenario, device) = try await Self.deviceWithItems()
        defer { Task { await scenario.finish([device]) } }
        let listed = try await device.expect(["list", "--search", "git"])
        let names = listed.stdout.split(separator: "\n").map { $0.split(separator: "\t").map(String.init)[1] }
        #expect(names == ["GitHub", "GitHub", "Old git notes"], "\(listed)")
    }

    @Test("list at a terminal: a header and aligned columns; piped: the tab-separated lines, without a header")
    func listAtTerminal() async throws {
        let (scenario, device) = try await Self.deviceWithItems()
        defer { Task { await scenario.finish([device]) } }
        try await device.expect(["favorite", "Bank"])

        let list = try TerminalSession(try vaultsyncExecutable(), ["list"], environment: device.environment)
        defer { list.end() }
        #expect(try await list.exit() == 0, "\(list.text)")
        let lines = list.text.replacingOccurrences(of: "\r", with: "").split(separator: "\n").map(String.init)
        let header = try #require(lines.first { $0.hasPrefix("ID") }, "\(list.text)")
        for title in ["NAME", "TYPE", "USERNAME", "FOLDER"] { #expect(header.contains(title), "\(header)") }
        let typeColumn = try #require(header.range(of: "TYPE")).lowerBound.utf16Offset(in: header)
        let rows = lines.filter { $0.contains("GitHub") || $0.contains("Bank") || $0.contains("Old git notes") }
        #expect(rows.count == 4, "\(list.text)")
        for row in rows {
            // The type's word after the name (the note's name holds "note" too).
            let afterName = try #require(row.range(of: row.contains("Old git") ? "Old git notes" : row.contains("Bank") ? "Bank" : "GitHub")).upperBound
            let word = row.contains("Old git") ? "note" : "login"
            let type = try #require(row.range(of: word, range: afterName..<row.endIndex)).lowerBound.utf16Offset(in: row)
            #expect(type == typeColumn, "every row's type under TYPE: \(row)")
        }
        #expect(rows.contains { $0.contains("Bank") && $0.hasSuffix("★") }, "\(rows)")

        let piped = try await device.expect(["list"])
        #expect(!piped.stdout.contains("USERNAME"), "no header in a pipe: \(piped)")
        #expect(piped.stdout.split(separator: "\n").allSatisfy { $0.split(separator: "\t", omittingEmptySubsequences: false).count == 6 }, "\(piped)")
    }
}
