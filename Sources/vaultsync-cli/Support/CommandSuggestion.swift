import ArgumentParser
import Foundation

/// "Did you mean …?" for a mistyped command, as swift-argument-parser already says for a mistyped flag.
/// Only a command line the parser refused is looked at, so a name that is an argument (`get lsit`, an
/// item) is never taken for a typo.
enum CommandSuggestion {
    /// The message for `arguments` (without the program's name), which the parser refused with `error`,
    /// or nil when no command is near (or the "error" is --help, --version or a completion script).
    static func message(for arguments: [String], refusedWith error: any Error, root: any ParsableCommand.Type = VaultSyncCommand.self,
                        program: String = "vaultsync") -> String? {
        if error is CleanExit { return nil }
        var command = root
        var path = [program]
        for word in arguments where !word.hasPrefix("-") {
            let subcommands = command.configuration.subcommands
            guard !subcommands.isEmpty else { return nil }
            if let next = subcommands.first(where: { names(of: $0).contains(word) }) {
                command = next
                path.append(word)
                continue
            }
            let candidates = subcommands.filter { $0.configuration.shouldDisplay }.flatMap(names(of:))
            let ranked = candidates.map { (name: $0, distance: distance(word.lowercased(), $0)) }.sorted { $0.distance < $1.distance }
            guard let best = ranked.first, best.distance <= max(1, min(2, best.name.count / 3)) || best.name.hasPrefix(word.lowercased()) && word.count >= 2 else {
                return nil
            }
            return "unknown command '\(word)'. Did you mean '\((path + [best.name]).joined(separator: " "))'? (see `\(path.joined(separator: " ")) --help`)"
        }
        return nil
    }

    static func names(of command: any ParsableCommand.Type) -> [String] {
        let configuration = command.configuration
        let name = configuration.commandName ?? String(describing: command).lowercased()
        return [name] + configuration.aliases
    }

    /// The optimal string alignment distance (Levenshtein with adjacent transpositions: "lsit" is one from "list").
    static func distance(_ one: String, _ other: String) -> Int {
        let a = Array(one), b = Array(other)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var table = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { table[i][0] = i }
        for j in 0...b.count { table[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                table[i][j] = min(table[i - 1][j] + 1, table[i][j - 1] + 1, table[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] { table[i][j] = min(table[i][j], table[i - 2][j - 2] + 1) }
            }
        }
        return table[a.count][b.count]
    }
}
