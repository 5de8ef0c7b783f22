import AsyncHTTPClient
import Crypto
import Foundation
import Logging
import NIOCore
import VaultAPI
import VaultCrypto
import VaultModels
import VaultSyncCore
import VaultTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// L2 (docs/BENCHMARKS.md, "L: live sync"): one server node with 5,000 devices connected to its
/// notifications hub, the devices of an organization's 1,000 members (five each). Two figures:
/// - L2-rss: the server's resident memory growth per open connection. The server is the release
///   `vaultsync-server` executable in a process of its own (VmRSS of /proc/PID/status before and after
///   the connections open), so the clients' memory does not count. Reference: its RSS with none open.
/// - L2-fanout: a change to an organization item (a create by the owner's sixth, unconnected device)
///   until the last of the 5,000 connections has received its `ReceiveMessage`. Reference: the same
///   change with one member's device connected.
///
/// The organization is made through the API (register, create, invite, accept, confirm) by an
/// in-process server on the same data directory, with the tests' low server-side hash cost, before the
/// executable starts on it: the executable always hashes at full cost (600,000 iterations), which for
/// 6,000 logins is minutes of setup. Its access tokens are signed with the data directory's key, which
/// the executable reads. Members never decrypt anything here, so they share one key pair and their
/// master-password hashes are not derived (the server stores whatever hash a client sends).
enum HubScaleBenchmark {
    /// Devices (hub connections) per member.
    static let devicesPerMember = 5
    /// Emails per invite request (the server's limit, `RequestLimits.inviteEmails`).
    static let invitesPerRequest = 20
    /// Requests in flight while the organization is set up.
    static let setupWidth = 8
    /// Handshakes in flight while the connections open (the listen backlog drops a larger burst).
    static let openingWidth = 64

    static func run(options: BenchOptions) async throws -> [BenchResult] {
        let members = options.quick ? 100 : 1_000
        let connections = members * devicesPerMember
        let rounds = options.quick ? 3 : 10
        let serverExecutable: String
        do {
            serverExecutable = try CommandLineBenchmark.executable("vaultsync-server")
        } catch {
            print("L2 skipped: \(error)")
            return ["L2-rss", "L2-fanout"].map { BenchResult(id: $0, what: "skipped: \(error)", value: 0, unit: "-", goal: "-", met: nil) }
        }
        try raiseOpenFileLimit(toAtLeast: connections + 4_096)

        let data = temporaryDirectory("vaultsync-bench-l2")
        // VAULTSYNC_L2_KEEP=1 keeps the data directory (the organization, its tokens' key) for profiling.
        let keep = ProcessInfo.processInfo.environment["VAULTSYNC_L2_KEEP"] != nil
        defer { if keep { print("L2: data kept in \(data)") } else { try? FileManager.default.removeItem(atPath: data) } }
        let setupStart = ContinuousClock.now
        let organization = try await OrganizationSetup.make(dataDirectory: data, members: members, devicesPerMember: devicesPerMember)
        print(String(format: "L2: organization of %ld members, %ld device logins, made in %.1f s", members,
                     members * devicesPerMember + 1, (ContinuousClock.now - setupStart).seconds))

        let server = try await ServerChild.start(executable: serverExecutable, dataDirectory: data, arguments: [
            // Raised for this benchmark: 5 devices of each member plus the reference's, and every
            // connection comes from 127.0.0.1 (the defaults are 20 per account and 100 per address).
            "--hub-connections-per-user", String(devicesPerMember + 1),
            "--hub-connections-per-address", String(connections + 10),
        ])
        do {
            let results = try await measure(server: server, organization: organization, members: members, connections: connections, rounds: rounds)
            await offPool { server.stop() }
            return results
        } catch {
            await offPool { server.stop() }
            throw error
        }
    }

