import VaultModels
import VaultSyncCore

/// How a call to the server failed.
public enum ServerCallError: Error, Sendable, Equatable {
    /// The server answered with an HTTP error; `message` is the server's own (spec §3.3 client rule).
    case http(status: Int, message: String)
    /// `410` to a repeated create whose answer names what the key made (`createdId`, the VaultSync server:
    /// docs/PROTOCOL.md, "Idempotent creates"); a `410` without it stays ``http(status:message:)``.
    case createdSinceDeleted(createdID: String, message: String)
    /// No usable answer: timeout, refused or lost connection, TLS failure.
    case transport(CallFailure, detail: String)
    /// The answer was not what the protocol says (wrong JSON, an HTML page from a proxy…).
    case invalidResponse(String)
    /// The refresh token was refused: the user must log in again.
    case authenticationExpired
    /// The server's certificate failed verification: nothing was sent (docs/SECURITY.md, "TLS trust and proxies").
    case certificate(CertificateProblem)

    /// The failure as the offline decision sees it.
    public var failure: CallFailure {
        switch self {
        case .http(let status, _): return .status(status)
        case .createdSinceDeleted: return .status(410)
        case .transport(let failure, _): return failure
        case .invalidResponse: return .malformedResponse
        case .authenticationExpired: return .status(401)
        case .certificate: return .certificate
        }
    }

    /// The server's stale-edit refusal (spec §3.2: 400 whose message says "out of date").
    public var isOutOfDate: Bool {
        if case .http(400, let message) = self { return message.lowercased().contains("out of date") }
        return false
    }

    /// The certificate problem, when the server's certificate was refused.
    public var certificateProblem: CertificateProblem? {
        if case .certificate(let problem) = self { return problem }
        return nil
    }

    /// A repeated create whose first attempt made the item, which was deleted for good since: `410` (the
    /// VaultSync server, docs/PROTOCOL.md "Idempotent creates"). Never a reason to create it a second time
    /// under the same key.
    public var isCreatedSinceDeleted: Bool {
        switch self {
        case .http(410, _), .createdSinceDeleted: return true
        default: return false
        }
    }

    /// The id of what the repeated create's key made, when the `410` names it.
    public var createdSinceDeletedID: String? {
        if case .createdSinceDeleted(let id, _) = self { return id }
        return nil
    }

    /// An HTTP error answer as the client takes it: the server's message, and for a `410` that names
    /// what a create's key made, that id. An id that could not be part of a key (empty, over 100 bytes,
    /// not visible ASCII: a broken or hostile answer) is ignored.
    public static func answer(status: Int, message: String, createdID: String?) -> ServerCallError {
        if status == 410, let createdID, (1...100).contains(createdID.utf8.count), createdID.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) {
            return .createdSinceDeleted(createdID: createdID, message: message)
        }
        return .http(status: status, message: message)
    }

    /// A repeated upload of an attachment's file the server has already (our server's 400 "already been
    /// uploaded"): the earlier attempt arrived, its answer did not.
    public var isAlreadyUploaded: Bool {
        if case .http(400, let message) = self { return message.lowercased().contains("already been uploaded") }
        return false
    }

    /// What Bitwarden's clients take as "this server has no v2 attachment flow" on its announce: 404 or 405
    /// (they then use the legacy one-step upload, whose answer tells a missing item apart).
    public var isMissingRoute: Bool {
        if case .http(let status, _) = self { return status == 404 || status == 405 }
        return false
    }

    /// 404, or Vaultwarden's 400 "doesn't exist"/"not owned"/"Invalid folder" (spec §3.3).
    public var isGone: Bool {
        guard case .http(let status, let message) = self else { return false }
        if status == 404 { return true }
        let lower = message.lowercased()
        return status == 400 && (lower.contains("doesn't exist") || lower.contains("not owned") || lower.contains("invalid folder"))
    }
}

extension ServerCallError: CustomStringConvertible {
    public var description: String {
        switch self {
        case .http(let status, let message): return "The server refused the request (\(status)): \(message)"
        case .createdSinceDeleted(_, let message): return "The server refused the request (410): \(message)"
        case .transport(_, let detail): return "The server could not be reached: \(detail)"
        case .invalidResponse(let reason): return "The server's answer could not be understood: \(reason)"
        case .authenticationExpired: return "Your session has expired. Log in again."
        case .certificate(let problem): return "The server was not used: \(problem)"
        }
    }
}
