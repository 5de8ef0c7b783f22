import Foundation
import Testing
import VaultAPI
@testable import VaultClient
import VaultCrypto
import VaultModels
import VaultServer
import VaultTestSupport

/// Two-step login with an authenticator app and API-key login, through the engine against the real
/// server on loopback (docs/PROTOCOL.md, "Signing in").
@Suite("Two-step and API-key login against the real server")
struct TwoStepLoginTests {
    /// A server on a frozen clock, a registered account with the authenticator on (set up through the
    /// library, as `vaultsync two-step enable` does), and its key and recovery code.
    func withAuthenticator() async throws -> (Scenario, SteppedServerClock, Device, key: String, recovery: String) {
        let clock = SteppedServerClock()
        let scenario = try await Scenario.start { $0.now = { clock.now } }
        let first = try await scenario.device(register: true)
        #expect(try await first.engine.twoStepStatus().enabled == [])
        let setup = try await first.engine.authenticatorSetup(password: scenario.password)
        #expect(setup.enabled == false && setup.key.count == 32)
        #expect(setup.uri(email: scenario.email).hasPrefix("otpauth://totp/VaultSync:\(scenario.email)?secret=\(setup.key)&issuer=VaultSync"))
        await #expect(throws: VaultError.wrongPassword) {
            _ = try await first.engine.enableAuthenticator(setup: setup, code: try clock.code(setup.key), password: "wrong password")
        }
        let recovery = try #require(try await first.engine.enableAuthenticator(setup: setup, code: try clock.code(setup.key),
                                                                               password: scenario.password))
        #expect(try await first.engine.twoStepStatus().enabled == [.authenticator])
        clock.nextStep()
        return (scenario, clock, first, setup.key, recovery)
    }

    @Test("a code is asked for, a wrong one refused, the right one with remember logs in; the remembered device needs none, also after logout")
    func authenticator() async throws {
        let (scenario, clock, first, key, _) = try await withAuthenticator()
        let device = try Device.make(url: await scenario.server.url)
        let engine = device.engine
        var options = LoginOptions(acceptingKdf: testKDF)
        await #expect(throws: VaultError.twoFactorRequired(TwoFactorChallenge(providers: [.authenticator]))) {
            try await engine.login(email: scenario.email, password: scenario.password, options: options)
        }
        let right = try clock.code(key)
        options.secondFactor = SecondFactor(provider: .authenticator, code: right == "000000" ? "111111" : "000000")
        await #expect(throws: VaultError.twoFactorCodeInvalid(provider: .authenticator, message: "Two-step token is invalid. Try again.")) {
            try await engine.login(email: scenario.email, password: scenario.password, options: options)
        }
        options.secondFactor = SecondFactor(provider: .authenticator, code: String(right.prefix(3)) + " " + right.dropFirst(3), remember: true)
        try await engine.login(email: scenario.email, password: scenario.password, options: options)
        #expect(await engine.isUnlocked)
        #expect(try await engine.hasRememberedTwoFactor(email: scenario.email))

        // The same code again (a replay) is refused, on any device.
        let other = try Device.make(url: await scenario.server.url)
        await #expect(throws: VaultError.self) {
            try await other.engine.login(email: scenario.email, password: scenario.password,
                                         options: LoginOptions(acceptingKdf: testKDF, secondFactor: SecondFactor(provider: .authenticator, code: right)))
        }
        #expect(await other.engine.isUnlocked == false)

        // Logged out, the remembered device logs in with the password only.
        try await engine.logout(email: scenario.email)
        try await engine.login(email: scenario.email, password: scenario.password, options: LoginOptions(acceptingKdf: testKDF))
        #expect(await engine.isUnlocked)

        // After the password changes elsewhere... here: after two-step login is turned off and on again,
        // the server forgets remember tokens; the device is asked for a code again and drops its token.
        try await first.engine.disableAuthenticator(password: scenario.password)
        let again = try await first.engine.authenticatorSetup(password: scenario.password)
        clock.nextStep()
        _ = try await first.engine.enableAuthenticator(setup: again, code: try clock.code(again.key), password: scenario.password)
        clock.nextStep()
        try await engine.logout(email: scenario.email)
        await #expect(throws: VaultError.twoFactorRequired(TwoFactorChallenge(providers: [.authenticator]))) {
            try await engine.login(email: scenario.email, password: scenario.password, options: LoginOptions(acceptingKdf: testKDF))
        }
        #expect(try await engine.hasRememberedTwoFactor(email: scenario.email) == false)
        try await engine.login(email: scenario.email, password: scenario.password,
                               options: LoginOptions(acceptingKdf: testKDF, secondFactor: SecondFactor(provider: .authenticator,
                                                                                                   code: try clock.code(again.key))))
        #expect(await engine.isUnlocked)
        await scenario.finish([first, device, other])
    }

    @Test("the recovery code logs in and turns two-step login off")
    func recoveryCode() async throws {
        let (scenario, _, first, _, recovery) = try await withAuthenticator()
        #expect(try await first.engine.twoStepRecoveryCode(password: scenario.password) == recovery)
        let device = try Device.make(url: await scenario.server.url)
        // Typed as a person might: upper case, in groups.
        let typed = recovery.uppercased().enumerated().map { $0.offset > 0 && $0.offset % 4 == 0 ? " \($0.element)" : String($0.element) }.joined()
        try await device.engine.login(email: scenario.email, password: scenario.password,
                                      options: LoginOptions(acceptingKdf: testKDF, secondFactor: SecondFactor(provider: .recoveryCode, code: typed)))
        #expect(try await device.engine.twoStepStatus().enabled == [])
        // The used code is gone: a new one replaced it.
        #expect(try await device.engine.twoStepRecoveryCode(password: scenario.password) != recovery)
        await scenario.finish([first, device])
    }

    @Test("wrong codes in a row lock the second step out (429), and the engine reports the server's reason")
    func wrongCodesAreLimited() async throws {
        let (scenario, clock, first, key, _) = try await withAuthenticator()
        let device = try Device.make(url: await scenario.server.url)
        let right = try clock.code(key)
        let wrong = right == "000000" ? "111111" : "000000"
        var refusals: [VaultError] = []
        for _ in 0..<8 {
            do {
                try await device.engine.login(email: scenario.email, password: scenario.password,
                                              options: LoginOptions(acceptingKdf: testKDF, secondFactor: SecondFactor(provider: .authenticator, code: wrong)))
            } catch let error as VaultError {
                refusals.append(error)
            }
        }
        #expect(refusals.count == 8)
        let limited = refusals.filter { if case .serverRefused(429, _) = $0 { return true } else { return false } }
        #expect(!limited.isEmpty, "\(refusals)")
        // While locked out, even the right code is refused.
        await #expect(throws: VaultError.self) {
            try await device.engine.login(email: scenario.email, password: scenario.password,
                                          options: LoginOptions(acceptingKdf: testKDF, secondFactor: SecondFactor(provider: .authenticator, code: right)))
        }
        await scenario.finish([first, device])
    }

    @Test("API key: login with the key then the password only unlocks; wrong password, rotated key; the session renews with the key")
    func apiKey() async throws {
        let (scenario, _, first, _, _) = try await withAuthenticator()
        _ = try await first.engine.addItem(loginItem("GitHub"))
        let key = try await first.engine.personalAPIKey(password: scenario.password)
        #expect(key.clientID == "user." + (await first.engine.currentUserID ?? ""))

        let device = try Device.make(url: await scenario.server.url)
        await #expect(throws: VaultError.wrongPassword) {
            try await device.engine.login(apiKey: key, password: "not the password")
        }
        try await device.engine.login(apiKey: key, password: scenario.password)
        #expect(await device.engine.currentEmail == scenario.email)
        #expect(try await device.engine.view(named: "GitHub") != nil, "no second factor was asked, and the vault downloaded")

        // The session has no refresh token: an expired access token is renewed with the key.
        await device.engine.invalidateAccessToken()
        _ = try await device.engine.addItem(loginItem("After renewal"))
        _ = try await first.engine.sync()
        #expect(try await first.engine.view(named: "After renewal") != nil)

        // Offline unlock works as for a password login.
        await device.engine.lock()
        try await device.engine.unlock(email: scenario.email, password: scenario.password)

        // A rotated key replaces the old one.
        let rotated = try await first.engine.personalAPIKey(password: scenario.password, rotate: true)
        #expect(rotated.clientSecret != key.clientSecret)
        let third = try Device.make(url: await scenario.server.url)
        await #expect(throws: VaultError.apiKeyRefused("the server does not accept this client id and secret")) {
            try await third.engine.login(apiKey: key, password: scenario.password)
        }
        try await third.engine.login(apiKey: rotated, password: scenario.password)
        await #expect(throws: VaultError.self) {
            try await third.engine.login(apiKey: APIKeyCredentials(clientID: "organization.x", clientSecret: "y"), password: scenario.password)
        }
        await scenario.finish([first, device, third])
    }
}
