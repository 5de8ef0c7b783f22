import AgentLink
import ArgumentParser
import CommandLineSupport
import Foundation
import VaultClient
import VaultModels

/// Bitwarden's CLI, `bw`, on this engine (docs/BW-COMPATIBILITY.md): its commands, flags, JSON, messages
/// and exit codes, so that scripts written for `bw` run unchanged, offline too. Reached as `bw` (a link
/// to the executable named so) or as `vaultsync bw …`.
enum BWSurface {
    /// The arguments after the program's name; invoked as `bw`, with `bw` in front (``ProgramName``).
    static func commandArguments() -> [String] { ProgramName.commandArguments(CommandLine.arguments) }
}

/// bw's global flags, taken by every bw command, and their environment variables (bw sets the one from the other).
struct BWOptions: ParsableArguments {
    @Option(name: .customLong("session"), help: "The session key (as BW_SESSION).") var session: String?
    @Flag(name: .customLong("raw"), help: "Print the bare value (as BW_RAW=true).") var raw = false
    @Flag(name: .customLong("pretty"), help: "Indent JSON with two spaces (as BW_PRETTY=true).") var pretty = false
    @Flag(name: .customLong("response"), help: "Print bw's {success, data} envelope (as BW_RESPONSE=true).") var response = false
    @Flag(name: .customLong("nointeraction"), help: "Never ask (as BW_NOINTERACTION=true).") var noInteraction = false
    @Flag(name: .customLong("quiet"), help: "Print nothing (as BW_QUIET=true).") var quiet = false
    @Flag(name: .customLong("cleanexit"), help: "Exit 0 after an error too (as BW_CLEANEXIT=true).") var cleanExit = false

    func wants(_ flag: Bool, _ variable: String, in environment: [String: String]) -> Bool {
        flag || environment[variable] == "true"
    }
}

/// `--passwordenv NAME` and `--passwordfile FILE`, where bw's `login` and `unlock` take the master password from.
struct BWPasswordOptions: ParsableArguments {
    @Option(name: .customLong("passwordenv"), help: "Read the master password from this environment variable.") var variable: String?
    @Option(name: .customLong("passwordfile"), help: "Read the master password from the first line of this file.") var file: String?
}

/// What a bw command answers, printed as bw prints it (``BWOutput``).
enum BWResponse {
    /// An object bw prints as JSON: an item, a folder.
    case object(JSONValue)
    /// `status`: printed as its inner object; the envelope calls it a template.
    case template(JSONValue)
    case list([JSONValue])
    /// Printed as it is; nothing when nil (`sync --last` before any sync).
    case string(String?)
    /// A title and a message; `raw` is what `--raw` prints instead (the session key of `unlock`).
    case message(title: String, message: String? = nil, raw: String? = nil)
}

/// A bw error: its message, printed in red on standard error (or in the envelope), exit 1.
struct BWFailure: Error {
    let message: String

    static let notFound = BWFailure(message: "Not found.")
    static let notLoggedIn = BWFailure(message: "You are not logged in.")
    static let locked = BWFailure(message: "Vault is locked.")
    static let parseError = BWFailure(message: "Error parsing the encoded request data.")

    static func multipleResults(_ ids: [String]) -> BWFailure {
        BWFailure(message: "More than one result was found. Try getting a specific object by `id` instead. The following objects were found:"
                  + ids.map { "\n" + $0 }.joined())
    }
}

/// bw's printing: the final line without a line end when the stream is not a terminal (so `$(bw get
/// password X)` and a pipe see the value alone), with one at a terminal; errors on standard error.
enum BWOutput {
    static func print(_ response: BWResponse, options: BWOptions, environment: [String: String]) {
        guard !options.wants(options.quiet, "BW_QUIET", in: environment) else { return }
        let pretty = options.wants(options.pretty, "BW_PRETTY", in: environment)
        if options.wants(options.response, "BW_RESPONSE", in: environment) {
            return write(json(.object(["success": .bool(true), "data": data(response)]), pretty: pretty), error: false)
        }
        switch response {
        case .object(let value), .template(let value): write(json(value, pretty: pretty), error: false)
        case .list(let values): write(json(.array(values), pretty: pretty), error: false)
        case .string(let text): if let text { write(text, error: false) }
        case .message(let title, let message, let raw):
            if options.wants(options.raw, "BW_RAW", in: environment) {
                if let raw { write(raw, error: false) }
            } else {
                write(title + (message.map { "\n" + $0 } ?? ""), error: false)
            }
        }
    }

    static func fail(_ failure: BWFailure, options: BWOptions, environment: [String: String]) -> Int32 {
        if !options.wants(options.quiet, "BW_QUIET", in: environment) {
            if options.wants(options.response, "BW_RESPONSE", in: environment) {
                write(json(.object(["success": .bool(false), "message": .string(failure.message)]),
                           pretty: options.wants(options.pretty, "BW_PRETTY", in: environment)), error: false)
            } else {
                let coloured = Console.stderrIsTTY && environment["NO_COLOR"].map(\.isEmpty) ?? true
                write(coloured ? "\u{1B}[91m" + failure.message + "\u{1B}[39m" : failure.message, error: true)
            }
        }
        return options.wants(options.cleanExit, "BW_CLEANEXIT", in: environment) ? 0 : 1
    }

