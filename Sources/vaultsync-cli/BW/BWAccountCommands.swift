import ArgumentParser
import Foundation
import VaultAPI
import VaultClient
import VaultCrypto
import VaultModels
import VaultSyncCore

/// `bw login`: email and master password (arguments, `--passwordenv`, `--passwordfile`, or asked), a
/// two-step code with `--method`/`--code`, or a personal API key (`--apikey`, BW_CLIENTID and
/// BW_CLIENTSECRET). The same engine login as `vaultsync login`, so the same KDF floor and server checks.
struct BWLoginCommand: BWSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "login", abstract: "Log in and print the session key (BW_SESSION); --raw prints the key alone.")
    static var needsVault: Bool { false }
    @OptionGroup var bw: BWOptions
    @Argument(help: "The account's email (asked when not given).") var email: String?
    @Argument(help: "The master password (bw takes it here; safer: --passwordenv or --passwordfile).") var password: String?
    @Option(name: .customLong("method"), help: "Two-step login method: 0 authenticator, 1 email, 8 recovery code.") var method: String?
    @Option(name: .customLong("code"), help: "The two-step login code.") var code: String?
    @Flag(name: .customLong("apikey"), help: "Log in with a personal API key (BW_CLIENTID, BW_CLIENTSECRET).") var apiKey = false
    @OptionGroup var passwordOptions: BWPasswordOptions
    @Flag(name: .customLong("check"), help: "Say whether this profile is logged in.") var check = false
    @Flag(name: .customLong("sso"), help: "Single sign-on (not supported here).") var sso = false

    var passwordSource: (variable: String?, file: String?) { (passwordOptions.variable, passwordOptions.file) }

    /// bw's numbers for the two-step methods (TwoFactorProviderType); 8 is our recovery code.
    static let methods: [String: TwoFactorProviderType] = ["0": .authenticator, "1": .email, "8": .recoveryCode]

    func respond(_ context: CLIContext) async throws -> BWResponse {
        if check {
            guard context.settings.email != nil else { throw BWFailure.notLoggedIn }
            return .message(title: "You are logged in!")
        }
        if let current = context.settings.email { throw BWFailure(message: "You are already logged in as \(current).") }
        guard !sso else { throw BWFailure(message: "Single sign-on is not supported here: log in with your email and master password, or --apikey.") }
        guard let server = context.settings.server, !server.isEmpty else {
            throw BWFailure(message: "No server is set: run `bw config server URL` first.")
        }
        _ = server
        let interactive = !bw.wants(bw.noInteraction, "BW_NOINTERACTION", in: context.environment) && Console.stdinIsTTY
        if apiKey { return try await loginWithAPIKey(context, interactive: interactive) }
        var given = email?.trimmingCharacters(in: .whitespaces) ?? ""
        if given.isEmpty, interactive { given = Console.ask("? Email address: ")?.trimmingCharacters(in: .whitespaces) ?? "" }
        guard !given.isEmpty else { throw BWFailure(message: "Email address is required.") }
        guard given.contains("@") else { throw BWFailure(message: "Email address is invalid.") }
        let normalised = MasterKey.normaliseSalt(given)
        let secret = try masterPassword(context, interactive: interactive)
        var options = LoginOptions(acceptingKdf: nil)
        let requested: TwoFactorProviderType?
        if let method {
            guard let provider = Self.methods[method] else { throw BWFailure(message: "Invalid two-step login method.") }
            requested = provider
        } else {
            requested = nil
        }
        if let code, !code.isEmpty { options.secondFactor = SecondFactor(provider: requested ?? .authenticator, code: code, remember: false) }
        var flow = LoginFlow(email: normalised, requested: requested, remember: false)
        while true {
            do {
                try await context.engine.login(email: normalised, password: secret, options: options)
                break
            } catch let refusal as VaultError {
                guard interactive else {
                    if case .twoFactorRequired = refusal { throw BWFailure(message: "Code is required.") }
                    throw refusal
                }
                options = try await flow.next(after: refusal, options: options, engine: context.engine, password: secret)
            }
        }
        return try await loggedIn(context, email: normalised)
    }

    func masterPassword(_ context: CLIContext, interactive: Bool) throws -> String {
        if let password, !password.isEmpty {
            Console.note("warning: a password given as an argument is visible to other processes (ps); use --passwordenv NAME or --passwordfile FILE")
            return password
        }
        if context.passwordGiven, let given = try context.masterPassword(allowPrompt: false), !given.isEmpty { return given }
        if interactive, let typed = try context.masterPassword(prompt: "? Master password: [input is hidden] "), !typed.isEmpty { return typed }
        throw BWFailure(message: "Master password is required.")
    }

    func loginWithAPIKey(_ context: CLIContext, interactive: Bool) async throws -> BWResponse {
        func value(_ variable: String, prompt: String, secret: Bool) throws -> String {
            if let value = context.environment[variable]?.trimmingCharacters(in: .whitespacesAndNewlines), !value.isEmpty { return value }
            let answer = interactive ? (secret ? Console.readSecret(prompt: prompt) : Console.ask(prompt)) : nil
            guard let answer = answer?.trimmingCharacters(in: .whitespacesAndNewlines), !answer.isEmpty else {
                throw BWFailure(message: secret ? "Client secret is required." : "Client ID is required.")
            }
            return answer
        }
        let credentials = APIKeyCredentials(clientID: try value("BW_CLIENTID", prompt: "? client_id: ", secret: false),
                                            clientSecret: try value("BW_CLIENTSECRET", prompt: "? client_secret: ", secret: true))
        guard credentials.userID != nil else { throw BWFailure(message: "Invalid API Key; Organization API Key currently not supported") }
        // This engine opens the vault at login (it keeps no locked-but-logged-in keys), so the master password is asked here too.
        let secret = try masterPassword(context, interactive: interactive)
        try await context.engine.login(apiKey: credentials, password: secret)
        guard let email = await context.engine.currentEmail else { throw BWFailure.notLoggedIn }
        return try await loggedIn(context, email: email)
    }

    /// The profile records the account; the session key is bw's answer.
    func loggedIn(_ context: CLIContext, email: String) async throws -> BWResponse {
        var context = context
        context.settings.email = email
        try context.saveSettings()
        let key = try await context.startSession()
        return .message(title: "You are logged in!", message: BWUnlockCommand.sessionText(key), raw: key)
    }
}

