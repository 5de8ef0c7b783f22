import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import SwiftASN1
import VaultSyncCore
// The trust check of the diagnosis judges the chain apart from its dates (they are judged on their own).
@_spi(DisableValidityCheck) import X509

/// Extra certificate authorities from a PEM file (a private CA of a self-hosted server), trusted in
/// addition to the system's.
public struct CertificateAuthorityFile: Sendable {
    public let path: String
    public let certificates: [NIOSSLCertificate]

    /// The same certificates for swift-certificates' verifier (the diagnosis; read only then: a system
    /// bundle in SSL_CERT_FILE holds well over a hundred).
    public var parsed: [Certificate] {
        certificates.compactMap { try? Certificate(derEncoded: try $0.toDERBytes()) }
    }

    /// Reads and checks `path`: readable, PEM, at least one certificate, every one of them parseable.
    public static func load(path: String) throws -> CertificateAuthorityFile {
        guard FileManager.default.fileExists(atPath: path) else { throw CertificateAuthorityFileError(path: path, reason: "no such file") }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CertificateAuthorityFileError(path: path, reason: "the file cannot be read")
        }
        let text = String(decoding: data, as: UTF8.self)
        guard text.contains("-----BEGIN CERTIFICATE-----") else {
            throw CertificateAuthorityFileError(path: path, reason: "it holds no PEM certificate (\"-----BEGIN CERTIFICATE-----\"); convert a DER file with `openssl x509 -inform der -in FILE -out FILE.pem`")
        }
        let certificates: [NIOSSLCertificate]
        do {
            certificates = try NIOSSLCertificate.fromPEMBytes(Array(data))
        } catch {
            throw CertificateAuthorityFileError(path: path, reason: "a certificate in it cannot be read (\(error))")
        }
        guard !certificates.isEmpty else { throw CertificateAuthorityFileError(path: path, reason: "it holds no certificate") }
        return CertificateAuthorityFile(path: path, certificates: certificates)
    }

    /// The subjects of the certificates (for messages).
    public var names: [String] { parsed.map { ServerTrust.displayName($0.subject) } }
}

/// A CA file that cannot be used.
public struct CertificateAuthorityFileError: Error, Sendable, Equatable, CustomStringConvertible {
    public var path: String
    public var reason: String
    public var description: String { "the CA file \(path) cannot be used: \(reason)" }
}

/// How the client connects: extra trusted authorities and the proxy, as decided for one server.
public struct ConnectionSettings: Sendable {
    public var authorities: CertificateAuthorityFile?
    public var proxy: ProxyEndpoint?

    public init(authorities: CertificateAuthorityFile? = nil, proxy: ProxyEndpoint? = nil) {
        self.authorities = authorities
        self.proxy = proxy
    }
}

/// Telling a certificate that failed verification from a connection that broke, and finding out why.
public enum ServerTrust {
    /// Whether a connection error is the peer's certificate failing verification (chain, dates or name),
    /// as opposed to a handshake that broke or timed out.
    public static func isCertificateFailure(_ error: any Error) -> Bool {
        if let extra = error as? NIOSSLExtraError, extra == .failedToValidateHostname { return true }
        if let ssl = error as? NIOSSLError, case .handshakeFailed(let inner) = ssl {
            let text = String(describing: inner)
            return text.contains("CERTIFICATE_VERIFY_FAILED")
        }
        return false
    }

