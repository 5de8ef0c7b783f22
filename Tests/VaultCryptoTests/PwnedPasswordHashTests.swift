import Testing
import VaultCrypto

/// The range query of Have I Been Pwned's Pwned Passwords API: the SHA-1 split as the service expects it
/// (SHA-1 of "password" as Python's hashlib gives it, 2026-12-02), and the count found in an answer.
@Suite("Pwned Passwords range query")
struct PwnedPasswordHashTests {
    @Test("five upper-case hex digits of the SHA-1 are the prefix sent; the other 35 are matched here")
    func split() {
        let parts = PwnedPasswordHash.split("password")
        #expect(parts.prefix == "5BAA6" && parts.suffix == "1E4C9B93F3F0682250B6CF8331B7EE68FD8")
        #expect(PwnedPasswordHash.split("gh-two") == ("CDC8E", "82A3D3C7737A35D4448240A5B67E807D348"))
        #expect(PwnedPasswordHash.split("pässwörd").prefix.count == 5, "UTF-8 bytes are hashed")
    }

    @Test("the count is the matching line's, any case, CRLF or LF; padding lines (count 0) and other suffixes do not count")
    func count() {
        let answer = "0018A45C4D1DEF81644B54AB7F969B88D65:1\r\n1E4C9B93F3F0682250B6CF8331B7EE68FD8:9659365\r\n1E4C9B93F3F0682250B6CF8331B7EE68FD9:0\r\n"
        #expect(PwnedPasswordHash.count(of: "1E4C9B93F3F0682250B6CF8331B7EE68FD8", inRange: answer) == 9_659_365)
        #expect(PwnedPasswordHash.count(of: "1E4C9B93F3F0682250B6CF8331B7EE68FD8", inRange: answer.lowercased().replacingOccurrences(of: "\r\n", with: "\n")) == 9_659_365)
        #expect(PwnedPasswordHash.count(of: "82A3D3C7737A35D4448240A5B67E807D348", inRange: answer) == 0)
        #expect(PwnedPasswordHash.count(of: "1E4C9B93F3F0682250B6CF8331B7EE68FD8", inRange: "") == 0)
    }
}
