import Foundation
import Testing
import VaultTestSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `--clip` through the built executable, on a real X clipboard: an X server of the test's own (Xvfb)
/// and xclip, which scripts/setup.sh installs for the tests (docs/CLI.md, "The clipboard").
@Suite("vaultsync --clip")
struct ClipboardTests {
    /// An X server on a display of its own, for one test.
    final class XServer: @unchecked Sendable {
        let display: String
        let pid: pid_t

        init?() {
            guard let xvfb = ["/usr/bin/Xvfb"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else { return nil }
            // A display number no other test (or desktop) uses: tried until one starts.
            for _ in 0..<20 {
                let number = Int.random(in: 200...9_000)
                if FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(number)") { continue }
                let null = open("/dev/null", O_RDWR)
                defer { close(null) }
                guard let pid = try? Spawn.start(xvfb, [":\(number)", "-nolisten", "tcp", "-screen", "0", "320x240x24"],
                                                 environment: ProcessInfo.processInfo.environment, folder: nil,
                                                 stdin: null, stdout: null, stderr: null) else { return nil }
                var started = false
                let deadline = Date().addingTimeInterval(60)
                while Date() < deadline {
                    if FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(number)") { started = true; break }
                    var status: Int32 = 0
                    if waitpid(pid, &status, WNOHANG) == pid { break }  // the display was taken: try another
                    usleep(10_000)
                }
                if started {
                    display = ":\(number)"
                    self.pid = pid
                    return
                }
                kill(pid, SIGKILL)
            }
            return nil
        }

        func stop() {
            kill(pid, SIGTERM)
            _ = Spawn.wait(pid)
        }
    }

    static func clipboard(_ display: String) async throws -> String {
        var environment = ProcessInfo.processInfo.environment
        environment["DISPLAY"] = display
        let result = try await runProcess(URL(fileURLWithPath: "/usr/bin/xclip"), ["-selection", "clipboard", "-o"], environment: environment)
        return result.stdout
    }

    static func setClipboard(_ text: String, _ display: String) async throws {
        var environment = ProcessInfo.processInfo.environment
        environment["DISPLAY"] = display
        // xclip stays behind to serve the selection: its output must not be a pipe this test reads to its end.
        _ = try await runProcess(URL(fileURLWithPath: "/bin/sh"), ["-c", "printf %s \"$0\" | xclip -selection clipboard >/dev/null 2>&1", text],
                                 environment: environment)
    }

    /// The detached clearers started for the profile `home` (their environment names it).
    static func clearers(of home: String) -> [pid_t] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap(pid_t.init).filter { pid in
            guard let command = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline"),
                  String(decoding: command, as: UTF8.self).contains("clipboard-clear"),
                  let environment = FileManager.default.contents(atPath: "/proc/\(pid)/environ") else { return false }
            return String(decoding: environment, as: UTF8.self).split(separator: "\0").contains { $0 == "VAULTSYNC_HOME=\(home)" }
        }
    }

    /// An X server, and a registered device on it holding the login "Bank" (password "bank-Pa55").
    static func deviceWithDisplay(username: String?) async throws -> (XServer, CLIScenario, CLIDevice) {
        let x = try #require(XServer(), "Xvfb is missing (scripts/setup.sh test installs it)")
        let scenario = try await CLIScenario.start()
        var device = try await scenario.device(register: true)
        device.environment["DISPLAY"] = x.display
        try await device.expect(["add", "login", "--name", "Bank"] + (username.map { ["--username", $0] } ?? []) + ["--password", "-"], stdin: "bank-Pa55\n")
        return (x, scenario, device)
    }

