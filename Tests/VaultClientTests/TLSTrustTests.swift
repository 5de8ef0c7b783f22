import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import Testing
import VaultAPI
import VaultClient
import VaultModels
import VaultSyncCore
import VaultTestSupport

/// A TLS endpoint on loopback (OS-chosen port) presenting a given certificate. It answers nothing:
/// it counts completed handshakes and the application bytes that arrive after one. A client that
/// refuses the certificate completes no handshake and sends no byte.
final class TLSListener: Sendable {
    let channel: any Channel
    let counts = NIOLockedValueBox<(handshakes: Int, applicationBytes: Int)>((0, 0))

    var port: Int { channel.localAddress?.port ?? 0 }
    var url: String { "https://127.0.0.1:\(port)" }
    var handshakes: Int { counts.withLockedValue { $0.handshakes } }
    var applicationBytes: Int { counts.withLockedValue { $0.applicationBytes } }

    init(certificatePath: String, keyPath: String) async throws {
        let configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certificatePath).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: keyPath, format: .pem)))
        let context = try NIOSSLContext(configuration: configuration)
        let counts = self.counts
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                    try channel.pipeline.syncOperations.addHandler(Counter(counts: counts))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
    }

    func stop() async {
        try? await channel.close()
    }

    final class Counter: ChannelInboundHandler {
        typealias InboundIn = ByteBuffer
        let counts: NIOLockedValueBox<(handshakes: Int, applicationBytes: Int)>

        init(counts: NIOLockedValueBox<(handshakes: Int, applicationBytes: Int)>) { self.counts = counts }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if case .handshakeCompleted = event as? TLSUserEvent { counts.withLockedValue { $0.handshakes += 1 } }
            context.fireUserInboundEventTriggered(event)
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let bytes = unwrapInboundIn(data).readableBytes
            counts.withLockedValue { $0.applicationBytes += bytes }
            context.close(promise: nil)
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }
}

/// A throwaway CA and server certificate in a fresh directory.
func testAuthority(hosts: [String] = ["127.0.0.1", "localhost"], serverValidity: ClosedRange<Date>? = nil,
                   commonName: String = "VaultSync Test CA") throws -> TestCertificateAuthority {
    try TestCertificateAuthority.make(directory: URL(fileURLWithPath: temporaryDirectory("vaultsync-ca")), commonName: commonName,
                                      hosts: hosts, serverValidity: serverValidity)
}

@Suite("TLS trust: a refused certificate is named, not taken for offline", .timeLimit(.minutes(3)))
struct TLSTrustTests {
    /// A logged-in device (against the plain loopback server), then the same profile pointed at `url`.
    static func device(at url: String, scenario: Scenario, configure: (inout EngineConfiguration) -> Void = { _ in }) async throws -> Device {
        let first = try await scenario.device(register: true)
        await first.engine.shutdown()
        let device = try first.reopen(url: url, configure: configure)
        try await device.engine.unlock(email: scenario.email, password: scenario.password)
        return device
    }

