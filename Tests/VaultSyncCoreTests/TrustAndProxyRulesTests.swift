import Foundation
import Testing
@testable import VaultSyncCore

@Suite("Proxy settings: which proxy for which server (curl's rules)")
struct ProxySettingsTests {
    @Test("https servers use HTTPS_PROXY, http servers HTTP_PROXY, both fall back to ALL_PROXY; lower case wins; empty is unset")
    func choice() throws {
        let environment = ["HTTPS_PROXY": "http://upper:3128", "https_proxy": "http://lower:3128", "HTTP_PROXY": "plain:8080",
                           "ALL_PROXY": "http://all:1", "no_proxy": ""]
        let settings = ProxySettings.fromEnvironment(environment)
        #expect(try settings.proxy(for: "https://vault.example.com") == ProxyEndpoint(host: "lower", port: 3128))
        #expect(try settings.proxy(for: "http://vault.example.com:8087") == ProxyEndpoint(host: "plain", port: 8080))
        let onlyAll = ProxySettings.fromEnvironment(["all_proxy": "http://all:9", "https_proxy": " "])
        #expect(try onlyAll.proxy(for: "https://vault.example.com") == ProxyEndpoint(host: "all", port: 9))
        #expect(try onlyAll.proxy(for: "http://vault.example.com") == ProxyEndpoint(host: "all", port: 9))
        #expect(try ProxySettings.fromEnvironment([:]).proxy(for: "https://vault.example.com") == nil)
        // An https server never takes HTTP_PROXY, nor an http server HTTPS_PROXY.
        #expect(try ProxySettings(httpProxy: "http://p:1").proxy(for: "https://vault.example.com") == nil)
        #expect(try ProxySettings(httpsProxy: "http://p:1").proxy(for: "http://127.0.0.1:8087") == nil)
    }

    @Test("proxy addresses: scheme optional, port 1080 by default, user and password (percent-encoded) for basic auth", arguments: [
        ("http://proxy.corp:3128", ProxyEndpoint(host: "proxy.corp", port: 3128)),
        ("proxy.corp:3128", ProxyEndpoint(host: "proxy.corp", port: 3128)),
        ("HTTP://Proxy.Corp", ProxyEndpoint(host: "Proxy.Corp", port: 1080)),
        ("http://alice:s%40cret@proxy.corp:8080/", ProxyEndpoint(host: "proxy.corp", port: 8080, username: "alice", password: "s@cret")),
        ("http://bob@10.0.0.1:8080", ProxyEndpoint(host: "10.0.0.1", port: 8080, username: "bob")),
        ("http://[::1]:3128", ProxyEndpoint(host: "::1", port: 3128)),
    ])
    func parse(text: String, expected: ProxyEndpoint) throws {
        #expect(try ProxySettings.parse(text, source: "HTTPS_PROXY") == expected)
    }

    @Test("unusable proxy settings are refused, naming the variable and never showing the password", arguments: [
        "https://proxy.corp:443", "socks5://proxy.corp:1080", "http://", "http://proxy.corp:3128/path", "http://user:hunter2@proxy:99999",
    ])
    func refused(text: String) {
        do {
            _ = try ProxySettings(httpsProxy: text).proxy(for: "https://vault.example.com")
            Issue.record("\(text) was accepted")
        } catch let error as ProxySettingError {
            #expect(error.source == "HTTPS_PROXY")
            #expect(!error.description.contains("hunter2"))
        } catch {
            Issue.record("unexpected \(error)")
        }
    }

    @Test("the endpoint's description never shows the password")
    func description() {
        #expect(ProxyEndpoint(host: "p", port: 1, username: "u", password: "secret").description == "http://u@p:1")
    }

    @Test("NO_PROXY: names match themselves and every name below them, with or without a leading dot", arguments: [
        ("vault.example.com", "example.com", true),
        ("example.com", "example.com", true),
        ("example.com", ".example.com", true),
        ("vault.example.com", ".example.com", true),
        ("VAULT.Example.COM.", "example.com.", true),
        ("badexample.com", "example.com", false),
        ("example.com.evil.net", "example.com", false),
        ("vault.example.com", "other.org, vault.example.com ,x", true),
        ("vault.example.com", "other.org,,x", false),
        ("vault.example.com", "*", true),
        ("vault.example.com", " * ", true),
        ("vault.example.com", "*.example.com", false),
        ("vault.example.com", "vault.example.com:443", true),
        ("vault.example.com", "", false),
    ])
    func noProxyNames(host: String, list: String, bypass: Bool) {
        #expect(ProxySettings.bypasses(host: host, noProxy: list) == bypass)
    }

    @Test("NO_PROXY: addresses match only addresses, exactly or by network; loopback gets no exception of its own", arguments: [
        ("127.0.0.1", "127.0.0.1", true),
        ("127.0.0.1", "127.0.0.0/8", true),
        ("127.0.0.1", "localhost", false),
        ("10.1.2.3", "10.0.0.0/8", true),
        ("11.1.2.3", "10.0.0.0/8", false),
        ("192.168.1.7", "192.168.1.0/24", true),
        ("192.168.2.7", "192.168.1.0/24", false),
        ("10.1.2.3", "10.1.2.3/33", false),
        ("::1", "::1", true),
        ("[::1]", "[::1]", true),
        ("fd00::5", "fd00::/8", true),
        ("127.0.0.1", "1.0.0.127.in-addr.arpa,example.com", false),
        ("127.0.0.1", "", false),
    ])
    func noProxyAddresses(host: String, list: String, bypass: Bool) {
        #expect(ProxySettings.bypasses(host: host, noProxy: list) == bypass)
    }