    /// Has the clearer `pid` set its SIGUSR1 handler yet (SigCgt in /proc/PID/status)?
    static func catchesWake(_ pid: pid_t) -> Bool {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("SigCgt:") }),
              let mask = UInt64(line.dropFirst("SigCgt:".count).trimmingCharacters(in: .whitespaces), radix: 16) else { return false }
        return mask & (1 << UInt64(SIGUSR1 - 1)) != 0
    }

    /// Ends the one clearer's wait now (SIGUSR1) and waits until it has looked and ended.
    static func clearNow(_ home: String) async -> Bool {
        guard let clearer = clearers(of: home).first, await waitUntil({ catchesWake(clearer) || clearers(of: home).isEmpty }) else { return false }
        kill(clearer, SIGUSR1)
        return await waitUntil { clearers(of: home).isEmpty }
    }

    @Test("get --clip copies the password and says so; the clipboard is emptied when its clear time comes; nothing on standard output")
    func copiesAndClears() async throws {
        let (x, scenario, device) = try await Self.deviceWithDisplay(username: "alice")
        defer {
            x.stop()
            Task { await scenario.finish([device]) }
        }
        // The clear comes when the test says (SIGUSR1 ends the clearer's wait), never by its clock.
        try await device.expect(["config", "clipboard-clear", "3600"])

        let copied = try await device.expect(["get", "Bank", "--clip"])
        #expect(copied.stdout.isEmpty, "\(copied)")
        #expect(copied.stderr.contains("the password of \"Bank\" copied to the clipboard (xclip); it is cleared in 3600 s"), "\(copied)")
        #expect(try await Self.clipboard(x.display) == "bank-Pa55")
        #expect(Self.clearers(of: device.home).count == 1, "a clear is scheduled")
        #expect(await Self.clearNow(device.home), "the clearer ends")
        #expect(try await Self.clipboard(x.display) == "", "emptied once its time was up")

        let username = try await device.expect(["get", "Bank", "--field", "username", "--clip"])
        #expect(username.stderr.contains("the username of \"Bank\" copied"), "\(username)")
        #expect(try await Self.clipboard(x.display) == "alice")
        #expect(await Self.clearNow(device.home))
        #expect(try await Self.clipboard(x.display) == "")
    }

    @Test("what was copied after the secret is left alone when the clear time comes; generate --clip copies too")
    func leavesLaterCopy() async throws {
        let (x, scenario, device) = try await Self.deviceWithDisplay(username: nil)
        defer {
            x.stop()
            Task { await scenario.finish([device]) }
        }
        try await device.expect(["config", "clipboard-clear", "3600"])
        try await device.expect(["get", "Bank", "--clip"])
        #expect(try await Self.clipboard(x.display) == "bank-Pa55")
        try await Self.setClipboard("copied later by the person", x.display)
        #expect(try await Self.clipboard(x.display) == "copied later by the person")
        #expect(await Self.clearNow(device.home))
        #expect(try await Self.clipboard(x.display) == "copied later by the person")

        let generated = try await device.expect(["generate", "--clip", "--length", "20"])
        #expect(generated.stdout.isEmpty && generated.stderr.contains("The password copied to the clipboard"), "\(generated)")
        #expect(try await Self.clipboard(x.display).count == 20)
        #expect(await Self.clearNow(device.home))
        #expect(try await Self.clipboard(x.display) == "")
    }

    @Test("no display or no tool: a clear error naming what to install, nothing copied, exit 64")
    func noClipboard() async throws {
        let scenario = try await CLIScenario.start()
        let device = try await scenario.device(register: true)
        defer { Task { await scenario.finish([device]) } }
        try await device.expect(["add", "login", "--name", "Bank", "--password", "-"], stdin: "bank-Pa55\n")
        let noDisplay = try await device.run(["get", "Bank", "--clip"], removing: ["DISPLAY", "WAYLAND_DISPLAY"])
        #expect(noDisplay.status == 64 && noDisplay.stderr.contains("no display to copy to"), "\(noDisplay)")
        #expect(!noDisplay.stdout.contains("bank-Pa55") && !noDisplay.stderr.contains("bank-Pa55"))
        let empty = temporaryDirectory("vaultsync-no-tools")
        let noTool = try await device.run(["get", "Bank", "--clip"], environment: ["DISPLAY": ":1", "PATH": empty], removing: ["WAYLAND_DISPLAY"])
        #expect(noTool.status == 64 && noTool.stderr.contains("no clipboard tool found on PATH; install xclip or xsel"), "\(noTool)")
        let unknown = try await device.run(["config", "clipboard-clear", "0"])
        #expect(unknown.status == 64 && unknown.stderr.contains("between 1 and 3600 seconds"), "\(unknown)")
    }
}
