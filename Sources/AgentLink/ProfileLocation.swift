#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where a profile lives (docs/CLI.md, "Profiles"): the one rule both the command line and its small
/// front (which finds the profile's agent before anything else is loaded) follow, so that both always
/// name the same profile and so the same agent.
///
/// `VAULTSYNC_HOME`, else `$XDG_DATA_HOME/vaultsync`, else `~/.local/share/vaultsync`.
public enum ProfileLocation {
    /// The profile folder for `environment`, as an absolute path. `currentDirectory` is asked only for a
    /// relative `VAULTSYNC_HOME`.
    public static func directory(environment: [String: String], currentDirectory: () -> String = ProfileLocation.currentDirectory) -> String {
        if let home = environment["VAULTSYNC_HOME"], !home.isEmpty {
            return absolute(home, environment: environment, currentDirectory: currentDirectory)
        }
        if let data = environment["XDG_DATA_HOME"], !data.isEmpty { return data + "/vaultsync" }
        return homeDirectory(environment) + "/.local/share/vaultsync"
    }

    /// The folder `VAULTSYNC_HOME` names, as an absolute path. A `~` the shell did not expand (the value quoted, or set
    /// in a service's environment file) is the home folder; a relative path is taken from the current folder
    /// once, here. Both were used as given (RELIABILITY bug 86): `VAULTSYNC_HOME="~/vault"` made a folder named `~`
    /// in whatever folder the command ran in, and a relative profile was another, empty one after a `cd`.
    public static func absolute(_ path: String, environment: [String: String], currentDirectory: () -> String = ProfileLocation.currentDirectory) -> String {
        var path = path
        if path == "~" || path.hasPrefix("~/") {
            path = homeDirectory(environment) + path.dropFirst()
        }
        guard !path.hasPrefix("/") else { return path }
        return currentDirectory() + "/" + path
    }

    /// `HOME`, else the user database's home folder.
    public static func homeDirectory(_ environment: [String: String]) -> String {
        if let home = environment["HOME"], !home.isEmpty { return home }
        if let entry = getpwuid(getuid()), let folder = entry.pointee.pw_dir { return String(cString: folder) }
        return "/"
    }

    /// The process's current folder.
    public static func currentDirectory() -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        return buffer.withUnsafeMutableBufferPointer { buffer in
            guard let base = buffer.baseAddress, getcwd(base, buffer.count) != nil else { return "." }
            return String(cString: base)
        }
    }
}
