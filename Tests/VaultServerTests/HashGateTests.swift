import Foundation
import Testing
@testable import VaultServer

/// The limit on concurrent slow password hashes: one per core, the rest in arrival order.
@Suite("Slow hashes: one per core, in order")
struct HashGateTests {
    actor Log {
        var events: [String] = []
        func add(_ event: String) { events.append(event) }
    }

    @Test("a second caller waits until the first leaves; waiting callers go in arrival order")
    func limitAndOrder() async throws {
        let gate = HashGate(limit: 1)
        let log = Log()
        await gate.enter()
        let second = Task {
            await gate.enter()
            await log.add("second in")
            await gate.leave()
        }
        // The second is queued before the third (the gate is an actor: each enter is one step).
        while await gate.waitingCount < 1 { await Task.yield() }
        let third = Task {
            await gate.enter()
            await log.add("third in")
            await gate.leave()
        }
        while await gate.waitingCount < 2 { await Task.yield() }
        await log.add("first out")
        await gate.leave()
        await second.value
        await third.value
        #expect(await log.events == ["first out", "second in", "third in"])
        #expect(await gate.runningCount == 0)
    }

    @Test("slowHash gives the body's value and its error")
    func valuesAndErrors() async throws {
        struct Refused: Error {}
        #expect(try await slowHash { 6 * 7 } == 42)
        await #expect(throws: Refused.self) { try await slowHash { () throws -> Int in throw Refused() } }
    }
}
