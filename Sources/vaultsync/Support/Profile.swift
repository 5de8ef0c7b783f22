import Foundation
import VaultClient

/// The profile directory: the encrypted vault database, the settings and the sealed session.
///
/// `VAULTSYNC_HOME`, else `$XDG_DATA_HOME/vaultsync`, else `~/.local/share/vaultsync`. Created 0700;
/// every file in it 0600 (the process umask is 077 while the CLI runs).
struct Profile {
    let directory: String

    static func resolve(environment: [String: String] = ProcessInfo.processInfo.environment) -> Profile {
        if let home = environment["VAULTSYNC_HOME"], !home.isEmpty { return Profile(directory: home) }
        if let data = environment["XDG_DATA_HOME"], !data.isEmpty { return Profile(directory: data + "/vaultsync") }
        let home = environment["HOME"] ?? NSHomeDirectory()
        return Profile(directory: home + "/.local/share/vaultsync")
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
            throw CLIError.profile("cannot create the profile directory \(directory): \(error.localizedDescription)")
        }
    }

    func loadSettings() throws -> ProfileSettings {
        guard FileManager.default.fileExists(atPath: settingsPath) else { return ProfileSettings() }
        do {
            let data = try Data(contentsOf: URL(fileURLWithPath: settingsPath))
            return try JSONDecoder().decode(ProfileSettings.self, from: data)
        } catch {
            throw CLIError.profile("\(settingsPath) is unreadable (\(error.localizedDescription)); fix or remove it")
        }
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

    func removeSession() {
        try? FileManager.default.removeItem(atPath: sessionPath)
    }

    func readSession() -> String? {
        (try? String(contentsOfFile: sessionPath, encoding: .utf8))?.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// The profile's plain settings (no secrets: the server URL and the account's email).
struct ProfileSettings: Codable, Equatable {
    var server: String?
    var email: String?
    /// How long `unlock` keeps the vault unlocked (seconds).
    var lockTimeout: Int?
    /// Put conflict backups in the "Offline Sync Conflicts" folder instead of the item's folder.
    var conflictFolder: Bool?
    /// Plain HTTP to a server on another machine, allowed on purpose (`config server URL --insecure-allow-plain-http`).
    var insecureAllowPlainHTTP: Bool?

    static let defaultLockTimeout = 3600

    func engineConfiguration() -> EngineConfiguration {
        var configuration = EngineConfiguration(serverURL: server ?? "")
        configuration.backupsInConflictFolder = conflictFolder ?? false
        configuration.insecureAllowPlainHTTP = insecureAllowPlainHTTP ?? false
        return configuration
    }
}
