import ArgumentParser
import Foundation
import VaultAPI
import VaultClient
import VaultModels

/// The master password for a command that proves it to the server again (two-step settings, API key).
func requirePassword(_ context: CLIContext, for what: String) throws -> String {
    guard let password = try context.masterPassword() else {
        throw CLIError.usage("\(what) needs the master password (prompt, --password-file or VAULTSYNC_PASSWORD)")
    }
    return password
}

struct TwoStepCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "two-step",
        abstract: "Show, turn on or off the account's two-step login with an authenticator app.",
        discussion: """
        The same Bitwarden routes serve vaultsync-server, Vaultwarden and bitwarden.com (where the web \
        vault offers more providers). Each command proves the master password to the server again.

        Examples:
          vaultsync two-step status
          vaultsync two-step enable                 (on a terminal: shows the key, asks for a code)
          vaultsync two-step enable > key.txt       (in a script: prints the key only)
          vaultsync two-step enable --key @key.txt --code 123456
          vaultsync two-step recovery-code
          vaultsync two-step disable
        """,
        subcommands: [Status.self, Enable.self, Disable.self, RecoveryCode.self],
        defaultSubcommand: Status.self
    )

    struct Status: VaultCommand {
        static let configuration = CommandConfiguration(commandName: "status", abstract: "Which two-step providers are on.",
                                                        discussion: "Example:\n  vaultsync two-step status --json")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var output: OutputOptions

        func execute(_ context: CLIContext) async throws {
            let status = try await context.engine.twoStepStatus()
            if output.json {
                Presentation.printJSON(.object(["enabled": .array(status.enabled.map { .int($0.rawValue) }),
                                                "names": .array(status.enabled.map { .string($0.name) })]))
                return
            }
            print(status.enabled.isEmpty ? "Two-step login is off." : "Two-step login is on: \(status.enabled.map(\.name).joined(separator: ", ")).")
        }
    }

    struct Enable: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "enable",
            abstract: "Turn on two-step login with an authenticator app.",
            discussion: """
            On a terminal: shows the key (and an otpauth:// URI for apps that read one), asks for a code \
            the app shows, turns it on and shows the recovery code, which is the way in if the app is \
            lost: keep it somewhere safe. In a script: without --code, prints the key alone on standard \
            output; then pass it back with --key (- or @FILE: it is a secret) and a current --code.
            """)
        @OptionGroup var global: GlobalOptions
        @Option(help: ArgumentHelp("The key printed by a first `two-step enable`, read from SOURCE: - or @FILE.", valueName: "SOURCE"))
        var key: String?
        @Option(help: ArgumentHelp("A current code from the authenticator app.", valueName: "CODE")) var code: String?

        func validate() throws {
            if let key { _ = try SecretSource(key, flag: "--key") }
            if key != nil && code == nil { throw ValidationError("--key needs --code (a current code from the app)") }
        }

        func execute(_ context: CLIContext) async throws {
            let password = try requirePassword(context, for: "two-step enable")
            let email = try context.requireEmail()
            let setup: AuthenticatorSetup
            if let key {
                guard let text = try SecretSource(key, flag: "--key").read(flag: "--key", label: "Authenticator key", wholeText: false),
                      !text.isEmpty else { throw CLIError.usage("--key: no key given") }
                setup = AuthenticatorSetup(key: text.filter { !$0.isWhitespace }.uppercased())
            } else {
                setup = try await context.engine.authenticatorSetup(password: password)
                if setup.enabled { throw CLIError.aborted("The authenticator is already on for this account; `two-step disable` first to change it.") }
            }
            var code = self.code
            if code == nil {
                guard Console.stdinIsTTY, Console.stderrIsTTY else {
                    print(setup.key)
                    Console.note("Add this key to your authenticator app, then run `vaultsync two-step enable --key @FILE --code CODE` with the key in FILE and a current code.")
                    return
                }
                Console.error("Key: \(setup.key)\nURI: \(setup.uri(email: email))\nAdd it to your authenticator app.")
                code = Console.ask("Code from your authenticator app: ")?.trimmingCharacters(in: .whitespaces)
                guard let given = code, !given.isEmpty else { throw CLIError.aborted("no code given; two-step login stays off") }
            }
            let recovery = try await context.engine.enableAuthenticator(setup: setup, code: code!, password: password)
            print("Two-step login with an authenticator app is on for \(email).")
            if let recovery {
                print("Recovery code (keep it safe, away from this device; it turns two-step login off): \(recovery)")
            }
        }
    }

    struct Disable: VaultCommand {
        static let configuration = CommandConfiguration(commandName: "disable", abstract: "Turn off two-step login with an authenticator app.",
                                                        discussion: "Example:\n  vaultsync two-step disable")
        @OptionGroup var global: GlobalOptions

        func execute(_ context: CLIContext) async throws {
            let password = try requirePassword(context, for: "two-step disable")
            try await context.engine.disableAuthenticator(password: password)
            print("Two-step login with an authenticator app is off.")
        }
    }

    struct RecoveryCode: VaultCommand {
        static let configuration = CommandConfiguration(commandName: "recovery-code", abstract: "Show the account's two-step recovery code.",
                                                        discussion: "Example:\n  vaultsync two-step recovery-code")
        @OptionGroup var global: GlobalOptions

        func execute(_ context: CLIContext) async throws {
            let password = try requirePassword(context, for: "two-step recovery-code")
            guard let code = try await context.engine.twoStepRecoveryCode(password: password) else {
                throw CLIError.missing("This account has no two-step recovery code: two-step login was never turned on.")
            }
            print(code)
        }
    }
}

struct APIKeyCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        commandName: "api-key",
        abstract: "Show (or --rotate) the account's personal API key, for `login --apikey`.",
        discussion: """
        Prints client_id and client_secret. Whoever has both can sign in to the account without the \
        second factor (the vault still needs the master password to open); --rotate makes a new \
        secret and the old one stops working.

        Examples:
          vaultsync api-key
          vaultsync api-key --rotate
        """)
    @OptionGroup var global: GlobalOptions
    @Flag(help: "Make a new secret; the old one stops working.") var rotate = false

    func execute(_ context: CLIContext) async throws {
        let password = try requirePassword(context, for: "api-key")
        let key = try await context.engine.personalAPIKey(password: password, rotate: rotate)
        print("client_id: \(key.clientID)\nclient_secret: \(key.clientSecret)")
    }
}
