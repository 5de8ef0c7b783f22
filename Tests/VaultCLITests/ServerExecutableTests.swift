import AsyncHTTPClient
import Foundation
import Testing
import VaultServer
import VaultTestSupport

/// `vaultsync-server` as a person starts it: the built executable, in a folder of its own.
@Suite("The server executable as people start it")
struct ServerExecutableTests {
    @Test("no flags in an empty folder: it listens, stores its data in ./vaultsync-data, and stops on SIGTERM")
    func defaults() async throws {
        let folder = NSTemporaryDirectory() + "vaultsync-server-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // Only the port is given by the environment (8087 may be taken on a shared machine); no flag at all.
        // An empty VAULTSYNC_TOKEN_KEY is "not given" too (it was decoded as an empty key and refused).
        let (server, log) = try await Self.startServer(
            in: folder, environment: ProcessInfo.processInfo.environment.merging(["VAULTSYNC_PORT": "0", "VAULTSYNC_TOKEN_KEY": ""]) { $1 })
        #expect(log.text.contains("storing data in SQLite at ./vaultsync-data/vaultsync.sqlite"), "\(log.text)")
        #expect(FileManager.default.fileExists(atPath: folder + "/vaultsync-data/vaultsync.sqlite"))
        #expect(FileManager.default.fileExists(atPath: folder + "/vaultsync-data/token-signing.key"))
        kill(server.pid, SIGTERM)
        // Polled, not waitUntilExit: a blocked cooperative thread would stall the servers of other tests.
        #expect(await waitUntil { !server.isRunning }, "it stops on SIGTERM")
        #expect(server.exitedCleanly, "\(log.text)")
    }

    @Test("a token key that is not base64 of 32 bytes is refused with a clear message, before anything is stored")
    func badTokenKey() async throws {
        let folder = NSTemporaryDirectory() + "vaultsync-server-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try Data("c2hvcnQ=\n".utf8).write(to: URL(fileURLWithPath: folder + "/short.key"))
        let result = try await runExecutable("vaultsync-server", ["--port", "0", "--token-key-file", folder + "/short.key"],
                                             environment: ProcessInfo.processInfo.environment, in: folder)
        #expect(result.status == 64)
        #expect(result.stderr.contains("--token-key-file: \(folder)/short.key does not hold base64 of at least 32 bytes"), "\(result.stderr)")
        let variable = try await runExecutable("vaultsync-server", ["--port", "0"],
                                               environment: ProcessInfo.processInfo.environment.merging(["VAULTSYNC_TOKEN_KEY": "c2hvcnQ="]) { $1 },
                                               in: folder)
        #expect(variable.status == 64)
        #expect(variable.stderr.contains("VAULTSYNC_TOKEN_KEY must be base64 of at least 32 bytes"), "\(variable.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder + "/vaultsync-data"))
    }

