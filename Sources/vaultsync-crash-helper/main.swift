import Foundation
import VaultClient
import VaultModels

// Test helper, killed with SIGKILL by the crash tests at any point:
//   vaultsync-crash-helper DATABASE EMAIL PASSWORD COUNT
//     performs COUNT offline saves on an existing profile and prints "ACK n" after each save returns,
//     so a test can check that every acknowledged save survived (names and passwords carry the
//     environment's VAULTSYNC_CRASH_TAG, so that runs on one profile stay distinct);
//   vaultsync-crash-helper resolve DATABASE EMAIL PASSWORD SERVER_URL
//     unlocks the profile and syncs its queue against the server (resolution), printing "SYNCED" when
//     done, so a test can kill it in the middle of conflict resolution;
//   vaultsync-crash-helper probe-shm-lock SHM_PATH
//     prints "LOCKED" if some other process holds a lock on the SQLite shared-memory file's dead-man
//     byte (every process with the database open does), "FREE" otherwise: what a newly opening
//     process would conclude about being alone with the database.
/// Unbuffered, so a line is out before the next save starts.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

func fail(_ message: String, code: Int32) -> Never {
    FileHandle.standardError.write(Data((message + "\n").utf8))
    exit(code)
}

let arguments = CommandLine.arguments
if arguments.count == 3, arguments[1] == "probe-shm-lock" {
    let descriptor = open(arguments[2], O_RDWR)
    guard descriptor >= 0 else { fail("cannot open \(arguments[2])", code: 1) }
    // SQLite's unix VFS: lock bytes start at 120 of the -shm file; 128 is the dead-man switch.
    var probe = flock()
    probe.l_type = Int16(F_WRLCK)
    probe.l_whence = Int16(SEEK_SET)
    probe.l_start = 128
    probe.l_len = 1
    guard fcntl(descriptor, F_GETLK, &probe) == 0 else { fail("F_GETLK failed: \(errno)", code: 1) }
    say(probe.l_type == Int16(F_UNLCK) ? "FREE" : "LOCKED")
    exit(0)
}
let usage = "usage: vaultsync-crash-helper DATABASE EMAIL PASSWORD COUNT | resolve DATABASE EMAIL PASSWORD SERVER_URL"
if arguments.count == 6, arguments[1] == "resolve" {
    var configuration = EngineConfiguration(serverURL: arguments[5])
    configuration.api.requestTimeout = .seconds(20)
    do {
        let engine = try VaultEngine(databasePath: arguments[2], configuration: configuration)
        try await engine.unlock(email: arguments[3], password: arguments[4])
        say("READY")
        let started = ContinuousClock.now
        let report = try await engine.sync()
        let elapsed = (ContinuousClock.now - started).components
        let milliseconds = elapsed.seconds * 1_000 + elapsed.attoseconds / 1_000_000_000_000_000
        say("SYNCED resolved=\(report.resolved) pending=\(report.stillPending) attention=\(report.needsAttention) milliseconds=\(milliseconds)")
    } catch {
        fail("crash helper failed: \(error)", code: 1)
    }
    exit(0)
}
guard arguments.count == 5, let count = Int(arguments[4]) else { fail(usage, code: 64) }
var configuration = EngineConfiguration(serverURL: "http://127.0.0.1:9")
configuration.api.requestTimeout = .seconds(2)
let tag = ProcessInfo.processInfo.environment["VAULTSYNC_CRASH_TAG"] ?? ""
do {
    let engine = try VaultEngine(databasePath: arguments[1], configuration: configuration)
    try await engine.unlock(email: arguments[2], password: arguments[3])
    say("READY")
    var lastID: String?
    for index in 0..<count {
        if index % 3 == 2, let id = lastID {
            var view = try await engine.item(id: id)
            view.notes = "crash-edit-\(tag)\(index)"
            view.login?.password = "crash-password-\(tag)\(index)"
            _ = try await engine.updateItem(view)
        } else {
            var view = CipherView(type: .login, name: "crash-item-\(tag)\(index)")
            view.login = LoginView(username: "user-\(index)", password: "crash-password-\(tag)\(index)")
            lastID = try await engine.addItem(view).value.id
        }
        say("ACK \(index)")
    }
    say("DONE")
} catch {
    fail("crash helper failed: \(error)", code: 1)
}
