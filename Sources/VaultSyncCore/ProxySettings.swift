import Foundation

/// An HTTP proxy that tunnels with CONNECT, optionally with basic authentication.
public struct ProxyEndpoint: Sendable, Hashable {
    public var host: String
    public var port: Int
    public var username: String?
    public var password: String?

    public init(host: String, port: Int, username: String? = nil, password: String? = nil) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
    }
}

extension ProxyEndpoint: CustomStringConvertible {
    /// `http://[user@]host:port`, never the password.
    public var description: String {
        let bracketed = host.contains(":") ? "[\(host)]" : host
        return "http://\(username.map { "\($0)@" } ?? "")\(bracketed):\(port)"
    }
}

/// A proxy setting that cannot be used.
public struct ProxySettingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Where the setting came from (`HTTPS_PROXY`, say).
    public var source: String
    public var reason: String

    public var description: String { "the proxy setting \(source) cannot be used: \(reason)" }
}

/// The proxy settings a caller hands to the engine (the command line reads them from the environment;
/// the library never reads environment variables itself), and the decision which proxy a server
/// address goes through. Follows curl:
///
/// - `https://` servers use `https_proxy`/`HTTPS_PROXY`, `http://` servers `http_proxy`/`HTTP_PROXY`;
///   either falls back to `all_proxy`/`ALL_PROXY`. The lower-case name wins when both are set, and an
///   empty value counts as unset.
/// - A proxy is `http://[user:password@]host[:port]` (no scheme means `http://`, no port 1080, as in
///   curl). Only HTTP proxies are supported: the connection to the server is tunnelled with CONNECT,
///   and TLS runs end to end through the tunnel, so the proxy sees neither the tokens nor the vault.
/// - `no_proxy`/`NO_PROXY`: a comma-separated list. `*` alone means no proxy at all. A name matches
///   the host itself and every name below it (`example.com` and `.example.com` both match
///   `example.com` and `vault.example.com`, not `badexample.com`), ignoring case and a trailing dot.
///   An IP address matches only the same address, or a network written `192.168.0.0/16`.
/// - Loopback addresses get no exception of their own: as with curl, `127.0.0.1` and `localhost` go
///   through the proxy unless `NO_PROXY` names them.
public struct ProxySettings: Sendable, Hashable {
    public var httpsProxy: String?
    public var httpProxy: String?
    public var allProxy: String?
    public var noProxy: String?
    /// The names the values came from, for error messages.
    public var httpsProxySource = "HTTPS_PROXY"
    public var httpProxySource = "HTTP_PROXY"
    public var allProxySource = "ALL_PROXY"

    public init(httpsProxy: String? = nil, httpProxy: String? = nil, allProxy: String? = nil, noProxy: String? = nil) {
        self.httpsProxy = httpsProxy
        self.httpProxy = httpProxy
        self.allProxy = allProxy
        self.noProxy = noProxy
    }

    /// The settings in a set of environment variables (given by the caller), lower-case names first.
    public static func fromEnvironment(_ environment: [String: String]) -> ProxySettings {
        func value(_ names: String...) -> (String, String)? {
            for name in names {
                if let value = environment[name]?.trimmingCharacters(in: .whitespaces), !value.isEmpty { return (name, value) }
            }
            return nil
        }
        var settings = ProxySettings()
        if let (name, text) = value("https_proxy", "HTTPS_PROXY") { settings.httpsProxy = text; settings.httpsProxySource = name }
        if let (name, text) = value("http_proxy", "HTTP_PROXY") { settings.httpProxy = text; settings.httpProxySource = name }
        if let (name, text) = value("all_proxy", "ALL_PROXY") { settings.allProxy = text; settings.allProxySource = name }
        settings.noProxy = value("no_proxy", "NO_PROXY")?.1
        return settings
    }

    /// Whether nothing is set.
    public var isEmpty: Bool { httpsProxy == nil && httpProxy == nil && allProxy == nil }

    /// The proxy a request to `url` goes through, `nil` for a direct connection. Throws when the
    /// setting that applies cannot be parsed (never silently direct: the user asked for a proxy).
    public func proxy(for url: String) throws -> ProxyEndpoint? {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
              let host = components.host, !host.isEmpty else { return nil }
        let chosen: (String, String)?
        switch scheme {
        case "https": chosen = httpsProxy.map { (httpsProxySource, $0) } ?? allProxy.map { (allProxySource, $0) }
        case "http": chosen = httpProxy.map { (httpProxySource, $0) } ?? allProxy.map { (allProxySource, $0) }
        default: chosen = nil
        }
        guard let (source, text) = chosen else { return nil }
        if Self.bypasses(host: host, noProxy: noProxy) { return nil }
        return try Self.parse(text, source: source)
    }

