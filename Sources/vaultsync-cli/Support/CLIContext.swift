import ArgumentParser
import Foundation
import VaultClient
import VaultCrypto
import VaultModels

/// Options every vault command takes.
struct GlobalOptions: ParsableArguments {
    @Option(name: .customLong("password-file"), help: ArgumentHelp(
        "Read the master password from the first line of FILE (- for standard input) instead of a prompt.", valueName: "FILE"))
    var passwordFile: String?
}

/// `--json` on read commands.
struct OutputOptions: ParsableArguments {
    @Flag(name: .long, help: "Print JSON (stable field names, see docs/CLI.md).")
    var json = false
}

/// What one command run works with: the profile, its settings and the engine on its database.
struct CLIContext {
    let profile: Profile
    var settings: ProfileSettings
    let engine: VaultEngine
    let options: GlobalOptions
    let environment: [String: String]
    /// The settings file this command found damaged and may replace (`config` setters only): `settings` are then
    /// the defaults, with the account this device's database holds.
    var damagedSettings: Profile.DamagedSettings? = nil

    /// `repairingSettings`: a damaged settings file is not refused; ``saveSettings()`` replaces it, keeping a copy.
    static func open(_ options: GlobalOptions, repairingSettings: Bool = false,
                     environment: [String: String] = AgentHost.environment) throws -> CLIContext {
        let profile = Profile.resolve(environment: environment)
        try profile.prepare()
        profile.removeSessionIfExpired()
        let (settings, damaged) = repairingSettings ? try profile.readSettings() : (try profile.loadSettings(), nil)
        // In the agent, the agent's engine: one engine in one process writes the profile while the agent runs.
        let engine = try AgentHost.current?.engine
            ?? VaultEngine(databasePath: profile.databasePath, configuration: settings.engineConfiguration(environment: environment))
        return CLIContext(profile: profile, settings: settings, engine: engine, options: options, environment: environment, damagedSettings: damaged)
    }

    /// With a damaged settings file: the account is the one this device's database holds (a profile holds one),
    /// so that a repair keeps the profile logged in, and `config server` still asks for a logout before another server.
    mutating func recoverAccountOfDamagedSettings() async {
        guard damagedSettings != nil, let accounts = try? await engine.accounts(), accounts.count == 1 else { return }
        settings.email = accounts[0]
    }

