import Foundation
import Testing
import VaultCrypto
import VaultModels
import VaultTestSupport

/// An item this device cannot decrypt: one a server injected under a key the account never had, or one
/// damaged on the way. It must never stop the user from working with the rest of the vault.
@Suite("CLI: an item that cannot be decrypted")
struct UnreadableItemTests {
    /// RELIABILITY bug 68: an item a server injected under a foreign key blocked `export` ("sync, or see `vaultsync
    /// list`") and could not be deleted either: every command that names it decrypted it first.
    @Test("an injected item under a foreign key is listed as unreadable, can be deleted by id, and then export works")
    func injectedItemCanBeDeleted() async throws {
        let scenario = try await CLIScenario.start()
        let (device, proxy) = try await scenario.deviceBehindProxy()
        try await device.expect(["add", "login", "--name", "Kept", "--username", "alice", "--password", "-"], stdin: "hunter2\n")
        let injectedID = UUID().uuidString.lowercased()
        let foreign = try EncString.encrypt("Planted", key: SymmetricCryptoKey.generate()).serialized
        await proxy.setTamper { method, path, body in
            guard method == "GET", path.hasPrefix("/api/sync"), var object = try? JSONParser.parseObject(body),
                  var planted = object["ciphers"]?.arrayValue?.first?.objectValue else { return nil }
            planted["id"] = .string(injectedID)
            planted["name"] = .string(foreign)
            object["ciphers"] = .array((object["ciphers"]?.arrayValue ?? []) + [.object(planted)])
            return JSONValue.object(object).serialized()
        }
        try await device.expect(["sync"])
        // The list names it, and the way out; the readable ones are listed as ever.
        let listed = try await device.expect(["list"])
        #expect(listed.stdout.contains("Kept") && !listed.stdout.contains(injectedID), "\(listed)")
        #expect(listed.stderr.contains("1 item cannot be decrypted and is not listed (\(injectedID))")
                && listed.stderr.contains("vaultsync delete \(injectedID) --permanent"), "\(listed)")
        // Export refuses, naming it and the way out.
        let directory = (device.home as NSString).deletingLastPathComponent
        let refused = try await device.expect(["export", "--format", "json", "--output", directory + "/export.json"], status: 1)
        #expect(refused.stderr.contains(injectedID) && refused.stderr.contains("vaultsync delete"), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory + "/export.json"))
        // Shown by id: what it is, not a crypto error.
        let shown = try await device.run(["get", injectedID])
        #expect(shown.status == 1 && shown.stderr.contains("Could not decrypt") && shown.stderr.contains("vaultsync delete \(injectedID) --permanent"), "\(shown)")
        // Deleted for good by its id; the server never had it.
        await proxy.setTamper(nil)
        let deleted = try await device.expect(["delete", injectedID, "--permanent"])
        #expect(deleted.stdout.contains("Deleted") && deleted.stdout.contains(String(injectedID.prefix(8))), "\(deleted)")
        try await device.expect(["sync"])
        let names = try await device.json(["list"]).arrayValue?.compactMap { $0["name"]?.stringValue }
        #expect(names == ["Kept"], "\(String(describing: names))")
        try await device.expect(["export", "--format", "json", "--output", directory + "/export.json"])
        await proxy.stop()
        await scenario.finish([device])
    }
}
