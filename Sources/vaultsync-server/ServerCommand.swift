import ArgumentParser
import CommandLineSupport
import Foundation
import VaultModels
import Hummingbird
import Logging
import NIOCore
import VaultServer

/// Reads an environment variable (every flag can also be set this way).
func environment(_ name: String) -> String? {
    ProcessInfo.processInfo.environment[name].flatMap { $0.isEmpty ? nil : $0 }
}

/// `vaultsync-server`: a Bitwarden-compatible sync server on SQLite (default) or PostgreSQL.
@main
struct ServerCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vaultsync-server",
        abstract: "A Bitwarden-compatible vault sync server (SQLite by default, PostgreSQL for larger deployments).",
        discussion: """
        Every flag can also be set by the environment variable in its help. Stops gracefully on SIGINT/SIGTERM.

        Secrets never go on the command line, which every user of the machine can read (ps, /proc/PID/cmdline): the token signing key comes from a file (--token-key-file) or VAULTSYNC_TOKEN_KEY, and a database URL with a password from a file (--database-url-file) or VAULTSYNC_DATABASE_URL. The environment of a process is readable only by the same user (and root).

        Examples:
          vaultsync-server
          vaultsync-server --port 0 --data-dir /tmp/vs
          vaultsync-server --attachment-limit 500MiB
          vaultsync-server --database-url-file /etc/vaultsync/database-url --token-key-file /etc/vaultsync/token.key
          vaultsync-server --host 0.0.0.0 --tls-cert-file /etc/vaultsync/fullchain.pem --tls-key-file /etc/vaultsync/key.pem
          VAULTSYNC_DATABASE_URL=postgres://vaultsync:…@127.0.0.1:5432/vaultsync vaultsync-server
        """,
        version: "vaultsync-server \(ProductVersion.current)",
        subcommands: [BackupCommand.self, RestoreCommand.self, AdminCommand.self])

    /// Parses the command line as `NegativeNumbers` hands it on (`--port -5` is a value, refused by the range
    /// check), then runs.
    static func main() async {
        await parseAndRun()
    }

    @Option(help: "Address to listen on (VAULTSYNC_HOST).")
    var host: String = environment("VAULTSYNC_HOST") ?? "127.0.0.1"

    @Option(help: "Port to listen on; 0 picks a free one (VAULTSYNC_PORT).")
    var port: Int = environment("VAULTSYNC_PORT").flatMap(Int.init) ?? 8087

    @Option(help: "Directory for the SQLite database and the token signing key (VAULTSYNC_DATA_DIR).")
    var dataDir: String = environment("VAULTSYNC_DATA_DIR") ?? "./vaultsync-data"

    // No default from the environment for the two secrets: ArgumentParser would print it in --help.
    @Option(help: ArgumentHelp("""
        postgres://user@host:port/database selects PostgreSQL. A URL with a password is refused here: \
        give it in VAULTSYNC_DATABASE_URL or --database-url-file.
        """, valueName: "URL"))
    var databaseURL: String?

    @Option(name: .customLong("database-url-file"), help: ArgumentHelp(
        "Read the PostgreSQL URL (which may hold the password) from the first line of FILE.", valueName: "FILE"))
    var databaseURLFile: String?

    @Option(help: "trace, debug, info, notice, warning, error or critical (VAULTSYNC_LOG_LEVEL).")
    var logLevel: String = environment("VAULTSYNC_LOG_LEVEL") ?? "info"

    // A flag's default must be false (ArgumentParser refuses a `true` one): the variable is read in `signupsDisabled`.
    @Flag(help: "Refuse new registrations (VAULTSYNC_DISABLE_SIGNUPS=true).")
    var disableSignups = false

    @Option(help: ArgumentHelp("""
        false: only addresses invited with `admin invite` may register, as --disable-signups (VAULTSYNC_SIGNUPS_ALLOWED).
        """, valueName: "true|false"))
    var signupsAllowed: Bool?

    /// The flags, or VAULTSYNC_DISABLE_SIGNUPS set to true, 1 or yes, or VAULTSYNC_SIGNUPS_ALLOWED to false, 0 or no.
    var signupsDisabled: Bool {
        disableSignups || signupsAllowed == false
            || ["1", "true", "yes"].contains(environment("VAULTSYNC_DISABLE_SIGNUPS")?.lowercased() ?? "")
            || (signupsAllowed == nil && ["0", "false", "no"].contains(environment("VAULTSYNC_SIGNUPS_ALLOWED")?.lowercased() ?? ""))
    }

    @Option(help: ArgumentHelp("text, or json: one JSON object per line, for log collectors (VAULTSYNC_LOG_FORMAT).", valueName: "FORMAT"))
    var logFormat: String = environment("VAULTSYNC_LOG_FORMAT") ?? "text"

    @Option(help: ArgumentHelp("""
        On SIGTERM/SIGINT, how long requests in flight and notification connections get to finish before the server stops \
        anyway (VAULTSYNC_SHUTDOWN_TIMEOUT; default 10).
        """, valueName: "SECONDS"))
    var shutdownTimeout: Double = environment("VAULTSYNC_SHUTDOWN_TIMEOUT").flatMap(Double.init) ?? 10

    @Option(name: .customLong("database-wait"), help: ArgumentHelp("""
        PostgreSQL: how long a starting server waits for a database that does not answer, retrying; 0 fails at once \
        (VAULTSYNC_DATABASE_WAIT; default: until it answers).
        """, valueName: "SECONDS"))
    var databaseWaitFlag: Double?

    /// The flag, else its variable (`nil`: wait until the database answers).
    var databaseWait: Double? { databaseWaitFlag ?? environment("VAULTSYNC_DATABASE_WAIT").flatMap(Double.init) }

    @Flag(help: "Serve GET /metrics in Prometheus' format on the same port (VAULTSYNC_METRICS=true).")
    var metrics = false

    @Option(name: .customLong("metrics-token-file"), help: ArgumentHelp(
        "/metrics answers only requests with `Authorization: Bearer TOKEN`, TOKEN read from FILE's first line.", valueName: "FILE"))
    var metricsTokenFile: String?

    /// The flag or VAULTSYNC_METRICS, and the token from the file (read and checked here: a scrape token on the command line would be readable by every user).
    func metricsSettings() throws -> (enabled: Bool, token: String?) {
        let enabled = metrics || ["1", "true", "yes"].contains(environment("VAULTSYNC_METRICS")?.lowercased() ?? "")
        guard let metricsTokenFile else { return (enabled, nil) }
        guard enabled else { throw ValidationError("--metrics-token-file protects /metrics: give --metrics (or VAULTSYNC_METRICS=true) too") }
        guard let text = try? String(contentsOfFile: metricsTokenFile, encoding: .utf8) else {
            throw ValidationError("--metrics-token-file: cannot read \(metricsTokenFile)")
        }
        let token = text.split(whereSeparator: \.isNewline).first.map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
        guard token.count >= 16 else { throw ValidationError("--metrics-token-file: \(metricsTokenFile) must hold a token of at least 16 characters") }
        return (true, token)
    }

    @Option(name: .customLong("token-key-file"), help: ArgumentHelp("""
        Read the base64 token signing key shared by several instances from FILE (or VAULTSYNC_TOKEN_KEY: \
        the environment is readable only by the same user); default: a key file in the data directory.
        """, valueName: "FILE"))
    var tokenKeyFile: String?

    /// The key as a flag value, as earlier versions took it: refused with the way to give it instead.
    @Option(name: .customLong("token-key"), help: .hidden)
    var tokenKeyValue: String?

    /// The database URL and the token key from the flags, files and environment (`nil`: not given).
    func secrets() throws -> (databaseURL: String?, tokenKey: [UInt8]?) {
        if tokenKeyValue != nil {
            throw ValidationError("""
                --token-key no longer takes the key: a command line is readable by every user of this machine. \
                Put the key in a file only the server's user can read and give --token-key-file FILE, or set VAULTSYNC_TOKEN_KEY.
                """)
        }
        var tokenKey: [UInt8]?
        if let tokenKeyFile {
            guard let text = try? String(contentsOfFile: tokenKeyFile, encoding: .utf8) else {
                throw ValidationError("--token-key-file: cannot read \(tokenKeyFile)")
            }
            guard let key = Data(base64Encoded: text.trimmingCharacters(in: .whitespacesAndNewlines)), key.count >= 32 else {
                throw ValidationError("--token-key-file: \(tokenKeyFile) does not hold base64 of at least 32 bytes.")
            }
            tokenKey = Array(key)
        } else if let text = environment("VAULTSYNC_TOKEN_KEY") {
            guard let key = Data(base64Encoded: text), key.count >= 32 else {
                throw ValidationError("VAULTSYNC_TOKEN_KEY must be base64 of at least 32 bytes.")
            }
            tokenKey = Array(key)
        }

        var url: String?
        var source: String
        switch (databaseURL, databaseURLFile) {
        case (.some, .some):
            throw ValidationError("give only one of --database-url and --database-url-file")
        case (.some(let given), nil):
            if Self.holdsPassword(given) {
                throw ValidationError("""
                    --database-url must not hold a password: a command line is readable by every user of this machine. \
                    Give the URL in VAULTSYNC_DATABASE_URL (the environment is readable only by the same user) or in a file \
                    with --database-url-file FILE.
                    """)
            }
            (url, source) = (given.isEmpty ? nil : given, "--database-url")
        case (nil, .some(let path)):
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
                throw ValidationError("--database-url-file: cannot read \(path)")
            }
            // Any line end ends the line: "\r\n" is one Character in Swift, which a split on "\n" does not see, and a file
            // with Windows line ends gave a URL whose database name ended in it (RELIABILITY bug 90).
            let line = text.split(maxSplits: 1, omittingEmptySubsequences: false, whereSeparator: \.isNewline).first
                .map { $0.trimmingCharacters(in: .whitespaces) } ?? ""
            guard !line.isEmpty else { throw ValidationError("--database-url-file: \(path) is empty") }
            (url, source) = (line, "the URL in --database-url-file")
        case (nil, nil):
            (url, source) = (environment("VAULTSYNC_DATABASE_URL"), "VAULTSYNC_DATABASE_URL")
        }
        if let url, !url.hasPrefix("postgres://"), !url.hasPrefix("postgresql://") {
            throw ValidationError("\(source) must start with postgres://")
        }
        return (url, tokenKey)
    }

    /// Whether a postgres URL carries a password: `user:password@` before the host, or a `password`
    /// query parameter.
    static func holdsPassword(_ url: String) -> Bool {
        let afterScheme = url.range(of: "://").map { url[$0.upperBound...] } ?? url[...]
        let authority = afterScheme.prefix { $0 != "/" && $0 != "?" }
        if let at = authority.lastIndex(of: "@"), authority[..<at].contains(":") { return true }
        if let query = url.split(separator: "?", maxSplits: 1).dropFirst().first {
            return query.split(separator: "&").contains { $0.lowercased().hasPrefix("password=") }
        }
        return false
    }

    @Option(name: .customLong("trusted-proxy"),
            help: "Address of a reverse proxy whose X-Forwarded-For is believed for login limits; repeatable (VAULTSYNC_TRUSTED_PROXIES, comma-separated).")
    var trustedProxies: [String] = (environment("VAULTSYNC_TRUSTED_PROXIES") ?? "").split(separator: ",")
        .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }

    @Option(name: .customLong("cors-origin"),
            help: "An origin (scheme://host[:port]) whose web pages may call this server, such as a web vault served elsewhere; repeatable (VAULTSYNC_CORS_ORIGINS, comma-separated). The official desktop app and Safari extension are always allowed.")
    var corsOrigins: [String] = (environment("VAULTSYNC_CORS_ORIGINS") ?? "").split(separator: ",")
        .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }

    @Option(name: .customLong("tls-cert-file"), help: ArgumentHelp("""
        Serve HTTPS instead of HTTP, with the PEM certificate chain in FILE (the server's certificate first); \
        needs --tls-key-file (VAULTSYNC_TLS_CERT_FILE).
        """, valueName: "FILE"))
    var tlsCertFileFlag: String?

    @Option(name: .customLong("tls-key-file"), help: ArgumentHelp(
        "The PEM private key of --tls-cert-file's certificate (VAULTSYNC_TLS_KEY_FILE).", valueName: "FILE"))
    var tlsKeyFileFlag: String?

    @Option(name: .customLong("attachment-limit"), help: ArgumentHelp("""
        Largest attachment file accepted, in bytes or with a unit: 500MiB, 2GiB (VAULTSYNC_ATTACHMENT_LIMIT; default 100MiB). \
        Uploads stream to the database in bounded memory whatever the limit.
        """, valueName: "SIZE"))
    var attachmentLimitFlag: String?

    /// The attachment limit in bytes, from the flag, else its variable, else 100 MiB; an unreadable value
    /// is a usage error naming where it came from.
    func attachmentLimit() throws -> Int {
        let (text, source): (String, String) = attachmentLimitFlag.map { ($0, "--attachment-limit") }
            ?? environment("VAULTSYNC_ATTACHMENT_LIMIT").map { ($0, "VAULTSYNC_ATTACHMENT_LIMIT") } ?? ("100MiB", "the default")
        do {
            return try ByteSize.parse(text)
        } catch {
            throw ValidationError("\(source): \(error)")
        }
    }

    @Option(name: .customLong("hub-connections-per-user"), help: ArgumentHelp("""
        Open notifications-hub connections allowed per account; one more is refused (VAULTSYNC_HUB_CONNECTIONS_PER_USER; \
        default \(ServerConfiguration().hubConnectionsPerUser)).
        """, valueName: "COUNT"))
    var hubConnectionsPerUserFlag: Int?

    @Option(name: .customLong("hub-connections-per-address"), help: ArgumentHelp("""
        Open notifications-hub connections allowed per client address (behind a NAT or a proxy many devices share one) \
        (VAULTSYNC_HUB_CONNECTIONS_PER_ADDRESS; default \(ServerConfiguration().hubConnectionsPerAddress)).
        """, valueName: "COUNT"))
    var hubConnectionsPerAddressFlag: Int?

    /// A hub limit from its flag, else its variable, else the default; a value that is not a whole number
    /// of at least 1 is a usage error naming where it came from (0 would refuse every connection).
    func hubLimit(_ flag: Int?, flagName: String, variable: String, default value: Int) throws -> Int {
        let (limit, source): (Int?, String)
        if let flag {
            (limit, source) = (flag, flagName)
        } else if let text = environment(variable) {
            (limit, source) = (Int(text), variable)
        } else {
            return value
        }
        guard let limit, limit >= 1 else {
            throw ValidationError("\(source) must be a whole number of at least 1.")
        }
        return limit
    }

    /// The hub's connection limits per account and per address.
    func hubLimits() throws -> (perUser: Int, perAddress: Int) {
        let defaults = ServerConfiguration()
        return (try hubLimit(hubConnectionsPerUserFlag, flagName: "--hub-connections-per-user", variable: "VAULTSYNC_HUB_CONNECTIONS_PER_USER",
                             default: defaults.hubConnectionsPerUser),
                try hubLimit(hubConnectionsPerAddressFlag, flagName: "--hub-connections-per-address",
                             variable: "VAULTSYNC_HUB_CONNECTIONS_PER_ADDRESS", default: defaults.hubConnectionsPerAddress))
    }

    /// The flag, else its environment variable (an optional option cannot have a default value).
    var tlsCertFile: String? { tlsCertFileFlag ?? environment("VAULTSYNC_TLS_CERT_FILE") }
    var tlsKeyFile: String? { tlsKeyFileFlag ?? environment("VAULTSYNC_TLS_KEY_FILE") }

    /// The TLS files, both or neither (`nil`: plain HTTP), checked: readable, PEM, a key that fits.
    func tlsFiles() throws -> ServerConfiguration.TLSFiles? {
        switch (tlsCertFile, tlsKeyFile) {
        case (nil, nil):
            return nil
        case (.some, nil):
            throw ValidationError("--tls-cert-file needs --tls-key-file (the certificate's private key): give both for HTTPS, or neither for HTTP.")
        case (nil, .some):
            throw ValidationError("--tls-key-file needs --tls-cert-file (the certificate chain): give both for HTTPS, or neither for HTTP.")
        case (.some(let certificate), .some(let key)):
            let files = ServerConfiguration.TLSFiles(certificateChainPath: certificate, privateKeyPath: key)
            do {
                try files.validate()
            } catch {
                throw ValidationError("\(error)")
            }
            return files
        }
    }

    /// The flag's name when the command line gave it, else its variable's: a message names what the person set.
    static func source(_ flag: String, _ variable: String) -> String {
        CommandLine.arguments.contains { $0 == flag || $0.hasPrefix(flag + "=") } ? flag : variable
    }

    func validate() throws {
        // An origin is what a browser sends: a scheme, a host, maybe a port, and no path (a trailing "/" or a path
        // would never match, silently).
        for origin in corsOrigins {
            guard let url = URL(string: origin), let scheme = url.scheme, ["http", "https"].contains(scheme.lowercased()), url.host != nil,
                  url.path.isEmpty, url.query == nil, url.fragment == nil, url.user == nil else {
                throw ValidationError("\(Self.source("--cors-origin", "VAULTSYNC_CORS_ORIGINS")) must be origins such as https://vault.example.com "
                    + "(a scheme, a host and maybe a port; no path, not even a trailing /); \"\(origin)\" is not one.")
            }
        }
        for proxy in trustedProxies where !ServerConfiguration.isIPAddress(proxy) {
            throw ValidationError("\(Self.source("--trusted-proxy", "VAULTSYNC_TRUSTED_PROXIES")) must be IP addresses; \"\(proxy)\" is not one.")
        }
        // A variable that is set but unreadable is an error, not a silent default (a typo in a unit file
        // would otherwise start the server on 8087 or with signups open).
        if let text = environment("VAULTSYNC_PORT"), Int(text) == nil {
            throw ValidationError("VAULTSYNC_PORT must be a port number between 0 and 65535, not \"\(text)\".")
        }
        if let text = environment("VAULTSYNC_DISABLE_SIGNUPS"),
           !["1", "true", "yes", "0", "false", "no"].contains(text.lowercased()) {
            throw ValidationError("VAULTSYNC_DISABLE_SIGNUPS must be true or false (1/0, yes/no), not \"\(text)\".")
        }
        if let text = environment("VAULTSYNC_SIGNUPS_ALLOWED"), !["1", "true", "yes", "0", "false", "no"].contains(text.lowercased()) {
            throw ValidationError("VAULTSYNC_SIGNUPS_ALLOWED must be true or false (1/0, yes/no), not \"\(text)\".")
        }
        for (name, variable) in [("VAULTSYNC_SHUTDOWN_TIMEOUT", "--shutdown-timeout"), ("VAULTSYNC_DATABASE_WAIT", "--database-wait")] {
            if let text = environment(name), Double(text) == nil {
                throw ValidationError("\(name) must be a number of seconds, not \"\(text)\" (or give \(variable)).")
            }
        }
        guard ["text", "json"].contains(logFormat) else {
            throw ValidationError("\(Self.source("--log-format", "VAULTSYNC_LOG_FORMAT")) must be text or json, not \"\(logFormat)\".")
        }
        guard shutdownTimeout >= 0, shutdownTimeout <= 3_600 else {
            throw ValidationError("\(Self.source("--shutdown-timeout", "VAULTSYNC_SHUTDOWN_TIMEOUT")) must be between 0 and 3600 seconds.")
        }
        if let databaseWait, databaseWait < 0 || !databaseWait.isFinite {
            throw ValidationError("\(Self.source("--database-wait", "VAULTSYNC_DATABASE_WAIT")) must be 0 or more seconds.")
        }
        guard (0...65535).contains(port) else { throw ValidationError("\(Self.source("--port", "VAULTSYNC_PORT")) must be between 0 and 65535.") }
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("\(Self.source("--log-level", "VAULTSYNC_LOG_LEVEL")) must be one of trace, debug, info, notice, warning, error, critical, not \"\(logLevel)\".")
        }
        // An address that can never be listened on is a usage error, said before anything is stored.
        if host.isEmpty || (host.allSatisfy { $0.isNumber || $0 == "." } && !ServerConfiguration.isIPAddress(host)) {
            throw ValidationError("\(Self.source("--host", "VAULTSYNC_HOST")) must be an IP address or a host name of this machine, not \"\(host)\".")
        }
        _ = try secrets()
        _ = try tlsFiles()
        _ = try attachmentLimit()
        _ = try hubLimits()
    }

    func run() async throws {
        let secrets = try secrets()
        var configuration = ServerConfiguration()
        configuration.host = host
        configuration.port = port
        configuration.dataDirectory = dataDir
        configuration.databaseURL = secrets.databaseURL
        configuration.logLevel = Logger.Level(rawValue: logLevel) ?? .info
        configuration.disableSignups = signupsDisabled
        configuration.trustedProxies = trustedProxies
        configuration.corsOrigins = corsOrigins
        configuration.tls = try tlsFiles()
        configuration.maxAttachmentBytes = try attachmentLimit()
        (configuration.hubConnectionsPerUser, configuration.hubConnectionsPerAddress) = try hubLimits()
        // No file and no variable: the key file in the data directory.
        configuration.tokenKey = secrets.tokenKey
        (configuration.metricsEnabled, configuration.metricsToken) = try metricsSettings()
        configuration.shutdownTimeout = .milliseconds(Int64(shutdownTimeout * 1000))
        configuration.databaseWait = databaseWait.map { .milliseconds(Int64($0 * 1000)) }
        let level = configuration.logLevel
        let json = logFormat == "json"
        LoggingSystem.bootstrap { label in
            var handler: any LogHandler = json ? JSONLogHandler(label: label) : StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let app = try await buildApplication(configuration: configuration)
        do {
            try await app.runService()
        } catch let error as IOError where error.errnoCode == EADDRINUSE {
            FileHandle.standardError.write(Data("""
                Error: \(host) port \(port) is in use by another program (another vaultsync-server?). Stop it, or choose \
                another port with --port or VAULTSYNC_PORT.\n
                """.utf8))
            throw ExitCode.failure
        } catch let error as IOError where error.errnoCode == EADDRNOTAVAIL {
            throw cannotListen(because: "no interface of this machine has that address")
        } catch let error as IOError where error.errnoCode == EACCES {
            FileHandle.standardError.write(Data("""
                Error: not allowed to listen on \(host) port \(port): ports below 1024 need privileges this user \
                (uid \(getuid())) does not have. Choose a port of 1024 or above with --port or VAULTSYNC_PORT (e.g. 8087), \
                and put a reverse proxy in front if the server must answer on 443.\n
                """.utf8))
            throw ExitCode.failure
        } catch is SocketAddressError.UnknownHost {
            throw cannotListen(because: "no such host")
        } catch is SocketAddressError {
            throw cannotListen(because: "not an address this machine can listen on")
        }
    }

    /// Says why the address cannot be listened on, and the way out (exit 64: what was given is unusable).
    func cannotListen(because reason: String) -> ExitCode {
        FileHandle.standardError.write(Data("""
            Error: cannot listen on \(host): \(reason). Give --host (or VAULTSYNC_HOST) an address of this machine, \
            such as 127.0.0.1, or 0.0.0.0 for every interface.\n
            """.utf8))
        return ExitCode(64)
    }
}