    /// The envelope's `data`.
    static func data(_ response: BWResponse) -> JSONValue {
        switch response {
        case .object(let value): return value
        case .template(let value): return .object(["object": .string("template"), "template": value])
        case .list(let values): return .object(["object": .string("list"), "data": .array(values)])
        case .string(let text): return .object(["object": .string("string"), "data": text.map(JSONValue.string) ?? .null])
        case .message(let title, let message, let raw):
            var object: JSONObject = ["noColor": .bool(false), "object": .string("message"), "title": .string(title),
                                      "message": message.map(JSONValue.string) ?? .null]
            if let raw { object["raw"] = .string(raw) }
            return .object(object)
        }
    }

    /// JSON.stringify's text: compact, or indented by two spaces.
    static func json(_ value: JSONValue, pretty: Bool) -> String {
        guard pretty else { return value.jsonText }
        var text = ""
        value.writePretty(into: &text, indent: 0)
        return text
    }

    static func write(_ text: String, error: Bool) {
        let descriptor = error ? STDERR_FILENO : STDOUT_FILENO
        let line = isatty(descriptor) == 1 ? text + "\n" : text
        if error {
            FileHandle.standardError.write(Data(line.utf8))
        } else {
            // A failed write (a full disk) is seen at the end, as for every command (StandardOutput.finish).
            Swift.print(line, terminator: "")
        }
    }
}

/// A bw command: opens the profile with bw's session and password sources, unlocks when it needs the
/// vault (asking as bw does), answers, and prints bw's way; every failure is bw's message and exit 1.
protocol BWSubcommand: AsyncParsableCommand, AgentHostable {
    var bw: BWOptions { get }
    /// Whether the command needs the unlocked vault (bw's `exitIfLocked`); else only the profile.
    static var needsVault: Bool { get }
    /// `--passwordenv` / `--passwordfile` where the command takes them.
    var passwordSource: (variable: String?, file: String?) { get }
    func respond(_ context: CLIContext) async throws -> BWResponse
    /// Whether this invocation needs the unlocked vault (``needsVault`` unless its arguments say otherwise).
    var needsVaultNow: Bool { get }
}

extension BWSubcommand {
    static var needsVault: Bool { true }
    var runsInAgent: Bool { false }
    var needsKeys: Bool { needsVaultNow }
    var needsVaultNow: Bool { Self.needsVault }
    var passwordSource: (variable: String?, file: String?) { (nil, nil) }

    mutating func run() async throws {
        var environment = AgentHost.environment
        if let session = bw.session ?? environment["BW_SESSION"], !session.isEmpty { environment["VAULTSYNC_SESSION"] = session }
        if let variable = passwordSource.variable {
            environment["VAULTSYNC_PASSWORD"] = environment[variable] ?? ""
        }
        var options = GlobalOptions()
        options.passwordFile = passwordSource.file
        let status: Int32
        do {
            let context = try CLIContext.open(options, environment: environment)
            do {
                // In the agent, once it is unlocked, its keys serve the command (as for vaultsync's own).
                let unlockedAgent = AgentHost.current != nil ? !(await context.engine.isLocked) : false
                if needsVaultNow, !unlockedAgent { try await BWUnlocking.unlock(context, options: bw) }
                BWOutput.print(try await respond(context), options: bw, environment: environment)
                status = 0
            } catch {
                status = BWOutput.fail(BWErrors.failure(for: error), options: bw, environment: environment)
            }
            if AgentHost.current == nil { await context.engine.shutdown() }
        } catch {
            status = BWOutput.fail(BWErrors.failure(for: error), options: bw, environment: environment)
        }
        if status != 0 { throw ExitCode(status) }
    }
}

enum BWUnlocking {
    /// bw's `exitIfNotAuthed` and `exitIfLocked`: logged in, then unlocked by the session, a given password,
    /// or (unless `--nointeraction`) the master password asked on the terminal or read from a pipe.
    static func unlock(_ context: CLIContext, options: BWOptions) async throws {
        guard context.settings.email != nil else { throw BWFailure.notLoggedIn }
        if options.wants(options.noInteraction, "BW_NOINTERACTION", in: context.environment) {
            guard context.passwordGiven || context.environment["VAULTSYNC_SESSION"].map({ !$0.isEmpty }) == true else { throw BWFailure.locked }
            try await context.unlock(prompt: false)
        } else {
            try await context.unlock()
        }
    }
}

enum BWErrors {
    static func failure(for error: any Error) -> BWFailure {
        switch error {
        case let failure as BWFailure: return failure
        case VaultError.wrongPassword: return BWFailure(message: "Invalid master password.")
        case VaultError.loginRefused: return BWFailure(message: "Username or password is incorrect. Try again.")
        case VaultError.sessionInvalid: return .locked
        case CLIError.notLoggedIn: return .notLoggedIn
        case CLIError.locked, CLIError.lockedBecause: return .locked
        default: return BWFailure(message: describe(error).message)
        }
    }
}
