import Testing
import NIOCore
@testable import VaultAPI

/// The pace an answer's body must keep (HTTPTransport's `BodyPace`), on instants the test chooses.
@Suite("Answer body pace")
struct BodyPaceTests {
    /// RELIABILITY bug 67: the pace counted from the request's start, so a head that arrived just inside the
    /// deadline left its body no time: an answer given in time failed as "came too slowly" on a loaded machine.
    @Test("a head that came just inside the deadline still gives its body the full timeout")
    func countsFromTheHead() throws {
        let head = ContinuousClock.now
        let pace = BodyPace(timeout: .seconds(2), headArrived: head)
        // The first bytes 1.9 s after the head (3.8 s after a request whose head took 1.9 s).
        try pace.check(received: 300, at: head + .milliseconds(1_900))
    }

    @Test("a body that trickles is refused once the timeout and its size's allowance at 16 KiB/s are spent")
    func trickleRefused() throws {
        let head = ContinuousClock.now
        let pace = BodyPace(timeout: .seconds(2), headArrived: head)
        // 32 KiB earns 2 s on top of the 2 s grace.
        try pace.check(received: 32 * 1024, at: head + .milliseconds(3_990))
        #expect(throws: ServerCallError.self) { try pace.check(received: 32 * 1024, at: head + .milliseconds(4_010)) }
        #expect(throws: ServerCallError.self) { try pace.check(received: 10, at: head + .seconds(3)) }
    }
}
