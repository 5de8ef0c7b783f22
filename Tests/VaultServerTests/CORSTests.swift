import HTTPTypes
import Testing
@testable import VaultServer

/// Cross-origin requests from the official clients that run in a browser engine (docs/PROTOCOL.md,
/// "Cross-origin requests"). RELIABILITY bug 69: every preflight was a 404 and no answer named an allowed origin,
/// so the desktop app and Safari's extension could not sign in.
@Suite("Cross-origin requests (CORS)")
struct CORSTests {
    static func preflight(_ api: APIClient, _ path: String, origin: String) async throws -> APIResponse {
        try await api.request(.options, path, headers: [
            .origin: origin, .accessControlRequestMethod: "POST", .accessControlRequestHeaders: "content-type,device-type",
        ])
    }

    @Test("the desktop app's and Safari's origins, and a configured one: preflights answered, answers (errors too) name the origin")
    func allowedOrigins() async throws {
        try await withTestServer(.sqlite, configure: { $0.corsOrigins = ["https://vault.example.com"] }) { api in
            for origin in ["bw-desktop-file://bundle", "file://", "https://vault.example.com"] {
                let preflight = try await Self.preflight(api, "/identity/connect/token", origin: origin)
                #expect(preflight.status == .ok, "\(origin)")
                #expect(preflight.headers[.accessControlAllowOrigin] == origin && preflight.headers[.accessControlAllowCredentials] == "true")
                #expect(preflight.headers[.accessControlAllowMethods] == "POST")
                #expect(preflight.headers[.accessControlAllowHeaders] == "content-type,device-type")
                let config = try await api.request(.get, "/api/config", headers: [.origin: origin])
                #expect(config.status == .ok && config.headers[.accessControlAllowOrigin] == origin)
                let refused = try await api.request(.get, "/api/sync", headers: [.origin: origin])
                #expect(refused.status == .unauthorized && refused.headers[.accessControlAllowOrigin] == origin, "an error a page can read")
            }
        }
    }

    @Test("any other origin gets no CORS headers, and its preflight is not answered")
    func otherOrigins() async throws {
        try await withTestServer(.sqlite) { api in
            for origin in ["https://evil.example", "https://vault.example.com", "null", "bw-desktop-file://evil"] {
                let preflight = try await Self.preflight(api, "/identity/connect/token", origin: origin)
                #expect(preflight.status != .ok && preflight.headers[.accessControlAllowOrigin] == nil, "\(origin)")
                let config = try await api.request(.get, "/api/config", headers: [.origin: origin])
                #expect(config.status == .ok && config.headers[.accessControlAllowOrigin] == nil, "\(origin)")
            }
        }
    }
}
