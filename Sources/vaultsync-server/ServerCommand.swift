import ArgumentParser
import Foundation
import Hummingbird
import Logging
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

        Examples:
          vaultsync-server
          vaultsync-server --port 0 --data-dir /tmp/vs
          vaultsync-server --database-url postgres://vaultsync:secret@127.0.0.1:5432/vaultsync
        """)

    @Option(help: "Address to listen on (VAULTSYNC_HOST).")
    var host: String = environment("VAULTSYNC_HOST") ?? "127.0.0.1"

    @Option(help: "Port to listen on; 0 picks a free one (VAULTSYNC_PORT).")
    var port: Int = environment("VAULTSYNC_PORT").flatMap(Int.init) ?? 8087

    @Option(help: "Directory for the SQLite database and the token signing key (VAULTSYNC_DATA_DIR).")
    var dataDir: String = environment("VAULTSYNC_DATA_DIR") ?? "./vaultsync-data"

    @Option(help: "postgres://user:password@host:port/database selects PostgreSQL (VAULTSYNC_DATABASE_URL).")
    var databaseURL: String = environment("VAULTSYNC_DATABASE_URL") ?? ""

    @Option(help: "trace, debug, info, notice, warning, error or critical (VAULTSYNC_LOG_LEVEL).")
    var logLevel: String = environment("VAULTSYNC_LOG_LEVEL") ?? "info"

    @Flag(help: "Refuse new registrations (VAULTSYNC_DISABLE_SIGNUPS=true).")
    var disableSignups: Bool = ["1", "true", "yes"].contains(environment("VAULTSYNC_DISABLE_SIGNUPS")?.lowercased() ?? "")

    @Option(help: "Base64 token signing key shared by several instances (VAULTSYNC_TOKEN_KEY); default: a key file in the data directory.")
    var tokenKey: String = environment("VAULTSYNC_TOKEN_KEY") ?? ""

    @Option(name: .customLong("trusted-proxy"),
            help: "Address of a reverse proxy whose X-Forwarded-For is believed for login limits; repeatable (VAULTSYNC_TRUSTED_PROXIES, comma-separated).")
    var trustedProxies: [String] = (environment("VAULTSYNC_TRUSTED_PROXIES") ?? "").split(separator: ",")
        .map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }

    func validate() throws {
        for proxy in trustedProxies where !ServerConfiguration.isIPAddress(proxy) {
            throw ValidationError("--trusted-proxy must be an IP address, not \"\(proxy)\".")
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
        guard (0...65535).contains(port) else { throw ValidationError("--port must be between 0 and 65535.") }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical.") }
        if !tokenKey.isEmpty {
            guard let key = Data(base64Encoded: tokenKey), key.count >= 32 else {
                throw ValidationError("--token-key must be base64 of at least 32 bytes.")
            }
        }
        if !databaseURL.isEmpty, !databaseURL.hasPrefix("postgres://"), !databaseURL.hasPrefix("postgresql://") {
            throw ValidationError("--database-url must start with postgres://")
        }
    }

    func run() async throws {
        var configuration = ServerConfiguration()
        configuration.host = host
        configuration.port = port
        configuration.dataDirectory = dataDir
        configuration.databaseURL = databaseURL.isEmpty ? nil : databaseURL
        configuration.logLevel = Logger.Level(rawValue: logLevel) ?? .info
        configuration.disableSignups = disableSignups
        configuration.trustedProxies = trustedProxies
        // No flag and no variable: the key file in the data directory (an empty text is "not given", not an empty key).
        configuration.tokenKey = tokenKey.isEmpty ? nil : Data(base64Encoded: tokenKey).map(Array.init)
        let level = configuration.logLevel
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let app = try await buildApplication(configuration: configuration)
        try await app.runService()
    }
}
