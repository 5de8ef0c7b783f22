import Foundation
import VaultStore

/// Where a profile database is, against where it was made: a copied profile folder carries the
/// original's device identifier, so the server (and live sync's "from another device" rule) would take
/// both for one device, and each would refresh the other's tokens away.
public enum ProfilePlace: Sendable, Equatable {
    /// In the folder it was made in (or last accepted in).
    case original
    /// In another folder, and the folder it was made in holds no profile with its device identifier:
    /// the folder was moved or renamed.
    case moved(from: String)
    /// In another folder, while the folder it was made in still holds a profile with the same device
    /// identifier: this is a copy of it.
    case copied(from: String)
}

extension VaultEngine {
    /// Tells where the profile is against where it was made (its folder, followed through symbolic
    /// links). The first call on a profile records its folder and answers ``ProfilePlace/original``.
    public func profilePlace() async throws -> ProfilePlace {
        let here = Self.realFolder(of: store.path)
        guard let recorded = try await read({ tx in try tx.profilePlace.folder() }) else {
            try await write { tx in try tx.profilePlace.record(here) }
            return .original
        }
        guard recorded != here else { return .original }
        let original = recorded + "/" + (store.path as NSString).lastPathComponent
        let ours = try await read { tx in try tx.accounts.deviceIdentifiers() }
        if FileManager.default.fileExists(atPath: original), let theirs = VaultStore.deviceIdentifiers(atPath: original),
           !ours.isDisjoint(with: theirs) {
            return .copied(from: recorded)
        }
        return .moved(from: recorded)
    }

    /// Records the profile's current folder as its place: after a move, or when a copy is kept as the
    /// same device on purpose (it is then not reported again).
    public func acceptProfilePlace() async throws {
        let here = Self.realFolder(of: store.path)
        try await write { tx in try tx.profilePlace.record(here) }
    }

    /// Makes this profile a device of its own: every account gets a new device identifier, and the
    /// session tokens and remembered two-step logins, which belonged to the old one, are dropped, so the
    /// next use of the server needs a login (the vault, queued changes and drafts stay, and are sent
    /// after it). Records the current folder as the profile's place. Locks the engine.
    public func becomeNewDevice() async throws {
        let here = Self.realFolder(of: store.path)
        try await write { tx in
            try tx.accounts.becomeNewDevice { UUID().uuidString.lowercased() }
            try tx.profilePlace.record(here)
        }
        await lock()
    }

    static func realFolder(of databasePath: String) -> String {
        URL(fileURLWithPath: profileFolder(of: databasePath)).resolvingSymlinksInPath().standardizedFileURL.path
    }
}
