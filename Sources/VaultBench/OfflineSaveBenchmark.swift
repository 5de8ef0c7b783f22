import AsyncHTTPClient
import Crypto
import Foundation
import GRDB
import Logging
import VaultAPI
import VaultClient
import VaultCrypto
import VaultModels
import VaultStore
import VaultTestSupport

/// P1: an offline save through the real engine (encrypt, store, queue in one transaction, with the
/// server unreachable) in a 10,000-item vault, next to the bare cost of the same work: raw
/// AES-256-CBC + HMAC of the same plaintexts and a bare GRDB insert of the same bytes (same pragmas).
enum OfflineSaveBenchmark {
    static func run(options: BenchOptions) async throws -> [BenchResult] {
        let vaultSize = 10_000
        let saves = options.quick ? 300 : 2_000
        let server = benchServer()
        try await server.start()
        let account = try await BenchAccount.register(url: await server.url)
        try await account.importItems(vaultSize)
        let profile = temporaryDirectory("vaultsync-bench-p1")
        defer { try? FileManager.default.removeItem(atPath: profile) }
        let path = profile + "/vault.sqlite"
        let online = try VaultEngine(databasePath: path, configuration: EngineConfiguration(serverURL: await server.url))
        try await online.login(email: account.email, password: account.password, acceptingKdf: BenchAccount.kdf)
        await online.shutdown()
        await server.destroy()

        // The real offline path: nothing listens at the server's address.
        var configuration = EngineConfiguration(serverURL: deadServerURL())
        configuration.api.requestTimeout = .seconds(2)
        let engine = try VaultEngine(databasePath: path, configuration: configuration, logger: quietLogger())
        try await engine.unlock(email: account.email, password: account.password)
        let views = try await engine.items().compactMap { try? $0.result.get() }.sorted { $0.name < $1.name }
        precondition(views.count == vaultSize, "expected \(vaultSize) items, found \(views.count)")
        let userID = await engine.currentUserID!

        let bare = try BareStore(path: profile + "/bare.sqlite")
        let rows = try await engine.localStore.readDatabase { db in try CipherRow.fetchAll(db) }
        try bare.fill(rows)
        let key = SymmetricCryptoKey.generate()
        let encKey = SymmetricKey(data: key.rawBytes.prefix(32))
        let macKey = SymmetricKey(data: key.rawBytes.suffix(32))

        var ours: [Double] = []
        var oursCPU = 0.0  // the process's CPU time during the saves (all threads: the background checkpoints too)
        var reference: [Double] = []
        var storedBytes = (item: 0, record: 0)
        let batch = 50
        // `VAULTSYNC_PERF_CTL` (see ``PerfControl``): the profile covers the save loop only.
        let perf = PerfControl.fromEnvironment()
        perf?.send("enable")
        for start in stride(from: 0, to: saves, by: batch) {
            let chunk = Array(views[start..<min(start + batch, saves)])
            var edited: [CipherView] = []
            for var view in chunk {
                let changed = (view.login?.password ?? "") + "-offline"
                view.login?.password = changed
                edited.append(view)
                let cpuBefore = processCPUSeconds()
                let seconds = try await measureAsync {
                    let result = try await engine.updateItem(view)
                    guard case .savedOffline = result.outcome else { fatalError("expected an offline save, got \(result.outcome)") }
                }
                oursCPU += processCPUSeconds() - cpuBefore
                ours.append(seconds)
            }
            // The bytes the engine stored for these items, for the bare reference.
            let ids = chunk.map { $0.id! }
            let stored = try await engine.localStore.readDatabase { db in
                try ids.map { id in
                    (try CipherRow.fetchOne(db, key: ["userID": userID, "id": id])!.json,
                     try String.fetchOne(db, sql: "SELECT sealed FROM pendingChange WHERE userID = ? AND itemID = ?", arguments: [userID, id])!)
                }
            }
            for (_, (json, sealed)) in zip(edited, stored) {
                storedBytes.item += json.utf8.count
                storedBytes.record += sealed.utf8.count
            }
            for (view, (json, sealed)) in zip(edited, stored) {
                let plaintexts = Self.plaintexts(of: view) + [Array(repeating: UInt8(ascii: "m"), count: sealed.utf8.count * 3 / 4)]
                reference.append(try measure {
                    for plaintext in plaintexts { _ = try RawCrypto.encrypt(plaintext, encKey: encKey, macKey: macKey) }
                    try bare.save(id: view.id!, json: json, sealed: sealed)
                })
            }
        }
        perf?.send("disable")
        // Where the time goes (the parts of a save that the bare reference does not have).
        let store = engine.localStore
        var emptyWrites: [Double] = []
        var deadCalls: [Double] = []
        // As the engine's client: a refused connection fails at once (no retries until the deadline).
        var clientConfiguration = HTTPClient.Configuration()
        clientConfiguration.connectionPool.retryConnectionEstablishment = false
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: clientConfiguration)
        let dead = BitwardenAPI(baseURL: deadServerURL(), httpClient: client)
        for _ in 0..<100 {
            emptyWrites.append(try await measureAsync { try await store.write { _ in } })
            deadCalls.append(await measureAsync { _ = try? await dead.revisionDate(token: "none") })
        }
        try await client.shutdown()
        print(String(format: "P1 parts: p50 %.3f ms per store write transaction (async), %.3f ms per refused server call; CPU %.3f ms per save (mean, every thread)",
                     percentile(emptyWrites, 0.5) * 1000, percentile(deadCalls, 0.5) * 1000, oursCPU / Double(ours.count) * 1000))
        // The slow tail, save by save (which saves, how slow), next to the reference's.
        func tail(_ times: [Double]) -> String {
            let slow = times.enumerated().filter { $0.element > 0.002 }
            return "\(slow.count) over 2 ms" + (slow.isEmpty ? "" : " (" + slow.prefix(8).map { String(format: "#%d %.1f ms", $0.offset, $0.element * 1000) }.joined(separator: ", ") + ")")
        }
        print("P1 tail: ours \(tail(ours)); bare \(tail(reference)); stored per save: item \(storedBytes.item / ours.count) bytes, queue record \(storedBytes.record / ours.count) bytes")
        await engine.shutdown()
        let p50 = percentile(ours, 0.5) * 1000, p99 = percentile(ours, 0.99) * 1000
        let r50 = percentile(reference, 0.5) * 1000, r99 = percentile(reference, 0.99) * 1000
        let what = "offline save, \(vaultSize / 1000)k vault, \(saves) saves"
        let referenceWhat = "raw AES-CBC+HMAC of the same fields + bare GRDB insert of the same bytes"
        return [
            BenchResult(id: "P1-p50", what: what + ", p50", value: p50, unit: "ms", reference: r50, referenceWhat: referenceWhat,
                        ratio: p50 / r50, goal: "≤ 3× bare", met: p50 / r50 <= 3),
            BenchResult(id: "P1-p99", what: what + ", p99", value: p99, unit: "ms", reference: r99, referenceWhat: referenceWhat,
                        ratio: p99 / r99, goal: "p99 ≤ 2 ms, ≤ 3× bare", met: p99 <= 2 && p99 / r99 <= 3),
        ]
    }

    /// Every plaintext the engine encrypts for this item (the name, login fields, URIs, notes, custom
    /// fields and password history).
    static func plaintexts(of view: CipherView) -> [[UInt8]] {
        var texts: [String?] = [view.name, view.notes, view.login?.username, view.login?.password]
        texts += view.login?.uris.map(\.uri) ?? []
        texts += view.fields.flatMap { [$0.name, $0.value] }
        texts += view.passwordHistory.map(\.password)
        return texts.compactMap { $0.map { Array($0.utf8) } }
    }
}

