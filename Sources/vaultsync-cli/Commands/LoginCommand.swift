import ArgumentParser
import Foundation
import VaultAPI
import VaultClient
import VaultCrypto
import VaultModels
import VaultSyncCore

struct LoginCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        commandName: "login",
        abstract: "Log in to the server and download the vault.",
        discussion: """
        Examples:
          vaultsync login alice@example.com
          vaultsync login alice@example.com --password-file ~/.vault-pass
          vaultsync login alice@example.com --code 123456 --remember
          vaultsync login alice@example.com --method email            (mails a code, then asks for it)
          vaultsync login alice@example.com --method recovery --code @recovery.txt
          vaultsync login alice@example.com --new-device-code 12345678
          VAULTSYNC_CLIENTID=user.… VAULTSYNC_CLIENTSECRET=… vaultsync login --apikey
          vaultsync login alice@example.com --accept-kdf pbkdf2:100000

        Two-step login: on a terminal you are asked for a code when the account needs one (the \
        authenticator app's first; email when that is the only one, or with --method email). In a \
        script, pass --code (and --method for an email or recovery code): without it the login stops \
        with exit code 3 and names the flags. --remember keeps the server's "remember this device" \
        token, so the next login here needs no code; it survives logout and only your master password \
        opens it. The recovery code turns two-step login off on the account.

        A new device on bitwarden.com may be asked for a code the server emails (new-device \
        verification): pass it with --new-device-code; --resend-new-device-code mails another.

        --apikey logs in with your personal API key (client id and secret from VAULTSYNC_CLIENTID and \
        VAULTSYNC_CLIENTSECRET, or asked for on a terminal); the master password then only unlocks, on \
        this device. No second factor is asked.

        The key derivation settings the server announces are checked before anything is sent: on a device that has unlocked the account they may not be weaker than before, and a first login here refuses settings below Bitwarden's current minimums (PBKDF2 600,000 iterations; Argon2id 2 iterations, 16 MiB). If your account really uses such settings, confirm them exactly as the refusal names them with --accept-kdf (or answer the question on a terminal).
        """)
    static var needsUnlock: Bool { false }
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The account's email (not needed with --apikey).") var email: String?
    @Option(help: ArgumentHelp("The two-step login method: authenticator, email or recovery.", valueName: "METHOD"))
    var method: String?
    @Option(help: ArgumentHelp(
        "The two-step login code: the code itself, - (standard input) or @FILE. A recovery code only as - or @FILE.",
        valueName: "CODE"))
    var code: String?
    @Flag(help: "Remember this device for two-step login (the next login here needs no code).") var remember = false
    @Option(name: .customLong("new-device-code"), help: ArgumentHelp("The new-device verification code the server emailed.", valueName: "CODE"))
    var newDeviceCode: String?
    @Flag(name: .customLong("resend-new-device-code"), help: "Have the server email another new-device verification code, then stop.")
    var resendNewDeviceCode = false
    @Flag(name: .customLong("apikey"), help: "Log in with a personal API key (VAULTSYNC_CLIENTID, VAULTSYNC_CLIENTSECRET).")
    var apiKey = false
    @Option(name: .customLong("accept-kdf"), help: ArgumentHelp(
        "Confirm weaker key derivation settings exactly as the refusal names them (pbkdf2:ITERATIONS or argon2id:ITERATIONS,MiB,LANES).",
        valueName: "SETTINGS"))
    var acceptKdf: String?

    static let methods: [String: TwoFactorProviderType] = ["authenticator": .authenticator, "email": .email, "recovery": .recoveryCode]

    func validate() throws {
        if let acceptKdf, KdfConfiguration(spec: acceptKdf) == nil {
            throw ValidationError("--accept-kdf takes pbkdf2:ITERATIONS or argon2id:ITERATIONS,MiB,LANES (got \"\(acceptKdf)\")")
        }
        if let method, Self.methods[method.lowercased()] == nil {
            throw ValidationError("--method takes authenticator, email or recovery (got \"\(method)\")")
        }
        if method?.lowercased() == "recovery", let code, code != "-", !code.hasPrefix("@") {
            throw ValidationError("""
                --method recovery takes the recovery code from - (standard input; a no-echo prompt on a terminal) or @FILE, \
                not on the command line: it stays valid until used and a command line is readable by every user of this machine.
                """)
        }
        if apiKey {
            if email != nil || method != nil || code != nil || remember || newDeviceCode != nil || resendNewDeviceCode {
                throw ValidationError("--apikey takes no email and no two-step or new-device flags: the server asks no second factor for an API key")
            }
        } else if email == nil {
            throw ValidationError("give the account's email (or --apikey)")
        }
    }

    func execute(_ context: CLIContext) async throws {
        _ = try context.requireServer()
        if apiKey {
            try await loginWithAPIKey(context)
            return
        }
        let normalised = MasterKey.normaliseSalt(email ?? "")
        if let current = context.settings.email, current != normalised {
            throw CLIError.usage("this profile is logged in as \(current); log out first (or use another VAULTSYNC_HOME)")
        }
        guard let password = try context.masterPassword() else {
            throw CLIError.usage("give the master password (prompt, --password-file or VAULTSYNC_PASSWORD)")
        }
        var options = LoginOptions(acceptingKdf: acceptKdf.flatMap(KdfConfiguration.init(spec:)))
        if resendNewDeviceCode {
            try await context.engine.resendNewDeviceCode(email: normalised, password: password, options: options)
            print("A new verification code was emailed to \(normalised). Log in with --new-device-code CODE.")
            return
        }
        let requested = method.flatMap { Self.methods[$0.lowercased()] }
        if let code {
            let provider = requested ?? .authenticator
            options.secondFactor = SecondFactor(provider: provider, code: try Self.readCode(code, provider: provider), remember: remember)
        }
        if let newDeviceCode { options.newDeviceCode = try Self.readCode(newDeviceCode, provider: .email) }
        var flow = LoginFlow(email: normalised, requested: requested, remember: remember)
        while true {
            do {
                try await context.engine.login(email: normalised, password: password, options: options)
                break
            } catch let refusal as VaultError {
                // Settings confirmed with --accept-kdf that are not the ones announced: said, not only refused again.
                let offered: KdfConfiguration? = switch refusal {
                case .kdfBelowMinimums(let offered), .kdfWeakened(_, let offered): offered
                default: nil
                }
                if let given = options.acceptingKdf, let offered, given != offered {
                    throw CLIError.stated("--accept-kdf \(given.spec) is not what the server announces (\(offered.spec)). " + describe(refusal).message,
                                          .verificationFailed)
                }
                options = try await flow.next(after: refusal, options: options, engine: context.engine, password: password)
            }
        }
        var context = context
        context.settings.email = normalised
        try context.saveSettings()
        let key = try await context.startSession()
        let count = try await context.engine.items().count
        print("Logged in as \(normalised); \(count) item\(count == 1 ? "" : "s") downloaded.")
        printSessionHint(key)
        await AgentStartCommand.handOver(context, password: password, startingOne: context.settings.agent == true)
    }

    /// A code from the command line: as given, or read from `-` / `@FILE` (the first line).
    static func readCode(_ text: String, provider: TwoFactorProviderType) throws -> String {
        guard text == "-" || (text.hasPrefix("@") && text.count > 1) else { return text }
        let label = provider == .recoveryCode ? "Recovery code" : "Code"
        guard let value = try SecretSource(text, flag: "--code").read(flag: "--code", label: label, wholeText: false), !value.isEmpty else {
            throw CLIError.usage("--code: no code in \(text == "-" ? "standard input" : String(text.dropFirst()))")
        }
        return value
    }

    func loginWithAPIKey(_ context: CLIContext) async throws {
        func value(_ variable: String, prompt: String, secret: Bool) throws -> String {
            if let value = context.environment[variable]?.trimmingCharacters(in: .whitespacesAndNewlines), !value.isEmpty { return value }
            guard Console.stdinIsTTY else {
                throw CLIError.usage("--apikey needs \(variable) (or a terminal to ask on): the API key is shown in the web vault under Account settings → Security → Keys")
            }
            let answer = secret ? Console.readSecret(prompt: prompt) : Console.ask(prompt)
            guard let answer = answer?.trimmingCharacters(in: .whitespacesAndNewlines), !answer.isEmpty else {
                throw CLIError.aborted("no \(secret ? "client secret" : "client id") given; nothing was sent")
            }
            return answer
        }
        let credentials = APIKeyCredentials(clientID: try value("VAULTSYNC_CLIENTID", prompt: "client_id: ", secret: false),
                                            clientSecret: try value("VAULTSYNC_CLIENTSECRET", prompt: "client_secret: ", secret: true))
        guard credentials.userID != nil else {
            throw CLIError.usage("the client id has the form user.<id> (it is shown next to the API key); \"\(credentials.clientID)\" is not one")
        }
        guard let password = try context.masterPassword() else {
            throw CLIError.usage("give the master password to unlock (prompt, --password-file or VAULTSYNC_PASSWORD)")
        }
        try await context.engine.login(apiKey: credentials, password: password)
        guard let email = await context.engine.currentEmail else { throw CLIError.notLoggedIn }
        if let current = context.settings.email, current != email {
            // Another account's key: nothing of this profile's account is touched, the new one is removed again.
            _ = try? await context.engine.logout(email: email)
            throw CLIError.usage("this profile is logged in as \(current); log out first (or use another VAULTSYNC_HOME)")
        }
        var context = context
        context.settings.email = email
        try context.saveSettings()
        let key = try await context.startSession()
        let count = try await context.engine.items().count
        print("Logged in as \(email) with an API key; \(count) item\(count == 1 ? "" : "s") downloaded.")
        printSessionHint(key)
    }
}

