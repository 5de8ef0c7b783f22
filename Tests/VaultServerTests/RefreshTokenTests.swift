import Foundation
import Hummingbird
import Testing
import VaultCrypto
import VaultModels
@testable import VaultServer

/// A refresh's answer: the new refresh and access tokens, or the refusal.
struct RefreshAnswer: Sendable {
    let response: APIResponse
    var ok: Bool { response.status == .ok }
    var refresh: String? { response.object["refresh_token"]?.stringValue }
    var access: String? { response.object["access_token"]?.stringValue }
    /// Refused the way every bad refresh token is: 400 `invalid_grant`.
    var refusedAsInvalidGrant: Bool { response.status == .badRequest && response.object["error"] == .string("invalid_grant") }
}

extension APIClient {
    func refresh(_ token: String) async throws -> RefreshAnswer {
        RefreshAnswer(response: try await form("/identity/connect/token", [
            ("grant_type", "refresh_token"), ("refresh_token", token), ("client_id", "cli"),
        ]))
    }
}

@Suite("Refresh tokens: lifetime, grace period of the previous token, reuse revokes the device", .serialized)
struct RefreshTokenTests {
    @Test("the previous token answers the same successor within the grace period; after it, it revokes the device",
          arguments: Backend.available)
    func gracePeriod(backend: Backend) async throws {
        let clock = ManualClock(frozen: true)
        try await withTestServer(backend, configure: { $0.now = { clock.now }; $0.refreshTokenGracePeriod = 120 }) { api in
            let user = try await TestUser.register(api)
            let device = UUID().uuidString
            let first = try #require(try await user.login(api, device: device).object["refresh_token"]?.stringValue)
            let lost = try await api.refresh(first)
            let second = try #require(lost.refresh)
            clock.advance(seconds: 120)
            // The answer was lost; at the last second of the grace the same token gets the same answer.
            let again = try await api.refresh(first)
            #expect(again.ok && again.refresh == second)
            let access = try #require(again.access)
            #expect(try await api.request(.get, "/api/sync", token: access).status == .ok)
            clock.advance(seconds: 1)
            // After the grace the previous token is someone else's copy: refused, and the device's chain ends.
            #expect(try await api.refresh(first).refusedAsInvalidGrant)
            #expect(try await api.refresh(second).refusedAsInvalidGrant, "the current token of a revoked device")
            // A password login on the device starts a new chain.
            let relogin = try #require(try await user.login(api, device: device).object["refresh_token"]?.stringValue)
            #expect(try await api.refresh(relogin).ok)
        }
    }

    @Test("the grace period is configurable", arguments: Backend.available)
    func configurableGrace(backend: Backend) async throws {
        let clock = ManualClock(frozen: true)
        try await withTestServer(backend, configure: { $0.now = { clock.now }; $0.refreshTokenGracePeriod = 10 }) { api in
            let user = try await TestUser.register(api)
            let first = try #require(try await user.login(api).object["refresh_token"]?.stringValue)
            let second = try #require(try await api.refresh(first).refresh)
            clock.advance(seconds: 10)
            #expect(try await api.refresh(first).refresh == second)
            clock.advance(seconds: 1)
            #expect(try await api.refresh(first).refusedAsInvalidGrant)
        }
    }