/// The floor for P1's storage: the engine's two rows (item and queue record) written in one GRDB
/// transaction to a WAL database with VaultStore's pragmas.
struct BareStore {
    let pool: DatabasePool

    init(path: String) throws {
        var configuration = Configuration()
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA foreign_keys = ON")
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        pool = try DatabasePool(path: path, configuration: configuration)
        try pool.write { db in
            try db.execute(sql: "CREATE TABLE item (id TEXT PRIMARY KEY, json TEXT NOT NULL)")
            try db.execute(sql: "CREATE TABLE queue (id TEXT PRIMARY KEY, sealed TEXT NOT NULL)")
        }
    }

    func fill(_ rows: [CipherRow]) throws {
        try pool.write { db in
            for row in rows { try db.execute(sql: "INSERT INTO item (id, json) VALUES (?, ?)", arguments: [row.id, row.json]) }
        }
    }

    func save(id: String, json: String, sealed: String) throws {
        try pool.write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO item (id, json) VALUES (?, ?)", arguments: [id, json])
            try db.execute(sql: "INSERT OR REPLACE INTO queue (id, sealed) VALUES (?, ?)", arguments: [id, sealed])
        }
    }
}

/// Raw BoringSSL AES-256-CBC + HMAC-SHA256 over bytes: the floor every EncString benchmark compares to.
enum RawCrypto {
    static func encrypt(_ plaintext: [UInt8], encKey: SymmetricKey, macKey: SymmetricKey,
                        random: any RandomSource = SystemRandomSource()) throws -> (iv: Data, ciphertext: Data, mac: Data) {
        let iv = random.bytes(count: 16)
        let ciphertext = try AES._CBC.encrypt(plaintext, using: encKey, iv: AES._CBC.IV(ivBytes: iv))
        var hmac = HMAC<SHA256>(key: macKey)
        hmac.update(data: iv)
        hmac.update(data: ciphertext)
        return (Data(iv), ciphertext, Data(hmac.finalize()))
    }

    static func decrypt(iv: Data, ciphertext: Data, mac: Data, encKey: SymmetricKey, macKey: SymmetricKey) throws -> Data {
        var hmac = HMAC<SHA256>(key: macKey)
        hmac.update(data: iv)
        hmac.update(data: ciphertext)
        guard hmac.finalize() == mac else { fatalError("MAC mismatch in reference") }
        return try AES._CBC.decrypt(ciphertext, using: encKey, iv: AES._CBC.IV(ivBytes: iv))
    }
}
