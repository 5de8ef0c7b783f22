import ArgumentParser
import Foundation
import VaultClient
import VaultCrypto
import VaultModels
import VaultSyncCore

struct ConfigCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "config",
        abstract: "Show or change the profile's settings.",
        discussion: """
        Examples:
          vaultsync config server https://vault.example.com
          vaultsync config lock-timeout 900
          vaultsync config conflict-folder on
          vaultsync config ca-file ~/company-root-ca.pem
          vaultsync config show --json
        """,
        subcommands: [Server.self, LockTimeout.self, SaveTimeout.self, ClipboardClear.self, Agent.self, Device.self, Conflicts.self, ConflictFolder.self, AttachmentCache.self, CAFile.self, Show.self],
        defaultSubcommand: Show.self
    )

    struct Server: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "server",
            abstract: "Set the server URL (a VaultSync or other Bitwarden-compatible server).",
            discussion: """
            https:// is required, except for a server on this machine (127.0.0.1, ::1, localhost): over plain HTTP the login hash and the session's tokens cross the network readable.

            Examples:
              vaultsync config server https://vault.example.com
              vaultsync config server http://127.0.0.1:8087
            """)
        static var needsUnlock: Bool { false }
        static var repairsDamagedSettings: Bool { true }
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The server's base URL.") var url: String
        @Flag(name: .customLong("insecure-allow-plain-http"),
              help: "Allow http:// to another machine (only on a test network you control; every command warns).")
        var insecureAllowPlainHTTP = false

        func validate() throws {
            if case .refused(let reason) = ServerAddress.check(url, allowPlainHTTP: insecureAllowPlainHTTP) {
                // The flag is named only where it would help: the refusal is of plain HTTP to another machine.
                let flagHelps = ServerAddress.check(url, allowPlainHTTP: true) != .refused(reason)
                throw ValidationError(reason + (flagHelps ? " (--insecure-allow-plain-http)." : "."))
            }
        }

        func execute(_ context: CLIContext) async throws {
            var context = context
            let newURL = url.hasSuffix("/") ? String(url.dropLast()) : url
            // Moving the same server from http:// to https:// is allowed while logged in.
            let sameServer = context.settings.server.map { Self.withoutScheme($0) == Self.withoutScheme(newURL) } ?? true
            if let current = context.settings.server, !sameServer, context.settings.email != nil {
                throw CLIError.usage("this profile is logged in to \(current); run `vaultsync logout` before changing the server")
            }
            context.settings.server = newURL
            context.settings.insecureAllowPlainHTTP = insecureAllowPlainHTTP ? true : nil
            try context.saveSettings()
            print("Server set to \(newURL)")
            if case .plainHTTPAllowed = ServerAddress.check(newURL, allowPlainHTTP: true) {
                Console.error("WARNING: plain HTTP to another machine: the login hash and the session's tokens cross the network readable.")
            }
        }

        static func withoutScheme(_ url: String) -> String {
            url.split(separator: ":", maxSplits: 1).last.map(String.init)?.lowercased() ?? url
        }
    }

    struct LockTimeout: SecondsSettingCommand {
        static let configuration = CommandConfiguration(
            commandName: "lock-timeout",
            abstract: "How long `unlock` keeps the vault unlocked, in seconds (default 3600).",
            discussion: "Example:\n  vaultsync config lock-timeout 900")
        static let range = 60...604_800
        static var setting: WritableKeyPath<ProfileSettings, Int?> { \.lockTimeout }
        static let what = "the lock timeout"
        static func done(_ seconds: Int) -> String { "Lock timeout set to \(seconds) s (applies to the next unlock)" }
        @OptionGroup var global: GlobalOptions
        @Argument(help: "Seconds (60–604800).") var seconds: Int
    }

    struct SaveTimeout: SecondsSettingCommand {
        static let configuration = CommandConfiguration(
            commandName: "save-timeout",
            abstract: "How long a save waits for the server before it is kept on this device and queued, in seconds (default 3).",
            discussion: """
            On a network that accepts connections and never answers (captive Wi-Fi, a dead proxy) a save returns after this long, its change queued; the next sync (or `vaultsync watch`) sends it. VAULTSYNC_SAVE_TIMEOUT overrides it for one command.

            Example:
              vaultsync config save-timeout 10
            """)
        static let range = 1...60
        static var setting: WritableKeyPath<ProfileSettings, Int?> { \.saveTimeout }
        static let what = "the save timeout"
        static func done(_ seconds: Int) -> String { "Save timeout set to \(seconds) s" }
        @OptionGroup var global: GlobalOptions
        @Argument(help: "Seconds (1–60).") var seconds: Int
    }

    struct ClipboardClear: SecondsSettingCommand {
        static let configuration = CommandConfiguration(
            commandName: "clipboard-clear",
            abstract: "How long a secret copied with --clip stays on the clipboard, in seconds (default 30).",
            discussion: """
            After this long the clipboard is emptied, unless it holds something else by then (what you copied since is left alone).

            Example:
              vaultsync config clipboard-clear 15
            """)
        static let range = Clipboard.clearRange
        static var setting: WritableKeyPath<ProfileSettings, Int?> { \.clipboardClear }
        static let what = "the clipboard clear time"
        static func done(_ seconds: Int) -> String { "Secrets copied with --clip are cleared from the clipboard after \(seconds) s" }
        @OptionGroup var global: GlobalOptions
        @Argument(help: "Seconds (1–3600).") var seconds: Int
    }

    struct Agent: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "agent",
            abstract: "on: `unlock` and `login` start this profile's agent when it is not running (docs/CLI.md, \"The agent\"); off (default): they do not.",
            discussion: "Examples:\n  vaultsync config agent on\n  vaultsync config agent off")
        static var needsUnlock: Bool { false }
        static var repairsDamagedSettings: Bool { true }
        @OptionGroup var global: GlobalOptions
        @Argument(help: "on or off.") var state: String

        func execute(_ context: CLIContext) async throws {
            guard state == "on" || state == "off" else { throw CLIError.usage("say on or off") }
            var context = context
            context.settings.agent = state == "on" ? true : nil
            try context.saveSettings()
            print(state == "on" ? "unlock and login start the agent when it is not running" : "unlock and login leave the agent alone")
        }
    }

    struct Device: VaultCommand {
        enum Choice: String, ExpressibleByArgument, CaseIterable { case new, same }
        static let configuration = CommandConfiguration(
            commandName: "device",
            abstract: "Make this profile a device of its own (new), or keep a copied profile as the same device as its original (same).",
            discussion: """
            A profile folder copied from another holds the original's device identifier, so both act as one device;             commands ask about it on a terminal and warn elsewhere. `new` gives this profile a device identifier of its             own and ends its sessions: the next use of the server needs a login (the vault and queued changes stay).             `same` stops the question.

            Examples:
              vaultsync config device new
              vaultsync config device same
            """)
        static var needsUnlock: Bool { false }
        static var checksProfilePlace: Bool { false }
        @OptionGroup var global: GlobalOptions
        @Argument(help: "new or same.") var choice: Choice

        func execute(_ context: CLIContext) async throws {
            switch choice {
            case .new:
                try await context.becomeNewDevice()
            case .same:
                try await context.engine.acceptProfilePlace()
                print("This profile stays the same device as the one it was copied from")
            }
        }
    }

    struct Conflicts: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "conflicts",
            abstract: "How a conflict ends: merge field by field (default), or the newer version wins with a backup copy of the other.",
            discussion: """
              merge   fields changed on one side are taken from it; a backup copy is made only when both
                      sides changed the same field differently (the newer value wins)
              backup  the newer version wins and the other is kept as a backup copy, whatever they changed

              Example:
                vaultsync config conflicts backup
              """)
        static var needsUnlock: Bool { false }
        static var repairsDamagedSettings: Bool { true }
        @OptionGroup var global: GlobalOptions
        @Argument(help: "merge or backup.") var policy: String

        func execute(_ context: CLIContext) async throws {
            guard let chosen = ConflictPolicy(rawValue: policy) else { throw CLIError.usage("say merge or backup") }
            var context = context
            context.settings.conflictPolicy = chosen.rawValue
            try context.saveSettings()
            print(chosen == .merge ? "Conflicts are merged field by field; a backup copy only when both sides changed the same field"
                                   : "Conflicts end with the newer version, the other kept as a backup copy")
        }
    }

    struct AttachmentCache: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "attachment-cache",
            abstract: "How much of the downloaded attachments this device keeps (encrypted) for reading offline; 0 keeps none.",
            discussion: "Sizes: bytes, or with KiB, MiB or GiB (KB, MB, GB), 0 for none (default 256MiB).\n\nExamples:\n  vaultsync config attachment-cache 1GiB\n  vaultsync config attachment-cache 0")
        static var needsUnlock: Bool { false }
        static var repairsDamagedSettings: Bool { true }
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The size (e.g. 512MiB).") var size: String

        /// 0 keeps none; anything else is a size as the server's flags take it (`ByteSize`).
        static func bytes(_ text: String) -> Int? {
            text.trimmingCharacters(in: .whitespaces) == "0" ? 0 : try? ByteSize.parse(text)
        }

        func validate() throws {
            guard Self.bytes(size) != nil else { throw ValidationError("say a size such as 256MiB, 1GiB or 0") }
        }

        func execute(_ context: CLIContext) async throws {
            var context = context
            let bytes = Self.bytes(size) ?? 0
            context.settings.attachmentCache = bytes
            try context.saveSettings()
            context.engine.trimAttachmentCaches(to: bytes)
            print(bytes == 0 ? "Downloaded attachments are not kept on this device"
                             : "Up to \(ByteSize.readable(bytes, binaryUnits: true)) of downloaded attachments are kept (encrypted) for reading offline")
        }
    }

    struct ConflictFolder: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "conflict-folder",
            abstract: "Put conflict backups in an \"Offline Sync Conflicts\" folder (on) or next to the item (off, default).",
            discussion: "Example:\n  vaultsync config conflict-folder on")
        static var needsUnlock: Bool { false }
        static var repairsDamagedSettings: Bool { true }
        @OptionGroup var global: GlobalOptions
        @Argument(help: "on or off.") var value: String

        func execute(_ context: CLIContext) async throws {
            guard ["on", "off"].contains(value) else { throw CLIError.usage("say on or off") }
            var context = context
            context.settings.conflictFolder = value == "on"
            try context.saveSettings()
            print("Conflict backups go \(value == "on" ? "to the \"Offline Sync Conflicts\" folder" : "next to the item")")
        }
    }

    struct Show: VaultCommand {
        static let configuration = CommandConfiguration(commandName: "show", abstract: "Show the settings.", discussion: "Example:\n  vaultsync config show")
        static var needsUnlock: Bool { false }
        @OptionGroup var global: GlobalOptions
        @OptionGroup var output: OutputOptions

        /// The save deadline in force, in seconds.
        static func saveTimeout(_ settings: ProfileSettings, _ context: CLIContext) -> Int {
            settings.effectiveSaveTimeout(environment: context.environment)
                ?? Int(EngineConfiguration(serverURL: "").api.saveTimeout.nanoseconds / 1_000_000_000)
        }

        func execute(_ context: CLIContext) async throws {
            let settings = context.settings
            if output.json {
                Presentation.printJSON(.object([
                    "profile": .string(context.profile.directory),
                    "server": Presentation.string(settings.server),
                    "email": Presentation.string(settings.email),
                    "lockTimeout": .int(settings.lockTimeout ?? ProfileSettings.defaultLockTimeout),
                    "saveTimeout": .int(Self.saveTimeout(settings, context)),
                    "clipboardClear": .int(settings.clipboardClear ?? Clipboard.defaultClearSeconds),
                    "conflicts": .string(settings.effectiveConflictPolicy.rawValue),
                    "attachmentCache": .int(settings.attachmentCache ?? EngineConfiguration(serverURL: "").attachmentCacheBytes),
                    "conflictFolder": .bool(settings.conflictFolder ?? false),
                    "agent": .bool(settings.agent ?? false),
                    "caFile": Presentation.string(settings.effectiveCAFile(environment: context.environment)?.path),
                    "proxy": .string(ConnectionDescription.proxy(settings, environment: context.environment)),
                ]))
                return
            }
            print("profile          \(context.profile.directory)")
            print("server           \(settings.server ?? "(not set)")")
            print("account          \(settings.email ?? "(not logged in)")")
            print("lock timeout     \(settings.lockTimeout ?? ProfileSettings.defaultLockTimeout) s")
            print("save timeout     \(Self.saveTimeout(settings, context)) s")
            print("clipboard clear  \(settings.clipboardClear ?? Clipboard.defaultClearSeconds) s")
            print("conflicts        \(settings.effectiveConflictPolicy.rawValue)")
            print("attachment cache \(ByteSize.readable(settings.attachmentCache ?? EngineConfiguration(serverURL: "").attachmentCacheBytes, binaryUnits: true))")
            print("conflict folder  \(settings.conflictFolder ?? false ? "on" : "off")")
            print("agent            \(settings.agent ?? false ? "on (unlock and login start it)" : "off")")
            print("CA file          \(ConnectionDescription.caFile(settings, environment: context.environment))")
            print("proxy            \(ConnectionDescription.proxy(settings, environment: context.environment))")
        }
    }
}

