import AgentLink
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// This process's environment, read from the C library (no Foundation here).
enum ProcessEnvironment {
    static func current() -> [String: String] {
        #if canImport(Darwin)
        let entries = _NSGetEnviron().pointee
        #else
        let entries = environ
        #endif
        var result: [String: String] = [:]
        var index = 0
        while let entry = entries[index] {
            let text = String(cString: entry)
            if let equals = text.firstIndex(of: "=") {
                let key = String(text[..<equals])
                // The first of two entries of one name wins, as getenv answers.
                if result[key] == nil { result[key] = String(text[text.index(after: equals)...]) }
            }
            index += 1
        }
        return result
    }
}

/// The command handed to the profile's agent, which runs it or declines it.
enum AgentFront {
    /// `VAULTSYNC_AGENT=off` keeps every command in its own process (the direct mode).
    static func mayUseAgent(_ environment: [String: String]) -> Bool {
        environment["VAULTSYNC_AGENT"]?.lowercased() != "off"
    }

    /// The command's exit status as the agent ran it; nil when the agent does not run (or is not there),
    /// or declines the command: then the command line runs it in this process.
    static func runInAgent(environment: [String: String]) -> Int32? {
        let folder = ProfileLocation.currentDirectory()
        let profile = ProfileLocation.directory(environment: environment, currentDirectory: { folder })
        let path = AgentLocation.socketPath(profileDirectory: profile, environment: environment)
        // No socket file, no agent: the common case costs one stat.
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        let fd: Int32
        do {
            fd = try AgentConnection.connect(path)
        } catch {
            return nil
        }
        defer { close(fd) }
        let request = runRequest(arguments: ProgramName.commandArguments(CommandLine.arguments), environment: environment, folder: folder)
        let answer: [UInt8]
        do {
            answer = try AgentConnection.exchange(fd, request: request, descriptors: [STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO])
        } catch .broken(.closed) {
            // The agent took the command and ended before answering (it was killed): the command may have
            // run, so it is not run a second time here.
            writeError("vaultsync: the agent ended while it ran this command; `vaultsync status` shows what the profile holds\n")
            return 1
        } catch {
            return nil
        }
        return exitStatus(in: answer)
    }

    /// `{"op":"run","decline":true,…}`: the agent runs the command only when it would run there (an
    /// unlocked agent, a command that asks nothing) and otherwise answers `{"declined":true}` untouched.
    static func runRequest(arguments: [String], environment: [String: String], folder: String) -> [UInt8] {
        var json = #"{"op":"run","decline":true,"arguments":["#
        json += arguments.map(JSONText.quoted).joined(separator: ",")
        json += #"],"environment":{"#
        json += environment.sorted { $0.key < $1.key }.map { JSONText.quoted($0.key) + ":" + JSONText.quoted($0.value) }.joined(separator: ",")
        json += #"},"folder":"# + JSONText.quoted(folder) + "}"
        return Array(json.utf8)
    }

    /// The `exit` of an answer `{"exit":N}`; nil for any other answer (declined, an error).
    static func exitStatus(in answer: [UInt8]) -> Int32? {
        let text = String(decoding: answer, as: UTF8.self)
        let prefix = #"{"exit":"#
        guard text.hasPrefix(prefix), text.hasSuffix("}") else { return nil }
        return Int32(text.dropFirst(prefix.count).dropLast())
    }

    static func writeError(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }
}

/// JSON strings, written by hand: the request is the only JSON this program writes.
enum JSONText {
    static func quoted(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}

/// `vaultsync-cli`, the command line itself, beside this program.
enum FullCommandLine {
    static let name = "vaultsync-cli"

    /// Replaces this process with `vaultsync-cli` and the same arguments; never returns.
    static func replaceThisProcess() -> Never {
        let path = (ownFolder() ?? "") + "/" + name
        execv(path, CommandLine.unsafeArgv)
        // Not beside this program (copied alone): the one on PATH, if any.
        execvp(name, CommandLine.unsafeArgv)
        AgentFront.writeError("vaultsync: \(name), which runs vaultsync's commands, is neither beside \(ownFolder() ?? "this program") nor on PATH: build both (swift build) or install both together\n")
        exit(1)
    }

    /// The folder of this executable, links resolved.
    static func ownFolder() -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        #if canImport(Darwin)
        var size = UInt32(buffer.count)
        guard _NSGetExecutablePath(&buffer, &size) == 0, let resolved = realpath(buffer, nil) else { return nil }
        defer { free(resolved) }
        let path = String(cString: resolved)
        #else
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        let path = String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        #endif
        guard let slash = path.lastIndex(of: "/") else { return nil }
        return String(path[..<slash])
    }
}
