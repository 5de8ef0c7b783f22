import Foundation
import Testing
import VaultTestSupport

/// `vaultsync login` through the built executable for the login steps of the official server
/// (emailed two-step code, new-device code), in a script (no terminal) and on a pseudo-terminal.
/// The official server's answers come from ``OfficialLoginGate`` in front of the real server.
@Suite("CLI: two-step and new-device login")
struct LoginFlowCommandTests {
    /// A registered account, a gate asking for `rules` in front of its server, and a new device's
    /// profile pointed at the gate.
    func gated(_ rules: OfficialLoginGate.Rules) async throws -> (CLIScenario, OfficialLoginGate, CLIDevice) {
        let scenario = try await CLIScenario.start()
        let first = try await scenario.device(register: true)
        try? FileManager.default.removeItem(atPath: (first.home as NSString).deletingLastPathComponent)
        let gate = OfficialLoginGate(upstream: await scenario.server.url, rules: rules)
        try await gate.start()
        let device = CLIDevice(password: scenario.password)
        try await device.expect(["config", "server", await gate.url])
        return (scenario, gate, device)
    }

    @Test("in a script: the emailed code is requested and the flags named (exit 3); a wrong code exits 3; the right one with --remember logs in; the next login needs no code")
    func scriptedEmailTwoFactor() async throws {
        let (scenario, gate, device) = try await gated(.init(emailTwoFactor: true))
        let asked = try await device.expect(["login", scenario.email, "--accept-kdf", "pbkdf2:100000"], status: 3)
        #expect(asked.stderr.contains("A two-step login code was emailed to te*****@example.com"))
        #expect(asked.stderr.contains("no terminal is attached"))
        #expect(asked.stderr.contains("vaultsync login \(scenario.email) --method email --code CODE"))
        let code = try #require(gate.mailbox.last)

        let wrong = try await device.expect(["login", scenario.email, "--accept-kdf", "pbkdf2:100000", "--method", "email",
                                             "--code", code == "000000" ? "111111" : "000000"], status: 3)
        #expect(wrong.stderr.contains("The email code was not accepted (Two-step token is invalid. Try again.)"))

        let done = try await device.expect(["login", scenario.email, "--accept-kdf", "pbkdf2:100000", "--method", "email",
                                            "--code", code, "--remember"])
        #expect(done.stdout.contains("Logged in as \(scenario.email)"))
        try await device.expect(["logout"])
        let mails = gate.mailbox.count
        let again = try await device.expect(["login", scenario.email, "--accept-kdf", "pbkdf2:100000"])
        #expect(again.stdout.contains("Logged in as \(scenario.email)"))
        #expect(gate.mailbox.count == mails, "the remembered device was asked for nothing")
        // --forget-device drops it: the next login is asked for a code again.
        let out = try await device.expect(["logout"])
        #expect(out.stderr.contains("still remembers the two-step login"))
        try await device.expect(["login", scenario.email, "--accept-kdf", "pbkdf2:100000"])
        try await device.expect(["logout", "--forget-device"])
        try await device.expect(["login", scenario.email, "--accept-kdf", "pbkdf2:100000"], status: 3)
        await gate.stop()
        await scenario.finish([device])
    }

    @Test("in a script: providers VaultSync cannot complete are named, and the recovery code is offered")
    func scriptedUnsupported() async throws {
        let (scenario, gate, device) = try await gated(.init(emailTwoFactor: true, otherProviders: [3]))
        let wrongMethod = try await device.expect(["login", scenario.email, "--accept-kdf", "pbkdf2:100000",
                                                   "--method", "authenticator"], status: 3)
        #expect(wrongMethod.stderr.contains("This account does not use authenticator app for two-step login; it offers: email, YubiKey."))
        // A code of a provider the account does not have is answered with the challenge (as Vaultwarden does).
        let wrongProvider = try await device.expect(["login", scenario.email, "--accept-kdf", "pbkdf2:100000", "--code", "123456"], status: 3)
        #expect(wrongProvider.stderr.contains("This account does not use authenticator app for two-step login; it offers: email, YubiKey."))
        let literal = try await device.expect(["login", scenario.email, "--method", "recovery", "--code", "abcd-efgh"], status: 64)
        #expect(literal.stderr.contains("--method recovery takes the recovery code from - (standard input"))
        #expect(!literal.stderr.contains("abcd-efgh"), "the refusal does not repeat the code")
        await gate.stop()
        await scenario.finish([device])
    }