/// `config NAME SECONDS`: a setting in seconds, checked against its range and saved in the profile.
protocol SecondsSettingCommand: VaultCommand {
    static var range: ClosedRange<Int> { get }
    static var setting: WritableKeyPath<ProfileSettings, Int?> { get }
    /// The setting as a sentence names it ("the lock timeout").
    static var what: String { get }
    static func done(_ seconds: Int) -> String
    var seconds: Int { get }
}

extension SecondsSettingCommand {
    static var needsUnlock: Bool { false }
    static var repairsDamagedSettings: Bool { true }

    func execute(_ context: CLIContext) async throws {
        guard Self.range.contains(seconds) else {
            throw CLIError.usage("\(Self.what) must be between \(Self.range.lowerBound) and \(Self.range.upperBound) seconds")
        }
        var context = context
        context.settings[keyPath: Self.setting] = seconds
        try context.saveSettings()
        print(Self.done(seconds))
    }
}

struct RegisterCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        commandName: "register",
        abstract: "Create an account on the server and log in.",
        discussion: """
        The keys are made on this device; the server only ever sees a hash of the master password.

        Examples:
          vaultsync register alice@example.com
          VAULTSYNC_PASSWORD=… vaultsync register alice@example.com --name Alice
        """)
    static var needsUnlock: Bool { false }
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The account's email.") var email: String
    @Option(help: "Display name.") var name: String?
    @Option(name: .customLong("kdf-iterations"), help: "PBKDF2-SHA256 iterations, 100000 to 2000000 (default 600000).") var iterations = 600_000

    static let accepted = 100_000...2_000_000

    func execute(_ context: CLIContext) async throws {
        _ = try context.requireServer()
        guard email.contains("@") else { throw CLIError.usage("\"\(email)\" is not an email address") }
        guard context.settings.email == nil else { throw CLIError.usage("this profile is logged in as \(context.settings.email!); log out first") }
        guard let password = try context.masterPassword(prompt: "New master password: ") else {
            throw CLIError.usage("give the master password (prompt, --password-file or VAULTSYNC_PASSWORD)")
        }
        // Too short is said at once, before the password is asked again; typed at a terminal it is asked
        // twice (a piped or given one is not).
        guard password.count >= 12 else { throw CLIError.usage("the master password must have at least 12 characters") }
        if context.options.passwordFile == nil, context.environment["VAULTSYNC_PASSWORD"] == nil, Console.stdinIsTTY {
            guard Console.readSecret(prompt: "Repeat it: ") == password else { throw CLIError.usage("the passwords differ; nothing was created") }
        }
        // Bitwarden's servers (and ours) take 100,000 to 2,000,000; below 600,000, Bitwarden's current minimum,
        // every device's first login has to confirm the settings (a hostile server could announce them).
        guard Self.accepted.contains(iterations) else {
            throw CLIError.usage("--kdf-iterations must be between 100,000 and 2,000,000 (Bitwarden's servers refuse others); 600,000, the default, or more is recommended")
        }
        let kdf = KdfConfiguration.pbkdf2(iterations: iterations)
        if !kdf.meetsCurrentMinimums {
            Console.note("warning: \(kdf.summary) is below Bitwarden's current minimum of 600,000 iterations: each other device's first login must confirm it with --accept-kdf \(kdf.spec)")
        }
        try await context.engine.register(email: email, password: password, name: name, kdf: kdf)
        var context = context
        context.settings.email = MasterKey.normaliseSalt(email)
        try context.saveSettings()
        let key = try await context.startSession()
        print("Registered and logged in as \(context.settings.email!).")
        printSessionHint(key)
    }
}

