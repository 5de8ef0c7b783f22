import AsyncHTTPClient
import Foundation
import Testing
import VaultTestSupport
@testable import VaultServer

/// The server's optional TLS (docs/PROTOCOL.md, "TLS"), in process, with a test certificate authority.
@Suite("TLS: HTTPS with a certificate and key from PEM files")
struct TLSTests {
    @Test("a server with TLS answers over https to a client that trusts the CA, and not to one that does not")
    func serves() async throws {
        let directory = temporaryDirectory("vaultsync-tls")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let authority = try TestCertificateAuthority.make(directory: URL(fileURLWithPath: directory + "/certificates"))
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.dataDirectory = directory + "/data"
        configuration.logLevel = .error
        configuration.insecureTestingPasswordIterations = 1_000
        configuration.tls = .init(certificateChainPath: authority.certificatePath, privateKeyPath: authority.keyPath)
        let server = EmbeddedServer(configuration: configuration)
        try await server.start()
        let url = await server.url
        #expect(url.hasPrefix("https://127.0.0.1:"))
        let client = try authority.makeHTTPClient()
        do {
            let response = try await client.execute(HTTPClientRequest(url: url + "/alive"), timeout: .seconds(30))
            #expect(response.status == .ok)
            let config = try await client.execute(HTTPClientRequest(url: url + "/api/config"), timeout: .seconds(30))
            let body = String(buffer: try await config.body.collect(upTo: 1 << 20))
            #expect(body.contains("\"api\":\"https://127.0.0.1:"), "links name https: \(body)")
            // By name too: the certificate names localhost.
            let port = await server.port
            #expect(try await client.execute(HTTPClientRequest(url: "https://localhost:\(port)/alive"), timeout: .seconds(30)).status == .ok)
        } catch {
            try? await client.shutdown()
            await server.stop()
            throw error
        }
        try await client.shutdown()

        // A client that trusts only the system's roots refuses the certificate; plain HTTP gets no answer.
        let untrusting = HTTPClient(eventLoopGroupProvider: .singleton)
        await #expect(throws: (any Error).self) {
            _ = try await untrusting.execute(HTTPClientRequest(url: url + "/alive"), timeout: .seconds(30))
        }
        await #expect(throws: (any Error).self) {
            _ = try await untrusting.execute(HTTPClientRequest(url: url.replacingOccurrences(of: "https:", with: "http:") + "/alive"),
                                             timeout: .seconds(30))
        }
        try await untrusting.shutdown()
        await server.stop()
    }

    @Test("TLS files that cannot be read, are not PEM, or do not belong together are refused before the server starts, naming the file")
    func badFiles() async throws {
        let directory = temporaryDirectory("vaultsync-tls")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = try TestCertificateAuthority.make(directory: URL(fileURLWithPath: directory + "/one"))
        let second = try TestCertificateAuthority.make(directory: URL(fileURLWithPath: directory + "/two"))
        try Data("not a certificate\n".utf8).write(to: URL(fileURLWithPath: directory + "/junk.pem"))
        func reason(_ certificate: String, _ key: String) -> String? {
            do {
                try ServerConfiguration.TLSFiles(certificateChainPath: certificate, privateKeyPath: key).validate()
                return nil
            } catch {
                return "\(error)"
            }
        }
        #expect(reason(first.certificatePath, first.keyPath) == nil)
        #expect(reason(directory + "/missing.pem", first.keyPath) == "TLS: cannot read \(directory)/missing.pem")
        #expect(reason(first.certificatePath, directory + "/missing.pem") == "TLS: cannot read \(directory)/missing.pem")
        #expect(reason(directory + "/junk.pem", first.keyPath) == "TLS: \(directory)/junk.pem does not hold a PEM certificate")
        #expect(reason(first.certificatePath, directory + "/junk.pem") == "TLS: \(directory)/junk.pem does not hold a PEM private key")
        #expect(reason(first.certificatePath, second.keyPath)?.contains("does not belong to the certificate") == true)

        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.dataDirectory = directory + "/data"
        configuration.tls = .init(certificateChainPath: first.certificatePath, privateKeyPath: second.keyPath)
        await #expect(throws: ServerConfigurationError.self) { _ = try await buildApplication(configuration: configuration) }
        #expect(!FileManager.default.fileExists(atPath: directory + "/data"), "nothing stored")
    }
}
