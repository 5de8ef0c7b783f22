import Foundation
import GRDB
import Testing
import VaultAPI
import VaultClient
import VaultModels
import VaultStore
import VaultTestSupport

/// The login steps only the official server has (an emailed two-step code, the emailed new-device
/// code), against the real server behind ``OfficialLoginGate``, which answers those steps exactly as
/// the official server does (docs/PROTOCOL.md).
@Suite("Official-server login flows")
struct OfficialLoginFlowTests {
    /// A registered account, then a gate in front of its server asking for `rules`, and a new device
    /// pointed at the gate.
    func gated(_ rules: OfficialLoginGate.Rules) async throws -> (Scenario, OfficialLoginGate, Device) {
        let scenario = try await Scenario.start()
        let first = try await scenario.device(register: true)
        await first.engine.shutdown()
        let gate = OfficialLoginGate(upstream: await scenario.server.url, rules: rules)
        try await gate.start()
        return (scenario, gate, try Device.make(url: await gate.url))
    }

    @Test("email two-step: challenge, code requested, wrong code refused, right code with remember, next login uses the remembered token")
    func emailTwoFactor() async throws {
        let (scenario, gate, device) = try await gated(.init(emailTwoFactor: true))
        let engine = device.engine
        var options = LoginOptions(acceptingKdf: testKDF)
        let challenge: TwoFactorChallenge
        do {
            try await engine.login(email: scenario.email, password: scenario.password, options: options)
            Issue.record("a login without a code succeeded")
            return
        } catch VaultError.twoFactorRequired(let answer) {
            challenge = answer
        }
        #expect(challenge.providers == [.email])
        #expect(challenge.emailHint == "te*****@example.com")
        let session = try #require(challenge.emailSessionToken)
        #expect(session.hasPrefix("BwSsoEmail2FaSessionToken_"))
        #expect(await engine.isUnlocked == false)

        options.emailSessionToken = session
        try await engine.requestEmailCode(email: scenario.email, password: scenario.password, options: options)
        let mailed = try #require(gate.mailbox.last)
        let request = try #require(gate.seen.last)
        #expect(request.path == "/api/two-factor/send-email-login")
        #expect(request.fields["email"] == scenario.email && request.fields["deviceIdentifier"] != nil)

        options.secondFactor = SecondFactor(provider: .email, code: "000000" == mailed ? "111111" : "000000")
        await #expect(throws: VaultError.twoFactorCodeInvalid(provider: .email, message: "Two-step token is invalid. Try again.")) {
            try await engine.login(email: scenario.email, password: scenario.password, options: options)
        }
        // The wrong code did not use up the mailed one; spaces a person types are dropped.
        options.secondFactor = SecondFactor(provider: .email, code: mailed.prefix(3) + " " + mailed.dropFirst(3), remember: true)
        try await engine.login(email: scenario.email, password: scenario.password, options: options)
        #expect(await engine.isUnlocked)
        let sent = try #require(gate.seen.last { $0.path == "/identity/connect/token" })
        #expect(sent.fields["twoFactorToken"] == mailed && sent.fields["twoFactorProvider"] == "1" && sent.fields["twoFactorRemember"] == "1")
        let remembered = try #require(gate.rememberTokens.first)

        // Logged out, the device still knows the remember token: the next login sends it and asks nothing.
        try await engine.logout(email: scenario.email)
        let mails = gate.mailbox.count
        try await engine.login(email: scenario.email, password: scenario.password, options: LoginOptions(acceptingKdf: testKDF))
        #expect(await engine.isUnlocked)
        let again = try #require(gate.seen.last { $0.path == "/identity/connect/token" })
        #expect(again.fields["twoFactorProvider"] == "5" && again.fields["twoFactorToken"] == remembered)
        #expect(gate.mailbox.count == mails, "no new code was mailed")
        #expect(again.fields["deviceIdentifier"] == sent.fields["deviceIdentifier"], "the device keeps its identifier across logout")

        // The token is kept sealed: not in the profile database in the clear.
        for suffix in ["", "-wal"] {
            let bytes = readFileKeepingLocks(device.profile + "/vault.sqlite" + suffix) ?? Data()
            let found = bytes.withUnsafeBytes { file in Array(remembered.utf8).withUnsafeBytes { byteSearch(file, contains: $0) } }
            #expect(!found, "the remember token is in vault.sqlite\(suffix) in the clear")
        }