    static func measure(server: ServerChild, organization: OrganizationSetup, members: Int, connections: Int,
                        rounds: Int) async throws -> [BenchResult] {
        let hubURL = NotificationsConnection.hubURL(baseURL: server.url, configuredNotifications: nil)
        let api = BitwardenAPI(baseURL: server.url, httpClient: HTTPClient.shared, logger: quietLogger())
        let log = HubLog()

        // Reference: one member's device connected, the same change.
        let single = HubLog()
        let one = connect(hubURL, token: organization.members[1].tokens[0], log: single)
        try await waitFor("the reference connection to open", within: .seconds(30)) { single.opened == 1 }
        var referenceTimes: [Double] = []
        var referenceRequests: [Double] = []
        for round in 0..<rounds {
            let measured = try await change(api, organization, name: "L2 reference \(round)", reaching: 1, log: single)
            referenceTimes.append(measured.delivery)
            referenceRequests.append(measured.request)
        }
        one.cancel()
        await one.value

        let rssBefore = try server.residentKiB()
        let openStart = ContinuousClock.now
        var tasks: [Task<Void, Never>] = []
        tasks.reserveCapacity(connections)
        for member in organization.members {
            for token in member.tokens {
                while tasks.count - log.settled >= openingWidth { try await Task.sleep(for: .milliseconds(1)) }
                tasks.append(connect(hubURL, token: token, log: log))
            }
        }
        try await waitFor("\(connections) hub connections to open", within: .seconds(600)) { log.settled == connections }
        let openTime = (ContinuousClock.now - openStart).seconds
        if let failure = log.failures.first {
            throw LiveBenchError.setup("L2: \(log.failures.count) of \(connections) hub connections failed, the first: \(failure)")
        }
        let rssOpen = try server.residentKiB()
        var fanout: [Double] = []
        var requests: [Double] = []
        for round in 0..<rounds {
            let measured = try await change(api, organization, name: "L2 change \(round)", reaching: connections, log: log)
            fanout.append(measured.delivery)
            requests.append(measured.request)
        }
        let rssAfter = try server.residentKiB()
        guard log.ended.isEmpty else {
            throw LiveBenchError.setup("L2: \(log.ended.count) hub connections ended during the rounds, the first: \(log.ended[0])")
        }
        // Closed by the clients before the server stops (its graceful shutdown would close them all).
        for task in tasks { task.cancel() }
        for task in tasks { await task.value }

        let perConnection = Double(rssOpen - rssBefore) / Double(connections)
        print(String(format: "L2: %ld connections open in %.1f s; server VmRSS %.1f MiB with none, %.1f MiB with all, %.1f MiB after %ld changes",
                     connections, openTime, Double(rssBefore) / 1024, Double(rssOpen) / 1024, Double(rssAfter) / 1024, rounds))
        print("L2: one device connected: delivered in (ms) \(milliseconds(referenceTimes)); the create answered in \(milliseconds(referenceRequests))")
        print("L2: all \(connections) connected: the last received it after (ms) \(milliseconds(fanout)); the create answered in \(milliseconds(requests))")
        let worst = fanout.max() ?? .nan
        return [
            BenchResult(id: "L2-rss", what: "server RSS per hub connection, \(connections) open", value: perConnection, unit: "KiB",
                        reference: Double(rssBefore), referenceWhat: "the server's VmRSS with none open",
                        ratio: nil, goal: "≤ 64 KiB", met: perConnection <= 64),
            BenchResult(id: "L2-fanout", what: "\(members)-member org change → \(connections) conns, max",
                        value: worst * 1000, unit: "ms", reference: (referenceTimes.max() ?? .nan) * 1000,
                        referenceWhat: "the same change, one device connected, worst", ratio: nil, goal: "≤ 1000 ms", met: worst <= 1),
        ]
    }

    /// Creates an organization item through the owner's unconnected device; seconds from the request
    /// until `count` connections have received its `SyncCipherCreate`.
    /// Also the create's own round trip (the answer comes once the notification is published).
    static func change(_ api: BitwardenAPI, _ organization: OrganizationSetup, name: String, reaching count: Int,
                       log: HubLog) async throws -> (delivery: Double, request: Double) {
        var view = try organization.keys.newItem(type: .login, name: name, organizationId: organization.id)
        view.login = LoginView(username: "bench", password: "pw")
        let wire = try view.encrypted(with: organization.keys)
        let start = ContinuousClock.now
        let created = try await api.createCipher(wire, collectionIDs: [organization.collectionID], token: organization.actingToken)
        let request = (ContinuousClock.now - start).seconds
        guard let id = created.id?.lowercased() else { throw LiveBenchError.notSynced("\(name): the create answered no id") }
        try await waitFor("\(name) to reach \(count) connections", within: .seconds(60), poll: .milliseconds(1)) { log.arrivals(id).count >= count }
        guard let last = log.arrivals(id).last else { return (.nan, request) }
        return ((last - start).seconds, request)
    }

    static func milliseconds(_ values: [Double]) -> String {
        values.map { String(format: "%.0f", $0 * 1000) }.joined(separator: " ")
    }

