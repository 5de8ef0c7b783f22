import Foundation
import Testing
import VaultModels

/// The fast case-insensitive comparisons give Foundation's answers (the name lookup and search rules).
@Suite("Case-insensitive names and search")
struct CaseInsensitiveTests {
    @Test("ASCII text: the same answers as Foundation, over 20,000 random pairs (seeded)")
    func asciiAgreesWithFoundation() {
        var generator = SplitMix64(seed: 2026_11_26)  // the same pairs on every run
        let alphabet = Array("aAbBzZ-_. 19@[`{")
        func word(_ length: Int) -> String { String((0..<length).map { _ in alphabet.randomElement(using: &generator)! }) }
        for _ in 0..<10_000 {
            let (hay, needle) = (word(Int.random(in: 0...12, using: &generator)), word(Int.random(in: 0...3, using: &generator)))
            #expect(CaseInsensitive.contains(hay, needle) == hay.localizedCaseInsensitiveContains(needle), "\(hay) ∋ \(needle)")
            let other = word(hay.count)
            #expect(CaseInsensitive.equal(hay, other) == (hay.caseInsensitiveCompare(other) == .orderedSame), "\(hay) = \(other)")
            let candidate = Bool.random(using: &generator) ? other : word(Int.random(in: 0...12, using: &generator))
            #expect(CaseInsensitive.Equality(hay).matches(utf8: Array(candidate.utf8)[...]) == CaseInsensitive.equal(hay, candidate), "\(hay) = \(candidate)")
            #expect(CaseInsensitive.Containment(needle).found(inUTF8: Array(hay.utf8)[...]) == hay.localizedCaseInsensitiveContains(needle), "\(hay) ∋ \(needle)")
        }
    }

    @Test("text beyond ASCII is compared by Foundation's rules")
    func beyondASCII() {
        for (lhs, rhs) in [("Straße", "STRASSE"), ("Ärzte", "ärzte"), ("café", "CAFÉ"), ("Δ", "δ"), ("ǅ", "ǆ")] {
            #expect(CaseInsensitive.equal(lhs, rhs) == (lhs.caseInsensitiveCompare(rhs) == .orderedSame), "\(lhs) = \(rhs)")
            // Either side beyond ASCII, given as bytes: the same answer.
            #expect(CaseInsensitive.Equality(lhs).matches(utf8: Array(rhs.utf8)[...]) == CaseInsensitive.equal(lhs, rhs), "\(lhs) = \(rhs)")
            #expect(CaseInsensitive.Equality(rhs).matches(utf8: Array(lhs.utf8)[...]) == CaseInsensitive.equal(rhs, lhs), "\(rhs) = \(lhs)")
            #expect(CaseInsensitive.contains("x " + lhs + " y", rhs) == ("x " + lhs + " y").localizedCaseInsensitiveContains(rhs))
            #expect(CaseInsensitive.Containment(rhs).found(inUTF8: Array(("x " + lhs + " y").utf8)[...])
                    == ("x " + lhs + " y").localizedCaseInsensitiveContains(rhs), "\(lhs) ∋ \(rhs)")
        }
        #expect(CaseInsensitive.contains("Bank of Ärzte", "ärz"))
        #expect(!CaseInsensitive.contains("Bank", "Banks"))
    }
}
