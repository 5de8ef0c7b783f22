import Foundation
import Testing
import VaultModels
import VaultTestSupport

/// Ids from the server are data, never paths (docs/SECURITY.md, "Ids from the server never name a
/// path"). The user id in the access token's `sub` claim names the user's attachment folders and
/// `logout` removes them: a server that sends `../../victim` must not get a folder outside the profile
/// removed.
@Suite("CLI: ids from a hostile server never name a path")
struct HostileIDTests {
    /// The access token of a token answer with its `sub` claim replaced (the signature is left as it
    /// was: clients read the claims without verifying them, as Bitwarden's do).
    static func withSubject(_ subject: String, in body: [UInt8]) -> [UInt8]? {
        guard var object = try? JSONParser.parseObject(body), let token = object["access_token"]?.stringValue else { return nil }
        let parts = token.split(separator: ".").map(String.init)
        guard parts.count == 3 else { return nil }
        var base64 = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.utf8.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64), var claims = try? JSONParser.parseObject(data) else { return nil }
        claims["sub"] = .string(subject)
        let payload = Data(JSONValue.object(claims).serialized()).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        object["access_token"] = .string([parts[0], payload, parts[2]].joined(separator: "."))
        return JSONValue.object(object).serialized()
    }

    @Test("a token whose subject is a path (../../victim) is refused at login, and logout removes nothing outside the profile")
    func hostileSubjectRefused() async throws {
        let scenario = try await CLIScenario.start()
        let owner = try await scenario.device(register: true)
        let proxy = FaultProxy(upstream: await scenario.server.url)
        try await proxy.start()
        let device = CLIDevice(password: scenario.password)
        let root = (device.home as NSString).deletingLastPathComponent
        // The folder `profile/attachment-cache/../../victim` would name, with a file the user cares about.
        let victim = root + "/victim"
        try FileManager.default.createDirectory(atPath: victim, withIntermediateDirectories: true)
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: victim + "/notes.txt"))
        await proxy.setTamper { method, path, body in
            guard method == "POST", path.hasPrefix("/identity/connect/token") else { return nil }
            return Self.withSubject("../../victim", in: body)
        }
        try await device.expect(["config", "server", await proxy.url])
        let refused = try await device.run(["login", scenario.email, "--accept-kdf", "pbkdf2:100000"])
        #expect(refused.status != 0, "\(refused)")
        #expect(refused.stderr.contains("subject is not a user id"), "\(refused)")
        _ = try await device.run(["logout"])
        #expect(FileManager.default.fileExists(atPath: victim + "/notes.txt"), "logout removed a folder outside the profile")

        // The same server, answering honestly again: the login works and logout still leaves the folder.
        await proxy.setTamper(nil)
        try await device.expect(["login", scenario.email, "--accept-kdf", "pbkdf2:100000"])
        try await device.expect(["logout"])
        #expect(FileManager.default.fileExists(atPath: victim + "/notes.txt"))
        await proxy.stop()
        await scenario.finish([owner, device])
    }
}
