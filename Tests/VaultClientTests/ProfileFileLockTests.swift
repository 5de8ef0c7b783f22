import Foundation
import Testing
import VaultClient
import VaultModels
import VaultTestSupport

/// The crash tests once found a malformed database after a SIGKILL (docs/RELIABILITY.md): the test
/// process had scanned the profile's files for plaintext secrets with plain reads while its own engine
/// had the database open. Closing those descriptors dropped the process's SQLite locks, so the next
/// process to open the profile believed it was alone and reset the WAL index under live readers.
@Suite("Profile files and SQLite locks")
struct ProfileFileLockTests {
    func probe(_ helper: URL, _ path: String) throws -> String {
        // Spawn, not Foundation's Process (docs/RELIABILITY.md: libdispatch crashes while waiting on one).
        let output = try Spawn.pipe()
        let pid = try Spawn.start(helper.path, ["probe-shm-lock", path], environment: ProcessInfo.processInfo.environment,
                                  folder: nil, stdin: STDIN_FILENO, stdout: output.write, stderr: STDERR_FILENO)
        close(output.write)
        let text = String(decoding: Spawn.readAll(output.read), as: UTF8.self)
        _ = Spawn.wait(pid)
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("Scanning a profile's files through a child process or kept descriptors keeps this process's SQLite locks; plain reads drop them")
    func scansKeepLocks() async throws {
        let scenario = try await Scenario.start()
        let a = try await scenario.device(register: true)
        _ = try await a.engine.addItem(loginItem("lock probe"))
        let helper = try helperExecutable("vaultsync-crash-helper")
        let database = a.profile + "/vault.sqlite"
        let shm = database + "-shm"
        #expect(try probe(helper, shm) == "LOCKED", "an open engine holds the shared-memory lock")

        for suffix in ["", "-wal", "-shm"] {
            let bytes = try #require(readFileKeepingLocks(database + suffix))
            #expect(!bytes.isEmpty)
        }
        #expect(try probe(helper, shm) == "LOCKED", "reading through a child process left the lock in place")

        // The reader that keeps its descriptors open reads the same bytes and leaves the lock too,
        // also after SQLite wrote more (it reads the current contents, not a cached copy).
        let reader = LockKeepingReader()
        #expect(reader.read(database) == readFileKeepingLocks(database))
        _ = try await a.engine.addItem(loginItem("lock probe 2"))
        for suffix in ["", "-wal", "-shm"] {
            #expect(reader.read(database + suffix) == readFileKeepingLocks(database + suffix), "\(suffix) read as it is now")
        }
        #expect(reader.read(a.profile + "/no such file") == nil)
        #expect(try probe(helper, shm) == "LOCKED", "reading through kept descriptors left the lock in place")

        // The hazard this lock avoids is real: one plain read and close of the file drops the lock.
        _ = FileManager.default.contents(atPath: shm)
        #expect(try probe(helper, shm) == "FREE", "a plain read released this process's lock")
        await scenario.finish([a])
        reader.closeAll()
    }
}
