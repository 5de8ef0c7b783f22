// The floor of VaultBench's agent rows (G1, docs/BENCHMARKS.md): the least a Swift program does to
// get an answer from a profile's agent — start (the Swift runtime alone, no Foundation), connect to
// the socket named by its one argument, send one request (`{"op":"status"}`), print the answer.

import AgentLink
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

func fail(_ text: String, _ status: Int32) -> Never {
    let bytes = Array(text.utf8)
    _ = bytes.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
    exit(status)
}

guard CommandLine.arguments.count == 2 else { fail("usage: VaultBenchSocketFloor SOCKET\n", 64) }
do {
    let fd = try AgentConnection.connect(CommandLine.arguments[1])
    let answer = try AgentConnection.exchange(fd, request: Array(#"{"op":"status"}"#.utf8))
    close(fd)
    print(String(decoding: answer, as: UTF8.self))
} catch {
    fail("VaultBenchSocketFloor: \(error)\n", 1)
}
