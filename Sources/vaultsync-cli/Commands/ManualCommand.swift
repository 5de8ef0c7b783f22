import ArgumentParser
import CommandLineSupport
import Foundation

/// `vaultsync manual`: the man page (roff, section 1), made from the same command tree as `--help`, so
/// it never lags behind the build (scripts/install-shell-support.sh installs it as vaultsync.1).
struct ManualCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "manual",
        abstract: "Print the man page (roff) for vaultsync: scripts/install-shell-support.sh installs it.",
        shouldDisplay: false)

    func run() throws {
        print(Self.page(date: String(ISO8601DateFormatter().string(from: Date()).prefix(10))), terminator: "")
    }

    /// Text as roff shows it literally: backslashes doubled, a leading dot or quote escaped.
    static func escaped(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\e").split(separator: "\n", omittingEmptySubsequences: false).map { line in
            line.hasPrefix(".") || line.hasPrefix("'") ? "\\&" + line : String(line)
        }.joined(separator: "\n")
    }

    /// Every visible command, depth first, with its path ("folder add").
    static func commands(under command: any ParsableCommand.Type, path: [String] = []) -> [(path: [String], type: any ParsableCommand.Type)] {
        command.configuration.subcommands.filter { $0.configuration.shouldDisplay }.flatMap { sub -> [(path: [String], type: any ParsableCommand.Type)] in
            let here = path + [sub.configuration.commandName ?? String(describing: sub).lowercased()]
            return [(here, sub)] + commands(under: sub, path: here)
        }
    }

    static func page(date: String) -> String {
        let root = VaultSyncCommand.configuration
        var page = """
        .TH VAULTSYNC 1 "\(date)" "vaultsync \(ProductVersion.current)" "User Commands"
        .SH NAME
        vaultsync \\- \(escaped(root.abstract))
        .SH SYNOPSIS
        .B vaultsync
        .I command
        [\\fIoptions\\fR]
        .SH DESCRIPTION
        .nf
        \(escaped(root.discussion))
        .fi
        .SH COMMANDS

        """
        for (path, type) in commands(under: VaultSyncCommand.self) {
            page += ".SS \"vaultsync \(path.joined(separator: " "))\"\n"
            page += ".nf\n" + escaped(VaultSyncCommand.helpMessage(for: type, columns: 100)) + "\n.fi\n"
        }
        page += """
        .SH FILES
        .TP
        .I $XDG_DATA_HOME/vaultsync
        The profile (VAULTSYNC_HOME): settings, the encrypted vault, the sealed sessions.
        .SH SEE ALSO
        docs/CLI.md in the VaultSync repository.

        """
        return page
    }
}