    /// Finds out why the certificate of `host:port` was refused: a short second handshake (through the
    /// same proxy) that accepts nothing, only records the chain the server presents, then the leaf is
    /// read and the chain checked against the trusted authorities. No request is sent on it.
    public static func diagnose(host: String, port: Int, settings: ConnectionSettings, detail: String,
                                now: Date = Date(), timeout: TimeAmount = .seconds(5)) async -> CertificateProblem {
        let chain: [Certificate]
        do {
            chain = try await peerChain(host: host, port: port, proxy: settings.proxy, timeout: timeout)
        } catch {
            return CertificateProblem(host: host, port: port, reasons: [.unknown], detail: detail)
        }
        guard let leaf = chain.first else { return CertificateProblem(host: host, port: port, reasons: [.unknown], detail: detail) }
        var dnsNames: [String] = []
        var addresses: [String] = []
        if let names = try? leaf.extensions.subjectAlternativeNames {
            for name in names {
                switch name {
                case .dnsName(let text): dnsNames.append(text)
                case .ipAddress(let octets): if let text = addressText(octets.bytes) { addresses.append(text) }
                default: break
                }
            }
        }
        let trusted = await chainTrusted(chain, extra: settings.authorities?.parsed ?? [])
        let facts = CertificateFacts(subject: displayName(leaf.subject), issuer: displayName(leaf.issuer),
                                     notValidBefore: leaf.notValidBefore, notValidAfter: leaf.notValidAfter,
                                     dnsNames: dnsNames, ipAddresses: addresses,
                                     selfSigned: leaf.subject == leaf.issuer, chainTrusted: trusted)
        return CertificateProblem.diagnose(facts, host: host, port: port, now: now, detail: detail)
    }

    /// Whether the chain leads to a trusted authority (the system's and `extra`), dates aside (they are
    /// judged on their own, so an expired certificate of a trusted CA still counts as trusted).
    static func chainTrusted(_ chain: [Certificate], extra: [Certificate]) async -> Bool {
        guard let leaf = chain.first else { return false }
        let roots = CertificateStore.systemTrustRoots.appending(contentsOf: extra)
        var verifier = Verifier(rootCertificates: roots) { RFC5280Policy.withValidityCheckDisabled() }
        let result = await verifier.validate(leaf: leaf, intermediates: CertificateStore(chain.dropFirst()))
        if case .validCertificate = result { return true }
        return false
    }

    /// The common name of a distinguished name, else the whole name.
    static func displayName(_ name: DistinguishedName) -> String {
        for rdn in name {
            for attribute in rdn where attribute.type == .RDNAttributeType.commonName {
                if let text = String(attribute.value) { return text }
            }
        }
        return String(describing: name)
    }

    static func addressText(_ bytes: ArraySlice<UInt8>) -> String? {
        let array = Array(bytes)
        switch array.count {
        case 4:
            return array.map(String.init).joined(separator: ".")
        case 16:
            var storage = in6_addr()
            withUnsafeMutableBytes(of: &storage) { $0.copyBytes(from: array) }
            var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            guard inet_ntop(AF_INET6, &storage, &buffer, socklen_t(buffer.count)) != nil else { return nil }
            return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        default:
            return nil
        }
    }

    // MARK: The diagnosis handshake

    /// The chain `host:port` presents, through `proxy` if given. Verification is replaced by a callback
    /// that records the chain and refuses it, so the handshake never completes and nothing is sent.
    static func peerChain(host: String, port: Int, proxy: ProxyEndpoint?, timeout: TimeAmount) async throws -> [Certificate] {
        let recorded = NIOLockedValueBox<[NIOSSLCertificate]>([])
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.certificateVerification = .noHostnameVerification
        let context = try NIOSSLContext(configuration: configuration)
        let serverName = ServerTrust.isAddress(host) ? nil : host
        let makeTLSHandler: @Sendable () throws -> NIOSSLClientHandler = {
            try NIOSSLClientHandler(context: context, serverHostname: serverName, customVerificationCallback: { certificates, promise in
                recorded.withLockedValue { $0 = certificates }
                promise.succeed(.failed)
            })
        }
        let group = MultiThreadedEventLoopGroup.singleton
        let bootstrap = ClientBootstrap(group: group)
            .connectTimeout(timeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let proxy {
                        try channel.pipeline.syncOperations.addHandler(
                            ConnectTunnelHandler(target: "\(ServerTrust.isAddress(host) && host.contains(":") ? "[\(host)]" : host):\(port)",
                                                 proxy: proxy, makeTLSHandler: makeTLSHandler))
                    } else {
                        try channel.pipeline.syncOperations.addHandler(try makeTLSHandler())
                    }
                }
            }
        let channel = try await bootstrap.connect(host: proxy?.host ?? host, port: proxy?.port ?? port).get()
        // The refused handshake closes the channel; a silent peer is cut off after `timeout`.
        let deadline = channel.eventLoop.scheduleTask(in: timeout) { channel.close(promise: nil) }
        try? await channel.closeFuture.get()
        deadline.cancel()
        return try recorded.withLockedValue { $0 }.map { try Certificate(derEncoded: try $0.toDERBytes()) }
    }
}