/// `bw logout`: the account and its data leave this device. A change still waiting for the server
/// would be lost, so it is refused then (bw has no queue to lose; `bw sync` sends it first).
struct BWLogoutCommand: BWSubcommand {
    static let configuration = CommandConfiguration(commandName: "logout", abstract: "Log out: the account's data leaves this device.")
    static var needsVault: Bool { false }
    @OptionGroup var bw: BWOptions

    func respond(_ context: CLIContext) async throws -> BWResponse {
        guard let email = context.settings.email else { throw BWFailure.notLoggedIn }
        let waiting = try await context.engine.queuedChangeCount(email: email)
        guard waiting == 0 else {
            throw BWFailure(message: "\(waiting) change\(waiting == 1 ? " is" : "s are") still waiting for the server and would be lost: run `bw sync` first (or `vaultsync logout --force`).")
        }
        try? await context.unlock(prompt: false)
        _ = try await context.engine.logout(email: email, forgetDevice: false)
        context.profile.removeAllSessions()
        var context = context
        context.settings.email = nil
        try context.saveSettings()
        return .message(title: "You have logged out.")
    }
}

/// `bw config server [URL]`: the server this profile uses (printed without a URL).
struct BWConfigCommand: BWSubcommand {
    static let configuration = CommandConfiguration(commandName: "config", abstract: "bw config server [URL]: show or set the server.")
    static var needsVault: Bool { false }
    @OptionGroup var bw: BWOptions
    @Argument(help: "server") var setting: String
    @Argument(help: "The server's base URL.") var value: String?

    func respond(_ context: CLIContext) async throws -> BWResponse {
        guard setting.lowercased() == "server" else { throw BWFailure(message: "Unknown setting.") }
        guard let value, !value.isEmpty else {
            return .string(context.settings.server ?? "https://bitwarden.com")
        }
        let url = value.hasSuffix("/") ? String(value.dropLast()) : value
        if case .refused(let reason) = ServerAddress.check(url, allowPlainHTTP: false) { throw BWFailure(message: reason + ".") }
        if context.settings.email != nil, context.settings.server != url {
            throw BWFailure(message: "Logout required before server config update.")
        }
        var context = context
        context.settings.server = url
        context.settings.insecureAllowPlainHTTP = nil
        try context.saveSettings()
        return .message(title: "Saved setting `config`.")
    }
}