    /// One hub connection (the client library's, JSON protocol, pinging every 15 s) reporting to `log`.
    static func connect(_ hubURL: String, token: String, log: HubLog) -> Task<Void, Never> {
        Task {
            let connection = NotificationsConnection(url: hubURL, logger: quietLogger())
            do {
                let end = try await connection.run(accessToken: token, onOpen: { log.noteOpened() }, onMessage: { message in
                    if message.type == PushType.syncCipherCreate.rawValue, let id = message.id { log.noteArrival(id) }
                })
                if end != .cancelled { log.noteEnded("\(end)") }
            } catch {
                log.noteFailed("\(error)")
            }
        }
    }

    /// Raises this process's soft limit of open files (the server child inherits it): each connection
    /// is a descriptor on both sides.
    static func raiseOpenFileLimit(toAtLeast wanted: Int) throws {
        var limit = rlimit()
        #if canImport(Glibc)
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        #else
        let resource = RLIMIT_NOFILE
        #endif
        guard getrlimit(resource, &limit) == 0 else { throw LiveBenchError.setup("getrlimit(RLIMIT_NOFILE) failed: errno \(errno)") }
        let before = limit.rlim_cur
        guard before < rlim_t(wanted) else {
            print("L2: RLIMIT_NOFILE is \(before) (hard \(limit.rlim_max)), enough for \(wanted) descriptors")
            return
        }
        guard limit.rlim_max >= rlim_t(wanted) else {
            throw LiveBenchError.setup("L2 needs \(wanted) open files per process; the hard limit is \(limit.rlim_max) (raise it: ulimit -Hn)")
        }
        limit.rlim_cur = rlim_t(wanted)
        guard setrlimit(resource, &limit) == 0 else { throw LiveBenchError.setup("setrlimit(RLIMIT_NOFILE, \(wanted)) failed: errno \(errno)") }
        print("L2: RLIMIT_NOFILE raised from \(before) to \(wanted) (hard \(limit.rlim_max)); the server child inherits it")
    }
}

/// What L2's connections saw: handshakes answered, failures, and each item's arrivals.
final class HubLog: @unchecked Sendable {
    private let lock = NSLock()
    private var openedCount = 0
    private var failed: [String] = []
    private var endings: [String] = []
    private var byItem: [String: (count: Int, last: ContinuousClock.Instant)] = [:]

    func noteOpened() { lock.withLock { openedCount += 1 } }
    func noteFailed(_ reason: String) { lock.withLock { failed.append(reason) } }
    func noteEnded(_ reason: String) { lock.withLock { endings.append(reason) } }

    func noteArrival(_ id: String) {
        let now = ContinuousClock.now
        lock.withLock {
            let count = (byItem[id]?.count ?? 0) + 1
            byItem[id] = (count, now)
        }
    }

    var opened: Int { lock.withLock { openedCount } }
    /// Connections that opened or failed to.
    var settled: Int { lock.withLock { openedCount + failed.count } }
    var failures: [String] { lock.withLock { failed } }
    var ended: [String] { lock.withLock { endings } }

    /// How many connections received the item's message, and when the last one did.
    func arrivals(_ id: String) -> (count: Int, last: ContinuousClock.Instant?) {
        lock.withLock { byItem[id].map { ($0.count, $0.last) } ?? (0, nil) }
    }
}

/// L2's organization: an owner and `members - 1` more, all confirmed with access to the default
/// collection, each with `devicesPerMember` signed-in devices; made through the API.
struct OrganizationSetup: Sendable {
    struct Member: Sendable {
        var email: String
        /// One access token per signed-in device.
        var tokens: [String]
    }

    var id: String
    var collectionID: String
    /// The owner's keys with the organization's key.
    var keys: VaultKeys
    /// The owner's sixth device, never connected: the one that makes the changes.
    var actingToken: String
    /// The owner first.
    var members: [Member]

