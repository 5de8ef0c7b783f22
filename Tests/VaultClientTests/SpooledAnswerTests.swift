import Foundation
import Testing
import VaultAPI
import VaultClient
import VaultModels
import VaultTestSupport

/// `/api/sync` written to a file with no name as it arrives and parsed from its mapping
/// (docs/ARCHITECTURE.md, "Large vaults"). A served answer of known bytes: what is tested is the
/// transport and the parse, so the server only has to send them.
@Suite("Spooled sync answers")
struct SpooledAnswerTests {
    /// A sync answer of `count` items, each with a long field: about 700 bytes an item.
    static func answer(items count: Int) -> [UInt8] {
        let filler = String(repeating: "x", count: 600)
        let items = (0..<count).map { #"{"id":"item-\#($0)","type":1,"name":"2.\#(filler)","revisionDate":"2026-11-26T10:00:00Z"}"# }
        let text = #"{"object":"sync","profile":{"id":"u","email":"a@example.com"},"folders":[{"id":"f","name":"n"}],"ciphers":["#
            + items.joined(separator: ",") + #"],"collections":[]}"#
        return Array(text.utf8)
    }

    static func folderContents(_ path: String) -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
    }

    @Test("an answer of many MiB spooled and parsed from the file matches the same answer held in memory, and leaves no file")
    func spooledMatchesMemory() async throws {
        let body = Self.answer(items: 20_000)
        #expect(body.count > 12 * 1024 * 1024, "larger than a few release steps")
        let server = HostileServer { _, path in
            path.hasPrefix("/api/sync") ? .init(body: body) : .init(status: 404, body: [])
        }
        try await server.start()
        let api = BitwardenAPI(baseURL: await server.url, httpClient: HTTPClientHolder.shared)
        let folder = temporaryDirectory("vaultsync-spool")
        defer { try? FileManager.default.removeItem(atPath: folder) }

        let spooled = try await api.syncText(token: "t", spoolDirectory: folder)
        #expect(spooled.isSpooled)
        #expect(Self.folderContents(folder).isEmpty, "the spooled file has no name from the start")
        var fromFile: [JSONObject] = []
        let snapshot = try spooled.parse { index, item in
            #expect(index == fromFile.count)
            fromFile.append(item)
        }
        let held = try await api.syncText(token: "t")
        #expect(!held.isSpooled)
        var inMemory: [JSONObject] = []
        let heldSnapshot = try held.parse { _, item in inMemory.append(item) }
        #expect(fromFile.count == 20_000)
        #expect(fromFile == inMemory)
        #expect(snapshot.profile == heldSnapshot.profile && snapshot.folders == heldSnapshot.folders)
        #expect(fromFile.last?["id"]?.stringValue == "item-19999")
        #expect(Self.folderContents(folder).isEmpty)
        await server.stop()
    }

    @Test("the engine's full sync takes the spooled path (the spool's limit applies to it) and leaves the profile folder as it was")
    func engineSpools() async throws {
        let scenario = try await Scenario.start()
        let device = try await scenario.device(register: true)
        _ = try await device.engine.addItem(loginItem("Spooled"))
        await device.engine.shutdown()
        let before = Set(Self.folderContents(device.profile))
        let limited = try device.reopen(url: await scenario.server.url) { $0.api.maximumSpooledAnswerSize = 64 }
        try await limited.engine.unlock(email: scenario.email, password: scenario.password)
        let refused = await #expect(throws: VaultError.self) { try await limited.engine.pull() }
        #expect(refused.map { "\($0)" }?.contains("larger than 64 bytes") == true, "\(String(describing: refused))")
        #expect(try await limited.engine.view(named: "Spooled") != nil, "a refused answer costs nothing stored")
        await limited.engine.shutdown()
        let reopened = try device.reopen(url: await scenario.server.url)
        try await reopened.engine.unlock(email: scenario.email, password: scenario.password)
        try await reopened.engine.pull()
        #expect(try await reopened.engine.view(named: "Spooled") != nil)
        #expect(!Self.folderContents(device.profile).contains { $0.hasPrefix(".vaultsync-answer") })
        #expect(Set(Self.folderContents(device.profile)).isSubset(of: before.union(["vault.sqlite-wal", "vault.sqlite-shm"])))
        await scenario.finish([reopened])
    }