    /// Parses `http://[user:password@]host[:port]`; user and password may be percent-encoded.
    public static func parse(_ text: String, source: String) throws -> ProxyEndpoint {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let withScheme = trimmed.contains("://") ? trimmed : "http://" + trimmed
        guard let components = URLComponents(string: withScheme), let scheme = components.scheme?.lowercased() else {
            throw ProxySettingError(source: source, reason: "\"\(redacted(trimmed))\" is not a proxy address (http://[user:password@]host:port)")
        }
        guard scheme == "http" else {
            throw ProxySettingError(source: source, reason: "\(scheme):// proxies are not supported; give an HTTP proxy (http://host:port), which tunnels TLS with CONNECT")
        }
        guard let host = components.host, !host.isEmpty else {
            throw ProxySettingError(source: source, reason: "\"\(redacted(trimmed))\" has no host")
        }
        if !components.path.isEmpty, components.path != "/" {
            throw ProxySettingError(source: source, reason: "\"\(redacted(trimmed))\" has a path; give only http://host:port")
        }
        let port = components.port ?? 1080
        guard (1...65535).contains(port) else { throw ProxySettingError(source: source, reason: "port \(port) is out of range") }
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        return ProxyEndpoint(host: bare, port: port, username: components.user?.removingPercentEncoding ?? components.user,
                             password: components.password?.removingPercentEncoding ?? components.password)
    }

    /// The text without its password, for messages.
    static func redacted(_ text: String) -> String {
        guard let at = text.lastIndex(of: "@") else { return text }
        let start = text.range(of: "://")?.upperBound ?? text.startIndex
        let userInfo = text[start..<at]
        guard let colon = userInfo.firstIndex(of: ":") else { return text }
        return String(text[..<colon]) + ":***" + String(text[at...])
    }

    /// Whether `host` is exempted by a `no_proxy` list (curl's rules, see the type's documentation).
    public static func bypasses(host: String, noProxy: String?) -> Bool {
        guard let noProxy, !noProxy.trimmingCharacters(in: .whitespaces).isEmpty else { return false }
        if noProxy.trimmingCharacters(in: .whitespaces) == "*" { return true }
        var name = host.lowercased()
        if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        if name.hasSuffix(".") { name.removeLast() }
        let address = IPAddress(name)
        for raw in noProxy.split(separator: ",") {
            var entry = raw.trimmingCharacters(in: .whitespaces).lowercased()
            guard !entry.isEmpty else { continue }
            if let address {
                var bits: Int?
                if let slash = entry.firstIndex(of: "/") {
                    guard let value = Int(entry[entry.index(after: slash)...]) else { continue }
                    bits = value
                    entry = String(entry[..<slash])
                }
                if entry.hasPrefix("["), entry.hasSuffix("]") { entry = String(entry.dropFirst().dropLast()) }
                guard let network = IPAddress(entry), network.matches(address, bits: bits) else { continue }
                return true
            } else {
                if entry.hasPrefix(".") { entry.removeFirst() }
                if entry.hasSuffix(".") { entry.removeLast() }
                // A name entry may carry a port (curl ignores it when matching names).
                if let colon = entry.lastIndex(of: ":"), Int(entry[entry.index(after: colon)...]) != nil, !entry.contains("]") {
                    entry = String(entry[..<colon])
                }
                guard !entry.isEmpty, IPAddress(entry) == nil else { continue }
                if name == entry || name.hasSuffix("." + entry) { return true }
            }
        }
        return false
    }
}

/// An IPv4 or IPv6 address as bytes, for `no_proxy` matching.
struct IPAddress: Equatable {
    var bytes: [UInt8]

    init?(_ text: String) {
        var v4 = in_addr()
        var v6 = in6_addr()
        if text.withCString({ inet_pton(AF_INET, $0, &v4) }) == 1 {
            bytes = withUnsafeBytes(of: &v4) { Array($0) }
        } else if text.withCString({ inet_pton(AF_INET6, $0, &v6) }) == 1 {
            bytes = withUnsafeBytes(of: &v6) { Array($0) }
        } else {
            return nil
        }
    }

    /// Whether `other` is in this network of `bits` leading bits (`nil` or 0: the whole address).
    func matches(_ other: IPAddress, bits: Int?) -> Bool {
        guard bytes.count == other.bytes.count else { return false }
        let total = bytes.count * 8
        let prefix = (bits == nil || bits == 0) ? total : bits!
        guard prefix <= total, prefix > 0 else { return false }
        for bit in 0..<prefix {
            let mask = UInt8(0x80) >> UInt8(bit % 8)
            if bytes[bit / 8] & mask != other.bytes[bit / 8] & mask { return false }
        }
        return true
    }
}
