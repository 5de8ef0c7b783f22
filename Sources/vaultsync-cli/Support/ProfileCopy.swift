import Foundation
import VaultClient

/// A copied profile folder (a backup restored beside its original, `cp -r` to try something) holds the
/// original's device identifier and session: both copies would act as one device, refreshing each
/// other's tokens away and ignoring each other's live changes as their own. Every command that opens the
/// profile looks once; a moved folder is simply recorded in its new place.
extension CLIContext {
    func checkProfilePlace() async throws {
        switch try await engine.profilePlace() {
        case .original:
            return
        case .moved:
            try await engine.acceptProfilePlace()
        case .copied(let original):
            let question = """
                This profile is a copy of the one in \(original): as it is, both act as one device (the server would end \
                one's sign-in whenever the other signs in, and neither would see the other's changes arrive live).
                Make this copy a device of its own? It then asks for a login before using the server; its vault and \
                queued changes stay. [y/N] 
                """
            guard Console.stdinIsTTY, Console.stderrIsTTY else {
                Console.note("warning: this profile is a copy of the one in \(original) and acts as the same device; "
                             + "`vaultsync config device new` makes it a device of its own (`config device same` keeps it as it is)")
                return
            }
            if Console.confirm(question) {
                try await becomeNewDevice()
            } else {
                try await engine.acceptProfilePlace()
                Console.note("Kept as the same device as \(original); not asked again (`vaultsync config device new` changes it).")
            }
        }
    }

    /// Gives the profile a device identifier of its own and ends its sessions (their tokens were the old device's).
    func becomeNewDevice() async throws {
        try await engine.becomeNewDevice()
        profile.removeAllSessions()
        let who = settings.email.map { " \($0)" } ?? ""
        Console.note("This profile is now a device of its own. Log in to use the server: vaultsync login\(who)")
    }
}