    /// The master password from `--password-file`, `VAULTSYNC_PASSWORD`, or (on a terminal) a no-echo
    /// prompt; `nil` when none of them is available.
    func masterPassword(prompt: String = "Master password: ", allowPrompt: Bool = true) throws -> String? {
        if let path = options.passwordFile {
            let text = try InputFile.text(path, what: "the password file")
            // Any line end ends the line: "\r\n" (one Character in Swift) and a lone "\r" too.
            let password = text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).first.map(String.init) ?? ""
            guard !password.isEmpty else { throw CLIError.usage("the password file \(path) is empty") }
            return password
        }
        if let password = environment["VAULTSYNC_PASSWORD"], !password.isEmpty { return password }
        if allowPrompt, Console.stdinIsTTY, let password = Console.readSecret(prompt: prompt), !password.isEmpty { return password }
        if allowPrompt, let password = Self.pipedPassword() { return password }
        return nil
    }

    /// The master password piped on standard input (`echo … | vaultsync unlock --raw`, `pass show vault |
    /// vaultsync login EMAIL`): its first line, read once per run, when standard input is a pipe or a file
    /// and no argument of the command reads it (`-`, `--password-stdin`: the item's secret comes from there).
    static func pipedPassword() -> String? {
        // One command's reading: in the agent, each command it runs has its own.
        let piped = AgentHost.current?.pipedPassword ?? Self.piped
        if let kept = piped.value { return kept }
        var status = stat()
        guard !Console.stdinIsTTY, fstat(STDIN_FILENO, &status) == 0,
              [S_IFIFO, S_IFREG, S_IFSOCK].contains(status.st_mode & S_IFMT) else { return nil }
        let arguments = AgentHost.arguments
        guard !arguments.contains(where: { $0 == "-" || $0 == "@-" || $0 == "@/dev/stdin" || $0 == "--password-stdin" || $0 == "/dev/stdin" }) else {
            return nil
        }
        guard let line = Swift.readLine(strippingNewline: true), !line.isEmpty else { return nil }
        let password = line.hasSuffix("\r") ? String(line.dropLast()) : line
        piped.value = password
        return password.isEmpty ? nil : password
    }

    /// What ``pipedPassword()`` read (a pipe is read once; some commands ask twice).
    private static let piped = KeptPassword()

    final class KeptPassword: @unchecked Sendable {
        private let lock = NSLock()
        private var kept: String?
        var value: String? {
            get { lock.withLock { kept } }
            set { lock.withLock { kept = newValue } }
        }
    }

    /// The password file's first line as versions before commit 1786a9e read it: a file with Windows line ends
    /// ("\r\n") gave its whole text, line end included. `nil` when that is the reading above.
    func legacyFilePassword() -> String? {
        guard let path = options.passwordFile, let text = try? InputFile.text(path, what: "the password file"),
              let legacy = text.split(separator: "\n", omittingEmptySubsequences: false).first.map(String.init),
              legacy != (try? masterPassword()) else { return nil }
        return legacy
    }

    /// Unlocks this device's vault with `password`; a wrong one, read from a file with Windows line ends, is tried
    /// again as earlier versions read it, so a vault set up with such a file still opens.
    func unlockLocally(email: String, password: String) async throws {
        do {
            try await engine.unlock(email: email, password: password)
        } catch VaultError.wrongPassword {
            guard let legacy = legacyFilePassword() else { throw VaultError.wrongPassword }
            try await engine.unlock(email: email, password: legacy)
        }
    }

    func requireEmail() throws -> String {
        guard let email = settings.email else { throw CLIError.notLoggedIn }
        return email
    }

    func requireServer() throws -> String {
        guard let server = settings.server, !server.isEmpty else { throw CLIError.noServer }
        return server
    }

    /// A password was given (`--password-file`, `VAULTSYNC_PASSWORD`).
    var passwordGiven: Bool { options.passwordFile != nil || environment["VAULTSYNC_PASSWORD"].map({ !$0.isEmpty }) == true }

    /// Whether ``unlock(prompt:)`` has a way in: a given password, a session key, or a terminal to ask on.
    var canUnlock: Bool { passwordGiven || environment["VAULTSYNC_SESSION"].map({ !$0.isEmpty }) == true || Console.stdinIsTTY || Self.pipedPassword() != nil }

    /// Unlocks for this run: a given password first (scripts), else the session of `vaultsync unlock`
    /// (`VAULTSYNC_SESSION`), else a prompt on a terminal.
    func unlock(prompt: Bool = true) async throws {
        let email = try requireEmail()
        if passwordGiven {
            try await unlockLocally(email: email, password: try masterPassword()!)
            return
        }
        if let key = environment["VAULTSYNC_SESSION"], !key.isEmpty {
            try await unlock(sessionKey: key)
            return
        }
        guard let password = try masterPassword(allowPrompt: prompt) else { throw CLIError.locked }
        try await engine.unlock(email: email, password: password)
    }

    /// Opens the sealed session with the key from VAULTSYNC_SESSION. A file that nobody can open any
    /// more is deleted: a damaged one, and one this key opens but the vault refuses (expired, or of an
    /// older login). A key that does not open the file leaves it alone: the file may be the newer
    /// session of another shell (it still goes at its expiry).
    func unlock(sessionKey key: String) async throws {
        guard let sessionKey = try? SymmetricCryptoKey(base64: key) else {
            throw CLIError.lockedBecause("VAULTSYNC_SESSION is not a session key (it is what `vaultsync unlock` prints; check for a typo or a cut).")
        }
        guard let file = profile.readSession(key: key) else { throw VaultError.sessionInvalid }
        guard case .sealed(let sealed, _) = file, let envelope = try? EncString(sealed) else {
            profile.removeSession(key: key)
            throw VaultError.sessionInvalid
        }
        do {
            try await engine.unlock(sealedSession: sealed, sessionKey: sessionKey)
        } catch let error as VaultError {
            switch error {
            case .sessionInvalid, .accountNotFound:
                if (try? envelope.decrypt(key: sessionKey)) != nil { profile.removeSession(key: key) }
            default: break
            }
            throw error
        }
    }

    /// Seals the unlocked session for later commands; returns the session key to export.
    func startSession() async throws -> String {
        let sessionKey = SymmetricCryptoKey.generate()
        let timeout = Int64(settings.lockTimeout ?? ProfileSettings.defaultLockTimeout)
        let expires = WireDate(Date()).adding(microseconds: timeout * 1_000_000)
        let sealed = try await engine.sealSession(with: sessionKey, expiresAt: expires)
        try profile.writeSession(sealed: sealed, expires: expires.date, key: sessionKey.base64)
        return sessionKey.base64
    }

    /// Writes the settings. A damaged file found by this command (and still there) is kept beside them first, and
    /// the person told: a damaged file blocked every command, `config server` too (RELIABILITY bug 98).
    func saveSettings() throws {
        if let damaged = damagedSettings, FileManager.default.contents(atPath: profile.settingsPath) == damaged.bytes {
            let copy = try profile.keepDamagedSettings(damaged)
            var note = "\(profile.settingsPath) was damaged (\(damaged.problem)); a copy is kept as \(copy), and new settings replace it: "
            note += "what this command does not set is back to its default (see `vaultsync config show`)"
            if settings.server == nil { note += "; set the server again with `vaultsync config server URL`" }
            if let email = settings.email { note += "; still logged in as \(email)" }
            Console.note(note)
        }
        try profile.saveSettings(settings)
    }
}

/// A command that works on the vault: opens the profile, unlocks if it needs to, maps every error to
/// its message and exit code.
/// A command that may run in the profile's agent (docs/CLI.md, "The agent").
protocol AgentHostable {
    /// Whether this command, as parsed, runs in the agent when one runs: it asks nothing of the calling
    /// terminal beyond the master password, which is asked before the command is sent.
    var runsInAgent: Bool { get }
    /// Whether it needs the vault's keys: a locked agent leaves it to the calling process, which asks.
    var needsKeys: Bool { get }
}

