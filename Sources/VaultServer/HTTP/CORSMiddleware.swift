import HTTPTypes
import Hummingbird

/// Cross-origin access for the official clients that run in a browser engine (docs/PROTOCOL.md, "Cross-origin
/// requests"): the desktop app (`bw-desktop-file://bundle`), Safari's extension (`file://`) and a web vault the
/// operator serves from another origin (`ServerConfiguration.corsOrigins`). A request from one of those origins
/// gets `Access-Control-Allow-Origin` naming it (never `*`: the answers carry credentials); a preflight
/// (`OPTIONS` with `Access-Control-Request-Method`) is answered here with what it asked for. Any other origin
/// gets no CORS headers, so a browser keeps a page of another site from reading the answers. Before this, every
/// preflight was a 404 and those clients could not sign in (RELIABILITY bug 69).
struct CORSMiddleware<Context: RequestContext>: RouterMiddleware {
    /// The origins the official clients' own shells use, always allowed (as the official server and Vaultwarden do).
    static var clientOrigins: Set<String> { ["file://", "bw-desktop-file://bundle"] }

    let allowed: Set<String>

    init(extraOrigins: [String]) {
        allowed = Self.clientOrigins.union(extraOrigins)
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let origin = request.headers[.origin], allowed.contains(origin) else { return try await next(request, context) }
        if request.method == .options, let method = request.headers[.accessControlRequestMethod] {
            var response = Response(status: .ok)
            response.headers[.accessControlAllowMethods] = method
            if let headers = request.headers[.accessControlRequestHeaders] { response.headers[.accessControlAllowHeaders] = headers }
            response.headers[.accessControlMaxAge] = "600"
            Self.allow(origin, in: &response)
            return response
        }
        var response = try await next(request, context)
        Self.allow(origin, in: &response)
        return response
    }

    static func allow(_ origin: String, in response: inout Response) {
        response.headers[.accessControlAllowOrigin] = origin
        response.headers[.accessControlAllowCredentials] = "true"
        response.headers[.vary] = "Origin"
    }
}