/// The questions of one interactive login: what to do after each refusal the person can answer
/// (a KDF to confirm, a code to give). In a script every such refusal ends the login with a message
/// naming the flags to pass.
struct LoginFlow {
    let email: String
    let requested: TwoFactorProviderType?
    let remember: Bool
    var emailCodeSent = false
    var kdfConfirmed = false

    init(email: String, requested: TwoFactorProviderType?, remember: Bool) {
        self.email = email
        self.requested = requested
        self.remember = remember
    }

    var interactive: Bool { Console.stdinIsTTY && Console.stderrIsTTY }

    /// The options of the next attempt, or the refusal (or a clearer one) thrown.
    mutating func next(after refusal: VaultError, options: LoginOptions, engine: VaultEngine, password: String) async throws -> LoginOptions {
        var options = options
        switch refusal {
        case .kdfBelowMinimums(let offered), .kdfWeakened(_, let offered):
            // On a terminal the person can confirm the settings at once; nothing was sent yet.
            guard interactive, !kdfConfirmed else { throw refusal }
            Console.error(refusal.description)
            guard Console.confirm("Log in with \(offered.summary)? [y/N] ") else { throw CLIError.aborted("nothing was sent to the server") }
            kdfConfirmed = true
            options.acceptingKdf = offered
            return options
        case .twoFactorRequired(let challenge):
            if let sent = options.secondFactor {
                // Vaultwarden answers a code of a provider the account does not have with the challenge.
                guard challenge.providers.contains(sent.provider) || sent.provider == .recoveryCode else {
                    throw CLIError.codeRequired("""
                        This account does not use \(sent.provider.name) for two-step login; it offers: \
                        \(challenge.providers.map(\.name).joined(separator: ", ")). Pick one with --method.
                        """)
                }
                throw refusal
            }
            let provider = try choose(challenge)
            if provider == .email && !emailCodeSent {
                var request = options
                request.emailSessionToken = challenge.emailSessionToken
                try await engine.requestEmailCode(email: email, password: password, options: request)
                emailCodeSent = true
                Console.error("A two-step login code was emailed to \(challenge.emailHint ?? "the account's two-step address").")
            }
            guard interactive else {
                let how: String
                switch provider {
                case .email: how = "--method email --code CODE"
                case .recoveryCode: how = "--method recovery --code @FILE (or - for standard input)"
                default: how = "--code CODE"
                }
                throw CLIError.codeRequired("""
                    This account uses two-step login and no terminal is attached to ask for a code. Run \
                    `vaultsync login \(email) \(how)`\(remember ? " --remember" : "") (add --remember to skip the code on this device next time).
                    """ + (TwoFactorRules.unsupportedNote(offered: challenge.providers).map { " Note: \($0)." } ?? ""))
            }
            if let note = TwoFactorRules.unsupportedNote(offered: challenge.providers), requested == nil { Console.note("Note: \(note).") }
            let prompt: String
            switch provider {
            case .email: prompt = "Code from the email: "
            case .recoveryCode: prompt = "Recovery code (it turns two-step login off): "
            default: prompt = "Code from your authenticator app: "
            }
            let typed = provider == .recoveryCode ? Console.readSecret(prompt: prompt) : Console.ask(prompt)
            guard let code = typed?.trimmingCharacters(in: .whitespaces), !code.isEmpty else {
                throw CLIError.aborted("no code given; you are not logged in")
            }
            options.secondFactor = SecondFactor(provider: provider, code: code, remember: remember)
            return options
        case .newDeviceVerificationRequired:
            guard options.newDeviceCode == nil else { throw refusal }
            guard interactive else {
                throw CLIError.codeRequired("""
                    The server does not know this device and has emailed a verification code to \(email). Run \
                    `vaultsync login \(email) --new-device-code CODE` (--resend-new-device-code mails another).
                    """)
            }
            Console.error("The server does not know this device and has emailed a verification code to \(email).")
            while true {
                guard let answer = Console.ask("Verification code (Enter: send another): ")?.trimmingCharacters(in: .whitespaces) else {
                    throw CLIError.aborted("no code given; you are not logged in")
                }
                if !answer.isEmpty {
                    options.newDeviceCode = answer
                    return options
                }
                try await engine.resendNewDeviceCode(email: email, password: password, options: options)
                Console.error("Another code was emailed to \(email).")
            }
        default:
            throw refusal
        }
    }

    /// The provider to ask a code for, or a clear refusal.
    func choose(_ challenge: TwoFactorChallenge) throws -> TwoFactorProviderType {
        switch TwoFactorRules.choose(requested: requested, offered: challenge.providers) {
        case .use(let provider):
            return provider
        case .notOffered(let requested, let offered):
            throw CLIError.codeRequired("""
                This account does not use \(requested.name) for two-step login; it offers: \
                \(offered.map(\.name).joined(separator: ", ")).
                """)
        case .noneSupported(let offered):
            throw CLIError.codeRequired("""
                This account's two-step login uses \(offered.map(\.name).joined(separator: ", ")); VaultSync supports \
                authenticator and email codes. Log in with `--method recovery --code @FILE` to use your recovery code (it turns two-step \
                login off), or add an authenticator app to the account in the web vault.
                """)
        }
    }
}
