import Foundation
import NIOSSL

/// The TLS server configuration from PEM files, with errors that name the file at fault.
enum TLSSetup {
    static func serverConfiguration(_ files: ServerConfiguration.TLSFiles) throws -> TLSConfiguration {
        let certificatePath = files.certificateChainPath
        let keyPath = files.privateKeyPath
        for path in [certificatePath, keyPath] where !FileManager.default.isReadableFile(atPath: path) {
            throw ServerConfigurationError.tls("cannot read \(path)")
        }
        let chain: [NIOSSLCertificate]
        do {
            chain = try NIOSSLCertificate.fromPEMFile(certificatePath)
        } catch {
            throw ServerConfigurationError.tls("\(certificatePath) does not hold a PEM certificate")
        }
        guard !chain.isEmpty else { throw ServerConfigurationError.tls("\(certificatePath) does not hold a PEM certificate") }
        let key: NIOSSLPrivateKey
        do {
            key = try NIOSSLPrivateKey(file: keyPath, format: .pem)
        } catch {
            throw ServerConfigurationError.tls("\(keyPath) does not hold a PEM private key")
        }
        let configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain.map { .certificate($0) },
                                                                     privateKey: .privateKey(key))
        do {
            _ = try NIOSSLContext(configuration: configuration)
        } catch {
            throw ServerConfigurationError.tls("the key in \(keyPath) does not belong to the certificate in \(certificatePath)")
        }
        return configuration
    }
}