func printSessionHint(_ key: String) {
    if Console.stdoutIsTTY {
        print("To stay unlocked in this shell:\n  export VAULTSYNC_SESSION=\"\(key)\"")
    } else {
        print("export VAULTSYNC_SESSION=\"\(key)\"")
    }
}

struct LogoutCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        commandName: "logout",
        abstract: "Remove the account and all its data from this device.",
        discussion: """
        Changes still waiting for the server are lost; `logout` refuses while there are any unless --force.
        A remembered two-step login ("login --remember") stays on this device, sealed so that only the \
        master password opens it; --forget-device removes it too, and the next login here needs a code.

        Example:
          vaultsync logout
          vaultsync logout --forget-device
        """)
    static var needsUnlock: Bool { false }
    @OptionGroup var global: GlobalOptions
    @Flag(help: "Log out even if changes are still waiting for the server.") var force = false
    @Flag(name: .customLong("forget-device"), help: "Also forget this device's remembered two-step login and identifier.")
    var forgetDevice = false

    func execute(_ context: CLIContext) async throws {
        let email = try context.requireEmail()
        let waiting = try await context.engine.queuedChangeCount(email: email)
        if !force, waiting > 0 {
            throw CLIError.aborted("\(waiting) change\(waiting == 1 ? " is" : "s are") still waiting for the server and would be lost; run `vaultsync sync` first, or `logout --force`")
        }
        // Unlocked (a session or a password at hand), the server is asked to end this device's session too.
        try? await context.unlock(prompt: false)
        let remembered = try await context.engine.hasRememberedTwoFactor(email: email)
        let revoked = try await context.engine.logout(email: email, forgetDevice: forgetDevice)
        context.profile.removeAllSessions()
        var context = context
        context.settings.email = nil
        try context.saveSettings()
        print("Logged out; the account's data was removed from this device.")
        if waiting > 0 {
            Console.note("\(waiting) change\(waiting == 1 ? "" : "s") that had not reached the server \(waiting == 1 ? "was" : "were") discarded (--force).")
        }
        if remembered && !forgetDevice {
            Console.note("This device still remembers the two-step login (only your master password opens it); `logout --forget-device` would remove it.")
        }
        if !revoked {
            Console.note("The server was not told (locked, offline, or a server without token revocation): this device's session ends there when its tokens expire.")
        }
    }
}

