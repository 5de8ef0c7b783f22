import Foundation

/// Why a server's certificate was not accepted, in terms a person can act on.
public enum CertificateFailureReason: String, Sendable, Codable, CaseIterable {
    /// Its validity ended (`notValidAfter` is past).
    case expired
    /// Its validity has not begun (often this device's clock is wrong).
    case notYetValid
    /// It names other hosts than the one the client connected to.
    case nameMismatch
    /// It is its own issuer and is not among the trusted certificates.
    case selfSigned
    /// Its issuer does not lead to an authority this device trusts.
    case untrustedIssuer
    /// Verification failed, but the certificate could not be examined (the diagnosis connection failed).
    case unknown
}

/// What the client read from the server's certificate chain, for ``CertificateProblem/diagnose(_:host:port:now:)``.
public struct CertificateFacts: Sendable, Equatable {
    public var subject: String
    public var issuer: String
    public var notValidBefore: Date
    public var notValidAfter: Date
    /// DNS names of the subject alternative names (`*.example.com` allowed).
    public var dnsNames: [String]
    /// IP addresses of the subject alternative names, as text.
    public var ipAddresses: [String]
    /// The leaf names itself as issuer and the server sent no other certificate.
    public var selfSigned: Bool
    /// Whether the chain leads to a trusted authority, checked at a time within the leaf's validity
    /// (so that an expired certificate of a trusted CA still counts as trusted); `nil` when not checked.
    public var chainTrusted: Bool?

    public init(subject: String, issuer: String, notValidBefore: Date, notValidAfter: Date, dnsNames: [String], ipAddresses: [String],
                selfSigned: Bool, chainTrusted: Bool?) {
        self.subject = subject
        self.issuer = issuer
        self.notValidBefore = notValidBefore
        self.notValidAfter = notValidAfter
        self.dnsNames = dnsNames
        self.ipAddresses = ipAddresses
        self.selfSigned = selfSigned
        self.chainTrusted = chainTrusted
    }
}

/// A server certificate that failed verification: which server, who issued it, and why it was
/// refused. Nothing was sent to that server.
public struct CertificateProblem: Sendable, Equatable, Codable {
    public var host: String
    public var port: Int
    /// The issuer's name as the certificate gives it (its common name, else the whole name); `nil` if unknown.
    public var issuer: String?
    public var subject: String?
    /// Every reason found, the one to fix first leading.
    public var reasons: [CertificateFailureReason]
    public var notValidBefore: Date?
    public var notValidAfter: Date?
    /// The names the certificate is valid for.
    public var names: [String]
    /// What the TLS library said (kept for logs).
    public var detail: String

    public init(host: String, port: Int, issuer: String? = nil, subject: String? = nil, reasons: [CertificateFailureReason],
                notValidBefore: Date? = nil, notValidAfter: Date? = nil, names: [String] = [], detail: String = "") {
        self.host = host
        self.port = port
        self.issuer = issuer
        self.subject = subject
        self.reasons = reasons.isEmpty ? [.unknown] : reasons
        self.notValidBefore = notValidBefore
        self.notValidAfter = notValidAfter
        self.names = names
        self.detail = detail
    }

    /// The leading reason.
    public var reason: CertificateFailureReason { reasons.first ?? .unknown }

    /// Decides why a certificate that failed verification was refused. The order is the order of
    /// fixing: an untrusted or self-signed certificate needs a CA on this device whatever else is
    /// wrong; then the dates; then the name.
    public static func diagnose(_ facts: CertificateFacts, host: String, port: Int, now: Date, detail: String = "") -> CertificateProblem {
        var reasons: [CertificateFailureReason] = []
        if facts.chainTrusted != true {
            reasons.append(facts.selfSigned ? .selfSigned : .untrustedIssuer)
        }
        if now > facts.notValidAfter { reasons.append(.expired) }
        if now < facts.notValidBefore { reasons.append(.notYetValid) }
        if !matches(host: host, dnsNames: facts.dnsNames, ipAddresses: facts.ipAddresses) { reasons.append(.nameMismatch) }
        // Everything looked right from here, yet the TLS library refused: say so, without guessing.
        if reasons.isEmpty { reasons.append(facts.chainTrusted == true ? .unknown : .untrustedIssuer) }
        return CertificateProblem(host: host, port: port, issuer: facts.issuer, subject: facts.subject, reasons: reasons,
                                  notValidBefore: facts.notValidBefore, notValidAfter: facts.notValidAfter,
                                  names: facts.dnsNames + facts.ipAddresses, detail: detail)
    }

    /// Whether `host` is among the certificate's names (RFC 6125: one `*` as the whole leftmost label;
    /// IP addresses only against IP entries).
    public static func matches(host: String, dnsNames: [String], ipAddresses: [String]) -> Bool {
        var name = host.lowercased()
        if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        if name.hasSuffix(".") { name.removeLast() }
        if let address = IPAddress(name) {
            return ipAddresses.contains { IPAddress($0) == address }
        }
        for pattern in dnsNames {
            var candidate = pattern.lowercased()
            if candidate.hasSuffix(".") { candidate.removeLast() }
            if candidate == name { return true }
            if candidate.hasPrefix("*.") {
                let suffix = candidate.dropFirst(1)
                if name.hasSuffix(suffix), !name.dropLast(suffix.count).contains("."), name.count > suffix.count { return true }
            }
        }
        return false
    }

    static func day(_ date: Date?) -> String {
        guard let date else { return "?" }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withFullDate]
        return formatter.string(from: date)
    }
}

extension CertificateProblem: CustomStringConvertible {
    /// One sentence a person can act on, naming the server, the issuer and the reason.
    public var description: String {
        let server = port == 443 ? host : "\(host):\(port)"
        let issued = issuer.map { " (issued by \"\($0)\")" } ?? ""
        let addCA = "Add the CA with `vaultsync config ca-file PATH` or SSL_CERT_FILE."
        switch reason {
        case .untrustedIssuer:
            return "the certificate of \(server)\(issued) is not trusted by this device: its issuer is not among the trusted authorities. \(addCA)"
        case .selfSigned:
            return "the certificate of \(server) is self-signed\(subject.map { " (\"\($0)\")" } ?? ""), not issued by an authority this device trusts. If this is your own server, add that certificate (or the CA that should sign it) with `vaultsync config ca-file PATH` or SSL_CERT_FILE."
        case .expired:
            return "the certificate of \(server)\(issued) expired on \(Self.day(notValidAfter)); it must be renewed on the server (or this device's clock is wrong)."
        case .notYetValid:
            return "the certificate of \(server)\(issued) is not valid before \(Self.day(notValidBefore)); check this device's clock, or the server's certificate."
        case .nameMismatch:
            let list = names.isEmpty ? "no name" : names.prefix(5).joined(separator: ", ")
            return "the certificate presented by \(server)\(issued) is for \(list), not \(host): the server address may be wrong, or something else answers in its place."
        case .unknown:
            return "the certificate of \(server)\(issued) was refused\(detail.isEmpty ? "" : " (\(detail))")."
        }
    }
}
