import ArgumentParser
import CommandLineSupport
import Foundation
import VaultAPI
import VaultClient
import VaultCrypto
import VaultExchange
import VaultModels

/// The documented exit codes (README, "Exit codes").
enum ExitStatus: Int32 {
    case ok = 0
    case failure = 1
    case locked = 2
    case authenticationFailed = 3
    case notFound = 4
    case ambiguous = 5
    case serverRefused = 6
    case serverUnreachable = 7
    case verificationFailed = 8
    /// A file that is not in the format it claims (sysexits EX_DATAERR).
    case badInput = 65
    /// The standard "usage error" code (sysexits EX_USAGE), which swift-argument-parser also uses.
    case usage = 64
}

/// Errors of the command-line layer, each with a message a person can act on.
enum CLIError: Error, CustomStringConvertible {
    case usage(String)
    case profile(String)
    case noServer
    case notLoggedIn
    case locked
    /// Locked, and why the way given did not open it.
    case lockedBecause(String)
    case notFound(what: String, reference: String)
    /// Something asked for is not there, said in full ("\"GitHub\" has no TOTP.").
    case missing(String)
    case ambiguous(what: String, reference: String, candidates: [String])
    case aborted(String)
    case verificationFailed(String)
    /// A login needs a code (two-step or new-device) and none was given where none can be asked for.
    case codeRequired(String)
    /// A failure said in full, with the exit status of the failure it stands for.
    case stated(String, ExitStatus)

    /// What an unreachable server's message adds: true only while something is queued.
    static let changesStayQueued = " Changes stay queued on this device."

    var description: String {
        switch self {
        case .usage(let message): return message
        case .profile(let message): return message
        case .noServer: return "No server configured. Run `vaultsync config server URL` first."
        case .notLoggedIn: return "You are not logged in. Run `vaultsync login EMAIL` (or `vaultsync register EMAIL`) first."
        case .locked:
            return """
            The vault is locked. Run `eval $(vaultsync unlock)`, or give the master password with \
            VAULTSYNC_PASSWORD or --password-file.
            """
        case .lockedBecause(let reason): return reason + " " + CLIError.locked.description
        case .notFound(let what, let reference): return "No \(what) matches \"\(reference)\"."
        case .missing(let message): return message
        case .ambiguous(let what, let reference, let candidates):
            return "\"\(reference)\" matches \(candidates.count) \(what)s; use an id:\n" + candidates.map { "  \($0)" }.joined(separator: "\n")
        case .aborted(let message): return message
        case .verificationFailed(let message): return message
        case .codeRequired(let message): return message
        case .stated(let message, _): return message
        }
    }

    var status: ExitStatus {
        switch self {
        case .usage, .aborted: return .usage
        case .profile: return .failure
        case .noServer: return .usage
        case .notLoggedIn: return .authenticationFailed
        case .locked, .lockedBecause: return .locked
        case .notFound, .missing: return .notFound
        case .ambiguous: return .ambiguous
        case .verificationFailed: return .verificationFailed
        case .codeRequired: return .authenticationFailed
        case .stated(_, let status): return status
        }
    }
}

/// Maps any error to its message and exit status.
func describe(_ error: any Error) -> (message: String, status: ExitStatus) {
    switch error {
    case let error as CLIError:
        return (error.description, error.status)
    case let error as GeneratorError:
        return (error.description, .usage)
    case let error as VaultError:
        if case .syncIncomplete(_, let cause) = error { return describe(cause) }
        let status: ExitStatus
        switch error {
        case .locked: status = .locked
        case .sessionInvalid: status = .locked
        case .notLoggedIn, .wrongPassword, .loginRefused, .sessionExpired, .accountNotFound: status = .authenticationFailed
        case .itemNotFound, .folderNotFound, .draftNotFound: status = .notFound
        case .serverRefused: status = .serverRefused
        case .serverUnreachable, .serverAnswerInvalid, .offlineEditsDisabled, .organizationItemOffline: status = .serverUnreachable
        case .invalidItem, .invalidFolder, .invalidOrganization: status = .usage
        case .memberNotAccepted, .itemWaitsForSync: status = .failure
        case .sharingRefused: status = .usage
        case .sharingOffline: status = .serverUnreachable
        case .notOrganizationManager: status = .serverRefused
        case .syncIncomplete: status = .serverUnreachable  // described by its cause, above
        case .crypto, .model, .storage, .exportUnreadable, .databaseUnusable: status = .failure
        case .duplicateImport: status = .usage
        // The server's answer was refused before anything was sent: a verification failure.
        case .kdfBelowMinimums, .kdfWeakened, .kdfUnusable: status = .verificationFailed
        case .insecureServer: status = .usage
        case .organizationNotTrusted, .organizationKeyChanged: status = .verificationFailed
        case .organizationUnavailable: status = .notFound
        case .keyPairUnavailable: status = .failure
        case .invitationRefused: status = .serverRefused
        // A login that needs more than the password, or whose second factor or API key was refused.
        case .twoFactorRequired, .twoFactorCodeInvalid, .newDeviceVerificationRequired, .newDeviceCodeInvalid, .apiKeyRefused:
            status = .authenticationFailed
        // The server's certificate was refused before anything was sent: a verification failure.
        case .untrustedCertificate: status = .verificationFailed
        case .caFileUnusable: status = .badInput
        case .proxyUnusable: status = .usage
        case .attachmentNotFound: status = .notFound
        case .attachmentAmbiguous: status = .ambiguous
        case .attachmentTooLarge: status = .usage
        case .attachmentNeedsServer: status = .serverUnreachable
        case .conflictVersionGone: status = .notFound
        }
        switch error {
        case .kdfBelowMinimums(let offered), .kdfWeakened(_, let offered):
            return (error.description + " With vaultsync: the same login command with --accept-kdf \(offered.spec).", status)
        case .model(.decryptionFailed(let itemID?, _, _)):
            return (error.description + " A sync may repair an item damaged on the way; one that is not yours (a server can plant items) "
                + "can be deleted: vaultsync delete \(itemID) --permanent", status)
        default:
            return (error.description, status)
        }
    case let error as StandardOutput.Failure:
        return (error.description, .failure)
    case let error as ModelError:
        // An item's own decryption result, shown as it is (`get` of an item that does not decrypt here).
        return describe(VaultError.model(error))
    case let error as ExchangeError:
        switch error {
        case .malformed, .accountEncrypted: return (error.description, .badInput)
        case .passwordRequired: return (error.description, .usage)
        case .wrongPassword: return (error.description, .authenticationFailed)
        case .cannotExport: return (error.description, .failure)
        }
    case let error as ServerCallError:
        switch error {
        case .http(let status, let message) where !(400..<500).contains(status):
            // A 5xx (or a stray redirect) is "not now": the same exit as an unreachable server.
            return ("The server is unavailable (it answered \(status): \(message))." + CLIError.changesStayQueued, .serverUnreachable)
        case .http(let status, let message): return ("The server refused (\(status)): \(message)", .serverRefused)
        case .createdSinceDeleted(_, let message): return ("The server refused (410): \(message)", .serverRefused)
        case .authenticationExpired: return (VaultError.sessionExpired.description, .authenticationFailed)
        case .transport(_, let detail):
            return ("The server could not be reached (\(detail))." + CLIError.changesStayQueued, .serverUnreachable)
        case .invalidResponse(let reason): return (VaultError.serverAnswerInvalid(reason).description, .serverUnreachable)
        case .certificate(let problem): return (VaultError.untrustedCertificate(problem).description, .verificationFailed)
        }
    default:
        return (String(describing: error), .failure)
    }
}
