import AgentLink
import Foundation
import VaultCrypto
import VaultClient
import VaultSyncCore

/// The profile directory: the encrypted vault database, the settings and the sealed session.
///
/// Where: ``ProfileLocation`` (`VAULTSYNC_HOME`, else `$XDG_DATA_HOME/vaultsync`, else `~/.local/share/vaultsync`). Created 0700;
/// every file in it 0600 (the process umask is 077 while the CLI runs).
struct Profile {
    let directory: String

    static func resolve(environment: [String: String] = ProcessInfo.processInfo.environment) -> Profile {
        Profile(directory: ProfileLocation.directory(environment: environment, currentDirectory: { FileManager.default.currentDirectoryPath }))
    }

    var databasePath: String { directory + "/vault.sqlite" }
    var settingsPath: String { directory + "/settings.json" }
    var sessionPath: String { directory + "/session" }

    /// Creates the directory (0700) if needed and tightens it if it exists.
    func prepare() throws {
        umask(0o077)
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
            try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: directory)
        } catch {
            throw CLIError.profile("cannot use the profile directory \(directory): \(Self.problem(creating: directory) ?? error.localizedDescription)")
        }
    }

    /// Why `directory` cannot be created or used, said as the person can act on it; Foundation's own text was
    /// "A file with the same name already exists" for a symbolic link to nothing and "(NSCocoaErrorDomain error
    /// 512.)" under a file, and "cannot create" for a folder that existed but was another user's (RELIABILITY bug 86).
    static func problem(creating directory: String) -> String? {
        var path = directory
        while !path.isEmpty {
            var status = stat()
            if lstat(path, &status) == 0 {
                let kind = status.st_mode & S_IFMT
                if kind == S_IFLNK, stat(path, &status) != 0 {
                    return "\(path) is a symbolic link to \((try? FileManager.default.destinationOfSymbolicLink(atPath: path)) ?? "nothing"), which does not exist"
                }
                if status.st_mode & S_IFMT != S_IFDIR { return "\(path) is a file, not a folder" }
                if path == directory, status.st_uid != geteuid() { return "it belongs to another user (uid \(status.st_uid))" }
                if access(path, W_OK | X_OK) != 0 { return "\(path) is not writable by this user (\(String(cString: strerror(errno))))" }
                return nil
            }
            let parent = (path as NSString).deletingLastPathComponent
            if parent == path { break }
            path = parent
        }
        return nil
    }

    /// A settings file that was read but holds no settings (not JSON, a value of the wrong kind): its bytes, kept
    /// aside when a `config` setter replaces it, and what is wrong with it.
    struct DamagedSettings {
        var bytes: Data
        var problem: String
    }

    /// The settings, refusing a damaged file with the ways to repair it.
    func loadSettings() throws -> ProfileSettings {
        let (settings, damaged) = try readSettings()
        if let damaged {
            throw CLIError.profile("""
                \(settingsPath) is damaged (\(damaged.problem)). `vaultsync config server URL` replaces it with new settings \
                (keeping a copy of this one beside it); or fix the file, or remove it (every setting is then back to its default)
                """)
        }
        return settings
    }

    /// The settings, or (defaults and) what is wrong with a file that was read but holds none. A file that cannot
    /// be read at all (its permissions, a folder in its place) is an error: nothing here could replace it.
    func readSettings() throws -> (ProfileSettings, DamagedSettings?) {
        guard FileManager.default.fileExists(atPath: settingsPath) else { return (ProfileSettings(), nil) }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: settingsPath))
        } catch {
            throw CLIError.profile("\(settingsPath) cannot be read (\(error.localizedDescription)); fix it or remove it")
        }
        do {
            return (try JSONDecoder().decode(ProfileSettings.self, from: data), nil)
        } catch {
            return (ProfileSettings(), DamagedSettings(bytes: data, problem: Self.settingsProblem(error)))
        }
    }

    /// What is wrong with a settings file, as a person can find it there (Foundation's text was "The data couldn't
    /// be read because it isn't in the correct format" for every problem).
    static func settingsProblem(_ error: any Error) -> String {
        func key(_ context: DecodingError.Context) -> String {
            context.codingPath.map(\.stringValue).joined(separator: ".")
        }
        switch error as? DecodingError {
        case .typeMismatch(_, let context)?, .valueNotFound(_, let context)?, .dataCorrupted(let context)?:
            return context.codingPath.isEmpty ? "not a JSON object of settings"
                : "\"\(key(context))\" is not what it should be: \(context.debugDescription)"
        case .keyNotFound(let missing, _)?: return "\"\(missing.stringValue)\" is missing"
        default: return error.localizedDescription
        }
    }

    /// Keeps a damaged settings file's bytes beside it, as `settings.json.damaged-YYYYMMDDTHHMMSSZ` (0600; `-2`, `-3`, …
    /// after it when that name is taken), before new settings replace it. Returns the copy's path.
    func keepDamagedSettings(_ damaged: DamagedSettings, now: Date = Date()) throws -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
        let base = "\(settingsPath).damaged-\(formatter.string(from: now))"
        var path = base
        var number = 1
        while FileManager.default.fileExists(atPath: path) {
            number += 1
            path = "\(base)-\(number)"
        }
        try writePrivate(damaged.bytes, to: path)
        return path
    }

    func saveSettings(_ settings: ProfileSettings) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try writePrivate(try encoder.encode(settings), to: settingsPath)
    }

    /// Writes a file atomically with mode 0600.
    func writePrivate(_ data: Data, to path: String) throws {
        do {
            try data.write(to: URL(fileURLWithPath: path), options: .atomic)
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        } catch {
            throw CLIError.profile("cannot write \(path): \(error.localizedDescription)")
        }
    }

    /// One sealed session per `unlock`, each in a file of its own: a second shell's unlock no longer ends
    /// the first one's session, and each expires on its own. The file's name is derived from the
    /// session key by a one-way hash (the key itself is never on disk): only the shell holding the key
    /// finds its file.
    var sessionsDirectory: String { directory + "/sessions" }

    func sessionPath(forKey key: String) -> String {
        sessionsDirectory + "/" + SessionFileName.forKey(key)
    }

    /// Every session file: the one per key, and the single file of versions before several sessions.
    func sessionFiles() -> [String] {
        let named = ((try? FileManager.default.contentsOfDirectory(atPath: sessionsDirectory)) ?? []).map { sessionsDirectory + "/" + $0 }
        return named + (FileManager.default.fileExists(atPath: sessionPath) ? [sessionPath] : [])
    }

    /// Ends every session of the profile (`lock`, `logout`).
    func removeAllSessions() {
        for path in sessionFiles() { try? FileManager.default.removeItem(atPath: path) }
    }

    /// Ends the session of `key` (a file nobody can open any more, `lock --this-shell`).
    func removeSession(key: String) {
        let path = sessionPath(forKey: key)
        if FileManager.default.fileExists(atPath: path) {
            try? FileManager.default.removeItem(atPath: path)
        } else {
            try? FileManager.default.removeItem(atPath: sessionPath)
        }
    }

    /// The sealed session as `unlock` saves it: a first line `expires UNIX-SECONDS` in the clear, then the
    /// sealed user key. The expiry is also inside the sealed payload, where it cannot be edited, but
    /// that only stops this CLI: whoever holds the session key can open the sealed copy whatever it
    /// says. So the file itself must go when its time is up, and the plain line lets any command see
    /// that without the key.
    func writeSession(sealed: String, expires: Date, key: String) throws {
        try FileManager.default.createDirectory(atPath: sessionsDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try writePrivate(Data("expires \(Int64(expires.timeIntervalSince1970.rounded(.up)))\n\(sealed)\n".utf8), to: sessionPath(forKey: key))
    }

    /// What a session file holds: `nil` when there is none.
    enum SessionFile {
        /// The sealed session and its expiry (`nil` for a file of an older version, which had no expiry line).
        case sealed(String, expires: Date?)
        /// Not a session file: nobody can open it.
        case damaged
    }

    /// The session of `key`: its own file, else the single file of earlier versions.
    func readSession(key: String) -> SessionFile? {
        Self.readSessionFile(sessionPath(forKey: key)) ?? Self.readSessionFile(sessionPath)
    }

    static func readSessionFile(_ path: String) -> SessionFile? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        switch lines.count {
        case 1 where !lines[0].hasPrefix("expires "):
            return .sealed(lines[0], expires: nil)
        case 2:
            guard lines[0].hasPrefix("expires "), let seconds = Int64(lines[0].dropFirst("expires ".count)) else { return .damaged }
            return .sealed(lines[1], expires: Date(timeIntervalSince1970: TimeInterval(seconds)))
        default:
            return .damaged
        }
    }

    /// Deletes every session file that says its time is up (every command does this, key or not).
    func removeSessionIfExpired(now: Date = Date()) {
        for path in sessionFiles() {
            if case .sealed(_, let expires?) = Self.readSessionFile(path), expires <= now { try? FileManager.default.removeItem(atPath: path) }
        }
    }
}