    @Test("an unknown issuer: sync fails naming host, issuer and reason; an edit is kept here saying why; status shows it; not one byte reaches the server")
    func unknownIssuer() async throws {
        let authority = try testAuthority(commonName: "Example Private CA")
        let listener = try await TLSListener(certificatePath: authority.certificatePath, keyPath: authority.keyPath)
        let scenario = try await Scenario.start()
        // Every save tries the server here: the save itself meets the certificate.
        let device = try await Self.device(at: listener.url, scenario: scenario) { $0.offlineBurstWindow = 0 }

        var problem: CertificateProblem?
        do {
            _ = try await device.engine.sync()
        } catch VaultError.untrustedCertificate(let found) {
            problem = found
        }
        let refused = try #require(problem)
        #expect(refused.reason == .untrustedIssuer)
        #expect(refused.host == "127.0.0.1")
        #expect(refused.port == listener.port)
        #expect(refused.issuer == "Example Private CA")
        #expect(refused.description.contains("(issued by \"Example Private CA\") is not trusted by this device"))

        let saved = try await device.engine.addItem(loginItem("Bank"))
        guard case .savedUntrustedServer(let pending, let why) = saved.outcome else {
            Issue.record("expected a save kept locally because of the certificate, got \(saved.outcome)")
            return
        }
        #expect(pending == 1)
        #expect(why.reason == .untrustedIssuer && why.issuer == "Example Private CA")

        let status = try await device.engine.status()
        #expect(status.online == false)
        #expect(status.certificateProblem?.reason == .untrustedIssuer)
        #expect(status.lastError?.contains("Example Private CA") == true)
        #expect(status.pendingCount == 1)
        // A restarted app (the CLI's next command) still sees it: it is stored with the last contact.
        let restarted = try device.reopen(url: listener.url)
        try await restarted.engine.unlock(email: scenario.email, password: scenario.password)
        #expect(try await restarted.engine.status().certificateProblem?.issuer == "Example Private CA")
        // Moments later (offlineBurstWindow) a save is kept at once, and says why from what is stored.
        let next = try await restarted.engine.addItem(loginItem("Mail"))
        guard case .savedUntrustedServer(2, let stored) = next.outcome else {
            Issue.record("expected a save kept locally because of the stored certificate problem, got \(next.outcome)")
            return
        }
        #expect(stored.issuer == "Example Private CA")

        #expect(listener.handshakes == 0)
        #expect(listener.applicationBytes == 0, "nothing may be sent to a server whose certificate was refused")
        await listener.stop()
        await restarted.engine.shutdown()
        await scenario.finish([device])
    }

    @Test("with the CA trusted: a certificate for other names, and an expired one, are named as such", arguments: ["name", "expired", "notYetValid"])
    func otherReasons(kind: String) async throws {
        let now = Date()
        let authority: TestCertificateAuthority
        switch kind {
        case "name": authority = try testAuthority(hosts: ["vault.example.com"])
        case "expired": authority = try testAuthority(serverValidity: now.addingTimeInterval(-30 * 86_400)...now.addingTimeInterval(-86_400))
        default: authority = try testAuthority(serverValidity: now.addingTimeInterval(86_400)...now.addingTimeInterval(30 * 86_400))
        }
        let listener = try await TLSListener(certificatePath: authority.certificatePath, keyPath: authority.keyPath)
        let scenario = try await Scenario.start()
        let device = try await Self.device(at: listener.url, scenario: scenario) { $0.caFile = authority.caPath }
        var problem: CertificateProblem?
        do {
            _ = try await device.engine.sync()
        } catch VaultError.untrustedCertificate(let found) {
            problem = found
        }
        let refused = try #require(problem)
        switch kind {
        case "name":
            #expect(refused.reasons == [.nameMismatch])
            #expect(refused.names == ["vault.example.com"])
            #expect(refused.description.contains("is for vault.example.com, not 127.0.0.1"))
        case "expired":
            #expect(refused.reasons == [.expired])
            #expect(refused.description.contains("expired on"))
        default:
            #expect(refused.reasons == [.notYetValid])
        }
        #expect(refused.issuer == "VaultSync Test CA")
        #expect(listener.applicationBytes == 0)
        await listener.stop()
        await scenario.finish([device])
    }

    @Test("a CA file that is missing, or holds no certificate, fails the first server call naming the file; nothing is sent")
    func unusableCAFile() async throws {
        let authority = try testAuthority()
        let listener = try await TLSListener(certificatePath: authority.certificatePath, keyPath: authority.keyPath)
        let missing = temporaryDirectory("vaultsync-ca") + "/nothing.pem"
        for path in [missing, authority.keyPath] {
            let device = try Device.make(url: listener.url) { $0.caFile = path }
            do {
                try await device.engine.login(email: "someone@example.com", password: "correct horse battery staple")
                Issue.record("a login with an unusable CA file went ahead")
            } catch VaultError.caFileUnusable(let named, let reason) {
                #expect(named == path)
                #expect(!reason.isEmpty)
                #expect(VaultError.caFileUnusable(path: named, reason: reason).description.contains(path))
            }
            await device.engine.shutdown()
        }
        #expect(listener.handshakes == 0 && listener.applicationBytes == 0)
        await listener.stop()
    }

