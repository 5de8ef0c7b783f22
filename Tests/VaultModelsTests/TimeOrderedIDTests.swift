import Foundation
import Testing
@testable import VaultModels

/// New ids are UUIDv7 (RFC 9562): the time first, so that ids made one after another sort one after another.
@Suite("Time-ordered ids")
struct TimeOrderedIDTests {
    @Test("the layout gives RFC 9562's example UUIDv7 (appendix A.6) from its time and random bits")
    func knownAnswer() {
        let id = TimeOrderedID.make(milliseconds: 0x017F_22E2_79B0, random: (0xCC3, 0x18C4_DC0C_0C07_398F))
        #expect(id == "017f22e2-79b0-7cc3-98c4-dc0c0c07398f")
        #expect(TimeOrderedID.milliseconds(of: id) == 0x017F_22E2_79B0)
        // Random bits outside their fields never reach the version or the variant.
        #expect(TimeOrderedID.make(milliseconds: 0x017F_22E2_79B0, random: (.max, .max)) == "017f22e2-79b0-7fff-bfff-ffffffffffff")
    }

    @Test("ids made at later microseconds sort later as text, within one millisecond too; ids of one microsecond differ; other UUIDs carry no time")
    func ordering() {
        let start: Int64 = 1_764_300_000_000_000
        // Consecutive microseconds across several milliseconds (an import), then each microsecond three times.
        let times = (0..<3_000).map { start + Int64($0) } + (0..<600).map { start + 5_000 + Int64($0 / 3) }
        let ids = times.map { TimeOrderedID.make(microseconds: $0) }
        #expect(Set(ids).count == ids.count)
        for ((earlierTime, laterTime), (earlier, later)) in zip(zip(times, times.dropFirst()), zip(ids, ids.dropFirst())) where earlierTime < laterTime {
            #expect(earlier < later, "\(earlierTime) \(laterTime)")
        }
        #expect(ids.map { TimeOrderedID.milliseconds(of: $0)! } == times.map { $0 / 1000 })
        #expect(ids.allSatisfy { UUID(uuidString: $0) != nil && $0 == $0.lowercased() })
        #expect(TimeOrderedID.milliseconds(of: UUID().uuidString) == nil, "a version 4 id")
        #expect(TimeOrderedID.milliseconds(of: "not an id") == nil)
        // Times outside the 48 bits of milliseconds are clamped, never wrapped into another time.
        #expect(TimeOrderedID.milliseconds(of: TimeOrderedID.make(microseconds: -5)) == 0)
        #expect(TimeOrderedID.milliseconds(of: TimeOrderedID.make(microseconds: .max)) == (1 << 48) - 1)
    }
}