/// The profile's plain settings (no secrets: the server URL and the account's email).
struct ProfileSettings: Codable, Equatable {
    var server: String?
    var email: String?
    /// How long `unlock` keeps the vault unlocked (seconds).
    var lockTimeout: Int?
    /// `config agent on`: `unlock` and `login` start the profile's agent when it is not running.
    var agent: Bool?
    /// Put conflict backups in the "Offline Sync Conflicts" folder instead of the item's folder.
    var conflictFolder: Bool?
    /// `config conflicts merge|backup` (``ConflictPolicy``'s raw value); unset: merge.
    var conflictPolicy: String?
    /// `config attachment-cache SIZE`: bytes of downloaded attachments kept (encrypted); unset: the default.
    var attachmentCache: Int?
    /// Plain HTTP to a server on another machine, allowed on purpose (`config server URL --insecure-allow-plain-http`).
    var insecureAllowPlainHTTP: Bool?
    /// A PEM file of extra certificate authorities (`config ca-file PATH`), absolute.
    var caFile: String?
    /// `config save-timeout SECONDS`: how long a save waits for the server before it is kept and queued.
    var saveTimeout: Int?
    /// `config clipboard-clear SECONDS`: how long a secret copied with `--clip` stays on the clipboard.
    var clipboardClear: Int?

