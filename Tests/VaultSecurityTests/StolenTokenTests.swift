import AsyncHTTPClient
import Foundation
import Testing
import VaultAPI
import VaultClient
import VaultModels
import VaultTestSupport

/// What a copy of this device's tokens is worth after the user logs out.
@Suite("Security: a stolen token after logout gets nothing", .serialized, .timeLimit(.minutes(5)))
struct StolenTokenTests {
    /// The refresh tokens the server handed out, as a thief reading the wire (or the device) would have them.
    final class TokenTap: @unchecked Sendable {
        private let lock = NSLock()
        private var tokens: [String] = []

        var last: String? { lock.withLock { tokens.last } }

        func tamper() -> FaultProxy.Tamper {
            { [self] method, path, body in
                if method == "POST", path.hasSuffix("/connect/token"), let token = (try? JSONParser.parseObject(body))?["refresh_token"]?.stringValue {
                    lock.withLock { tokens.append(token) }
                }
                return nil
            }
        }
    }

    @Test("logging out while unlocked ends the device's session on the server: its refresh token stops working")
    func logoutRevokes() async throws {
        let server = LiveServer()
        try await server.start()
        let proxy = FaultProxy(upstream: await server.url)
        try await proxy.start()
        let tap = TokenTap()
        await proxy.setTamper(tap.tamper())
        let email = uniqueEmail("logout")
        let device = try SecureDevice.make(url: await proxy.url)
        try await device.engine.register(email: email, password: "correct horse battery staple", kdf: securityKDF)
        let stolen = try #require(tap.last)
        let api = BitwardenAPI(baseURL: await server.url, httpClient: HTTPClient.shared)

        #expect(try await device.engine.logout(email: email))
        await #expect(throws: ServerCallError.authenticationExpired) { try await api.refresh(refreshToken: stolen) }
        #expect(await proxy.requestLog.contains("POST /identity/connect/revocation"))
        await proxy.stop()
        await server.destroy()
    }

    @Test("logging out while locked or offline still removes everything here, and says the server was not told")
    func logoutOffline() async throws {
        let server = LiveServer()
        try await server.start()
        let email = uniqueEmail("logout")
        let device = try SecureDevice.make(url: await server.url)
        try await device.engine.register(email: email, password: "correct horse battery staple", kdf: securityKDF)
        await device.engine.lock()
        #expect(try await device.engine.logout(email: email) == false)
        #expect(try await device.engine.accounts().isEmpty)
        await server.destroy()
    }
}