    @Test("an unusable proxy setting fails the calls instead of going around the proxy")
    func unusableProxy() async throws {
        let scenario = try await Scenario.start()
        let url = await scenario.server.url
        let device = try Device.make(url: url) { $0.proxy = ProxySettings(httpProxy: "socks5://127.0.0.1:1080") }
        do {
            try await device.engine.register(email: scenario.email, password: scenario.password, kdf: testKDF)
            Issue.record("registered around the proxy")
        } catch VaultError.proxyUnusable(let reason) {
            #expect(reason.contains("HTTP_PROXY") && reason.contains("socks5://"))
        }
        await scenario.finish([device])
    }
}

@Suite("Proxies: the client goes through HTTP_PROXY/HTTPS_PROXY unless NO_PROXY names the server", .timeLimit(.minutes(3)))
struct ProxyTests {
    @Test("through the proxy (one tunnel to the server per connection), and directly when NO_PROXY names it")
    func throughProxy() async throws {
        let proxy = ConnectProxy()
        try await proxy.start()
        let proxyURL = await proxy.url
        let scenario = try await Scenario.start()
        let port = await scenario.server.port
        let proxied = try await scenario.device(register: true) { $0.proxy = ProxySettings(httpProxy: proxyURL) }
        _ = try await proxied.engine.addItem(loginItem("Through the proxy"))
        #expect(proxy.tunnelCount >= 1)
        #expect(Set(proxy.tunnelTargets) == ["127.0.0.1:\(port)"])

        let before = proxy.tunnelCount
        let direct = try await scenario.device { $0.proxy = ProxySettings(httpProxy: proxyURL, noProxy: "localhost,127.0.0.1") }
        #expect(try await direct.engine.view(named: "Through the proxy") != nil)
        #expect(proxy.tunnelCount == before, "NO_PROXY names the server: no tunnel")
        await proxy.stop()
        await scenario.finish([proxied, direct])
    }

    @Test("a proxy nobody listens at is named as what could not be reached, not the server (RELIABILITY bug 61)")
    func proxyUnreachable() async throws {
        let scenario = try await Scenario.start()
        let registered = try await scenario.device(register: true)
        let deadProxy = deadServerURL()
        let proxied = try registered.reopen(url: await scenario.server.url) { $0.proxy = ProxySettings(httpProxy: deadProxy) }
        try await proxied.engine.unlock(email: scenario.email, password: scenario.password)
        await #expect {
            _ = try await proxied.engine.sync()
        } throws: { error in
            guard case VaultError.serverUnreachable(let detail) = error else { return false }
            return detail.contains("the proxy 127.0.0.1:") && detail.contains("could not be reached")
        }
        await scenario.finish([registered, proxied])
    }

    @Test("a proxy that needs a password gets it from the proxy URL")
    func authenticatedProxy() async throws {
        let proxy = ConnectProxy(credentials: (user: "alice", password: "s@cret"))
        try await proxy.start()
        let port = await proxy.port
        let scenario = try await Scenario.start()
        let device = try await scenario.device(register: true) { $0.proxy = ProxySettings(httpProxy: "http://alice:s%40cret@127.0.0.1:\(port)") }
        #expect(try await device.engine.addItem(loginItem("Authenticated")).outcome == .synced)
        #expect(proxy.tunnelCount >= 1 && proxy.refusedCount == 0)
        await proxy.stop()
        await scenario.finish([device])
    }

    @Test("the diagnosis of a refused certificate goes through the same proxy")
    func diagnosisThroughProxy() async throws {
        let authority = try testAuthority(commonName: "Proxied Private CA")
        let listener = try await TLSListener(certificatePath: authority.certificatePath, keyPath: authority.keyPath)
        let proxy = ConnectProxy()
        try await proxy.start()
        let proxyURL = await proxy.url
        let device = try Device.make(url: listener.url) { $0.proxy = ProxySettings(httpsProxy: proxyURL) }
        do {
            try await device.engine.login(email: "someone@example.com", password: "correct horse battery staple")
            Issue.record("the login went ahead")
        } catch VaultError.untrustedCertificate(let problem) {
            #expect(problem.issuer == "Proxied Private CA")
            #expect(problem.reason == .untrustedIssuer)
        }
        #expect(proxy.tunnelCount == 2, "the refused connection and the diagnosis, both tunnelled")
        #expect(Set(proxy.tunnelTargets) == ["127.0.0.1:\(listener.port)"])
        #expect(listener.applicationBytes == 0)
        await device.engine.shutdown()
        await listener.stop()
        await proxy.stop()
    }
}