        // When the server stops accepting it, the login asks for a code again and the token is dropped.
        gate.revokeRememberTokens()
        try await engine.logout(email: scenario.email)
        await #expect(throws: VaultError.self) {
            try await engine.login(email: scenario.email, password: scenario.password, options: LoginOptions(acceptingKdf: testKDF))
        }
        let count = gate.seen.filter { $0.path == "/identity/connect/token" }.count
        await #expect(throws: VaultError.self) {
            try await engine.login(email: scenario.email, password: scenario.password, options: LoginOptions(acceptingKdf: testKDF))
        }
        let last = try #require(gate.seen.last { $0.path == "/identity/connect/token" })
        #expect(last.fields["twoFactorProvider"] == nil, "the rejected token is not sent again")
        #expect(gate.seen.filter { $0.path == "/identity/connect/token" }.count == count + 1)
        await gate.stop()
        await scenario.finish([device])
    }

    @Test("a wrong master password never opens the remembered token and is refused as such")
    func rememberedTokenNeedsThePassword() async throws {
        let (scenario, gate, device) = try await gated(.init(emailTwoFactor: true))
        let engine = device.engine
        var options = LoginOptions(acceptingKdf: testKDF)
        // The challenge (for its session token), a mailed code, a login remembering the device.
        var challenge: TwoFactorChallenge?
        do {
            try await engine.login(email: scenario.email, password: scenario.password, options: options)
        } catch VaultError.twoFactorRequired(let answer) {
            challenge = answer
        }
        options.emailSessionToken = challenge?.emailSessionToken
        try await engine.requestEmailCode(email: scenario.email, password: scenario.password, options: options)
        options.secondFactor = SecondFactor(provider: .email, code: try #require(gate.mailbox.last), remember: true)
        try await engine.login(email: scenario.email, password: scenario.password, options: options)
        try await engine.logout(email: scenario.email)

        await #expect(throws: VaultError.loginRefused) {
            try await engine.login(email: scenario.email, password: "not the password", options: LoginOptions(acceptingKdf: testKDF))
        }
        let sent = try #require(gate.seen.last { $0.path == "/identity/connect/token" })
        #expect(sent.fields["twoFactorProvider"] == nil, "without the master password the remembered token cannot be opened, so it is not sent")
        await gate.stop()
        await scenario.finish([device])
    }

    @Test("providers VaultSync cannot complete are named")
    func unsupportedProviders() async throws {
        let (scenario, gate, device) = try await gated(.init(emailTwoFactor: true, otherProviders: [3, 7]))
        do {
            try await device.engine.login(email: scenario.email, password: scenario.password, options: LoginOptions(acceptingKdf: testKDF))
            Issue.record("a login without a code succeeded")
        } catch let error as VaultError {
            guard case .twoFactorRequired(let challenge) = error else { throw error }
            #expect(challenge.providers == [.email, .yubiKey, .webAuthn])
            #expect(error.description.contains("also accepts YubiKey and security key (WebAuthn/FIDO2); VaultSync supports authenticator and email codes"))
        }
        await gate.stop()
        await scenario.finish([device])
    }

    @Test("new-device verification: the emailed code, a wrong one refused, resend, then the device is known")
    func newDeviceVerification() async throws {
        let (scenario, gate, device) = try await gated(.init(newDeviceVerification: true))
        let engine = device.engine
        var options = LoginOptions(acceptingKdf: testKDF)
        await #expect(throws: VaultError.newDeviceVerificationRequired(email: scenario.email)) {
            try await engine.login(email: scenario.email, password: scenario.password, options: options)
        }
        let first = try #require(gate.mailbox.last)
        try await engine.resendNewDeviceCode(email: scenario.email, password: scenario.password, options: options)
        let second = try #require(gate.mailbox.last)
        #expect(gate.seen.last?.path == "/api/accounts/resend-new-device-otp")
        options.newDeviceCode = first == second ? "00000000" : first
        await #expect(throws: VaultError.newDeviceCodeInvalid) {
            try await engine.login(email: scenario.email, password: scenario.password, options: options)
        }
        options.newDeviceCode = second
        try await engine.login(email: scenario.email, password: scenario.password, options: options)
        #expect(await engine.isUnlocked)
        #expect(gate.seen.last { $0.path == "/identity/connect/token" }?.fields["newDeviceOtp"] == second)

        // The device is known now: the next login needs no code.
        try await engine.logout(email: scenario.email)
        try await engine.login(email: scenario.email, password: scenario.password, options: LoginOptions(acceptingKdf: testKDF))
        #expect(await engine.isUnlocked)
        await gate.stop()
        await scenario.finish([device])
    }
}