struct UnlockCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        commandName: "unlock",
        abstract: "Unlock the vault for this shell (prints a session key to export).",
        discussion: """
        The user key is sealed with a new random session key and the sealed copy is saved in the profile; the session key itself is only printed. Commands that see VAULTSYNC_SESSION open the sealed copy. Each unlock adds a session of its own (another shell's stays unlocked), and each expires after the lock timeout (`config lock-timeout`); `lock` ends them all, `lock --this-shell` only this shell's. A master password piped on standard input is read (`pass show vault | vaultsync unlock --raw`).

        Examples:
          eval "$(vaultsync unlock)"
          export VAULTSYNC_SESSION=$(vaultsync unlock --raw)
        """)
    static var needsUnlock: Bool { false }
    @OptionGroup var global: GlobalOptions
    @Flag(help: "Print only the session key.") var raw = false

    func execute(_ context: CLIContext) async throws {
        let email = try context.requireEmail()
        // Not `CLIError.locked`, whose advice is to run this very command (RELIABILITY bug 89).
        guard let password = try context.masterPassword() else {
            throw CLIError.stated("""
                No master password: there is no terminal to ask on. Give it with VAULTSYNC_PASSWORD or --password-file \
                (a pipe too: --password-file <(pass show vault)).
                """, .locked)
        }
        try await context.unlockLocally(email: email, password: password)
        let key = try await context.startSession()
        // A running agent that is locked gets the password too, and with `config agent on` one starts
        // (standard output stays the line to eval).
        await AgentStartCommand.handOver(context, password: password, startingOne: context.settings.agent == true)
        if raw { print(key) } else { print("export VAULTSYNC_SESSION=\"\(key)\"") }
    }
}

