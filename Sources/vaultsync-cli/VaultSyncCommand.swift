import ArgumentParser
import CommandLineSupport
import Foundation
import Logging
import VaultClient

/// `vaultsync`: the VaultSync command-line vault client.
@main
struct VaultSyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vaultsync",
        abstract: "An offline-first, end-to-end-encrypted password vault client (Bitwarden-compatible).",
        discussion: """
        Every change is encrypted on this device first and works without the server: it is queued and sent with the next `sync`, where conflicts are resolved without losing either version.

        Profile: VAULTSYNC_HOME (default: $XDG_DATA_HOME/vaultsync). Master password: prompt, --password-file FILE or VAULTSYNC_PASSWORD. Stay unlocked: eval "$(vaultsync unlock)".

        Exit codes: 0 ok (also "saved offline"), 1 error, 2 locked, 3 authentication failed, 4 not found, 5 ambiguous name, 6 server refused, 7 server unreachable, 8 verification failed, 64 usage error, 65 a file not in its format.

        Start with:
          vaultsync demo
          vaultsync config server https://vault.example.com
          vaultsync login you@example.com
        """,
        version: "vaultsync \(ProductVersion.current)",
        subcommands: [
            DemoCommand.self, ConfigCommand.self, RegisterCommand.self, LoginCommand.self, LogoutCommand.self,
            UnlockCommand.self, LockCommand.self, StatusCommand.self,
            ListCommand.self, GetCommand.self, AddCommand.self, EditCommand.self, DeleteCommand.self, RestoreCommand.self,
            ArchiveCommand.self, UnarchiveCommand.self, MoveCommand.self, FavoriteCommand.self,
            FolderCommand.self, SyncCommand.self, WatchCommand.self, AgentCommand.self, PendingCommand.self, ConflictsCommand.self, DraftsCommand.self,
            ImportCommand.self, ExportCommand.self,
            AttachmentCommand.self, GenerateCommand.self, ShareCommand.self, OrganizationCommand.self, CollectionCommand.self, TwoStepCommand.self, APIKeyCommand.self,
            FingerprintCommand.self, ClipboardClearCommand.self, ManualCommand.self, BWCommand.self,
        ]
    )

    /// Logs go to standard error at `VAULTSYNC_LOG` (trace…critical; default: warning). They never carry
    /// secrets (ids and decisions only).
    static func main() async {
        ProcessMemory.keepLargeBuffersOutOfHeaps()
        let named = ProcessInfo.processInfo.environment["VAULTSYNC_LOG"].flatMap { $0.isEmpty ? nil : $0 }
        let level = named.flatMap { Logger.Level(rawValue: $0.lowercased()) } ?? .warning
        if let named, Logger.Level(rawValue: named.lowercased()) == nil {
            // A typo in a logging variable must not keep anyone from their vault: said, and the default used.
            Console.note("warning: VAULTSYNC_LOG=\"\(named)\" is not a level (trace, debug, info, notice, warning, error, critical); logging at warning")
        }
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        // A command line the parser refuses is looked at for a mistyped command before the parser's own message.
        await parseAndRun(BWSurface.commandArguments()) { arguments, error in
            guard let suggestion = CommandSuggestion.message(for: arguments, refusedWith: error) else { return }
            Console.error(suggestion)
            Foundation.exit(ExitStatus.usage.rawValue)
        }
    }
}