@Suite("TLS trust against the real server over https (a private CA)", .timeLimit(.minutes(3)))
struct TLSServerTests {
    static func httpsServer(_ authority: TestCertificateAuthority) async throws -> LiveServer {
        let server = LiveServer { $0.tls = .init(certificateChainPath: authority.certificatePath, privateKeyPath: authority.keyPath) }
        try await server.start()
        return server
    }

    @Test("trusted through the CA file it works; without it an edit stays here with the reason and nothing reaches the server; once trusted, sync pushes it")
    func trustFixedLater() async throws {
        let authority = try testAuthority(commonName: "Example Private CA")
        let server = try await Self.httpsServer(authority)
        let url = await server.url
        #expect(url.hasPrefix("https://127.0.0.1:"))
        let scenario = Scenario(server: server, email: "tls-\(UUID().uuidString.prefix(8).lowercased())@example.com")
        let trusting: (inout EngineConfiguration) -> Void = { $0.caFile = authority.caPath }
        let other = try await scenario.device(register: true, configure: trusting)
        #expect(try await other.engine.addItem(loginItem("Online")).outcome == .synced)

        // The same account on a device that does not trust the CA (system authorities only).
        let setUp = try await scenario.device(configure: trusting)
        await setUp.engine.shutdown()
        let untrusting = try setUp.reopen(url: url)
        try await untrusting.engine.unlock(email: scenario.email, password: scenario.password)
        do {
            _ = try await untrusting.engine.sync()
            Issue.record("a sync went ahead with an untrusted certificate")
        } catch VaultError.untrustedCertificate(let problem) {
            #expect(problem.reason == .untrustedIssuer && problem.issuer == "Example Private CA" && problem.host == "127.0.0.1")
        }
        let kept = try await untrusting.engine.addItem(loginItem("Kept here"))
        #expect(kept.outcome.certificateProblem?.issuer == "Example Private CA")
        #expect(kept.outcome.pendingCount == 1)
        #expect(try await untrusting.engine.status().certificateProblem != nil)
        _ = try await other.engine.sync()
        #expect(try await other.engine.view(named: "Kept here") == nil, "nothing may reach a server whose certificate was refused")

        // The CA is added: the queued change goes, and the problem is gone from the status.
        await untrusting.engine.shutdown()
        let fixed = try untrusting.reopen(url: url, configure: trusting)
        try await fixed.engine.unlock(email: scenario.email, password: scenario.password)
        let report = try await fixed.engine.sync()
        #expect(report.resolved == 1 && report.stillPending == 0)
        let status = try await fixed.engine.status()
        #expect(status.certificateProblem == nil && status.online == true)
        _ = try await other.engine.sync()
        #expect(try await other.engine.view(named: "Kept here") != nil)
        await scenario.finish([other, fixed])
    }

    @Test("through HTTPS_PROXY to the https server (TLS end to end inside the tunnel), directly with NO_PROXY")
    func proxiedHTTPS() async throws {
        let authority = try testAuthority()
        let server = try await Self.httpsServer(authority)
        let port = await server.port
        let proxy = ConnectProxy()
        try await proxy.start()
        let proxyURL = await proxy.url
        let scenario = Scenario(server: server, email: "proxy-\(UUID().uuidString.prefix(8).lowercased())@example.com")
        let proxied = try await scenario.device(register: true) {
            $0.caFile = authority.caPath
            $0.proxy = ProxySettings.fromEnvironment(["HTTPS_PROXY": proxyURL])
        }
        #expect(try await proxied.engine.addItem(loginItem("Proxied")).outcome == .synced)
        #expect(proxy.tunnelCount >= 1)
        #expect(Set(proxy.tunnelTargets) == ["127.0.0.1:\(port)"])
        let before = proxy.tunnelCount
        let direct = try await scenario.device {
            $0.caFile = authority.caPath
            $0.proxy = ProxySettings.fromEnvironment(["HTTPS_PROXY": proxyURL, "NO_PROXY": "127.0.0.1"])
        }
        #expect(try await direct.engine.view(named: "Proxied") != nil)
        #expect(proxy.tunnelCount == before)
        await proxy.stop()
        await scenario.finish([proxied, direct])
    }
}
