import Foundation

/// Whether the client may talk to a server address (docs/SECURITY.md, "Plain HTTP").
///
/// Everything the client sends is encrypted except what authenticates it: the master-password hash
/// at login, the access and refresh tokens. Over plain HTTP anyone on the path reads and replaces
/// those, and the unauthenticated KDF settings of the prelogin answer with them. So `https://` is
/// required, except for a server on this machine's loopback interface (a local server or a test),
/// or when the user turned the check off on purpose (``allowPlainHTTP``, loudly named).
public enum ServerAddress {
    public enum Verdict: Sendable, Equatable {
        /// `https://`.
        case secure
        /// `http://` to 127.0.0.0/8, `::1` or `localhost`.
        case loopback
        /// `http://` to another host, allowed by the user's explicit override: warn every time.
        case plainHTTPAllowed(host: String)
        /// Refused, with the reason a person reads.
        case refused(String)
    }

    /// Checks `url` (the server's base URL).
    public static func check(_ url: String, allowPlainHTTP: Bool) -> Verdict {
        if let authority = url.range(of: "://").map({ url[$0.upperBound...].prefix { $0 != "/" }.split(separator: "@").last ?? "" }),
           !authority.contains("["), authority.filter({ $0 == ":" }).count >= 2 {
            return .refused("\"\(url)\" has an IPv6 address without brackets: write it as http://[ADDRESS]:PORT, e.g. http://[::1]:8087")
        }
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
              let host = components.host, !host.isEmpty else {
            return .refused("\"\(url)\" is not an http(s) URL with a host")
        }
        if let port = components.port, !(1...65_535).contains(port) {
            return .refused("\"\(url)\" has port \(port): a port is between 1 and 65535")
        }
        switch scheme {
        case "https":
            return .secure
        case "http":
            if isLoopback(host) { return .loopback }
            if allowPlainHTTP { return .plainHTTPAllowed(host: host) }
            return .refused("\(url) is plain HTTP to another machine: the login hash and the session's tokens would cross the network readable and replaceable. Use https://, or, only for a test network you control, allow plain HTTP explicitly")
        default:
            return .refused("\"\(url)\" is not an http(s) URL")
        }
    }

    /// Whether `host` names this machine's loopback interface.
    public static func isLoopback(_ host: String) -> Bool {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        let lowered = bare.lowercased()
        if lowered == "localhost" || lowered.hasSuffix(".localhost") || lowered == "::1" { return true }
        let octets = lowered.split(separator: ".", omittingEmptySubsequences: false)
        guard octets.count == 4, octets.allSatisfy({ UInt8($0) != nil }) else { return false }
        return octets[0] == "127"
    }
}
