#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where a profile's agent listens: one agent per profile (`VAULTSYNC_HOME`), each with a socket of its own.
public enum AgentLocation {
    /// The socket of the agent of the profile in `profileDirectory`: in `$XDG_RUNTIME_DIR/vaultsync`
    /// (a folder only the user can reach, emptied at logout) when the system provides one, else in the
    /// profile's own `agent` folder, else (a profile path too long for a socket address) in
    /// `/tmp/vaultsync-UID`. The file's name comes from the profile's path, so two profiles never share one.
    public static func socketPath(profileDirectory: String, environment: [String: String]) -> String {
        let name = "agent-" + fingerprint(profileDirectory) + ".sock"
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty {
            let path = runtime + "/vaultsync/" + name
            if fits(path) { return path }
        }
        let inProfile = profileDirectory + "/agent/agent.sock"
        if fits(inProfile) { return inProfile }
        return "/tmp/vaultsync-\(getuid())/" + name
    }

    /// A socket address holds about 104 bytes on Apple platforms, 108 on Linux.
    static func fits(_ path: String) -> Bool { path.utf8.count < 100 }

    /// 16 hex digits of FNV-1a over the path: a name, not a secret.
    static func fingerprint(_ text: String) -> String {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01B3
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