protocol VaultCommand: AsyncParsableCommand, AgentHostable {
    var global: GlobalOptions { get }
    /// Whether the command needs the vault unlocked.
    static var needsUnlock: Bool { get }
    /// Whether the command can replace a damaged settings file (the `config` setters); every other command refuses one.
    static var repairsDamagedSettings: Bool { get }
    /// Whether the command first looks whether the profile is a copy of another (all but `config device`).
    static var checksProfilePlace: Bool { get }
    /// Whether the command runs in the profile's agent when one runs (docs/CLI.md, "The agent"): commands
    /// that never ask anything beyond the master password, which is asked here before the command is sent.
    var runsInAgent: Bool { get }
    func execute(_ context: CLIContext) async throws
}

extension VaultCommand {
    static var needsUnlock: Bool { true }
    static var repairsDamagedSettings: Bool { false }
    static var checksProfilePlace: Bool { true }
    var runsInAgent: Bool { false }
    var needsKeys: Bool { Self.needsUnlock }

    mutating func run() async throws {
        if runsInAgent {
            let forwarded: Int32?
            do {
                forwarded = try await AgentForwarding.forward(needsUnlock: Self.needsUnlock, options: global)
            } catch {
                throw report(error)
            }
            if let forwarded {
                if forwarded == 0 { return }
                throw ExitCode(forwarded)
            }
        }
        var context: CLIContext
        do {
            context = try CLIContext.open(global, repairingSettings: Self.repairsDamagedSettings)
        } catch {
            throw report(error)
        }
        await context.recoverAccountOfDamagedSettings()
        // The agent's engine outlives the command; a command's own engine ends with it.
        let hosted = AgentHost.current != nil
        do {
            if Self.checksProfilePlace { try await context.checkProfilePlace() }
            // The agent, once unlocked, serves every command of its user without the password again.
            let unlockedAgent = hosted ? !(await context.engine.isLocked) : false
            if Self.needsUnlock, !unlockedAgent { try await context.unlock() }
            try await execute(context)
            if !hosted { await context.engine.shutdown() }
        } catch {
            if !hosted { await context.engine.shutdown() }
            if let exit = error as? ExitCode { throw exit }
            throw report(error, server: context.settings.server)
        }
    }
}

/// Prints an error and returns the exit code to end with.
/// `server`: the profile's server address, named (with the likely fix) when the server failed.
func report(_ error: any Error, server: String? = nil) -> ExitCode {
    if let exit = error as? ExitCode { return exit }
    let (message, status) = describe(error)
    Console.error(message + (ServerHints.hint(for: error, server: server) ?? ""))
    return ExitCode(status.rawValue)
}

/// Prints the "saved offline" note when a save did not reach the server.
/// Whether a save that reached the server lost the folder it asked for: a server keeps an item in no folder when
/// the folder is gone there (deleted on another device since this one synced), and the save succeeds. `move`
/// said "Moved … to \"F\"" and `add`/`edit --folder F` nothing, with the item in no folder (RELIABILITY bug 87); a
/// sync says it for the changes it sends (bug 55). Says so, on standard error, and returns true.
@discardableResult
func noteFolderGone(asked: String?, stored: String?, folder: String?, item: String, outcome: SaveOutcome) -> Bool {
    guard outcome == .synced, asked != nil, stored == nil else { return false }
    Console.note("""
        the server has no folder "\(folder ?? asked ?? "")" any more (deleted on another device since this one synced): \
        "\(item)" is in no folder; `vaultsync sync` brings this device's folders up to date
        """)
    return true
}

func noteOutcome(_ outcome: SaveOutcome) {
    switch outcome {
    case .synced:
        break
    case .savedOffline(let pending):
        Console.note("saved offline — \(pending) change\(pending == 1 ? "" : "s") pending (they sync when the server is reachable)")
    case .savedBehindQueuedChange(let pending):
        Console.note("saved on this device — the item has an earlier change waiting to sync, and this one joins it: run vaultsync sync to send them (\(pending) change\(pending == 1 ? "" : "s") pending)")
    case .savedForConflict(let pending):
        Console.note("saved on this device — the item changed on the server since it was read here: run vaultsync sync to resolve the two versions, nothing is lost (\(pending) change\(pending == 1 ? "" : "s") pending)")
    case .savedItemGoneFromServer(let pending):
        Console.note("saved on this device — the server no longer has this item (deleted on another device since this one synced): run vaultsync sync, which makes it again from this device's version if its content was changed here (\(pending) change\(pending == 1 ? "" : "s") pending)")
    case .savedSignedOut(let pending):
        Console.note("saved on this device — this profile is signed in nowhere yet: it syncs after `vaultsync login` (\(pending) change\(pending == 1 ? "" : "s") pending)")
    case .savedUntrustedServer(let pending, let problem):
        Console.note("saved on this device only — the server was not used: \(problem) \(pending) change\(pending == 1 ? "" : "s") pending (they sync once the certificate is trusted)")
    }
}