    @Test("an older token is theft: the thief's chain and the victim's both stop, other devices go on",
          arguments: Backend.available)
    func olderTokenRevokesTheDevice(backend: Backend) async throws {
        let clock = ManualClock(frozen: true)
        try await withTestServer(backend, configure: { $0.now = { clock.now } }) { api in
            let user = try await TestUser.register(api)
            let otherDevice = try #require(try await user.login(api).object["refresh_token"]?.stringValue)
            // The victim's token is copied; the thief refreshes first, twice.
            let victimLogin = try await user.login(api)
            let stolen = try #require(victimLogin.object["refresh_token"]?.stringValue)
            let victimAccess = try #require(victimLogin.object["access_token"]?.stringValue)
            let thief1 = try #require(try await api.refresh(stolen).refresh)
            let thief2 = try #require(try await api.refresh(thief1).refresh)
            let thiefAnswer = try await api.refresh(thief2)
            let thief3 = try #require(thiefAnswer.refresh)
            let thiefAccess = try #require(thiefAnswer.access)
            #expect(try await api.request(.get, "/api/sync", token: thiefAccess).status == .ok)
            // The victim's refresh presents a token older than the previous one: refused, the chain revoked.
            #expect(try await api.refresh(stolen).refusedAsInvalidGrant)
            #expect(try await api.refresh(thief3).refusedAsInvalidGrant)
            #expect(try await api.refresh(thief2).refusedAsInvalidGrant)
            // Access tokens of the revoked device stop at once; another device of the account is unaffected.
            #expect(try await api.request(.get, "/api/sync", token: thiefAccess).status == .unauthorized)
            #expect(try await api.request(.get, "/api/sync", token: victimAccess).status == .unauthorized)
            #expect(try await api.refresh(otherDevice).ok)
        }
    }

    @Test("the victim refreshed past the stolen token: the thief's use revokes the device", arguments: Backend.available)
    func thiefLate(backend: Backend) async throws {
        let clock = ManualClock(frozen: true)
        try await withTestServer(backend, configure: { $0.now = { clock.now } }) { api in
            let user = try await TestUser.register(api)
            let stolen = try #require(try await user.login(api).object["refresh_token"]?.stringValue)
            let victim1 = try #require(try await api.refresh(stolen).refresh)
            clock.advance(seconds: 3600)
            let victim2 = try #require(try await api.refresh(victim1).refresh)
            clock.advance(seconds: 3600)
            #expect(try await api.refresh(stolen).refusedAsInvalidGrant)
            #expect(try await api.refresh(victim2).refusedAsInvalidGrant)
        }
    }

    @Test("a made-up token naming a device's chain is refused and revokes nothing", arguments: Backend.available)
    func madeUpToken(backend: Backend) async throws {
        try await withTestServer(backend) { api in
            let user = try await TestUser.register(api)
            let token = try #require(try await user.login(api).object["refresh_token"]?.stringValue)
            let chain = try #require(RefreshTokens.chain(of: token))
            for forged in ["\(chain).AAAA", "\(chain).\(String(token.split(separator: ".")[1].reversed()))", "\(chain).", "garbage", ""] {
                let answer = try await api.refresh(forged)
                #expect(answer.response.status == .badRequest, "\(forged)")
            }
            #expect(try await api.refresh(token).ok)
        }
    }

    @Test("a chain ends at its absolute lifetime, counted from the login, however often it was refreshed",
          arguments: Backend.available)
    func absoluteLifetime(backend: Backend) async throws {
        let clock = ManualClock(frozen: true)
        try await withTestServer(backend, configure: { $0.now = { clock.now }; $0.refreshTokenLifetime = 10_000 }) { api in
            let user = try await TestUser.register(api)
            let device = UUID().uuidString
            var token = try #require(try await user.login(api, device: device).object["refresh_token"]?.stringValue)
            for _ in 0..<3 {
                clock.advance(seconds: 3333)
                token = try #require(try await api.refresh(token).refresh)
            }
            clock.advance(seconds: 1)  // 10,000 s after the login
            #expect(try await api.refresh(token).refusedAsInvalidGrant)
            let relogin = try #require(try await user.login(api, device: device).object["refresh_token"]?.stringValue)
            #expect(try await api.refresh(relogin).ok)
        }
    }

    @Test("the default lifetime is 30 days and the default grace 120 s")
    func defaults() {
        let configuration = ServerConfiguration()
        #expect(configuration.refreshTokenLifetime == 30 * 86_400)
        #expect(configuration.refreshTokenGracePeriod == 120)
    }
}