    @Test("--token-key-file: the server signs with the key from the file (no key file is made in the data directory)")
    func tokenKeyFile() async throws {
        let folder = NSTemporaryDirectory() + "vaultsync-server-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let keyFile = folder + "/token.key"
        try Data((Data((0..<64).map { UInt8($0) }).base64EncodedString() + "\n").utf8).write(to: URL(fileURLWithPath: keyFile))
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("VAULTSYNC_") }
        environment["VAULTSYNC_PORT"] = "0"
        let (server, _) = try await Self.startServer(in: folder, environment: environment, arguments: ["--token-key-file", keyFile])
        #expect(FileManager.default.fileExists(atPath: folder + "/vaultsync-data/vaultsync.sqlite"))
        #expect(!FileManager.default.fileExists(atPath: folder + "/vaultsync-data/token-signing.key"), "the key came from the file")
        kill(server.pid, SIGTERM)
        #expect(await waitUntil { !server.isRunning }, "it stops on SIGTERM")
    }

    @Test("a secret on the server's command line is refused with exit 64, a way to give it instead, and without repeating it",
          arguments: [
              (["--token-key", "c2hvcnQ="], "--token-key-file", "c2hvcnQ="),
              (["--token-key", String(repeating: "QUJD", count: 12)], "--token-key-file", String(repeating: "QUJD", count: 12)),
              (["--database-url", "postgres://vaultsync:db-Secret-1@127.0.0.1:9/vaultsync"], "VAULTSYNC_DATABASE_URL", "db-Secret-1"),
              (["--database-url", "postgresql://vaultsync:db-Secret-2@db.example/vaultsync"], "--database-url-file", "db-Secret-2"),
          ] as [([String], String, String)])
    func secretFlagsRefused(arguments: [String], advice: String, secret: String) async throws {
        let folder = try emptyFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let result = try await runExecutable("vaultsync-server", ["--port", "0"] + arguments, environment: freshEnvironment(home: folder), in: folder)
        #expect(result.status == 64, "\(result)")
        #expect(result.stderr.contains(arguments[0]) && result.stderr.contains(advice), "\(result.stderr)")
        #expect(!result.stderr.contains(secret) && !result.stdout.contains(secret), "the refusal must not repeat the secret")
        #expect(!FileManager.default.fileExists(atPath: folder + "/vaultsync-data"))
    }

    @Test("--database-url-file is read (its URL is checked like the flag's), and --help never prints a secret from the environment")
    func databaseURLFileAndHelp() async throws {
        let folder = try emptyFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try Data("mysql://vaultsync:file-Secret@127.0.0.1/vaultsync\n".utf8).write(to: URL(fileURLWithPath: folder + "/database-url"))
        let fromFile = try await runExecutable("vaultsync-server", ["--port", "0", "--database-url-file", folder + "/database-url"],
                                               environment: freshEnvironment(home: folder), in: folder)
        #expect(fromFile.status == 64 && fromFile.stderr.contains("must start with postgres://"), "\(fromFile)")
        #expect(!fromFile.stderr.contains("file-Secret"))
        let missing = try await runExecutable("vaultsync-server", ["--port", "0", "--database-url-file", folder + "/nothing"],
                                              environment: freshEnvironment(home: folder), in: folder)
        #expect(missing.status == 64 && missing.stderr.contains("--database-url-file"), "\(missing)")

        let secrets = ["VAULTSYNC_TOKEN_KEY": Data((0..<32).map { UInt8($0) }).base64EncodedString(),
                       "VAULTSYNC_DATABASE_URL": "postgres://vaultsync:env-Secret@127.0.0.1:9/vaultsync"]
        let help = try await runExecutable("vaultsync-server", ["--help"], environment: freshEnvironment(home: folder).merging(secrets) { $1 },
                                           in: folder)
        #expect(help.status == 0)
        #expect(!help.stdout.contains(secrets["VAULTSYNC_TOKEN_KEY"]!) && !help.stdout.contains("env-Secret"), "\(help.stdout)")
        #expect(help.stdout.contains("--token-key-file") && help.stdout.contains("--database-url-file"))
        #expect(help.stdout.contains("readable only by the same user"), "\(help.stdout)")
    }

    @Test("--tls-cert-file and --tls-key-file: the server answers /alive over https to a client that trusts the CA")
    func tls() async throws {
        let folder = try emptyFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let authority = try TestCertificateAuthority.make(directory: URL(fileURLWithPath: folder + "/certificates"))
        var environment = freshEnvironment(home: folder)
        environment["VAULTSYNC_PORT"] = "0"
        let (server, log) = try await Self.startServer(in: folder, environment: environment,
                                                       arguments: ["--tls-cert-file", authority.certificatePath, "--tls-key-file", authority.keyPath])
        let port = log.text.split(separator: "\n").first { $0.contains("listening on https://127.0.0.1:") }
            .flatMap { $0.split(separator: "https://127.0.0.1:").last }.flatMap { Int($0.prefix { $0.isNumber }) }
        #expect(port != nil, "\(log.text)")
        if let port {
            let client = try authority.makeHTTPClient()
            do {
                let response = try await client.execute(HTTPClientRequest(url: "https://127.0.0.1:\(port)/alive"), timeout: .seconds(30))
                #expect(response.status == .ok)
            } catch {
                Issue.record("/alive over https: \(error)")
            }
            try await client.shutdown()
        }
        kill(server.pid, SIGTERM)
        #expect(await waitUntil { !server.isRunning }, "it stops on SIGTERM")
    }

    @Test("one TLS flag without the other, or a file that cannot be read, is refused with exit 64 and a clear message",
          arguments: [
              (["--tls-cert-file", "CERT"], "--tls-cert-file needs --tls-key-file"),
              (["--tls-key-file", "KEY"], "--tls-key-file needs --tls-cert-file"),
              (["--tls-cert-file", "MISSING", "--tls-key-file", "KEY"], "TLS: cannot read"),
              (["--tls-cert-file", "KEY", "--tls-key-file", "KEY"], "does not hold a PEM certificate"),
          ] as [([String], String)])
    func tlsFlagsRefused(arguments: [String], message: String) async throws {
        let folder = try emptyFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let authority = try TestCertificateAuthority.make(directory: URL(fileURLWithPath: folder + "/certificates"))
        let resolved = arguments.map { argument in
            switch argument {
            case "CERT": return authority.certificatePath
            case "KEY": return authority.keyPath
            case "MISSING": return folder + "/missing.pem"
            default: return argument
            }
        }
        let result = try await runExecutable("vaultsync-server", ["--port", "0"] + resolved, environment: freshEnvironment(home: folder), in: folder)
        #expect(result.status == 64, "\(result)")
        #expect(result.stderr.contains(message), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder + "/vaultsync-data"))
        // The same from the environment.
        if arguments.count == 2 {
            let name = arguments[0] == "--tls-cert-file" ? "VAULTSYNC_TLS_CERT_FILE" : "VAULTSYNC_TLS_KEY_FILE"
            let fromEnvironment = try await runExecutable("vaultsync-server", ["--port", "0"],
                                                          environment: freshEnvironment(home: folder).merging([name: resolved[1]]) { $1 }, in: folder)
            #expect(fromEnvironment.status == 64 && fromEnvironment.stderr.contains(message), "\(fromEnvironment)")
        }
    }

    @Test("a negative --port is read as a value and refused by the range check, before anything is stored")
    func negativePortRefused() async throws {
        let folder = try emptyFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let result = try await runExecutable("vaultsync-server", ["--port", "-5"], environment: freshEnvironment(home: folder), in: folder)
        #expect(result.status == 64, "\(result)")
        #expect(result.stderr.contains("--port must be between 0 and 65535"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: folder + "/vaultsync-data"))
    }

    @Test("--attachment-limit and VAULTSYNC_ATTACHMENT_LIMIT: an unreadable size is refused with exit 64, naming where it came from")
    func attachmentLimitRefused() async throws {
        let folder = try emptyFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let flag = try await runExecutable("vaultsync-server", ["--port", "0", "--attachment-limit", "500 PiB"],
                                           environment: freshEnvironment(home: folder), in: folder)
        #expect(flag.status == 64, "\(flag)")
        #expect(flag.stderr.contains("--attachment-limit: \"500 PiB\" is not a size"), "\(flag.stderr)")
        let variable = try await runExecutable("vaultsync-server", ["--port", "0"],
                                               environment: freshEnvironment(home: folder).merging(["VAULTSYNC_ATTACHMENT_LIMIT": "0"]) { $1 },
                                               in: folder)
        #expect(variable.status == 64, "\(variable)")
        #expect(variable.stderr.contains("VAULTSYNC_ATTACHMENT_LIMIT: \"0\" is out of range: a size is at least 1 byte"), "\(variable.stderr)")
        let level = try await runExecutable("vaultsync-server", ["--port", "0"],
                                            environment: freshEnvironment(home: folder).merging(["VAULTSYNC_LOG_LEVEL": "loud"]) { $1 }, in: folder)
        #expect(level.status == 64 && level.stderr.contains("VAULTSYNC_LOG_LEVEL must be one of"), "\(level)")
        #expect(!FileManager.default.fileExists(atPath: folder + "/vaultsync-data"))
    }

    @Test("VAULTSYNC_DISABLE_SIGNUPS=true (and 1, yes) starts the server with registration refused; unset, it is open",
          arguments: [("true", true), ("1", true), ("YES", true), ("false", false), ("", false)])
    func signupsFromEnvironment(value: String, disabled: Bool) async throws {
        let folder = try emptyFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let environment = freshEnvironment(home: folder).merging(["VAULTSYNC_PORT": "0", "VAULTSYNC_DISABLE_SIGNUPS": value]) { $1 }
        let (server, log) = try await Self.startServer(in: folder, environment: environment)
        defer { kill(server.pid, SIGTERM) }
        let port = try #require(log.text.split(separator: "listening on http://127.0.0.1:").last?.prefix { $0.isNumber })
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: "http://127.0.0.1:\(port)/api/config"), timeout: .seconds(30))
        let body = String(buffer: try await response.body.collect(upTo: 1 << 20))
        #expect(response.status == .ok && body.contains("\"disableUserRegistration\":\(disabled)"), "\(body)")
    }

    @Test("a port another program listens on: a clear message naming the port and the way out, exit 1")
    func portInUse() async throws {
        let folder = try emptyFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let (first, log) = try await Self.startServer(in: folder, environment: freshEnvironment(home: folder), arguments: ["--port", "0"])
        defer { kill(first.pid, SIGTERM) }
        let port = try #require(log.text.split(separator: "listening on http://127.0.0.1:").last?.prefix { $0.isNumber })
        let second = try emptyFolder()
        defer { try? FileManager.default.removeItem(atPath: second) }
        let refused = try await runExecutable("vaultsync-server", ["--port", String(port)], environment: freshEnvironment(home: second), in: second)
        #expect(refused.status == 1, "\(refused)")
        #expect(refused.stderr.contains("127.0.0.1 port \(port) is in use by another program") && refused.stderr.contains("--port"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("bind(descriptor"), "no raw system call in the message: \(refused.stderr)")
    }

    @Test("a data directory that cannot be one, or a database file that is not one: the message names the file and the way out, exit 1",
          arguments: [
              ("FILE/sub", "FILE is a file, not a folder"),
              ("", "the data directory is empty"),
              ("DAMAGED", "vaultsync.sqlite is not a SQLite database this server can read"),
          ])
    func unusableDataDirectory(given: String, message: String) async throws {
        let folder = try emptyFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        _ = FileManager.default.createFile(atPath: folder + "/file", contents: Data("x".utf8))
        try FileManager.default.createDirectory(atPath: folder + "/damaged", withIntermediateDirectories: true)
        let garbage = Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        _ = FileManager.default.createFile(atPath: folder + "/damaged/vaultsync.sqlite", contents: garbage)
        let resolved = given.replacingOccurrences(of: "FILE", with: folder + "/file").replacingOccurrences(of: "DAMAGED", with: folder + "/damaged")
        let result = try await runExecutable("vaultsync-server", ["--port", "0", "--data-dir", resolved], environment: freshEnvironment(home: folder), in: folder)
        #expect(result.status == 1, "\(result)")
        let expected = message.replacingOccurrences(of: "FILE", with: folder + "/file")
        #expect(result.stderr.contains(expected), "\(result.stderr)")
        #expect(!result.stderr.contains("NSCocoaErrorDomain") && !result.stderr.contains("SQLite error"), "\(result.stderr)")
        // Nothing was changed: the damaged file is as it was.
        #expect(FileManager.default.contents(atPath: folder + "/damaged/vaultsync.sqlite") == garbage)
    }

    @Test("a database a newer vaultsync-server migrated: the server refuses to start, naming the migration and the way out, and changes nothing")
    func newerSchemaRefused() async throws {
        let folder = try emptyFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/vaultsync.sqlite"
        do {
            let database = try SQLiteDatabase(path: path)
            try await VaultRepository(database: database).migrate()
            _ = try await database.transaction { session in
                try await session.query("INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, 'from a later version', 1)")
            }
            await database.close()
        }
        let before = try #require(FileManager.default.contents(atPath: path))
        let result = try await runExecutable("vaultsync-server", ["--port", "0", "--data-dir", folder], environment: freshEnvironment(home: folder), in: folder)
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("migrated by a newer vaultsync-server (its migration 9999; this one knows up to")
                && result.stderr.contains("restore a backup made before the upgrade"), "\(result.stderr)")
        #expect(!result.stdout.contains("listening on"), "\(result.stdout)")
        #expect(FileManager.default.contents(atPath: path) == before)
    }

    /// With the default `--database-wait` a node waits for its database, logging each retry
    /// (`ServerMetricsTests.jsonLogsAndDatabaseWait`); 0 is the way to fail at once.
    @Test("a PostgreSQL nobody listens for, with --database-wait 0: the server says so and stops (RELIABILITY bug 60)")
    func databaseUnreachable() async throws {
        let folder = try emptyFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let result = try await runExecutable("vaultsync-server", ["--port", "0", "--database-wait", "0", "--database-url", "postgres://vaultsync@127.0.0.1:1/vaultsync"],
                                             environment: freshEnvironment(home: folder), in: folder)
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("cannot connect to PostgreSQL at 127.0.0.1:1/vaultsync: nothing listens there"), "\(result.stderr)")
        // The same URL from a file with Windows line ends: the line end is not part of the database's name (RELIABILITY bug 90).
        let file = folder + "/database-url"
        try Data("postgres://vaultsync@127.0.0.1:1/vaultsync\r\nsecond line\r\n".utf8).write(to: URL(fileURLWithPath: file))
        let fromFile = try await runExecutable("vaultsync-server", ["--port", "0", "--database-wait", "0", "--database-url-file", file],
                                               environment: freshEnvironment(home: folder), in: folder)
        #expect(fromFile.status == 1, "\(fromFile)")
        #expect(fromFile.stderr.contains("cannot connect to PostgreSQL at 127.0.0.1:1/vaultsync: nothing listens there"), "\(fromFile.stderr)")
    }

    @Test("an address no interface of this machine has: a clear message, exit 64, and no raw system call")
    func addressNotHere() async throws {
        let folder = try emptyFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // TEST-NET-1 (RFC 5737): never assigned to a machine.
        let refused = try await runExecutable("vaultsync-server", ["--host", "192.0.2.1", "--port", "0"], environment: freshEnvironment(home: folder), in: folder)
        #expect(refused.status == 64, "\(refused)")
        #expect(refused.stderr.contains("cannot listen on 192.0.2.1: no interface of this machine has that address"), "\(refused.stderr)")
        #expect(!refused.stderr.contains("bind(descriptor"), "no raw system call in the message: \(refused.stderr)")
    }

    /// Whether this machine can listen on IPv6's loopback (a container may have IPv6 turned off).
    static let hasIPv6Loopback: Bool = {
        #if os(Linux)
        let descriptor = socket(AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let descriptor = socket(AF_INET6, SOCK_STREAM, 0)
        #endif
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_in6()
        address.sin6_family = sa_family_t(AF_INET6)
        address.sin6_addr = in6addr_loopback
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) == 0 }
        }
    }()

    @Test("--host ::1: the URL printed has the address in brackets, and the CLI takes it", .enabled(if: hasIPv6Loopback, "no IPv6 loopback here"))
    func ipv6Loopback() async throws {
        let folder = try emptyFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let (server, log) = try await Self.startServer(in: folder, environment: freshEnvironment(home: folder), arguments: ["--host", "::1", "--port", "0"])
        defer { kill(server.pid, SIGTERM) }
        let port = try #require(log.text.split(separator: "listening on http://[::1]:").last?.prefix { $0.isNumber }, "\(log.text)")
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: "http://[::1]:\(port)/api/config"), timeout: .seconds(30))
        #expect(response.status == .ok)
        let device = CLIDevice(password: "correct horse battery staple")
        try await device.expect(["config", "server", "http://[::1]:\(port)"])
        try await device.expect(["register", "ipv6-\(port)@example.com", "--kdf-iterations", "100000"])
    }

    /// Starts the built `vaultsync-server` in `folder` and waits until it listens (or ends); the start
    /// line goes to standard error (the log), as every other line the server prints. Through ``KillableChild``
    /// (`posix_spawn`), not Foundation's `Process`: its Dispatch source crashed a full run while these tests ran
    /// (docs/RELIABILITY.md 103).
    static func startServer(in folder: String, environment: [String: String], arguments: [String] = []) async throws
        -> (process: KillableChild, log: OutputCollector) {
        let server = KillableChild(executable: try helperExecutable("vaultsync-server"), arguments: arguments, environment: environment,
                                   replacingEnvironment: true, folder: folder, collectingStandardError: true)
        try server.run()
        // http:// or https://
        try await server.wait(for: "listening on http")
        #expect(server.isRunning && server.output.text.contains("listening on http"), "it listens: \(server.output.text)")
        return (server, server.output)
    }
}