struct LockCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        commandName: "lock",
        abstract: "Lock the vault: every sealed session is deleted and every session key stops working (--this-shell: only this shell's).",
        discussion: "Examples:\n  vaultsync lock\n  vaultsync lock --this-shell")
    static var needsUnlock: Bool { false }
    @OptionGroup var global: GlobalOptions
    @Flag(name: .customLong("this-shell"), help: "End only the session of this shell's VAULTSYNC_SESSION; other shells stay unlocked (and the agent too).")
    var thisShell = false

    func execute(_ context: CLIContext) async throws {
        if thisShell {
            guard let key = context.environment["VAULTSYNC_SESSION"], !key.isEmpty else {
                throw CLIError.usage("--this-shell: this shell has no session (VAULTSYNC_SESSION is not set)")
            }
            context.profile.removeSession(key: key)
            return print("Locked this shell's session; other sessions stay unlocked.")
        }
        context.profile.removeAllSessions()
        // A running agent locks too (it holds the keys in memory; its next request needs the password again).
        _ = try? AgentRequests.ask("lock", context)
        print("Locked.")
    }
}

struct StatusCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Server, online/offline, locked/unlocked, pending changes, conflicts, last sync.",
        discussion: """
        Works locked too (then it shows what it can without the keys).

        Examples:
          vaultsync status
          vaultsync status --check
          vaultsync status --json
        """)
    static var needsUnlock: Bool { false }
    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions
    @Flag(help: "Ask the server now, instead of showing how the last contact went.") var check = false

    func execute(_ context: CLIContext) async throws {
        // Unlocks when it can without asking (password or session given); never prompts.
        if context.settings.email != nil { try? await context.unlock(prompt: false) }
        var checked: ServerCheck?
        if check {
            _ = try context.requireServer()
            checked = await context.engine.checkServer()
        }
        let status = try await context.engine.status()
        var snapshot = StatusSnapshot(settings: context.settings, status: status)
        snapshot.watch = LiveStateFile(profileDatabase: context.engine.localStore.path).read()
        snapshot.check = checked
        if output.json {
            Presentation.printJSON(snapshot.json)
        } else {
            for line in snapshot.lines { print(line) }
        }
    }
}

