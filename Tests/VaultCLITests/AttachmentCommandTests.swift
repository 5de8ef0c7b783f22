import Foundation
import Testing
import VaultModels
import VaultTestSupport

/// `vaultsync attachment …` through the built executable, against a real server.
@Suite("CLI: attachments")
struct AttachmentCommandTests {
    @Test("add, list, get to a file and to standard output, delete; bad input gets a clear error and changes nothing")
    func lifecycle() async throws {
        let scenario = try await CLIScenario.start()
        let a = try await scenario.device(register: true)
        try await a.expect(["add", "note", "--name", "Recovery", "--notes", "see attachment"])
        let folder = temporaryDirectory("vaultsync-attach")
        let source = folder + "/codes.txt"
        try "recovery-code-1\nrecovery-code-2\n".write(toFile: source, atomically: true, encoding: .utf8)

        try await a.expect(["attachment", "add", "Recovery", source, "--name", "codes (2026).txt"])
        let listed = try await a.json(["attachment", "list", "Recovery"])
        #expect(listed.count == 1 && listed[0]?["fileName"]?.stringValue == "codes (2026).txt")
        // A name with a line end stays on its row in the text list (it broke the row: RELIABILITY bug 72).
        try await a.expect(["add", "note", "--name", "Lines", "--notes", "x"])
        try await a.expect(["attachment", "add", "Lines", source, "--name", "two\nlines.txt"])
        let rows = try await a.expect(["attachment", "list", "Lines"]).stdout.split(separator: "\n")
        #expect(rows.count == 1 && rows[0].hasSuffix("two⏎lines.txt"), "\(rows)")

        let b = try await scenario.device()
        try await b.expect(["sync"])
        let printed = try await b.expect(["attachment", "get", "Recovery", "codes (2026).txt", "--output", "-"])
        #expect(printed.stdout == "recovery-code-1\nrecovery-code-2\n")
        let target = folder + "/out.txt"
        try await b.expect(["attachment", "get", "Recovery", "codes (2026).txt", "--output", target])
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "recovery-code-1\nrecovery-code-2\n")
        let mode = try FileManager.default.attributesOfItem(atPath: target)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        // An existing file is never overwritten.
        let again = try await b.expect(["attachment", "get", "Recovery", "codes (2026).txt", "--output", target], status: 64)
        #expect(again.stderr.contains("exists already"))

