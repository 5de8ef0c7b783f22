import ArgumentParser

/// `vaultsync`: the VaultSync command-line vault client.
@main
struct VaultSyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "vaultsync",
        abstract: "An offline-first, end-to-end-encrypted password vault client.",
        discussion: """
        Every change is encrypted on this device first. Nothing leaves it unencrypted.
        """,
        subcommands: [DemoCommand.self]
    )
}
