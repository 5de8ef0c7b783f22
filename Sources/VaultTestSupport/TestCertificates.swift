import AsyncHTTPClient
import Crypto
import Foundation
import NIOSSL
import SwiftASN1
import X509

/// A throwaway certificate authority for TLS tests: a self-signed CA and a server certificate it signed
/// for loopback names, written as PEM files. Clients that trust `ca.pem` (and nothing else) can reach a
/// server started with `server.pem` / `server-key.pem`; a client that does not trust it must refuse.
public struct TestCertificateAuthority: Sendable {
    /// `ca.pem`: the authority's certificate (what a client trusts).
    public let caPath: String
    /// `server.pem`: the server's certificate, signed by the authority.
    public let certificatePath: String
    /// `server-key.pem`: the server's private key (PKCS #8).
    public let keyPath: String
    public let caPEM: String
    public let certificatePEM: String
    public let keyPEM: String

    /// Makes a new authority and server certificate in `directory` (created if missing). The server
    /// certificate names every one of `hosts` as a subject alternative name: IP address literals as IP
    /// addresses, anything else as a DNS name. Both are valid from an hour ago for 30 days, and the key
    /// files are readable by the owner only. `serverValidity` gives the server certificate other dates
    /// (an expired or not yet valid certificate; the CA keeps its own).
    public static func make(directory: URL, commonName: String = "VaultSync Test CA",
                            hosts: [String] = ["127.0.0.1", "localhost"],
                            serverValidity: ClosedRange<Date>? = nil) throws -> TestCertificateAuthority {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let now = Date()
        let notBefore = now.addingTimeInterval(-3600)
        let notAfter = now.addingTimeInterval(30 * 86_400)

        let caKey = P256.Signing.PrivateKey()
        let caName = try DistinguishedName { CommonName(commonName) }
        let ca = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(caKey.publicKey),
            notValidBefore: notBefore, notValidAfter: notAfter, issuer: caName, subject: caName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                SubjectKeyIdentifier(hash: Certificate.PublicKey(caKey.publicKey))
            },
            issuerPrivateKey: .init(caKey))

        let serverKey = P256.Signing.PrivateKey()
        let names: [GeneralName] = hosts.map { host in
            if let bytes = ipAddressBytes(host) { return .ipAddress(ASN1OctetString(contentBytes: bytes[...])) }
            return .dnsName(host)
        }
        let serverName = try DistinguishedName { CommonName(hosts.first ?? "localhost") }
        let server = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(serverKey.publicKey),
            notValidBefore: serverValidity?.lowerBound ?? notBefore, notValidAfter: serverValidity?.upperBound ?? notAfter,
            issuer: caName, subject: serverName,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames(names)
                AuthorityKeyIdentifier(keyIdentifier: SubjectKeyIdentifier(hash: Certificate.PublicKey(caKey.publicKey)).keyIdentifier)
            },
            issuerPrivateKey: .init(caKey))

        let caPEM = try ca.serializeAsPEM().pemString + "\n"
        let certificatePEM = try server.serializeAsPEM().pemString + "\n"
        let keyPEM = serverKey.pemRepresentation + "\n"
        let caPath = directory.appendingPathComponent("ca.pem").path
        let certificatePath = directory.appendingPathComponent("server.pem").path
        let keyPath = directory.appendingPathComponent("server-key.pem").path
        try Data(caPEM.utf8).write(to: URL(fileURLWithPath: caPath))
        try Data(certificatePEM.utf8).write(to: URL(fileURLWithPath: certificatePath))
        guard FileManager.default.createFile(atPath: keyPath, contents: Data(keyPEM.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: keyPath])
        }
        return TestCertificateAuthority(caPath: caPath, certificatePath: certificatePath, keyPath: keyPath,
                                        caPEM: caPEM, certificatePEM: certificatePEM, keyPEM: keyPEM)
    }

    /// An HTTP client that trusts this authority only (not the system's roots). Shut it down when done.
    public func makeHTTPClient() throws -> HTTPClient {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(Array(caPEM.utf8)))
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
        configuration.timeout = .init(connect: .seconds(15), read: .seconds(30))
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    /// The 4 or 16 bytes of an IPv4 or IPv6 address literal; `nil` for anything else.
    static func ipAddressBytes(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }
}