        // Opened once, it reads offline (kept encrypted on the device).
        await scenario.server.stop()
        #expect(try await b.expect(["attachment", "get", "Recovery", "codes (2026).txt", "--output", "-"]).stdout
                == "recovery-code-1\nrecovery-code-2\n")
        try await scenario.server.start()
        // A lowered limit holds at once: at 0 nothing stays readable offline, and offline says why (RELIABILITY bug 72:
        // every file stayed, and a file too large to keep was said to be "never downloaded").
        try await b.expect(["config", "attachment-cache", "0"])
        await scenario.server.stop()
        let letGo = try await b.expect(["attachment", "get", "Recovery", "codes (2026).txt", "--output", "-"], status: 7)
        #expect(letGo.stderr.contains("is not on this device: downloaded attachments are not kept here"), "\(letGo)")
        try await scenario.server.start()
        try await b.expect(["config", "attachment-cache", "16"])
        try await b.expect(["attachment", "get", "Recovery", "codes (2026).txt", "--output", "-"])
        await scenario.server.stop()
        let tooLarge = try await b.expect(["attachment", "get", "Recovery", "codes (2026).txt", "--output", "-"], status: 7)
        #expect(tooLarge.stderr.contains("is not kept on this device: it is larger than the attachment cache"), "\(tooLarge)")
        try await scenario.server.start()
        try await b.expect(["config", "attachment-cache", "lots"], status: 64)
        try await b.expect(["config", "attachment-cache", "1GiB"])
        #expect(try await b.json(["config", "show"])["attachmentCache"]?.intValue == 1 << 30)
        // A size under a MiB is shown as it is, never as "0 MiB" (which reads as none kept; RELIABILITY bug 53).
        let small = try await b.expect(["config", "attachment-cache", "512KiB"])
        #expect(small.stdout.contains("Up to 512 KiB of downloaded attachments"), "\(small.stdout)")
        #expect(try await b.expect(["config", "show"]).stdout.contains("attachment cache 512 KiB"))
        try await b.expect(["config", "attachment-cache", "1GiB"])

        let missing = try await a.expect(["attachment", "add", "Recovery", folder + "/no-such-file"], status: 64)
        #expect(missing.stderr.contains("is not a file that can be read"))
        // A device (as a pipe) is the input's fault, exit 64, not the vault's.
        let device = try await a.expect(["attachment", "add", "Recovery", "/dev/null"], status: 64)
        #expect(device.stderr.contains("/dev/null is not a regular file") && !device.stderr.contains("local vault"), "\(device)")
        let unknown = try await a.expect(["attachment", "get", "Recovery", "other.txt", "--output", "-"], status: 4)
        #expect(unknown.stderr.contains("has no attachment \"other.txt\""))
        #expect(try await a.json(["attachment", "list", "Recovery"]).count == 1)
        // Two attachments of one name: ambiguous (exit 5, as two items of one name are), each named by its id.
        try await a.expect(["attachment", "add", "Recovery", source, "--name", "codes (2026).txt"])
        let twice = try await a.expect(["attachment", "get", "Recovery", "codes (2026).txt", "--output", "-"], status: 5)
        #expect(twice.stderr.contains("name one by its id"), "\(twice)")
        let second = try #require(try await a.json(["attachment", "list", "Recovery"]).arrayValue?.last?["id"]?.stringValue)
        try await a.expect(["attachment", "delete", "Recovery", second])
        #expect(try await a.json(["attachment", "list", "Recovery"]).count == 1)

        try await a.expect(["attachment", "delete", "Recovery", "codes (2026).txt"])
        #expect(try await a.json(["attachment", "list", "Recovery"]).count == 0)
        try await b.expect(["sync"])
        #expect(try await b.json(["attachment", "list", "Recovery"]).count == 0)
        try? FileManager.default.removeItem(atPath: folder)
        await scenario.finish([a, b])
    }

    @Test("attachments are listed with the file's own size, exact where its file is on this device; get lists them")
    func sizes() async throws {
        let scenario = try await CLIScenario.start()
        let a = try await scenario.device(register: true)
        let b = try await scenario.device()
        defer { Task { await scenario.finish([a, b]) } }
        try await a.expect(["add", "note", "--name", "Scans", "--notes", "x"])
        let folder = temporaryDirectory("vaultsync-attach-size")
        try Data(repeating: 0x41, count: 32).write(to: URL(fileURLWithPath: folder + "/codes.txt"))
        try Data(repeating: 0x42, count: 5000).write(to: URL(fileURLWithPath: folder + "/scan.pdf"))
        try await a.expect(["attachment", "add", "Scans", folder + "/codes.txt"])
        try await a.expect(["attachment", "add", "Scans", folder + "/scan.pdf"])

        // Added here: exact. 32 bytes encrypt to 97 (header 49, three blocks), which the server reports.
        let here = try await a.expect(["attachment", "list", "Scans"]).stdout
        #expect(here.contains("  32 bytes  codes.txt") && here.contains("  4.9 KiB  scan.pdf"), "\(here)")
        let json = try await a.json(["attachment", "list", "Scans"])
        let codes = try #require(json.arrayValue?.first { $0["fileName"]?.stringValue == "codes.txt" })
        #expect(codes["size"]?.intValue == 97 && codes["fileSize"]?.intValue == 32 && codes["fileSizeExact"]?.boolValue == true, "\(codes)")
        let shown = try await a.expect(["get", "Scans"]).stdout
        #expect(shown.contains("codes.txt (32 bytes)") && shown.contains("scan.pdf (4.9 KiB)") && shown.contains("attachment[2]"), "\(shown)")

        // Another device knows only the encrypted size until it has the file: the 16 sizes it allows, then exact.
        try await b.expect(["sync"])
        let there = try await b.expect(["attachment", "list", "Scans"]).stdout
        #expect(there.contains("  32–47 bytes  codes.txt") && there.contains("  about 4.9 KiB  scan.pdf"), "\(there)")
        let before = try #require(try await b.json(["attachment", "list", "Scans"]).arrayValue?.first { $0["fileName"]?.stringValue == "codes.txt" })
        #expect(before["fileSize"]?.intValue == 47 && before["fileSizeExact"]?.boolValue == false, "\(before)")
        try await b.expect(["attachment", "get", "Scans", "codes.txt", "--output", "-"])
        #expect(try await b.expect(["attachment", "list", "Scans"]).stdout.contains("  32 bytes  codes.txt"))
    }

    @Test("offline: attachment add keeps the file encrypted in the profile and says it waits; sync uploads it; delete offline reaches the server at the next sync")
    func offline() async throws {
        let scenario = try await CLIScenario.start()
        let a = try await scenario.device(register: true)
        try await a.expect(["add", "note", "--name", "Deed", "--notes", "see attachment"])
        let folder = temporaryDirectory("vaultsync-attach-offline")
        let source = folder + "/deed.txt"
        try "house deed\n".write(toFile: source, atomically: true, encoding: .utf8)

        await scenario.server.stop()
        let added = try await a.expect(["attachment", "add", "Deed", source])
        #expect(added.stderr.contains("waiting for the server"))
        let listed = try await a.json(["attachment", "list", "Deed"])
        #expect(listed.count == 1 && listed[0]?["pending"]?.boolValue == true)
        #expect(try await a.expect(["attachment", "get", "Deed", "deed.txt", "--output", "-"]).stdout == "house deed\n")
        try await scenario.server.start()
        try await a.expect(["sync"])
        #expect(try await a.json(["attachment", "list", "Deed"])[0]?["pending"]?.boolValue == false)

        let b = try await scenario.device()
        try await b.expect(["sync"])
        #expect(try await b.expect(["attachment", "get", "Deed", "deed.txt", "--output", "-"]).stdout == "house deed\n")
        // Renamed offline: the same file under the new name, on every device after the next syncs.
        await scenario.server.stop()
        let renamed = try await b.expect(["attachment", "rename", "Deed", "deed.txt", "deed-2026.txt"])
        #expect(renamed.stderr.contains("waiting for the server"))
        #expect(try await b.expect(["attachment", "get", "Deed", "deed-2026.txt", "--output", "-"]).stdout == "house deed\n")
        try await scenario.server.start()
        try await b.expect(["sync"])
        try await a.expect(["sync"])
        let names = try await a.json(["attachment", "list", "Deed"])
        #expect(names.count == 1 && names[0]?["fileName"]?.stringValue == "deed-2026.txt")
        #expect(try await a.expect(["attachment", "get", "Deed", "deed-2026.txt", "--output", "-"]).stdout == "house deed\n")
        try await b.expect(["attachment", "rename", "Deed", "deed-2026.txt", " "], status: 64)

        await scenario.server.stop()
        let deleted = try await b.expect(["attachment", "delete", "Deed", "deed-2026.txt"])
        #expect(deleted.stderr.contains("waiting on this device, 1 change pending"), "\(deleted.stderr)")
        #expect(try await b.json(["attachment", "list", "Deed"]).count == 0)
        try await scenario.server.start()
        try await b.expect(["sync"])
        try await a.expect(["sync"])
        #expect(try await a.json(["attachment", "list", "Deed"]).count == 0)
        try? FileManager.default.removeItem(atPath: folder)
        await scenario.finish([a, b])
    }
}
