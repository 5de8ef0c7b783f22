import ArgumentParser
import Foundation
import VaultAPI
import VaultClient
import VaultModels
import VaultSyncCore

extension ConfigCommand {
    /// `config ca-file PATH` / `config ca-file --clear`: extra certificate authorities for the server.
    struct CAFile: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "ca-file",
            abstract: "Trust the certificate authorities in a PEM file, in addition to the system's (a private CA of a self-hosted server).",
            discussion: """
            The file is checked now: one that is missing or holds no PEM certificate is refused and nothing is stored. It is read again by every command, so a renewed CA is picked up by replacing the file. Without a CA file set here, SSL_CERT_FILE is used the same way when it is set.

            Examples:
              vaultsync config ca-file ~/company-root-ca.pem
              vaultsync config ca-file --clear
            """)
        static var needsUnlock: Bool { false }
        static var repairsDamagedSettings: Bool { true }
        @OptionGroup var global: GlobalOptions
        @Argument(help: "A PEM file with one or more CA certificates.") var path: String?
        @Flag(help: "Remove the setting: only the system's authorities (and SSL_CERT_FILE, if set) are trusted.") var clear = false

        func validate() throws {
            if clear == (path != nil) { throw ValidationError("give a PEM file, or --clear") }
        }

        func execute(_ context: CLIContext) async throws {
            var context = context
            guard let path else {
                context.settings.caFile = nil
                try context.saveSettings()
                print("CA file removed; the system's certificate authorities are trusted\(context.environment["SSL_CERT_FILE"].map { $0.isEmpty ? "" : ", and those of SSL_CERT_FILE (\($0))" } ?? "").")
                return
            }
            let absolute = URL(fileURLWithPath: (path as NSString).expandingTildeInPath,
                               relativeTo: URL(fileURLWithPath: FileManager.default.currentDirectoryPath, isDirectory: true)).standardizedFileURL.path
            let file: CertificateAuthorityFile
            do {
                file = try CertificateAuthorityFile.load(path: absolute)
            } catch let error as CertificateAuthorityFileError {
                throw VaultError.caFileUnusable(path: error.path, reason: error.reason)
            }
            context.settings.caFile = absolute
            try context.saveSettings()
            let count = file.certificates.count
            print("Trusting \(count) certificate authorit\(count == 1 ? "y" : "ies") from \(absolute) in addition to the system's: \(file.names.map { "\"\($0)\"" }.joined(separator: ", "))")
        }
    }
}

/// What `config show` and `status` say about trust and proxies.
enum ConnectionDescription {
    static func caFile(_ settings: ProfileSettings, environment: [String: String]) -> String {
        guard let (path, source) = settings.effectiveCAFile(environment: environment) else { return "(system authorities only)" }
        return "\(path) (\(source))"
    }

    static func proxy(_ settings: ProfileSettings, environment: [String: String]) -> String {
        guard let server = settings.server else { return "(no server)" }
        do {
            return try ProxySettings.fromEnvironment(environment).proxy(for: server)?.description ?? "(direct)"
        } catch {
            return "unusable: \(error)"
        }
    }

    static func problemJSON(_ problem: CertificateProblem?) -> JSONValue {
        guard let problem else { return .null }
        return .object([
            "host": .string(problem.host),
            "port": .int(problem.port),
            "issuer": Presentation.string(problem.issuer),
            "subject": Presentation.string(problem.subject),
            "reason": .string(problem.reason.rawValue),
            "message": .string(problem.description),
        ])
    }
}
