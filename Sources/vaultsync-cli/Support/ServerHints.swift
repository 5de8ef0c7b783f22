import Foundation
import VaultAPI
import VaultClient

/// What a failed call to the server adds to its message: which server (the address in the profile),
/// and, where the failure shows the likely mistake, the fix: `https://` to a server that speaks plain
/// HTTP, a port with nothing listening, a path after the base address (`…/api`).
enum ServerHints {
    /// The sentence to append to `error`'s message, or nil when it is not a server failure.
    static func hint(for error: any Error, server: String?) -> String? {
        guard let server, !server.isEmpty else { return nil }
        let components = URLComponents(string: server)
        let path = components?.path ?? ""
        func named(_ fix: String?) -> String {
            " (server: \(server)" + (fix.map { "; \($0)" } ?? "") + ")"
        }
        let unreachableDetail: String?
        var refusedStatus: Int?
        switch error {
        case VaultError.serverUnreachable(let detail), VaultError.offlineEditsDisabled(let detail): unreachableDetail = detail
        case VaultError.serverRefused(let status, _): unreachableDetail = nil; refusedStatus = status
        case VaultError.serverAnswerInvalid: unreachableDetail = nil; refusedStatus = 0
        case let call as ServerCallError:
            switch call {
            case .transport(_, let detail): unreachableDetail = detail
            case .http(let status, _): unreachableDetail = nil; refusedStatus = status
            case .invalidResponse: unreachableDetail = nil; refusedStatus = 0
            default: return nil
            }
        case VaultError.syncIncomplete(_, let cause):
            return hint(for: cause, server: server)
        default:
            return nil
        }
        let pathHint = !path.isEmpty && path != "/"
            ? "the server address is its base URL, without \(path): vaultsync config server \(server.replacingOccurrences(of: path, with: ""))"
            : nil
        if let detail = unreachableDetail?.lowercased() {
            if components?.scheme == "https", detail.contains("tls") || detail.contains("ssl") || detail.contains("handshake")
                || detail.contains("wrong version") || detail.contains("record") || detail.contains("timed out") {
                // A plain-HTTP server given a TLS handshake waits for a request and never answers it: a timeout.
                let plain = server.replacingOccurrences(of: "https://", with: "http://")
                let what = detail.contains("timed out") ? "no answer over TLS" : "TLS failed"
                return named("\(what): if this server speaks plain HTTP (a local test server), use \(plain)")
            }
            if detail.contains("refused") {
                let port = components?.port.map(String.init) ?? (components?.scheme == "http" ? "80" : "443")
                return named("nothing listens on port \(port) of \(components?.host ?? "it"): check the port, and that the server runs")
            }
            return named(pathHint)
        }
        if let refusedStatus, refusedStatus == 404 || refusedStatus == 0 || refusedStatus == 405 {
            return named(pathHint ?? (refusedStatus == 404 ? "is this the address of a Bitwarden-compatible server?" : nil))
        }
        return refusedStatus != nil ? named(nil) : nil
    }
}