/// What `status` shows (shared with the demo).
struct StatusSnapshot {
    var settings: ProfileSettings
    var status: SyncStatus
    /// The `vaultsync watch` that keeps this profile live, when one runs.
    var watch: (pid: Int32, state: LiveState, program: String)?
    /// What `status --check` found when it asked the server.
    var check: ServerCheck?

    var checkText: String? {
        switch check {
        case .answered(let took)?:
            let milliseconds = Double(took.components.seconds) * 1_000 + Double(took.components.attoseconds) / 1e15
            return "the server answered now (\(Int(milliseconds.rounded())) ms)"
        case .failed(let error)?:
            return "the server did not answer now: \(describe(error).message)"
        case nil:
            return nil
        }
    }

    /// How the device keeps in step: this process's live sync, else a running watch's.
    var live: LiveState? { status.live ?? watch?.state }

    var connection: String {
        if status.certificateProblem != nil { return "untrusted-certificate" }
        switch status.online {
        case .some(true): return "online"
        case .some(false): return "offline"
        case .none: return "unknown"
        }
    }

    var json: JSONValue {
        .object([
            "server": Presentation.string(settings.server),
            "account": Presentation.string(settings.email),
            "connection": .string(connection),
            "lastContact": Presentation.date(status.lastContact),
            "locked": .bool(status.locked),
            "pending": status.locked ? .null : .int(status.pendingCount),
            "needsAttention": status.locked ? .null : .int(status.needsAttentionCount),
            "newConflicts": status.locked ? .null : .int(status.unreviewedConflicts),
            "lastSync": Presentation.date(status.lastSync),
            "certificateProblem": ConnectionDescription.problemJSON(status.certificateProblem),
            "live": live.map { .string($0.rawValue) } ?? .null,
            "check": check.map { found -> JSONValue in
                switch found {
                case .answered: .object(["answered": .bool(true), "message": .string(checkText ?? "")])
                case .failed: .object(["answered": .bool(false), "message": .string(checkText ?? "")])
                }
            } ?? .null,
        ])
    }