    static func make(dataDirectory: String, members count: Int, devicesPerMember: Int) async throws -> OrganizationSetup {
        let setup = LiveServer(dataDirectory: dataDirectory, configure: { configuration in
            // One address registers and signs in every member and device.
            configuration.registrationBurst = Double(count * 2)
            configuration.addressLoginBurst = Double(count * (devicesPerMember + 2) * 2)
            configuration.accountLoginBurst = Double(devicesPerMember * 4)
        })
        try await setup.start()
        let api = BitwardenAPI(baseURL: await setup.url, httpClient: HTTPClient.shared, logger: quietLogger())
        let run = UUID().uuidString.lowercased().prefix(8)
        // Shared by every member: generating 1,000 RSA keys would be most of the setup.
        let userKey = SymmetricCryptoKey.generate()
        let privateKey = try RSAPrivateKey.generate()
        let protectedKey = try EncString.wrap(userKey, with: SymmetricCryptoKey.generate()).serialized
        let publicKey = privateKey.publicKey.spkiBase64
        let encryptedPrivateKey = try privateKey.encrypted(with: userKey).serialized
        let login: @Sendable (String) async throws -> String = { email in
            try await api.login(email: email, passwordHash: passwordHash(email), deviceIdentifier: UUID().uuidString,
                                deviceName: "bench").tokens().accessToken
        }

        let emails = (0..<count).map { "l2-\(run)-\($0)@example.com" }
        _ = try await concurrently(emails, width: HubScaleBenchmark.setupWidth) { email in
            try await api.register(email: email, name: nil, passwordHash: passwordHash(email), protectedKey: protectedKey, kdf: BenchAccount.kdf,
                                   publicKey: publicKey, encryptedPrivateKey: encryptedPrivateKey)
        }
        let ownerToken = try await login(emails[0])
        let orgKey = SymmetricCryptoKey.generate()
        let wrappedOrgKey = try privateKey.publicKey.wrap(orgKey).serialized
        let created = try await api.rawJSON(.POST, "/api/organizations", token: ownerToken, body: .object([
            "name": .string("L2 organization"), "billingEmail": .string(emails[0]), "planType": .int(0),
            "key": .string(wrappedOrgKey),
            "collectionName": .string(try EncString.encrypt("Everyone", key: orgKey).serialized),
        ]))
        guard let orgID = created["id"]?.stringValue?.lowercased() else { throw LiveBenchError.setup("L2: the organization was not created") }
        guard let collectionID = try await api.organizationCollectionIDs(organizationID: orgID, token: ownerToken).first else {
            throw LiveBenchError.setup("L2: the organization has no default collection")
        }

        // Invites, 20 emails a request, each with its one-time code.
        var invites: [String: (id: String, code: String)] = [:]
        for start in stride(from: 1, to: count, by: HubScaleBenchmark.invitesPerRequest) {
            let batch = Array(emails[start..<min(start + HubScaleBenchmark.invitesPerRequest, count)])
            let answer = try await api.rawJSON(.POST, "/api/organizations/\(orgID)/users/invite", token: ownerToken, body: .object([
                "emails": .array(batch.map(JSONValue.string)), "type": .int(2), "groups": .array([]),
                "collections": .array([.object(["id": .string(collectionID), "readOnly": .bool(false), "hidePasswords": .bool(false),
                                                "manage": .bool(false)])]),
            ]))
            for entry in (answer["inviteCodes"]?.arrayValue ?? []).compactMap(\.objectValue) {
                if let email = entry["email"]?.stringValue?.lowercased(), let id = entry["id"]?.stringValue, let code = entry["code"]?.stringValue {
                    invites[email] = (id, code)
                }
            }
        }
        guard invites.count == count - 1 else { throw LiveBenchError.setup("L2: \(invites.count) invite codes for \(count - 1) invites") }

        // Each member signs in its devices and accepts with the first; the owner confirms them all.
        let invited = invites
        let memberTokens = try await concurrently(Array(emails.dropFirst()), width: HubScaleBenchmark.setupWidth) { email -> [String] in
            var tokens: [String] = []
            for _ in 0..<devicesPerMember { tokens.append(try await login(email)) }
            guard let invite = invited[email] else { throw LiveBenchError.setup("L2: no invite for \(email)") }
            try await api.acceptInvitation(id: invite.id, organizationID: orgID, code: invite.code, token: tokens[0])
            return tokens
        }
        _ = try await concurrently(Array(invites.values.map(\.id)), width: HubScaleBenchmark.setupWidth) { membershipID in
            _ = try await api.rawJSON(.POST, "/api/organizations/\(orgID)/users/\(membershipID)/confirm", token: ownerToken,
                                      body: .object(["key": .string(wrappedOrgKey)]))
        }
        var ownerTokens = [ownerToken]
        for _ in 1..<devicesPerMember { ownerTokens.append(try await login(emails[0])) }
        let actingToken = try await login(emails[0])
        let confirmed = try await api.rawJSON(.GET, "/api/organizations/\(orgID)/users", token: ownerToken)["data"]?.arrayValue?
            .compactMap(\.objectValue).filter { $0["status"]?.intValue == 2 }.count ?? 0
        guard confirmed == count else { throw LiveBenchError.setup("L2: \(confirmed) confirmed members, not \(count)") }
        await setup.stop()
        return OrganizationSetup(id: orgID, collectionID: collectionID,
                                 keys: VaultKeys(userKey: userKey, organizationKeys: [orgID: orgKey]), actingToken: actingToken,
                                 members: [Member(email: emails[0], tokens: ownerTokens)]
                                     + zip(emails.dropFirst(), memberTokens).map { Member(email: $0, tokens: $1) })
    }
}