    static let defaultLockTimeout = 3600

    /// The conflict policy in force (a value this version does not know counts as the default).
    var effectiveConflictPolicy: ConflictPolicy { conflictPolicy.flatMap(ConflictPolicy.init(rawValue:)) ?? .merge }

    /// The engine's settings from these and the environment: SSL_CERT_FILE when no CA file is set (as
    /// OpenSSL reads it, but added to the system's authorities), and the proxy variables
    /// (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY, NO_PROXY, lower case first). The library reads none itself.
    func engineConfiguration(environment: [String: String] = [:]) -> EngineConfiguration {
        var configuration = EngineConfiguration(serverURL: server ?? "")
        configuration.backupsInConflictFolder = conflictFolder ?? false
        configuration.conflictPolicy = effectiveConflictPolicy
        if let attachmentCache { configuration.attachmentCacheBytes = attachmentCache }
        configuration.insecureAllowPlainHTTP = insecureAllowPlainHTTP ?? false
        configuration.caFile = effectiveCAFile(environment: environment)?.path
        configuration.proxy = ProxySettings.fromEnvironment(environment)
        if let seconds = effectiveSaveTimeout(environment: environment) { configuration.api.saveTimeout = .seconds(Int64(seconds)) }
        return configuration
    }

    /// The save deadline in force: `VAULTSYNC_SAVE_TIMEOUT` (seconds, 1–60), else `config save-timeout`,
    /// else the engine's default (`nil`).
    func effectiveSaveTimeout(environment: [String: String]) -> Int? {
        if let text = environment["VAULTSYNC_SAVE_TIMEOUT"], let seconds = Int(text), (1...60).contains(seconds) { return seconds }
        return saveTimeout
    }

    /// The CA file in use and where the setting came from.
    func effectiveCAFile(environment: [String: String]) -> (path: String, source: String)? {
        if let caFile { return (caFile, "config ca-file") }
        if let path = environment["SSL_CERT_FILE"], !path.isEmpty { return (path, "SSL_CERT_FILE") }
        return nil
    }
}
