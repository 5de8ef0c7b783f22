import Foundation
import Testing
import VaultCrypto
import VaultServer
import VaultTestSupport

/// `vaultsync two-step`, `api-key` and the logins they enable, through the built executable against
/// the real server (in a script and on a pseudo-terminal).
@Suite("CLI: two-step setup, authenticator login, recovery code, API key")
struct TwoStepCommandTests {
    /// The key shown on a terminal after "Key: ".
    static func shownKey(_ transcript: String) -> String {
        guard let range = transcript.range(of: "Key: ") else { return "no key shown" }
        return String(transcript[range.upperBound...].prefix { $0.isLetter || $0.isNumber })
    }

    @Test("on a terminal: two-step enable shows the key, takes a code and shows the recovery code; then login asks for a code")
    func interactive() async throws {
        let clock = SteppedServerClock()
        let scenario = try await CLIScenario.start { $0.now = { clock.now } }
        let device = try await scenario.device(register: true)
        let enabled = try await device.runOnTerminal(["two-step", "enable"], conversation: [
            TerminalStep(prompt: "Code from your authenticator app: ") { (try? clock.code(Self.shownKey($0))) ?? "bad key" },
        ])
        #expect(enabled.status == 0, "\(enabled)")
        #expect(enabled.transcript.contains("otpauth://totp/VaultSync:\(scenario.email)?secret="))
        #expect(enabled.transcript.contains("Two-step login with an authenticator app is on for \(scenario.email)."))
        #expect(enabled.transcript.contains("Recovery code (keep it safe"))
        let key = Self.shownKey(enabled.transcript)
        #expect(try await device.expect(["two-step", "status"]).stdout.contains("Two-step login is on: authenticator app."))

        clock.nextStep()
        try await device.expect(["logout"])
        let login = try await device.runOnTerminal(["login", scenario.email, "--accept-kdf", "pbkdf2:100000"], conversation: [
            TerminalStep(prompt: "Code from your authenticator app: ") { (try? clock.code(key)) ?? "bad key" },
        ])
        #expect(login.status == 0, "\(login)")
        #expect(login.transcript.contains("Logged in as \(scenario.email)"))
        await scenario.finish([device])
    }

    @Test("in a script: enable by key file and code; login needs --code (exit 3 names it), a wrong one exits 3, --remember spares the next; recovery code from a file")
    func scripted() async throws {
        let clock = SteppedServerClock()
        let scenario = try await CLIScenario.start { $0.now = { clock.now } }
        let device = try await scenario.device(register: true)
        let printed = try await device.expect(["two-step", "enable"])
        let key = printed.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(key.count == 32, "only the key on standard output: \(printed)")
        #expect(printed.stderr.contains("--key @FILE --code CODE"))
        let folder = (device.home as NSString).deletingLastPathComponent
        let keyFile = folder + "/key.txt"
        try Data((key + "\n").utf8).write(to: URL(fileURLWithPath: keyFile))
        let literal = try await device.expect(["two-step", "enable", "--key", key, "--code", "123456"], status: 64)
        #expect(!literal.stderr.contains(key), "the refusal does not repeat the key")
        let on = try await device.expect(["two-step", "enable", "--key", "@" + keyFile, "--code", try clock.code(key)])
        #expect(on.stdout.contains("is on for \(scenario.email)"))
        let recovery = try await device.expect(["two-step", "recovery-code"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(recovery.count >= 16)

        clock.nextStep()
        try await device.expect(["logout"])
        let asked = try await device.expect(["login", scenario.email, "--accept-kdf", "pbkdf2:100000"], status: 3)
        #expect(asked.stderr.contains("no terminal is attached"))
        #expect(asked.stderr.contains("vaultsync login \(scenario.email) --code CODE"))
        let code = try clock.code(key)
        let wrong = try await device.expect(["login", scenario.email, "--accept-kdf", "pbkdf2:100000", "--code", code == "000000" ? "111111" : "000000"],
                                            status: 3)
        #expect(wrong.stderr.contains("The authenticator app code was not accepted (Two-step token is invalid. Try again.)"))
        try await device.expect(["login", scenario.email, "--accept-kdf", "pbkdf2:100000", "--code", code, "--remember"])
        try await device.expect(["logout"])
        try await device.expect(["login", scenario.email, "--accept-kdf", "pbkdf2:100000"])

        // A new device with the recovery code from a file: two-step login ends up off.
        let other = CLIDevice(password: scenario.password)
        try await other.expect(["config", "server", await scenario.server.url])
        let recoveryFile = folder + "/recovery.txt"
        try Data(recovery.utf8).write(to: URL(fileURLWithPath: recoveryFile))
        try await other.expect(["login", scenario.email, "--accept-kdf", "pbkdf2:100000", "--method", "recovery", "--code", "@" + recoveryFile])
        #expect(try await other.expect(["two-step", "status"]).stdout.contains("Two-step login is off."))
        await scenario.finish([device, other])
    }

    @Test("api-key prints the key; login --apikey takes it from the environment (or asks on a terminal), and refuses without either")
    func apiKey() async throws {
        let scenario = try await CLIScenario.start()
        let device = try await scenario.device(register: true)
        try await device.expect(["add", "login", "--name", "GitHub", "--username", "alice"])
        let printed = try await device.expect(["api-key"]).stdout
        let lines = printed.split(separator: "\n").map(String.init)
        let clientID = try #require(lines.first { $0.hasPrefix("client_id: ") }).replacingOccurrences(of: "client_id: ", with: "")
        let secret = try #require(lines.first { $0.hasPrefix("client_secret: ") }).replacingOccurrences(of: "client_secret: ", with: "")
        #expect(clientID.hasPrefix("user."))

        let scripted = CLIDevice(password: scenario.password)
        try await scripted.expect(["config", "server", await scenario.server.url])
        let missing = try await scripted.expect(["login", "--apikey"], status: 64)
        #expect(missing.stderr.contains("--apikey needs VAULTSYNC_CLIENTID"))
        let done = try await scripted.expect(["login", "--apikey"], environment: ["VAULTSYNC_CLIENTID": clientID, "VAULTSYNC_CLIENTSECRET": secret])
        #expect(done.stdout.contains("Logged in as \(scenario.email) with an API key; 1 item downloaded."))
        try await scripted.expect(["get", "GitHub", "--field", "username"])

        let person = CLIDevice(password: scenario.password)
        try await person.expect(["config", "server", await scenario.server.url])
        let asked = try await person.runOnTerminal(["login", "--apikey"], conversation: [
            TerminalStep(prompt: "client_id: ") { clientID },
            TerminalStep(prompt: "client_secret: ") { secret },
        ])
        #expect(asked.status == 0, "\(asked)")
        #expect(!asked.transcript.contains(secret), "the secret is asked for without echo")

        let rotated = try await device.expect(["api-key", "--rotate"]).stdout
        #expect(!rotated.contains(secret))
        try await person.expect(["logout"])
        let refused = try await person.expect(["login", "--apikey"], status: 3,
                                              environment: ["VAULTSYNC_CLIENTID": clientID, "VAULTSYNC_CLIENTSECRET": secret])
        #expect(refused.stderr.contains("The API key was not accepted"))
        await scenario.finish([device, scripted, person])
    }
}