    var lines: [String] {
        // No account: nothing to unlock (it said "unlock to see" and "locked": RELIABILITY bug 73).
        let loggedIn = settings.email != nil
        func ago(_ date: WireDate?) -> String {
            // Locked, the account's sync state cannot be read: not known, rather than "never".
            guard let date else { return status.locked && loggedIn ? "unlock to see" : "never" }
            let seconds = Int(Date().timeIntervalSince(date.date))
            let text = seconds < 60 ? "\(max(seconds, 0)) s ago" : seconds < 3600 ? "\(seconds / 60) min ago" : "\(seconds / 3600) h ago"
            return "\(date.iso8601.prefix(19))Z (\(text))"
        }
        var connectionText: String
        switch status.online {
        case .some(true): connectionText = Console.styled("online", .green)
        case .some(false): connectionText = Console.styled("offline", .yellow)
        case .none: connectionText = "unknown"
        }
        if status.certificateProblem != nil { connectionText = Console.styled("untrusted certificate", .red) }
        var lines = [
            "server          \(settings.server ?? "(not set)")",
            "account         \(settings.email ?? "(not logged in)")",
            // Offline, the time is that of the attempt that failed, not of the last time the server answered;
            // that is the last sync, and `status --check` asks it now.
            "connection      \(connectionText) (\(status.online == false ? "last attempt, failed" : "last contact"): \(ago(status.lastContact))"
                + (status.online == false && check == nil ? "; `status --check` asks it now)" : ")"),
            "vault           \(!loggedIn ? "not logged in (vaultsync login EMAIL)" : status.locked ? Console.styled("locked", .yellow) : "unlocked")",
        ]
        if let checkText { lines.insert("check           \(checkText)", at: 3) }
        if !loggedIn {
            return lines
        }
        if status.locked {
            lines.append("pending         (unlock to see)")
        } else {
            lines.append("pending         \(status.pendingCount)")
            lines.append("needs attention \(status.needsAttentionCount == 0 ? "0" : Console.styled("\(status.needsAttentionCount)", .red))")
            lines.append("new conflicts   \(status.unreviewedConflicts == 0 ? "0" : Console.styled("\(status.unreviewedConflicts)", .yellow))")
        }
        lines.append("last sync       \(status.lastSync == nil && status.locked ? "(unlock to see)" : ago(status.lastSync))")
        if let problem = status.certificateProblem { lines.append("certificate     \(problem)") }
        switch live {
        case .live?: lines.append("live sync       \(Console.styled("live", .green))\(watch.map { " (vaultsync \($0.program), pid \($0.pid))" } ?? "")")
        case .polling?: lines.append("live sync       polling (the server has no notifications hub)")
        case .offline?: lines.append("live sync       \(Console.styled("waiting for the server", .yellow))\(watch.map { " (vaultsync \($0.program), pid \($0.pid))" } ?? "")")
        case nil: lines.append("live sync       not running (`vaultsync watch` keeps this device live)")
        }
        return lines
    }
}
