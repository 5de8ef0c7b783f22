import Crypto
import Foundation
import Hummingbird

/// `/ready` (the database answers) and, with `--metrics`, `/metrics` (docs/OPERATIONS.md, "Watching it").
/// `/alive` (the process answers) is the account controller's, as Bitwarden's server has it.
struct OperationsController: Sendable {
    let repository: VaultRepository
    let metrics: ServerMetrics?
    let metricsToken: String?
    let hub: NotificationHub

    func addRoutes(to router: Router<VaultRequestContext>) {
        router.get("/ready") { _, _ -> Response in
            do {
                _ = try await repository.database.read { session in try await session.query("SELECT 1") }
                return Self.text(.ok, "ready\n")
            } catch {
                return Self.text(.serviceUnavailable, "the database does not answer\n")
            }
        }
        guard let metrics else { return }
        router.get("/metrics") { request, _ -> Response in
            if let metricsToken {
                let given = request.headers[.authorization] ?? ""
                // Compared as digests: equal lengths, so the comparison's time says nothing of the token.
                guard SHA256.hash(data: Array(given.utf8)) == SHA256.hash(data: Array("Bearer \(metricsToken)".utf8)) else {
                    return Self.text(.unauthorized, "a bearer token is required\n")
                }
            }
            var response = Response(status: .ok, body: .init(byteBuffer: ByteBuffer(bytes: metrics.exposition(hubConnections: hub.connectionTotal, database: repository.database.use.sample))))
            response.headers[.contentType] = "text/plain; version=0.0.4; charset=utf-8"
            return response
        }
    }

    static func text(_ status: HTTPResponse.Status, _ text: String) -> Response {
        var response = Response(status: status, body: .init(byteBuffer: ByteBuffer(string: text)))
        response.headers[.contentType] = "text/plain; charset=utf-8"
        return response
    }
}
