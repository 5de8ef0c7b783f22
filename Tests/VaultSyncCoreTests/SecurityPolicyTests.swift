import Testing
import VaultCrypto
@testable import VaultSyncCore

@Suite("Security policies: KDF pinning and minimums, server addresses")
struct SecurityPolicyTests {
    static let argon = KdfConfiguration.argon2id(iterations: 3, memoryMiB: 64, parallelism: 4)

    @Test("a pinned account accepts equal or stronger settings and refuses every weaker one", arguments: [
        // (pinned, offered, accepted)
        (KdfConfiguration.pbkdf2(iterations: 600_000), KdfConfiguration.pbkdf2(iterations: 600_000), true),
        (.pbkdf2(iterations: 600_000), .pbkdf2(iterations: 800_000), true),
        (.pbkdf2(iterations: 600_000), .pbkdf2(iterations: 599_999), false),
        (.pbkdf2(iterations: 100_000), .pbkdf2(iterations: 100_000), true),
        (.pbkdf2(iterations: 100_000), .pbkdf2(iterations: 5_000), false),
        (argon, argon, true),
        (argon, .argon2id(iterations: 3, memoryMiB: 64, parallelism: 1), true),
        (argon, .argon2id(iterations: 4, memoryMiB: 128, parallelism: 4), true),
        (argon, .argon2id(iterations: 2, memoryMiB: 64, parallelism: 4), false),
        (argon, .argon2id(iterations: 3, memoryMiB: 63, parallelism: 4), false),
        (argon, .argon2id(iterations: 10, memoryMiB: 16, parallelism: 4), false),
        // Memory-hardness is never traded for iterations.
        (argon, .pbkdf2(iterations: 2_000_000), false),
        // Moving to Argon2id at the current minimums or above is not weaker.
        (.pbkdf2(iterations: 600_000), .argon2id(iterations: 2, memoryMiB: 16, parallelism: 1), true),
        (.pbkdf2(iterations: 100_000), argon, true),
    ])
    func pinned(pinned: KdfConfiguration, offered: KdfConfiguration, accepted: Bool) {
        let verdict = KdfPolicy.evaluate(offered: offered, pinned: pinned, confirmed: nil)
        #expect(verdict == (accepted ? .accept : .weakerThanPinned(pinned: pinned, offered: offered)))
        // The user's confirmation of exactly the offered settings lifts the refusal; of others, nothing.
        #expect(KdfPolicy.evaluate(offered: offered, pinned: pinned, confirmed: offered) == .accept)
        if !accepted {
            #expect(KdfPolicy.evaluate(offered: offered, pinned: pinned, confirmed: pinned) == verdict)
        }
    }

    @Test("a first login needs Bitwarden's current minimums", arguments: [
        (KdfConfiguration.pbkdf2(iterations: 600_000), true),
        (.pbkdf2(iterations: 599_999), false),
        (.pbkdf2(iterations: 5_000), false),
        (.argon2id(iterations: 2, memoryMiB: 16, parallelism: 1), true),
        (.argon2id(iterations: 1, memoryMiB: 64, parallelism: 4), false),
        (.argon2id(iterations: 3, memoryMiB: 15, parallelism: 4), false),
        (argon, true),
    ])
    func firstLogin(offered: KdfConfiguration, accepted: Bool) {
        #expect(KdfPolicy.evaluate(offered: offered, pinned: nil, confirmed: nil) == (accepted ? .accept : .belowMinimums(offered: offered)))
        #expect(KdfPolicy.evaluate(offered: offered, pinned: nil, confirmed: offered) == .accept)
    }

    @Test("settings are named for people and typed back exactly")
    func settingsWords() {
        #expect(KdfConfiguration.pbkdf2(iterations: 100_000).summary == "PBKDF2-SHA256 with 100,000 iterations")
        #expect(KdfConfiguration.pbkdf2(iterations: 5_000).spec == "pbkdf2:5000")
        #expect(Self.argon.summary == "Argon2id with 3 iterations, 64 MiB and 4 lanes")
        for settings in [KdfConfiguration.pbkdf2(iterations: 600_000), Self.argon] {
            #expect(KdfConfiguration(spec: settings.spec) == settings)
        }
        for bad in ["", "pbkdf2", "pbkdf2:", "pbkdf2:x", "argon2id:3,64", "argon2id:3,,4", "scrypt:1", "pbkdf2:1,2"] {
            #expect(KdfConfiguration(spec: bad) == nil, "\(bad)")
        }
    }

    @Test("https anywhere, plain http only on loopback unless explicitly allowed", arguments: [
        ("https://vault.example.com", false, ServerAddress.Verdict.secure),
        ("HTTPS://vault.example.com:8443/base", false, .secure),
        ("http://127.0.0.1:8087", false, .loopback),
        ("http://user:secret@127.0.0.1:8087", false, .loopback),
        ("http://127.8.9.10", false, .loopback),
        ("http://localhost:8087", false, .loopback),
        ("http://[::1]:8087", false, .loopback),
        ("http://vault.example.com", true, .plainHTTPAllowed(host: "vault.example.com")),
        ("http://192.168.1.5", true, .plainHTTPAllowed(host: "192.168.1.5")),
    ])
    func allowed(url: String, allowPlain: Bool, verdict: ServerAddress.Verdict) {
        #expect(ServerAddress.check(url, allowPlainHTTP: allowPlain) == verdict)
    }

    @Test("refused addresses say why", arguments: [
        "http://vault.example.com", "http://128.0.0.1", "http://127.0.0.1.example.com", "http://localhost.evil.com",
        "ftp://vault.example.com", "vault.example.com", "http://", "",
    ])
    func refused(url: String) {
        guard case .refused(let reason) = ServerAddress.check(url, allowPlainHTTP: false) else {
            Issue.record("\(url) was not refused")
            return
        }
        #expect(!reason.isEmpty)
    }

    @Test("a port out of range and an IPv6 address without brackets are refused, even where plain HTTP is allowed, saying how to write them",
          arguments: [
              ("http://127.0.0.1:99999", "port 99999: a port is between 1 and 65535"),
              ("https://vault.example.com:70000", "port 70000"),
              ("http://127.0.0.1:0", "port 0"),
              ("http://::1:18473", "IPv6 address without brackets: write it as http://[ADDRESS]:PORT"),
              ("https://fe80::1/base", "IPv6 address without brackets"),
          ])
    func malformedAddress(url: String, message: String) {
        guard case .refused(let reason) = ServerAddress.check(url, allowPlainHTTP: true) else {
            Issue.record("\(url) was not refused")
            return
        }
        #expect(reason.contains(message), "\(reason)")
    }
}