/// Opens an HTTP CONNECT tunnel, then puts TLS on the connection.
final class ConnectTunnelHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let target: String
    let proxy: ProxyEndpoint
    let makeTLSHandler: @Sendable () throws -> NIOSSLClientHandler
    var received: [UInt8] = []

    init(target: String, proxy: ProxyEndpoint, makeTLSHandler: @escaping @Sendable () throws -> NIOSSLClientHandler) {
        self.target = target
        self.proxy = proxy
        self.makeTLSHandler = makeTLSHandler
    }

    func channelActive(context: ChannelHandlerContext) {
        var request = "CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\n"
        if let user = proxy.username {
            let credentials = Data("\(user):\(proxy.password ?? "")".utf8).base64EncodedString()
            request += "Proxy-Authorization: Basic \(credentials)\r\n"
        }
        request += "\r\n"
        context.writeAndFlush(wrapOutboundOut(context.channel.allocator.buffer(string: request)), promise: nil)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        received += buffer.readBytes(length: buffer.readableBytes) ?? []
        guard let end = received.firstRange(of: Array("\r\n\r\n".utf8)) else {
            if received.count > 16_384 { context.close(promise: nil) }
            return
        }
        let head = String(decoding: received[..<end.lowerBound], as: UTF8.self)
        let status = head.split(separator: " ", maxSplits: 2).dropFirst().first.flatMap { Int($0) }
        guard status == 200 else {
            context.close(promise: nil)
            return
        }
        do {
            let tls = try makeTLSHandler()
            try context.pipeline.syncOperations.addHandler(tls, position: .after(self))
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        } catch {
            context.close(promise: nil)
        }
    }
}

extension ServerTrust {
    static func isAddress(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return text.withCString { inet_pton(AF_INET, $0, &v4) } == 1 || text.withCString { inet_pton(AF_INET6, $0, &v6) } == 1
    }
}

extension BitwardenAPI {
    /// What a failed request means: a refused certificate becomes ``ServerCallError/certificate(_:)``
    /// with its diagnosis; anything else goes through ``transportError(_:)``.
    func failure(of error: any Error) async -> ServerCallError {
        guard ServerTrust.isCertificateFailure(error), let components = URLComponents(string: baseURL),
              let host = components.host else {
            let failure = Self.transportError(error)
            // Through a proxy, a refused connection is the proxy's (nothing was sent to the server): named, not the server.
            if let proxy = connection.proxy, case .transport(.unreachable, let detail) = failure, detail.contains("refused") {
                return .transport(.unreachable, detail: "the proxy \(proxy.host):\(proxy.port) (HTTPS_PROXY, HTTP_PROXY or ALL_PROXY) could not be "
                                  + "reached (\(detail))")
            }
            return failure
        }
        let port = components.port ?? (components.scheme?.lowercased() == "http" ? 80 : 443)
        let problem = await ServerTrust.diagnose(host: host, port: port, settings: connection, detail: String(describing: error))
        logger.info("the server's certificate was refused", metadata: [
            "host": "\(host)", "reason": "\(problem.reason.rawValue)", "issuer": "\(problem.issuer ?? "?")", "tls": "\(problem.detail)",
        ])
        return .certificate(problem)
    }
}