    @Test("an answer over the spool's limit, a refusal, a damaged text and a full disk each throw and leave no file; no usable folder falls back to memory")
    func limitsAndFailures() async throws {
        let body = Self.answer(items: 10)
        let server = HostileServer { _, _ in .init(body: body) }
        try await server.start()
        var configuration = APIConfiguration()
        configuration.maximumSpooledAnswerSize = body.count - 1
        let api = BitwardenAPI(baseURL: await server.url, httpClient: HTTPClientHolder.shared, configuration: configuration)
        let folder = temporaryDirectory("vaultsync-spool")
        defer { try? FileManager.default.removeItem(atPath: folder) }

        let tooLarge = await #expect(throws: ServerCallError.self) { try await api.syncText(token: "t", spoolDirectory: folder) }
        #expect(tooLarge?.description.contains("larger than \(body.count - 1) bytes") == true)
        #expect(Self.folderContents(folder).isEmpty)

        server.respond { _, _ in .json(#"{"message":"Invalid token"}"#, status: 401) }
        let refused = await #expect(throws: ServerCallError.self) { try await api.syncText(token: "t", spoolDirectory: folder) }
        #expect(refused?.failure == .status(401))

        server.respond { _, _ in .init(body: Array(body.dropLast())) }
        let damaged = try await api.syncText(token: "t", spoolDirectory: folder)
        var seen = 0
        #expect(throws: ServerCallError.self) { try damaged.parse { _, _ in seen += 1 } }
        #expect(seen == 10, "the items before the damage were handed over; the caller's transaction drops them")
        server.respond { _, _ in .init(body: []) }
        await #expect(throws: ServerCallError.self) { try await api.syncText(token: "t", spoolDirectory: folder).parse { _, _ in } }
        #expect(Self.folderContents(folder).isEmpty)

        #if os(Linux)
        // A full disk is this device's failure, never taken for the server being unreachable.
        server.respond { _, _ in .init(body: body) }
        let full = await #expect(throws: FileBodyError.self) { try await api.downloadAttachment(url: "/file", to: "/dev/full", expectedSize: body.count) }
        #expect(full?.description.contains("No space left on device") == true)
        #endif

        server.respond { _, _ in .init(body: body) }
        let fallback = try await api.syncText(token: "t", spoolDirectory: folder + "/missing")
        #expect(!fallback.isSpooled)
        var items = 0
        _ = try fallback.parse { _, _ in items += 1 }
        #expect(items == 10)
        await server.stop()
    }

    @Test("an answer that announces more than the limit is refused from its headers, before its body is read, spooled or in memory")
    func announcedLengthRefused() async throws {
        // The answer announces 2 GiB, sends a few bytes and then nothing: only a check of the header can
        // refuse it; reading on would wait for bytes that never come.
        let server = HostileServer { _, _ in .init(body: Array(#"{"object":"sync","#.utf8), announcedLength: 2 * 1024 * 1024 * 1024) }
        try await server.start()
        let api = BitwardenAPI(baseURL: await server.url, httpClient: HTTPClientHolder.shared)
        let folder = temporaryDirectory("vaultsync-spool")
        defer { try? FileManager.default.removeItem(atPath: folder) }

        let spooled = await #expect(throws: ServerCallError.self) { try await api.syncText(token: "t", spoolDirectory: folder) }
        #expect(spooled?.description.contains("larger than \(APIConfiguration().maximumSpooledAnswerSize) bytes") == true,
                "\(String(describing: spooled))")
        #expect(Self.folderContents(folder).isEmpty)
        let held = await #expect(throws: ServerCallError.self) { try await api.syncText(token: "t") }
        #expect(held?.description.contains("announces 2147483648 bytes") == true, "\(String(describing: held))")
        await server.stop()
    }
}
