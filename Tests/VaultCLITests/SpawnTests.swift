import Foundation
import Testing
import VaultTestSupport

@Suite("The CLI harness's children")
struct SpawnTests {
    @Test("a child gets its three standard descriptors and nothing else of the test process (no server socket, no other pipe)")
    func onlyStandardDescriptors() async throws {
        // A listening server in this process while the child runs: its socket must not reach the child.
        let server = LiveServer()
        try await server.start()
        let finished = try await runProcess(URL(fileURLWithPath: "/bin/ls"), ["/proc/self/fd"], environment: [:])
        let descriptors = finished.stdout.split(separator: "\n").compactMap { Int($0) }.sorted()
        // 0, 1, 2, and the one `ls` opens to read the folder.
        #expect(descriptors.count <= 4 && Array(descriptors.prefix(3)) == [0, 1, 2], "the child had \(descriptors)")
        await server.destroy()
    }
}
