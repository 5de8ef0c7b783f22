import Foundation

/// Terminal output: plain text (colored only on a TTY, `NO_COLOR` respected), JSON for scripts,
/// notes and errors on standard error.
enum Console {
    static let environment = ProcessInfo.processInfo.environment

    static var stdoutIsTTY: Bool { isatty(STDOUT_FILENO) == 1 }
    static var stderrIsTTY: Bool { isatty(STDERR_FILENO) == 1 }
    static var stdinIsTTY: Bool { isatty(STDIN_FILENO) == 1 }

    static var colorEnabled: Bool {
        stdoutIsTTY && environment["NO_COLOR"].map(\.isEmpty) ?? true && environment["TERM"] != "dumb"
    }

    enum Style: String {
        case bold = "1", dim = "2", red = "31", green = "32", yellow = "33", cyan = "36"
    }

    static func styled(_ text: String, _ style: Style) -> String {
        colorEnabled ? "\u{1B}[\(style.rawValue)m\(text)\u{1B}[0m" : text
    }

    static func line(_ text: String = "") {
        print(text)
    }

    /// A note for the person (not part of the command's output): standard error.
    static func note(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }

    static func error(_ text: String) {
        let prefix = stderrIsTTY && environment["NO_COLOR"] == nil ? "\u{1B}[31merror:\u{1B}[0m " : "error: "
        FileHandle.standardError.write(Data((prefix + text + "\n").utf8))
    }

    /// Asks a yes/no question on standard error and reads the answer; only "y" or "yes" is a yes.
    static func confirm(_ question: String) -> Bool {
        FileHandle.standardError.write(Data(question.utf8))
        guard let answer = Swift.readLine(strippingNewline: true)?.trimmingCharacters(in: .whitespaces).lowercased() else { return false }
        return answer == "y" || answer == "yes"
    }

    /// Asks on standard error and reads one line (`nil` at end of input).
    static func ask(_ prompt: String) -> String? {
        FileHandle.standardError.write(Data(prompt.utf8))
        return Swift.readLine(strippingNewline: true)
    }

    /// Reads a secret from the terminal without echo.
    static func readSecret(prompt: String) -> String? {
        // Echo goes off (discarding what was typed before the question) before the prompt is shown:
        // the other way round, an answer typed or pasted the moment the prompt appears could be
        // discarded with the type-ahead, leaving the program waiting for a line already given.
        var original = termios()
        let haveTerminal = tcgetattr(STDIN_FILENO, &original) == 0
        if haveTerminal {
            var silent = original
            silent.c_lflag &= ~tcflag_t(ECHO)
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &silent)
        }
        FileHandle.standardError.write(Data(prompt.utf8))
        defer {
            if haveTerminal {
                tcsetattr(STDIN_FILENO, TCSAFLUSH, &original)
                FileHandle.standardError.write(Data("\n".utf8))
            }
        }
        return Swift.readLine(strippingNewline: true)
    }
}
