import Foundation
import Logging
import VaultCrypto

/// Everything the server can be told, with the defaults `vaultsync-server` uses. Built from flags and
/// environment variables at the edge and passed down; no globals.
public struct ServerConfiguration: Sendable {
    public var host = "127.0.0.1"
    /// 0 picks a free port (reported on start).
    public var port = 8087
    /// Holds the SQLite database (when no URL is given) and the token signing key.
    public var dataDirectory = "./vaultsync-data"
    /// `postgres://user:password@host:port/database` selects PostgreSQL.
    public var databaseURL: String?
    public var logLevel: Logger.Level = .info
    /// Sign-ups closed: only addresses an administrator invited may register (`admin invite`).
    public var disableSignups = false
    /// On SIGTERM or SIGINT: how long requests in flight and notification connections get to finish before
    /// the server stops anyway.
    public var shutdownTimeout: Duration = .seconds(10)
    /// How long a server starting while PostgreSQL does not answer keeps retrying (`nil`: until it answers).
    public var databaseWait: Duration?
    /// The access-token signing key; when `nil` it is read from (or created in) the data directory.
    public var tokenKey: [UInt8]?
    /// Access-token lifetime in seconds (official: 3600).
    public var accessTokenLifetime: Int64 = 3600
    /// Refresh-token chain lifetime in seconds, counted from the password login that started it; refreshing
    /// does not extend it (docs/PROTOCOL.md, "Refresh tokens").
    public var refreshTokenLifetime: Int64 = 30 * 86_400
    /// How long, in seconds, the token before the current one still answers (with the same successor) after
    /// a refresh, for a client whose answer was lost; after that, presenting it revokes the device.
    public var refreshTokenGracePeriod: Int64 = 120
    /// PBKDF2 iterations of the server-side hash of master-password hashes (never below 600,000).
    public var passwordIterations = 600_000
    /// Tests only: a stored-hash cost below the minimum. Every in-process test server shares one queue
    /// of slow hashes (one per core, ``slowHash``); a suite's bursts of registrations and logins
    /// queued behind it for longer than a test client's request deadline. The executable never sets it.
    public var insecureTestingPasswordIterations: Int?

