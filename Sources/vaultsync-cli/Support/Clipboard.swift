import ArgumentParser
import Foundation
import ProcessSpawn
import VaultCrypto
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Copying a secret to the system clipboard with the platform's own tool, and clearing it later only
/// if it still holds what was copied (a person may have copied something else since).
///
/// The secret goes to the tool on a pipe, never in its arguments (which every user of the machine can
/// read in `ps`). The clear is a detached `vaultsync clipboard-clear` that is handed only the copied
/// text's SHA-256 on its standard input, waits, reads the clipboard back and compares digests.
struct Clipboard {
    /// A copy tool and its read-back counterpart.
    struct Tool: Equatable {
        var name: String
        var copy: [String]
        var paste: [String]
    }

    enum Problem: Error, Equatable {
        /// No display to copy to (Linux: neither WAYLAND_DISPLAY nor DISPLAY).
        case noDisplay
        /// A display, but none of the tools for it on PATH.
        case noTool(wanted: String)
        case failed(tool: String, status: Int32)
    }

    static let defaultClearSeconds = 30
    static let clearRange = 1...3_600

    /// The tool for this session: pbcopy on macOS; on Linux wl-copy under Wayland, else xclip or xsel under X.
    static func tool(environment: [String: String]) throws(Problem) -> Tool {
        #if os(macOS)
        return Tool(name: "pbcopy", copy: ["/usr/bin/pbcopy"], paste: ["/usr/bin/pbpaste"])
        #else
        let path = environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        func find(_ name: String) -> String? {
            path.split(separator: ":").map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
        }
        if environment["WAYLAND_DISPLAY"].map({ !$0.isEmpty }) == true, let copy = find("wl-copy"), let paste = find("wl-paste") {
            return Tool(name: "wl-copy", copy: [copy], paste: [paste, "--no-newline"])
        }
        guard environment["DISPLAY"].map({ !$0.isEmpty }) == true else {
            if environment["WAYLAND_DISPLAY"].map({ !$0.isEmpty }) == true { throw .noTool(wanted: "wl-clipboard (wl-copy)") }
            throw .noDisplay
        }
        if let xclip = find("xclip") {
            return Tool(name: "xclip", copy: [xclip, "-selection", "clipboard"], paste: [xclip, "-selection", "clipboard", "-o"])
        }
        if let xsel = find("xsel") {
            return Tool(name: "xsel", copy: [xsel, "--clipboard", "--input"], paste: [xsel, "--clipboard", "--output"])
        }
        throw .noTool(wanted: "xclip or xsel")
        #endif
    }

    /// Puts `text` on the clipboard; returns once the tool holds it.
    static func copy(_ text: String, with tool: Tool, environment: [String: String]) throws(Problem) {
        // xclip and wl-copy stay behind to serve the selection: in a session of their own (a closed
        // terminal does not take the copy away), their output nowhere (a caller reading this command's
        // output to its end is not kept waiting by them).
        let status: Int32
        do {
            let input = try Spawn.pipe()
            let null = open("/dev/null", O_WRONLY | O_CLOEXEC)
            defer {
                close(input.read)
                close(null)
            }
            let pid = try Spawn.start(tool.copy[0], Array(tool.copy.dropFirst()), environment: environment, stdin: input.read,
                                      stdout: null, stderr: null, newSession: true)
            Spawn.writeAll(Array(text.utf8), to: input.write)
            status = Spawn.wait(pid)
        } catch {
            throw .failed(tool: tool.name, status: -1)
        }
        guard status == 0 else { throw .failed(tool: tool.name, status: status) }
    }

    /// What the clipboard holds now, or nil when it cannot be read.
    static func contents(with tool: Tool, environment: [String: String]) -> String? {
        guard let output = try? Spawn.pipe() else { return nil }
        let null = open("/dev/null", O_RDWR | O_CLOEXEC)
        defer { close(null) }
        guard let pid = try? Spawn.start(tool.paste[0], Array(tool.paste.dropFirst()), environment: environment, stdin: null,
                                         stdout: output.write, stderr: null, newSession: true) else {
            close(output.read)
            close(output.write)
            return nil
        }
        close(output.write)
        let data = Spawn.readAll(output.read)
        return Spawn.wait(pid) == 0 ? String(decoding: data, as: UTF8.self) : nil
    }

    static func digest(_ text: String) -> String { TextDigest.sha256Hex(text) }

    /// Starts the detached clearer: after `seconds`, the clipboard is emptied if it still holds `text`.
    static func scheduleClear(of text: String, after seconds: Int, environment: [String: String]) throws {
        _ = try DetachedProcess.start(executable: DetachedProcess.currentExecutable(), arguments: ["clipboard-clear", "--after", String(seconds)],
                                      environment: environment.filter { !$0.key.hasPrefix("VAULTSYNC_PASSWORD") },
                                      standardInput: digest(text) + "\n", logPath: "/dev/null")
    }

    /// Copies `text` and schedules its clear; the note for standard error.
    static func copyAndClear(_ text: String, what: String, clearAfter seconds: Int, environment: [String: String]) throws -> String {
        let tool: Tool
        do {
            tool = try Self.tool(environment: environment)
            try copy(text, with: tool, environment: environment)
        } catch {
            throw CLIError.usage(describe(error))
        }
        try scheduleClear(of: text, after: seconds, environment: environment)
        return "\(what) copied to the clipboard (\(tool.name)); it is cleared in \(seconds) s if it still holds it"
    }

    static func describe(_ problem: Problem) -> String {
        switch problem {
        case .noDisplay:
            "--clip: no display to copy to (neither WAYLAND_DISPLAY nor DISPLAY is set); print the value instead"
        case .noTool(let wanted):
            "--clip: no clipboard tool found on PATH; install \(wanted)"
        case .failed(let tool, let status):
            "--clip: \(tool) could not copy (exit \(status)); nothing was copied"
        }
    }
}

/// `vaultsync clipboard-clear --after N`: started detached by `--clip`; reads the copied text's digest on
/// standard input, waits, and empties the clipboard only if it still holds that text. SIGUSR1 ends the
/// wait early (`pkill -USR1 -f clipboard-clear` clears now; the tests use it rather than wait).
struct ClipboardClearCommand: AsyncParsableCommand {
    nonisolated(unsafe) static var woken: sig_atomic_t = 0

    static let configuration = CommandConfiguration(
        commandName: "clipboard-clear",
        abstract: "Clear the clipboard after a delay if it still holds a copied secret (started by --clip).",
        shouldDisplay: false)
    @Option(help: "Seconds to wait.") var after: Int

    mutating func run() async throws {
        signal(SIGUSR1) { _ in ClipboardClearCommand.woken = 1 }
        let expected = (readLine(strippingNewline: true) ?? "").lowercased()
        guard expected.count == 64, Clipboard.clearRange.contains(after) else { throw ExitCode(64) }
        let environment = AgentHost.environment
        let tool = try Clipboard.tool(environment: environment)
        let deadline = ContinuousClock.now + .seconds(after)
        while ContinuousClock.now < deadline, Self.woken == 0 {
            try await Task.sleep(for: .milliseconds(100))
        }
        guard let now = Clipboard.contents(with: tool, environment: environment), Clipboard.digest(now) == expected else { return }
        try Clipboard.copy("", with: tool, environment: environment)
    }
}
