import ArgumentParser

/// ArgumentParser reads a token such as `-5` as short flags: `config lock-timeout -5` said "Missing expected
/// argument '<seconds>'" and `generate --length -5` "Missing value for '--length <N>'", neither naming the
/// mistake. No flag of this CLI is a digit, so a negative number is always a value: it is handed on in a form
/// the parser takes as one (`--length=-5`; a positional after `--`), and the command's own range check says
/// what is wrong with it. Both executables read their command line through it.
public enum NegativeNumbers {
    public static func isNegativeNumber(_ token: String) -> Bool {
        guard token.count > 1, token.first == "-" else { return false }
        let digits = token.dropFirst()
        return digits.allSatisfy { $0.isASCII && ($0.isNumber || $0 == ".") } && digits.contains { $0.isNumber }
    }

    /// `arguments` (without the program's name) with each negative number attached to the long option before
    /// it, or else moved after a `--` at the end (positionals keep their order among themselves).
    public static func rewrite(_ arguments: [String]) -> [String] {
        var (result, positionals) = ([String](), [String]())
        for token in arguments {
            if result.contains("--") || !isNegativeNumber(token) {
                result.append(token)
            } else if let option = result.last, option.hasPrefix("--"), option.count > 2, !option.contains("=") {
                result[result.count - 1] = option + "=" + token
            } else {
                positionals.append(token)
            }
        }
        guard !positionals.isEmpty else { return result }
        return result + (result.contains("--") ? [] : ["--"]) + positionals
    }
}

extension ParsableCommand {
    /// Parses the process's command line as ``NegativeNumbers`` hands it on, then runs the command it names;
    /// an error ends the process as ArgumentParser's own `main` would (its message, its exit code).
    ///
    /// `refused`: called with the arguments and the parser's error when it refuses them, before its
    /// message is printed (the CLI's "did you mean" for a mistyped command; it may exit itself).
    public static func parseAndRun(_ given: [String] = Array(CommandLine.arguments.dropFirst()),
                                   refused: (@Sendable ([String], any Error) -> Void)? = nil) async {
        do {
            let arguments = NegativeNumbers.rewrite(given)
            var command: any ParsableCommand
            do {
                command = try parseAsRoot(arguments)
            } catch {
                refused?(arguments, error)
                throw error
            }
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
        // What the command printed must have reached its destination: a full disk is an error, not exit 0.
        StandardOutput.exitIfUnwritten()
    }
}