    @Test("a server named in NO_PROXY goes direct; loopback is proxied unless named (as curl does)")
    func decision() throws {
        let proxied = ProxySettings(httpsProxy: "http://proxy:3128")
        #expect(try proxied.proxy(for: "https://127.0.0.1:8443") == ProxyEndpoint(host: "proxy", port: 3128))
        #expect(try proxied.proxy(for: "https://localhost:8443") == ProxyEndpoint(host: "proxy", port: 3128))
        var exempt = proxied
        exempt.noProxy = "localhost,127.0.0.1"
        #expect(try exempt.proxy(for: "https://127.0.0.1:8443") == nil)
        #expect(try exempt.proxy(for: "https://localhost:8443") == nil)
        #expect(try exempt.proxy(for: "https://vault.example.com") != nil)
        // An exempted server is not bothered by an unusable proxy setting: it is not used.
        let broken = ProxySettings(httpsProxy: "socks5://x", noProxy: "*")
        #expect(try broken.proxy(for: "https://vault.example.com") == nil)
    }
}

@Suite("Certificate problems: why a server certificate was refused")
struct CertificateProblemTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    static func facts(trusted: Bool? = true, selfSigned: Bool = false, validFrom: Double = -86_400, validUntil: Double = 86_400,
                      dns: [String] = ["vault.example.com"], ips: [String] = []) -> CertificateFacts {
        CertificateFacts(subject: "vault.example.com", issuer: selfSigned ? "vault.example.com" : "Example Private CA",
                         notValidBefore: now.addingTimeInterval(validFrom), notValidAfter: now.addingTimeInterval(validUntil),
                         dnsNames: dns, ipAddresses: ips, selfSigned: selfSigned, chainTrusted: trusted)
    }

    @Test("each reason, the one to fix first leading", arguments: [
        (facts(trusted: false), [CertificateFailureReason.untrustedIssuer]),
        (facts(trusted: nil), [.untrustedIssuer]),
        (facts(trusted: false, selfSigned: true), [.selfSigned]),
        (facts(validUntil: -1), [.expired]),
        (facts(validFrom: 60), [.notYetValid]),
        (facts(dns: ["other.example.com"]), [.nameMismatch]),
        (facts(trusted: false, validUntil: -1, dns: ["other.example.com"]), [.untrustedIssuer, .expired, .nameMismatch]),
        (facts(), [.unknown]),
    ])
    func reasons(facts: CertificateFacts, expected: [CertificateFailureReason]) {
        let problem = CertificateProblem.diagnose(facts, host: "vault.example.com", port: 443, now: Self.now)
        #expect(problem.reasons == expected)
        #expect(problem.issuer == facts.issuer)
    }

    @Test("host names: exact, one wildcard label, IP addresses only against IP entries", arguments: [
        ("vault.example.com", ["vault.example.com"], [String](), true),
        ("VAULT.example.com.", ["vault.example.com"], [], true),
        ("vault.example.com", ["*.example.com"], [], true),
        ("a.vault.example.com", ["*.example.com"], [], false),
        ("example.com", ["*.example.com"], [], false),
        ("127.0.0.1", ["127.0.0.1"], [], false),
        ("127.0.0.1", ["localhost"], ["127.0.0.1"], true),
        ("::1", [], ["0:0:0:0:0:0:0:1"], true),
        ("localhost", [], ["127.0.0.1"], false),
    ])
    func names(host: String, dns: [String], ips: [String], matches: Bool) {
        #expect(CertificateProblem.matches(host: host, dnsNames: dns, ipAddresses: ips) == matches)
    }

    @Test("the message names the server, the issuer and what to do")
    func message() {
        let untrusted = CertificateProblem.diagnose(Self.facts(trusted: false), host: "vault.example.com", port: 443, now: Self.now)
        #expect(untrusted.description == "the certificate of vault.example.com (issued by \"Example Private CA\") is not trusted by this device: its issuer is not among the trusted authorities. Add the CA with `vaultsync config ca-file PATH` or SSL_CERT_FILE.")
        let expired = CertificateProblem.diagnose(Self.facts(validUntil: -86_400 * 3), host: "vault.example.com", port: 8443, now: Self.now)
        #expect(expired.description.contains("vault.example.com:8443"))
        #expect(expired.description.contains("expired on 2027-01-12"))
        let wrongName = CertificateProblem.diagnose(Self.facts(dns: ["a.example.com", "b.example.com"]), host: "vault.example.com", port: 443, now: Self.now)
        #expect(wrongName.description.contains("is for a.example.com, b.example.com, not vault.example.com"))
    }

    @Test("a problem survives its JSON round trip (status in a later process)")
    func coding() throws {
        let problem = CertificateProblem.diagnose(Self.facts(trusted: false), host: "vault.example.com", port: 443, now: Self.now, detail: "CERTIFICATE_VERIFY_FAILED")
        let decoded = try JSONDecoder().decode(CertificateProblem.self, from: try JSONEncoder().encode(problem))
        #expect(decoded == problem)
    }
}
