import Foundation
import Hummingbird
import HummingbirdWebSocket
import NIOCore
import VaultModels

/// Per-request state: the authenticated user (set by ``AuthMiddleware``) and the client's address.
public struct VaultRequestContext: RequestContext, WebSocketRequestContext {
    public var coreContext: CoreRequestContextStorage
    /// Where the WebSocket upgrade of `/notifications/hub` keeps its handler.
    public let webSocket: WebSocketHandlerReference<VaultRequestContext>
    /// The authenticated user's id, on `/api` routes that require it.
    var userID: String?
    /// The access token's claims.
    var claims: AccessClaims?
    /// The peer address (for rate limiting).
    let remoteAddress: String

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        webSocket = .init()
        remoteAddress = source.channel.remoteAddress?.ipAddress ?? "unknown"
    }

    /// Body limits are applied per route with ``readBody(_:limit:)``.
    public var maxUploadSize: Int { 256 * 1024 * 1024 }

    /// The authenticated user, or 401.
    func requireUser() throws -> String {
        guard let userID else { throw APIError.unauthorized }
        return userID
    }
}

extension Request {
    /// Collects the body up to `limit` bytes (413 beyond).
    func readBody(limit: Int) async throws -> [UInt8] {
        do {
            let buffer = try await body.collect(upTo: limit)
            return Array(buffer.readableBytesView)
        } catch is NIOTooManyBytesError {
            throw APIError(.contentTooLarge, "The request body is larger than \(limit) bytes.")
        }
    }

    /// The body as a JSON object (400 with the official shape if it is not one).
    func jsonObject(limit: Int) async throws -> JSONObject {
        let bytes = try await readBody(limit: limit)
        do {
            return try JSONParser.parseObject(bytes)
        } catch let error as ModelError {
            throw APIError.from(error)
        }
    }
}

/// Checks the bearer token on every route it guards; 401 without a valid, unexpired one, when its
/// security stamp is not the account's current one (logged out everywhere, password changed), or when
/// the device it was issued to has been revoked (theft detected, logged out, deactivated) since the
/// token was issued, even if the device has signed in again after.
struct AuthMiddleware: RouterMiddleware {
    typealias Context = VaultRequestContext
    let signer: AccessTokenSigner
    let repository: VaultRepository
    let now: @Sendable () -> Int64

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let header = request.headers[.authorization], header.lowercased().hasPrefix("bearer "),
              let claims = signer.verify(String(header.dropFirst(7)), nowSeconds: now() / 1_000_000),
              // Download links are signed with the same key; only a user's token (a user id subject) is an access token.
              UUID(uuidString: claims.subject) != nil,
              try await repository.accessTokenIsLive(userID: claims.subject, device: claims.device, stamp: claims.securityStamp,
                                                     generation: claims.generation) else {
            throw APIError.unauthorized
        }
        var context = context
        context.userID = claims.subject
        context.claims = claims
        return try await next(request, context)
    }
}

extension VaultRepository {
    /// Whether an access token still stands: the account's security stamp is the one it carries, the
    /// device it was issued to is signed in (not revoked), and has not been revoked since the token was
    /// issued (its generation is the token's: a revocation increments it, a later login does not reset it).
    func accessTokenIsLive(userID: String, device: String, stamp: String, generation: Int64) async throws -> Bool {
        try await read { session in
            guard let row = try await session.query("""
                SELECT u.security_stamp, d.revoked_at, d.generation FROM users u JOIN devices d ON d.user_id = u.id
                WHERE u.id = ? AND d.identifier = ?
                """, [.text(userID), .text(device)]).first else { return false }
            return row.text("security_stamp") == stamp && row.int("revoked_at") == nil && row.int("generation") == generation
        }
    }
}
