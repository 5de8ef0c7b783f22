import Foundation

/// Terminal output: plain text (colored only on a TTY, `NO_COLOR` respected), JSON for scripts,
/// notes and errors on standard error.
enum Console {
    /// The command's environment (the client's, when the agent runs the command).
    static var environment: [String: String] { AgentHost.environment }
    /// In the agent, nothing reads the client's terminal: its prompts are asked in the calling process
    /// before the command is sent, and a command that would ask more does not run in the agent.
    static var mayAsk: Bool { AgentHost.current == nil }

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
        FileHandle.standardError.write(Data((terminalSafe(text) + "\n").utf8))
    }

    static func error(_ text: String) {
        let prefix = stderrIsTTY && environment["NO_COLOR"] == nil ? "\u{1B}[31merror:\u{1B}[0m " : "error: "
        FileHandle.standardError.write(Data((prefix + terminalSafe(text) + "\n").utf8))
    }

    /// `text` with every control character that a terminal would act on shown instead (`^[` for escape,
    /// `^G` for the bell, `<U+009B>` for C1 codes): item names, notes and folder names come from the vault,
    /// which an import, a shared organization item or a hostile server can fill, and must never clear,
    /// retitle or reprogram the terminal that shows them. Line ends and tabs stay. `keepingColors` (standard
    /// output on a color terminal): this program's own styles stay (``Style``, exactly those SGR sequences),
    /// which a vault text can then use too, for nothing more than those styles.
    static func terminalSafe(_ text: String, keepingColors: Bool = false) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var out = String.UnicodeScalarView()
        var scalars = text.unicodeScalars[...]
        while let scalar = scalars.first {
            scalars = scalars.dropFirst()
            guard isControl(scalar) else {
                out.append(scalar)
                continue
            }
            if keepingColors, scalar == "\u{1B}", let style = ownStyles.first(where: { scalars.starts(with: $0.unicodeScalars) }) {
                out.append(scalar)
                out.append(contentsOf: style.unicodeScalars)
                scalars = scalars.dropFirst(style.unicodeScalars.count)
                continue
            }
            let shown = scalar.value < 0x20 ? "^" + String(UnicodeScalar(UInt8(scalar.value + 0x40)))
                : scalar.value == 0x7F ? "^?" : "<U+\(String(scalar.value, radix: 16, uppercase: true).leftPadded(to: 4))>"
            out.append(contentsOf: shown.unicodeScalars)
        }
        return String(out)
    }

    /// The SGR sequences ``styled(_:_:)`` writes, after the escape.
    static let ownStyles = (["0"] + [Style.bold, .dim, .red, .green, .yellow, .cyan].map(\.rawValue)).map { "[\($0)m" }

    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        (scalar.value < 0x20 && scalar != "\n" && scalar != "\t") || (0x7F...0x9F).contains(scalar.value)
    }

    /// Asks a yes/no question on standard error and reads the answer; only "y" or "yes" is a yes.
    static func confirm(_ question: String) -> Bool {
        guard mayAsk else { return false }
        FileHandle.standardError.write(Data(question.utf8))
        guard let answer = Swift.readLine(strippingNewline: true)?.trimmingCharacters(in: .whitespaces).lowercased() else { return false }
        return answer == "y" || answer == "yes"
    }

    /// Asks on standard error and reads one line (`nil` at end of input).
    static func ask(_ prompt: String) -> String? {
        guard mayAsk else { return nil }
        FileHandle.standardError.write(Data(prompt.utf8))
        return Swift.readLine(strippingNewline: true)
    }

    /// Reads a secret from the terminal without echo.
    static func readSecret(prompt: String) -> String? {
        guard mayAsk else { return nil }
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

extension String {
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}

/// Every `print` of this program goes through ``Console/terminalSafe(_:)`` (this shadows the standard
/// library's within the module). A value printed exactly as stored (`get --field` into a pipe) uses
/// `Swift.print`.
func print(_ items: Any..., separator: String = " ", terminator: String = "\n") {
    Swift.print(Console.terminalSafe(items.map { "\($0)" }.joined(separator: separator), keepingColors: Console.colorEnabled), terminator: terminator)
}