extension OrganizationSetup {
    /// A member's master-password hash as the server is sent it: any fixed text per account will do,
    /// since the server only compares it with what the registration sent.
    static func passwordHash(_ email: String) -> String {
        Data(SHA256.hash(data: Data("bench:\(email)".utf8))).base64EncodedString()
    }
}

/// `body` over `items` with at most `width` in flight; the results in the items' order.
func concurrently<T: Sendable, R: Sendable>(_ items: [T], width: Int, _ body: @escaping @Sendable (T) async throws -> R) async throws -> [R] {
    try await withThrowingTaskGroup(of: (Int, R).self) { group in
        var results = [R?](repeating: nil, count: items.count)
        var next = 0
        func add() {
            let index = next
            next += 1
            group.addTask { (index, try await body(items[index])) }
        }
        while next < min(width, items.count) { add() }
        while let (index, result) = try await group.next() {
            results[index] = result
            if next < items.count { add() }
        }
        return results.compactMap { $0 }
    }
}

/// The release `vaultsync-server` executable running in a process of its own on a loopback port.
final class ServerChild: @unchecked Sendable {
    let process: Process
    let url: String
    let logPath: String

    private init(process: Process, url: String, logPath: String) {
        self.process = process
        self.url = url
        self.logPath = logPath
    }

    /// Starts the executable on `dataDirectory` with `arguments` and waits until it answers `/alive`;
    /// a port found taken is replaced by another.
    static func start(executable: String, dataDirectory: String, arguments: [String]) async throws -> ServerChild {
        let logPath = dataDirectory + "/server.log"
        for _ in 0..<8 {
            let port = TestPorts.next()
            let process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = ["--host", "127.0.0.1", "--port", String(port), "--data-dir", dataDirectory, "--log-level", "warning"] + arguments
            // Nothing of ours that would change the server (a database URL, a port).
            process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("VAULTSYNC_") }
            _ = FileManager.default.createFile(atPath: logPath, contents: nil)
            let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
            process.standardOutput = log
            process.standardError = log
            process.standardInput = FileHandle.nullDevice
            try process.run()
            try? log.close()
            let child = ServerChild(process: process, url: "http://127.0.0.1:\(port)", logPath: logPath)
            let deadline = ContinuousClock.now + .seconds(60)
            while process.isRunning, ContinuousClock.now < deadline {
                if await child.answers() { return child }
                try await Task.sleep(for: .milliseconds(20))
            }
            if process.isRunning {
                child.stop()
                throw LiveBenchError.setup("vaultsync-server did not answer within 60 s: \(child.logTail())")
            }
            // It ended: a taken port is tried again elsewhere, anything else is reported.
            guard child.logTail().contains("in use") else { throw LiveBenchError.setup("vaultsync-server exited: \(child.logTail())") }
        }
        throw LiveBenchError.setup("vaultsync-server found no free port")
    }

    func answers() async -> Bool {
        guard let response = try? await HTTPClient.shared.execute(HTTPClientRequest(url: url + "/alive"), timeout: .seconds(2)) else { return false }
        _ = try? await response.body.collect(upTo: 1 << 16)
        return response.status == .ok
    }

    /// The server's resident set size in KiB (`VmRSS` of /proc/PID/status).
    func residentKiB() throws -> Int {
        let status = try String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8)
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kib = Int(line.split(separator: " ").dropFirst().first ?? "") else {
            throw LiveBenchError.setup("no VmRSS for the server process")
        }
        return kib
    }

    func logTail() -> String {
        String(((try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "").suffix(800))
    }

    /// Asks it to stop (SIGTERM: a graceful shutdown) and waits.
    func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }
}
