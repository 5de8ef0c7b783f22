import Foundation
import Testing
@testable import VaultClient

/// Ids from the server are data, never paths (docs/SECURITY.md, "Ids from the server never name a
/// path"): every folder and file the client names after a server-made id stays inside its own folder.
@Suite("Disk names of server-made ids")
struct DiskNameTests {
    static let hostile = ["../../victim", "..", ".", "", "a/b", "/etc", "x\u{0}y", "..\\..\\victim", "ｇｉｔｈｕｂ", "name\n", String(repeating: "a", count: 129)]

    @Test("a user id that is not a UUID becomes a hashed plain name; a UUID stays itself; a made name maps to itself")
    func userFolders() {
        let uuid = UUID().uuidString
        #expect(DiskName.userFolder(uuid) == uuid.lowercased())
        var seen = Set<String>()
        for id in Self.hostile {
            let name = DiskName.userFolder(id)
            #expect(name.hasPrefix("id-") && name.utf8.count == 67, "\(id) → \(name)")
            #expect(!name.contains("/") && !name.contains(".."), "\(id) → \(name)")
            #expect(DiskName.userFolder(name) == name, "a name listed from disk names the same folder")
            seen.insert(name)
        }
        #expect(seen.count == Self.hostile.count, "distinct ids get distinct folders")
    }

    @Test("only a plain ASCII id names a file; the attachment folders stay under the profile whatever the user id")
    func files() {
        for id in Self.hostile { #expect(DiskName.file(id) == nil, "\(id)") }
        #expect(DiskName.file("a1b2c3d4e5f6g7h8i9j0k1l2m3n4o5p6") != nil, "Bitwarden's attachment ids")
        #expect(DiskName.file(UUID().uuidString) != nil)
        let profile = "/tmp/profile-\(UUID().uuidString)/vault.sqlite"
        let cache = AttachmentCache(profileDatabase: profile, userID: "../../victim", limit: 1)
        let staging = AttachmentStaging(profileDatabase: profile, userID: "../../victim")
        for folder in [cache.folder, staging.folder] {
            let standardized = (folder as NSString).standardizingPath
            #expect(standardized.hasPrefix((profile as NSString).deletingLastPathComponent + "/attachment-"), "\(folder)")
            #expect(!folder.contains(".."), "\(folder)")
        }
        #expect(cache.path("../x") == nil && staging.path("../x") == nil)
    }
}
