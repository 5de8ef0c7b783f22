import AsyncHTTPClient
import Foundation
import NIOCore
import Testing
import VaultTestSupport

/// `/ready` and `/metrics` of the built `vaultsync-server`, as Prometheus and a load balancer ask them.
@Suite("vaultsync-server: /ready and /metrics")
struct ServerMetricsTests {
    static func get(_ url: String, token: String? = nil) async throws -> (status: Int, body: String) {
        var request = HTTPClientRequest(url: url)
        if let token { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(30))
        return (Int(response.status.code), String(buffer: try await response.body.collect(upTo: 4 << 20)))
    }

    /// The samples of a Prometheus text exposition by `name{labels}`; a line that is neither a comment nor
    /// `name[{labels}] value` throws.
    static func samples(_ text: String) throws -> [String: Double] {
        struct Unparsed: Error { let line: String }
        var samples: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]),
                  line[..<space].wholeMatch(of: /[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="[^"]*",?)*\})?/) != nil else {
                throw Unparsed(line: String(line))
            }
            samples[String(line[..<space])] = value
        }
        return samples
    }

    @Test("--metrics with a token file: /metrics refuses a request without the token, and counts requests by route pattern and status with latencies; /ready answers; without --metrics there is no /metrics")
    func metrics() async throws {
        let folder = try emptyFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let token = "scrape-token-\(UUID().uuidString)"
        try Data((token + "\n").utf8).write(to: URL(fileURLWithPath: folder + "/metrics-token"))
        var environment = freshEnvironment(home: folder)
        environment["VAULTSYNC_PORT"] = "0"
        let (server, log) = try await ServerExecutableTests.startServer(in: folder, environment: environment,
                                                                        arguments: ["--metrics", "--metrics-token-file", folder + "/metrics-token"])
        defer { server.killAndCollect() }
        let port = try #require(log.text.split(separator: "listening on http://127.0.0.1:").last?.prefix { $0.isNumber })
        let base = "http://127.0.0.1:\(port)"
        #expect(try await Self.get(base + "/ready") == (200, "ready\n"))
        for _ in 0..<3 { #expect(try await Self.get(base + "/alive").status == 200) }
        #expect(try await Self.get(base + "/api/ciphers/00000000-0000-0000-0000-000000000000").status == 401)
        let refused = try await Self.get(base + "/metrics")
        #expect(refused.status == 401 && !refused.body.contains("vaultsync_http"), "\(refused)")
        #expect(try await Self.get(base + "/metrics", token: "wrong-token-of-some-length").status == 401)
        // A refused login (an unknown account is refused as a wrong password is), counted by reason.
        var login = HTTPClientRequest(url: base + "/identity/connect/token")
        login.method = .POST
        login.headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
        login.body = .bytes(ByteBuffer(string: "grant_type=password&username=nobody%40example.com&password=bm90LWl0&scope=api%20offline_access"
                                       + "&client_id=cli&deviceType=8&deviceIdentifier=\(UUID().uuidString)&deviceName=linux"))
        #expect(try await HTTPClient.shared.execute(login, timeout: .seconds(60)).status.code == 400)
        let scraped = try await Self.get(base + "/metrics", token: token)
        #expect(scraped.body.contains(#"vaultsync_logins_refused_total{reason="wrong_password"} 1"#), "\(scraped.body)")
        #expect(scraped.body.contains(#"vaultsync_logins_refused_total{reason="limited"} 0"#), "\(scraped.body)")
        #expect(scraped.body.contains("\nvaultsync_hub_connections 0.0\n"), "\(scraped.body)")
        #expect(scraped.status == 200, "\(scraped)")
        #expect(scraped.body.contains(#"vaultsync_http_requests_total{method="GET",route="/alive",status="200"} 3"#), "\(scraped.body)")
        #expect(scraped.body.contains(#"route="/api/ciphers/{id}",status="401""#), "the route's pattern, not the path: \(scraped.body)")
        #expect(!scraped.body.contains("00000000-0000-0000-0000-000000000000"))
        #expect(scraped.body.contains(#"vaultsync_http_request_duration_seconds_count{method="GET",route="/alive"} 3"#), "\(scraped.body)")
        // Every line parses as Prometheus' text format; the database's connections: SQLite's writer and
        // readers at most, none held or awaited between requests, and every call's wait observed (/ready's
        // query, the login's reads).
        let samples = try Self.samples(scraped.body)
        #expect(try #require(samples[#"vaultsync_database_connections{state="max"}"#]) >= 5)
        #expect(samples[#"vaultsync_database_connections{state="in_use"}"#] == 0)
        #expect(samples[#"vaultsync_database_connections{state="waiting"}"#] == 0)
        #expect(try #require(samples["vaultsync_database_wait_seconds_count"]) >= 2, "\(scraped.body)")

        let (plain, plainLog) = try await ServerExecutableTests.startServer(in: folder, environment: environment, arguments: ["--data-dir", folder + "/other"])
        defer { plain.killAndCollect() }
        let plainPort = try #require(plainLog.text.split(separator: "listening on http://127.0.0.1:").last?.prefix { $0.isNumber })
        #expect(try await Self.get("http://127.0.0.1:\(plainPort)/metrics").status == 404)
        let badToken = try await runExecutable("vaultsync-server", ["--port", "0", "--metrics-token-file", folder + "/metrics-token"],
                                               environment: freshEnvironment(home: folder), in: folder)
        #expect(badToken.status == 64 && badToken.stderr.contains("give --metrics"), "\(badToken)")
    }

    @Test("--log-format json writes one JSON object per line; with PostgreSQL not answering the server waits, retrying, for --database-wait, then says why it stops")
    func jsonLogsAndDatabaseWait() async throws {
        let folder = try emptyFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // Port 1 of loopback: nothing listens there, so connecting is refused at once.
        let closedPort = 1
        var environment = freshEnvironment(home: folder)
        environment["VAULTSYNC_DATABASE_URL"] = "postgres://vaultsync@127.0.0.1:\(closedPort)/vaultsync"
        let started = ContinuousClock.now
        let result = try await runExecutable("vaultsync-server", ["--port", "0", "--log-format", "json", "--database-wait", "2"],
                                             environment: environment, in: folder)
        #expect(ContinuousClock.now - started >= .seconds(1), "it waited")
        #expect(result.status != 0 && result.stderr.contains("nothing listens there"), "\(result)")
        let lines = result.stderr.split(separator: "\n").filter { $0.hasPrefix("{") }
        let waits = try lines.compactMap { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            .filter { $0["message"] as? String == "waiting for the database" }
        #expect(waits.count >= 2, "retried, each retry logged: \(result.stderr)")
        #expect(waits.allSatisfy { $0["level"] as? String == "warning" && ($0["time"] as? String)?.hasSuffix("Z") == true && $0["reason"] is String })
    }
}

