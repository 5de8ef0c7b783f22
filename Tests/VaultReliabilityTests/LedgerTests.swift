import Testing
import VaultModels
import VaultSyncCore

/// The ledger's rules for names (`Ledger.lostNames`), pure: which names may be gone at the end of a run and which
/// must still be on an item or a backup. The fault scenario's missing name of seed 179694 (docs/RELIABILITY.md,
/// "Open") was a rule missing here, not data lost: renaming a backup replaces the name it kept.
@Suite("Ledger")
struct LedgerTests {
    static let backupOfY = BackupName.make(originalName: "item-y", losingVersionDate: WireDate(microsecondsSinceEpoch: 1_795_657_171_802_121))

    @Test("two devices renaming one item differently: both new names must stay, the one they showed may go")
    func concurrentRenames() {
        let ledger = Ledger(tag: "t")
        ledger.saved(name: "item-x", replacing: nil)
        ledger.renamed(from: "item-x", to: "item-y")
        ledger.saved(name: "item-y", replacing: "item-x")
        ledger.renamed(from: "item-x", to: "item-z")
        ledger.saved(name: "item-z", replacing: "item-x")
        #expect(ledger.lostNames(present: ["item-z", Self.backupOfY]).isEmpty)
        #expect(ledger.lostNames(present: ["item-z"]) == ["item-y"])
        #expect(ledger.lostNames(present: [Self.backupOfY]) == ["item-z"])
    }

    @Test("renaming a backup replaces the name it kept; deleting an item for good exempts its every name")
    func backupRenamedAndDeletedForGood() {
        let ledger = Ledger(tag: "t")
        ledger.saved(name: "item-y", replacing: nil)
        ledger.saved(name: "item-w", replacing: Self.backupOfY)
        #expect(ledger.lostNames(present: ["item-w"]).isEmpty)
        ledger.saved(name: "item-v", replacing: nil)
        ledger.renamed(from: "item-v", to: "item-u")
        ledger.saved(name: "item-u", replacing: "item-v")
        #expect(ledger.lostNames(present: ["item-w"]) == ["item-u"])
        ledger.deletedForGood(itemName: "item-u")
        #expect(ledger.lostNames(present: ["item-w"]).isEmpty)
    }
}
