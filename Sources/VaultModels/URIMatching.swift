import Foundation

/// Whether a login's URI matches an address a person typed or a page has, by the URI's own match
/// setting (Bitwarden's `UriMatchType`; none set means "base domain", as in the official clients).
///
/// The base domain is the host's last two labels, or three under a known two-label public suffix
/// (`co.uk`, `com.au`, …). The official clients use the whole Public Suffix List; a host under a rarer
/// multi-label suffix is matched more broadly here (both hosts still end in the same suffix and label).
/// An IP address or a single-label host (`localhost`) is its own base domain.
public enum URIMatching {
    static let twoLabelSuffixes: Set<String> = [
        "co.uk", "org.uk", "ac.uk", "gov.uk", "me.uk", "net.uk", "com.au", "net.au", "org.au", "edu.au", "gov.au",
        "co.nz", "org.nz", "co.jp", "ne.jp", "or.jp", "com.br", "com.cn", "com.mx", "co.in", "co.za", "com.tr", "co.kr",
        "com.sg", "com.hk", "com.tw", "com.ar",
    ]

    /// `address` with a scheme: a bare host ("github.com") is taken as https.
    public static func normalized(_ address: String) -> String {
        address.contains("://") ? address : "https://" + address
    }

    /// The lower-cased host of `address` (nil when it has none).
    public static func host(_ address: String) -> String? {
        URLComponents(string: normalized(address.trimmingCharacters(in: .whitespaces)))?.host?.lowercased().nilIfEmpty
    }

    /// Host and port (the scheme's default port when none is given).
    static func hostAndPort(_ address: String) -> String? {
        guard let components = URLComponents(string: normalized(address.trimmingCharacters(in: .whitespaces))),
              let host = components.host?.lowercased(), !host.isEmpty else { return nil }
        let port = components.port ?? (components.scheme?.lowercased() == "http" ? 80 : 443)
        return "\(host):\(port)"
    }

    public static func baseDomain(_ host: String) -> String {
        let labels = host.split(separator: ".").map(String.init)
        if labels.count <= 2 || labels.allSatisfy({ Int($0) != nil }) || host.contains(":") { return host }
        let lastTwo = labels.suffix(2).joined(separator: ".")
        let keep = twoLabelSuffixes.contains(lastTwo) ? 3 : 2
        return labels.suffix(keep).joined(separator: ".")
    }

    /// Whether `stored` (a login's URI, with its match setting) matches `address`.
    public static func matches(_ stored: String, match: URIMatchType?, address: String) -> Bool {
        let target = normalized(address.trimmingCharacters(in: .whitespaces))
        switch match ?? .domain {
        case .domain:
            guard let one = host(stored), let other = host(target) else { return false }
            return baseDomain(one) == baseDomain(other)
        case .host:
            guard let one = hostAndPort(stored), let other = hostAndPort(target) else { return false }
            return one == other
        case .startsWith:
            return target.lowercased().hasPrefix(normalized(stored).lowercased())
        case .exact:
            return target.lowercased() == normalized(stored).lowercased()
        case .regularExpression:
            guard let expression = try? NSRegularExpression(pattern: stored, options: [.caseInsensitive]) else { return false }
            return expression.firstMatch(in: target, range: NSRange(target.startIndex..., in: target)) != nil
        default:
            // `never`, and a setting this version does not know: no match.
            return false
        }
    }
}

extension String {
    fileprivate var nilIfEmpty: String? { isEmpty ? nil : self }
}