    /// The iterations of the stored password hash this server writes (and spends on the decoy hash of an
    /// unknown account): ``passwordIterations``, never below the minimum, unless a test lowered it.
    public var storedHashIterations: Int {
        insecureTestingPasswordIterations ?? max(passwordIterations, StoredPasswordHash.minimumIterations)
    }
    /// Largest JSON body accepted (413 beyond).
    public var maxBodyBytes = 4 * 1024 * 1024
    /// Largest import body accepted.
    public var maxImportBytes = 64 * 1024 * 1024
    /// Largest attachment file accepted (`--attachment-limit`): a v2 create announcing more is refused, and
    /// an upload is cut off at its announced size. Files stream, so this bounds storage, not memory.
    public var maxAttachmentBytes = 100 * 1024 * 1024
    /// The notifications hub (docs/PROTOCOL.md, "The notifications hub"): open connections allowed per
    /// account and per client address, the server's ping interval, and how long a connection may stay
    /// silent (clients ping every 15 s) before it is closed.
    public var hubConnectionsPerUser = 20
    public var hubConnectionsPerAddress = 100
    public var hubPingInterval: Duration = .seconds(15)
    /// `GET /metrics` in Prometheus' format (`--metrics`); off unless asked.
    public var metricsEnabled = false
    /// When set, `/metrics` answers only a request with `Authorization: Bearer TOKEN` (`--metrics-token-file`).
    public var metricsToken: String?
    public var hubIdleTimeout: Duration = .seconds(30)
    /// How long an organization invite can be accepted, in seconds (official: 5 days).
    public var inviteLifetime: Int64 = 5 * 86_400
    /// Login attempts per account: burst, then one per `accountRefillSeconds`.
    public var accountLoginBurst = 10.0
    public var accountRefillSeconds = 6.0
    /// Login attempts per client address.
    public var addressLoginBurst = 60.0
    public var addressRefillSeconds = 1.0
    /// Failed logins in a row of one account from one address before it is locked out from there for
    /// `loginLockoutBaseSeconds`; each further failure doubles the lockout, up to `loginLockoutMaxSeconds`.
    public var accountLockoutThreshold = 20
    /// Failed logins from one address (any accounts) before the address is locked out the same way.
    public var addressLockoutThreshold = 200
    public var loginLockoutBaseSeconds = 60.0
    public var loginLockoutMaxSeconds = 86_400.0
    /// Wrong two-step codes in a row for one account (from any address: whoever sends them knows the
    /// password) before it is locked out for `loginLockoutBaseSeconds`, doubling with each further one.
    public var twoFactorLockoutThreshold = 5
    /// Registrations per client address: burst, then one per `registrationRefillSeconds`.
    public var registrationBurst = 60.0
    public var registrationRefillSeconds = 60.0
    /// Registrations refused from one address because the email has an account (probing for accounts)
    /// before the address may not register for `loginLockoutBaseSeconds`, doubling with each further one.
    public var registrationLockoutThreshold = 10
    /// Keys each table of a login limiter holds (accounts, addresses, account-and-address failures)
    /// before it evicts its least recently used cold ones; never an active lockout or a partly used bucket.
    public var loginLimiterCapacity = LoginRateLimiter.defaultCapacity
    /// Refused logins are logged as one summary line per this many seconds, not one line each.
    public var refusalLogIntervalSeconds = 60.0
    /// Addresses of reverse proxies whose `X-Forwarded-For` header is believed (exact IP addresses). From
    /// any other peer the header is ignored and the socket's address is the client's.
    public var trustedProxies: [String] = []
    /// Origins (`https://vault.example.com`) whose pages may call this server from a browser, beside the official
    /// desktop app's and Safari extension's, which are always allowed (docs/PROTOCOL.md, "Cross-origin requests").
    public var corsOrigins: [String] = []
    /// Serve the VaultSync bulk extensions (`POST /api/vaultsync/ciphers/bulk-update` and `…/bulk-create`); off, the
    /// server looks like any Bitwarden-compatible server to clients (tests use this for the fallback).
    public var bulkUpdateEnabled = true
    /// Most ciphers in one bulk update.
    public var bulkUpdateLimit = 1000
    /// Serve HTTPS with this certificate and key instead of plain HTTP (docs/PROTOCOL.md, "TLS").
    public var tls: TLSFiles?
    /// Called with every notification the hub hands to this node, as the JSON hub protocol's record
    /// (`{"type":1,"target":"ReceiveMessage",…}` and 0x1E) and the users it is for, before it reaches
    /// the node's connections. For a process that embeds the server and carries notifications by
    /// other means: the in-process simulation delivers them to its devices with drops, duplicates and
    /// reordering. nil (the default): none.
    public var notificationObserver: (@Sendable (_ userIDs: [String], _ record: String) -> Void)?
    /// The clock, in microseconds since the epoch (tests move it to expire tokens).
    public var now: @Sendable () -> Int64 = { Int64((Date().timeIntervalSince1970 * 1_000_000).rounded()) }

    public init() {}

    /// Whether `text` is an IPv4 or IPv6 address literal (for `trustedProxies`).
    public static func isIPAddress(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }

    /// Where the SQLite database lives when no URL is given.
    public var sqlitePath: String { (dataDirectory as NSString).appendingPathComponent("vaultsync.sqlite") }
    /// Where the signing key lives when not configured.
    public var tokenKeyPath: String { (dataDirectory as NSString).appendingPathComponent("token-signing.key") }
}

extension ServerConfiguration {
    /// PEM files for HTTPS: the certificate chain (the server's certificate first) and its private key.
    public struct TLSFiles: Sendable, Equatable {
        public var certificateChainPath: String
        public var privateKeyPath: String

        public init(certificateChainPath: String, privateKeyPath: String) {
            self.certificateChainPath = certificateChainPath
            self.privateKeyPath = privateKeyPath
        }

        /// Reads both files and checks that they make a TLS server (the key belongs to the certificate);
        /// throws ``ServerConfigurationError/tls(_:)`` saying which file is wrong.
        public func validate() throws {
            _ = try TLSSetup.serverConfiguration(self)
        }
    }

    /// `http` or `https`.
    public var scheme: String { tls == nil ? "http" : "https" }
}

/// Configuration errors, reported before the server starts.
public enum ServerConfigurationError: Error, CustomStringConvertible {
    case dataDirectory(String)
    case tokenKey(String)
    case tls(String)

    public var description: String {
        switch self {
        case .tls(let reason): return "TLS: \(reason)"
        case .dataDirectory(let reason): return "data directory: \(reason)"
        case .tokenKey(let reason): return "token signing key: \(reason)"
        }
    }
}
