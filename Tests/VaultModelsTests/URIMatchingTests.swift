import Testing
import VaultModels

/// A login URI against a typed address, by each match setting.
@Suite("URI matching")
struct URIMatchingTests {
    @Test("base domain (the default): any host of the same registrable domain, a known two-label suffix kept")
    func baseDomain() {
        #expect(URIMatching.matches("https://github.com/login", match: nil, address: "github.com"))
        #expect(URIMatching.matches("https://github.com", match: .domain, address: "https://gist.github.com/alice"))
        #expect(!URIMatching.matches("https://github.com", match: nil, address: "gitlab.com"))
        #expect(!URIMatching.matches("https://github.com", match: nil, address: "github.com.evil.example"))
        #expect(URIMatching.matches("https://www.bbc.co.uk", match: nil, address: "https://account.bbc.co.uk/signin"))
        #expect(!URIMatching.matches("https://www.bbc.co.uk", match: nil, address: "https://itv.co.uk"))
        #expect(URIMatching.matches("http://192.168.1.1/admin", match: nil, address: "192.168.1.1"))
        #expect(!URIMatching.matches("http://192.168.1.1", match: nil, address: "192.168.1.2"))
        #expect(URIMatching.baseDomain("a.b.example.com") == "example.com")
        #expect(URIMatching.baseDomain("localhost") == "localhost")
    }

    @Test("host: the same host and port; starts with, exact, regular expression, never")
    func otherSettings() {
        #expect(URIMatching.matches("https://gist.github.com", match: .host, address: "https://gist.github.com/x"))
        #expect(!URIMatching.matches("https://gist.github.com", match: .host, address: "https://github.com"))
        #expect(!URIMatching.matches("https://example.com:8443", match: .host, address: "https://example.com"))
        #expect(URIMatching.matches("https://example.com:443", match: .host, address: "example.com"))
        #expect(URIMatching.matches("https://example.com/app", match: .startsWith, address: "https://example.com/app/login"))
        #expect(!URIMatching.matches("https://example.com/app", match: .startsWith, address: "https://example.com/other"))
        #expect(URIMatching.matches("https://example.com/login", match: .exact, address: "https://example.com/login"))
        #expect(!URIMatching.matches("https://example.com/login", match: .exact, address: "https://example.com/login?next=1"))
        #expect(URIMatching.matches(#"^https://[a-z]+\.example\.com/"#, match: .regularExpression, address: "https://shop.example.com/"))
        #expect(!URIMatching.matches("([", match: .regularExpression, address: "https://example.com"), "a broken expression matches nothing")
        #expect(!URIMatching.matches("https://example.com", match: .never, address: "https://example.com"))
    }
}