    @Test("in a script: a new device is told to pass --new-device-code (exit 3), --resend-new-device-code mails another, the code logs in")
    func scriptedNewDevice() async throws {
        let (scenario, gate, device) = try await gated(.init(newDeviceVerification: true))
        let asked = try await device.expect(["login", scenario.email, "--accept-kdf", "pbkdf2:100000"], status: 3)
        #expect(asked.stderr.contains("has emailed a verification code to \(scenario.email)"))
        #expect(asked.stderr.contains("--new-device-code CODE"))
        let resent = try await device.expect(["login", scenario.email, "--accept-kdf", "pbkdf2:100000", "--resend-new-device-code"])
        #expect(resent.stdout.contains("A new verification code was emailed"))
        let code = try #require(gate.mailbox.last)
        try await device.expect(["login", scenario.email, "--accept-kdf", "pbkdf2:100000", "--new-device-code", code])
        #expect(try await device.json(["list"]).count == 0)
        await gate.stop()
        await scenario.finish([device])
    }

    @Test("on a terminal: the email code is asked for after it was mailed, then the vault downloads")
    func interactiveEmailTwoFactor() async throws {
        let (scenario, gate, device) = try await gated(.init(emailTwoFactor: true, otherProviders: [7]))
        let run = try await device.runOnTerminal(["login", scenario.email, "--accept-kdf", "pbkdf2:100000"], conversation: [
            TerminalStep(prompt: "Code from the email: ") { gate.mailbox.last ?? "none mailed" },
        ])
        #expect(run.status == 0, "\(run)")
        #expect(run.answered == 1)
        #expect(run.transcript.contains("A two-step login code was emailed to te*****@example.com"))
        #expect(run.transcript.contains("also accepts security key (WebAuthn/FIDO2)"))
        #expect(run.transcript.contains("Logged in as \(scenario.email)"))
        await gate.stop()
        await scenario.finish([device])
    }

    @Test("on a terminal: the new-device code is asked for; Enter mails another, which logs in")
    func interactiveNewDevice() async throws {
        let (scenario, gate, device) = try await gated(.init(newDeviceVerification: true))
        let run = try await device.runOnTerminal(["login", scenario.email, "--accept-kdf", "pbkdf2:100000"], conversation: [
            TerminalStep(prompt: "Verification code (Enter: send another): ") { "" },
            TerminalStep(prompt: "Verification code (Enter: send another): ") { gate.mailbox.last ?? "none mailed" },
        ])
        #expect(run.status == 0, "\(run)")
        #expect(run.answered == 2)
        #expect(run.transcript.contains("Another code was emailed to \(scenario.email)"))
        #expect(gate.mailbox.count == 2)
        await gate.stop()
        await scenario.finish([device])
    }

    @Test("on a terminal: settings below the minimums are shown and logged in with only after a yes")
    func interactiveKdfConfirmation() async throws {
        let scenario = try await CLIScenario.start()
        let first = try await scenario.device(register: true)
        let device = CLIDevice(password: scenario.password)
        try await device.expect(["config", "server", await scenario.server.url])
        let declined = try await device.runOnTerminal(["login", scenario.email], conversation: [
            TerminalStep(prompt: "[y/N] ") { "n" },
        ])
        #expect(declined.status == 64, "\(declined)")
        #expect(declined.transcript.contains("nothing was sent to the server"))
        let accepted = try await device.runOnTerminal(["login", scenario.email], conversation: [
            TerminalStep(prompt: "[y/N] ") { "y" },
        ])
        #expect(accepted.status == 0, "\(accepted)")
        #expect(accepted.transcript.contains("100,000") || accepted.transcript.contains("100000"))
        #expect(accepted.transcript.contains("Logged in as \(scenario.email)"))
        await scenario.finish([first, device])
    }
}
