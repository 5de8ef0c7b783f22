import Foundation
import VaultSyncCore

/// What a running `vaultsync watch` or agent tells the profile's other commands: its process id, how it
/// keeps the device in step (live, polling, offline) and which program it is, in `live-state` beside the
/// profile database (0600). It holds no secret. `status` shows it while that process runs; a file left by one that died is ignored.
struct LiveStateFile {
    let path: String
    /// The program that writes it: `watch` or `agent`.
    var program = "watch"

    init(profileDatabase: String, program: String = "watch") {
        self.program = program
        let folder = (profileDatabase as NSString).deletingLastPathComponent
        path = (folder.isEmpty ? "." : folder) + "/live-state"
    }

    func write(_ state: LiveState?) {
        guard let state else {
            try? FileManager.default.removeItem(atPath: path)
            return
        }
        let text = "\(getpid()) \(state.rawValue) \(program)\n"
        let temporary = path + ".partial"
        guard FileManager.default.createFile(atPath: temporary, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]),
              rename(temporary, path) == 0 else {
            try? FileManager.default.removeItem(atPath: temporary)
            return
        }
    }

    /// The state a running watch recorded, or `nil` when none runs.
    func read() -> (pid: Int32, state: LiveState, program: String)? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        let parts = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isWhitespace)
        // A file of an earlier version has no third field: it was written by a watch.
        guard parts.count == 2 || parts.count == 3, let pid = Int32(parts[0]), let state = LiveState(rawValue: String(parts[1])) else { return nil }
        // A process that no longer exists left the file behind (killed): nothing runs.
        guard kill(pid, 0) == 0 || errno == EPERM else { return nil }
        return (pid, state, parts.count == 3 ? String(parts[2]) : "watch")
    }
}
