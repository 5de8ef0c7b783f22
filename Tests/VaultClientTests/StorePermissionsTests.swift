import Foundation
import Testing
import VaultClient
import VaultStore
import VaultTestSupport

@Suite("Data at rest: the library's database files are owner-only whatever the process umask")
struct StorePermissionsTests {
    @Test("the database and its -wal and -shm files are created 0600 under umask 022, and existing ones are tightened")
    func ownerOnly() async throws {
        let directory = temporaryDirectory("vaultsync-perm")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/vault.sqlite"
        // An app using the library keeps the usual umask (the CLI sets 077 for itself).
        let previous = umask(0o022)
        defer { umask(previous) }
        let store = try VaultStore(path: path)
        try await store.writeDatabase { db in try db.execute(sql: "CREATE TABLE probe (x)") }
        for file in [path, path + "-wal", path + "-shm"] {
            #expect(FileManager.default.fileExists(atPath: file), "\(file)")
            #expect(try Self.mode(file) == 0o600, "\(file)")
        }
        // Files left readable by an older version are tightened on the next open.
        for file in [path, path + "-wal", path + "-shm"] {
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file)
        }
        _ = try VaultStore(path: path)
        for file in [path, path + "-wal", path + "-shm"] {
            #expect(try Self.mode(file) == 0o600, "\(file)")
        }
    }

    static func mode(_ path: String) throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        return ((attributes[.posixPermissions] as? NSNumber)?.intValue ?? 0) & 0o777
    }
}
