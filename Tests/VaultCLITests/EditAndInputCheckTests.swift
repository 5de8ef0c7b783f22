import Foundation
import Testing
import VaultModels
import VaultTestSupport

/// Left open at the end of RELIABILITY bug 92, fixed as bugs 94–97 and 99: an edit that changes nothing saved a new
/// revision; `list --search ""` listed nothing; a TYPE in capitals was refused; `--uri ""` added an empty URI; a
/// folder's item count took in archived items.
@Suite("CLI: edits that change nothing, and what TYPE, --search and --uri take")
struct EditAndInputCheckTests {
    @Test("edit with the values the item has (flags, --json, the editor): nothing saved or queued, exit 0, said on standard error; another device's change meets no conflict")
    func unchangedEdit() async throws {
        let scenario = try await CLIScenario.start()
        let a = try await scenario.device(register: true)
        let folder = (a.home as NSString).deletingLastPathComponent
        let passwordFile = folder + "/password"
        try Data("same-Pa55\n".utf8).write(to: URL(fileURLWithPath: passwordFile))
        try await a.expect(["folder", "add", "Work"])
        try await a.expect(["add", "login", "--name", "Bank", "--username", "alice", "--password", "@" + passwordFile, "--uri", "https://bank.example",
                            "--folder", "Work", "--notes", "branch north", "--field", "branch=north", "--favorite"])
        // The URI's match setting, which --uri does not show.
        try await a.expect(["edit", "Bank", "--json", "-"], stdin: #"{"login":{"uris":[{"uri":"https://bank.example","match":1}]}}"#)
        try await a.expect(["add", "card", "--name", "Visa", "--cardholder", "Alice A", "--exp-month", "07"])
        let bank = try await a.json(["get", "Bank"]), visa = try await a.json(["get", "Visa"])

        for arguments in [["--username", "alice"], ["--password", "@" + passwordFile], ["--uri", "https://bank.example"], ["--folder", "Work"],
                          ["--name", "Bank"], ["--notes", "branch north"], ["--field", "branch=north"], ["--favorite"],
                          ["--username", "alice", "--password", "@" + passwordFile, "--uri", "https://bank.example", "--folder", "work"]] {
            let result = try await a.expect(["edit", "Bank"] + arguments)
            #expect(result.stderr.contains(#"no changes: "Bank" already has these values"#) && result.stdout.isEmpty, "\(arguments): \(result)")
        }
        for arguments in [["--cardholder", "Alice A"], ["--exp-month", "07"], ["--name", "Visa"]] {
            let result = try await a.expect(["edit", "Visa"] + arguments)
            #expect(result.stderr.contains(#"no changes: "Visa" already has these values"#), "\(arguments): \(result)")
        }
        // `get --json` fed back, by --json and in the editor (saved as shown, or only laid out again).
        let fedBack = try await a.expect(["edit", "Bank", "--json", "-"], stdin: bank.jsonText)
        #expect(fedBack.stderr.contains("no changes") && fedBack.stdout.isEmpty, "\(fedBack)")
        for editor in ["true", #"edit() { sed -i 's/": /":    /' "$1"; }; edit"#] {
            let edited = try await a.expect(["edit", "Bank"], environment: ["EDITOR": editor], removing: ["VISUAL"])
            #expect(edited.stderr.contains(#"no changes: "Bank" already has these values"#) && edited.stdout.isEmpty, "\(editor): \(edited)")
        }
        #expect(try await a.json(["drafts"]).count == 0)
        // Nothing was saved: the same revision, password history and password date, the URI's match kept.
        let after = try await a.json(["get", "Bank"])
        #expect(after == bank, "\(after)")
        #expect(try await a.json(["get", "Visa"]) == visa)
        #expect(bank["login"]?["uris"]?[0]?["match"]?.intValue == 1 && bank["passwordHistory"]?.count == 0)

        // Another device changes the item; this one, not synced since, "edits" it to what it has: no conflict, nothing queued.
        let b = try await scenario.device()
        try await b.expect(["edit", "Bank", "--notes", "from B"])
        let stale = try await a.expect(["edit", "Bank", "--username", "alice"])
        #expect(stale.stderr.contains("no changes") && !stale.stderr.contains("saved on this device"), "\(stale)")
        #expect(try await a.json(["pending"]).count == 0)
        let report = try await a.json(["sync"])
        #expect(report["backups"]?.count == 0 && report["stillPending"]?.intValue == 0, "\(report)")
        #expect(try await a.json(["get", "Bank"])["notes"]?.stringValue == "from B")
        #expect(try await a.json(["conflicts"]).count == 0)

        // Offline: nothing is queued either; a real change still is.
        await scenario.server.stop()
        let offline = try await a.expect(["edit", "Bank", "--username", "alice", "--notes", "from B"])
        #expect(offline.stderr.contains("no changes") && !offline.stderr.contains("saved offline"), "\(offline)")
        #expect(try await a.json(["pending"]).count == 0)
        let changed = try await a.expect(["edit", "Bank", "--username", "alice2"])
        #expect(changed.stdout.contains(#"Saved "Bank""#) && changed.stderr.contains("saved offline — 1 change pending"), "\(changed)")
        await scenario.finish([a, b])
    }

    @Test("list --search with an empty text is a usage error that says to leave out --search")
    func emptySearch() async throws {
        let scenario = try await CLIScenario.start()
        let device = try await scenario.device(register: true)
        try await device.expect(["add", "note", "--name", "Wi-Fi", "--notes", "guest"])
        for arguments in [["list", "--search", ""], ["list", "--search", "", "--json", "--type", "note"]] {
            let refused = try await device.expect(arguments, status: 64)
            #expect(refused.stderr.contains("leave out --search to list every item") && refused.stdout.isEmpty, "\(arguments): \(refused)")
        }
        #expect(try await device.json(["list", "--search", "wi-"]).count == 1)
        #expect(try await device.json(["list", "--search", " "]).count == 0, "a space is a text to look for")
        await scenario.finish([device])
    }

    @Test("a TYPE is taken in any case: list --type, add TYPE, the item JSON's type; an unknown one names the types")
    func typeInAnyCase() async throws {
        let scenario = try await CLIScenario.start()
        let device = try await scenario.device(register: true)
        try await device.expect(["add", "LOGIN", "--name", "GitHub", "--username", "alice"])
        try await device.expect(["add", "Note", "--name", "Wi-Fi", "--notes", "guest"])
        try await device.expect(["add", "--json", "-"], stdin: #"{"type":"SSH-Key","name":"Server key","sshKey":{"publicKey":"ssh-ed25519 AAAA"}}"#)
        try await device.expect(["add", "card", "--json", "-"], stdin: #"{"type":"CARD","name":"Visa"}"#)
        for (type, names) in [("LOGIN", ["GitHub"]), ("Login", ["GitHub"]), ("login", ["GitHub"]), ("NOTE", ["Wi-Fi"]), ("ssh-KEY", ["Server key"]),
                              ("Card", ["Visa"])] {
            let listed = try await device.json(["list", "--type", type])
            #expect(listed.arrayValue?.compactMap { $0["name"]?.stringValue } == names, "--type \(type): \(listed)")
            let text = try await device.expect(["list", "--type", type])
            #expect(text.stdout.split(separator: "\n").count == names.count, "--type \(type): \(text)")
        }
        #expect(try await device.json(["get", "GitHub"])["type"]?.stringValue == "login")
        for arguments in [["list", "--type", "logins"], ["add", "password", "--name", "X"]] {
            let refused = try await device.expect(arguments, status: 64)
            #expect(refused.stderr.contains("(login, note, card, identity, ssh-key)"), "\(arguments): \(refused)")
        }
        try await device.expect(["add", "note", "--json", "-"], status: 64, stdin: #"{"type":"LOGIN","name":"Mixed"}"#)
        await scenario.finish([device])
    }

    @Test("an empty or blank URI is refused on add and edit (flags and JSON), exit 64, nothing saved")
    func emptyURI() async throws {
        let scenario = try await CLIScenario.start()
        let device = try await scenario.device(register: true)
        try await device.expect(["add", "login", "--name", "Bank", "--uri", "https://bank.example"])
        let before = try await device.json(["get", "Bank"])
        for arguments in [["add", "login", "--name", "Empty", "--uri", ""], ["add", "login", "--name", "Empty", "--uri", "  "],
                          ["add", "login", "--name", "Empty", "--uri", "https://a.example", "--uri", ""],
                          ["edit", "Bank", "--uri", ""], ["edit", "Bank", "--uri", "\t"], ["edit", "Bank", "--uri", "https://a.example", "--uri", " "]] {
            let refused = try await device.expect(arguments, status: 64)
            #expect(refused.stderr.contains("--uri needs a URI"), "\(arguments): \(refused)")
        }
        for json in [#"{"type":"login","name":"Empty","login":{"uris":[""]}}"#, #"{"type":"login","name":"Empty","login":{"uris":[{"uri":" ","match":null}]}}"#] {
            let refused = try await device.expect(["add", "--json", "-"], status: 64, stdin: json)
            #expect(refused.stderr.contains("login.uris[0] is empty"), "\(refused)")
        }
        try await device.expect(["edit", "Bank", "--json", "-"], status: 64, stdin: #"{"login":{"uris":["https://bank.example",""]}}"#)
        try await device.expect(["get", "Empty"], status: 4)
        #expect(try await device.json(["get", "Bank"]) == before)
        // The URIs are still replaced by those given.
        try await device.expect(["edit", "Bank", "--uri", "https://new.example"])
        #expect(try await device.json(["get", "Bank"])["login"]?["uris"] == .array([.object(["uri": .string("https://new.example"), "match": .null])]))
        // A URI given as a plain string in --json keeps the match setting the item has for it, as --uri does (it was dropped).
        try await device.expect(["edit", "Bank", "--json", "-"], stdin: #"{"login":{"uris":[{"uri":"https://new.example","match":3}]}}"#)
        try await device.expect(["edit", "Bank", "--json", "-"], stdin: #"{"login":{"uris":["https://new.example","https://other.example"]}}"#)
        #expect(try await device.json(["get", "Bank"])["login"]?["uris"] == .array([.object(["uri": .string("https://new.example"), "match": .int(3)]),
                                                                                   .object(["uri": .string("https://other.example"), "match": .null])]))
        await scenario.finish([device])
    }

    @Test("a folder's item count is what list --folder shows: archived and trashed items are left out")
    func folderCountLikeList() async throws {
        let scenario = try await CLIScenario.start()
        let device = try await scenario.device(register: true)
        try await device.expect(["folder", "add", "Work"])
        for name in ["Shown", "Also shown", "Archived", "Trashed"] {
            try await device.expect(["add", "note", "--name", name, "--notes", "n", "--folder", "Work"])
        }
        try await device.expect(["archive", "Archived"])
        try await device.expect(["delete", "Trashed"])
        let listed = try await device.json(["list", "--folder", "Work"])
        #expect(listed.count == 2)
        let folders = try await device.json(["folder", "list"])
        #expect(folders[0]?["name"]?.stringValue == "Work" && folders[0]?["items"]?.intValue == listed.count, "\(folders)")
        let text = try await device.expect(["folder", "list"])
        #expect(text.stdout.hasSuffix("\tWork\t2 items\n"), "\(text)")
        await scenario.finish([device])
    }
}
