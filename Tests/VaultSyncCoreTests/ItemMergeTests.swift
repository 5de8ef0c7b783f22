import Testing
import VaultCrypto
import VaultModels
@testable import VaultSyncCore

@Suite("Three-way merge of an item, field by field")
struct ItemMergeTests {
    static let t0 = WireDate(microsecondsSinceEpoch: 1_700_000_000_000_000)

    /// The version both sides started from.
    static func base() -> CipherView {
        var view = CipherView(type: .login, name: "GitHub")
        view.id = "item-1"
        view.notes = "work account"
        view.login = LoginView(uris: [LoginURIView(uri: "https://github.com"), LoginURIView(uri: "https://gist.github.com")],
                               username: "alice", password: "old-secret", totp: nil)
        view.login?.passwordRevisionDate = t0
        view.fields = [FieldView(type: .text, name: "team", value: "core"), FieldView(type: .hidden, name: "PIN", value: "1234")]
        view.revisionDate = t0
        return view
    }

    func merge(_ mine: CipherView, _ theirs: CipherView, winner: ItemMerge.Side = .mine) -> ItemMerge.Result {
        ItemMerge.merge(base: Self.base(), mine: mine, theirs: theirs, winner: winner)
    }

    @Test("edits of different fields merge: no conflict, both changes in the result")
    func disjoint() {
        var mine = Self.base()
        mine.name = "GitHub (work)"
        var theirs = Self.base()
        theirs.login?.uris.append(LoginURIView(uri: "https://github.example.com"))
        theirs.notes = nil
        for winner in [ItemMerge.Side.mine, .theirs] {
            let result = merge(mine, theirs, winner: winner)
            #expect(result.isClean)
            #expect(result.merged.name == "GitHub (work)")
            #expect(result.merged.notes == nil, "a field cleared on one side only is cleared")
            #expect(result.merged.login?.uris.map(\.uri) == ["https://github.com", "https://gist.github.com", "https://github.example.com"])
            #expect(result.takenFromMine == ["name"])
            #expect(Set(result.takenFromTheirs) == ["notes", "login.uri[https://github.example.com]"])
        }
    }

    /// A server signs each attachment's download address for a few minutes, so every answer carries a new one.
    @Test("an attachment whose download address alone differs is no change: nothing taken, nothing said")
    func attachmentAddress() {
        func attached(_ url: String) -> CipherView {
            var view = Self.base()
            var file = AttachmentView(id: "att-1", fileName: "scan.pdf", key: nil, size: "100")
            file.url = url
            view.attachments = [file]
            return view
        }
        var mine = attached("https://server/attachments/item-1/att-1?token=one")
        mine.name = "GitHub (work)"
        let theirs = attached("https://server/attachments/item-1/att-1?token=two")
        let result = ItemMerge.merge(base: attached("https://server/attachments/item-1/att-1?token=zero"), mine: mine, theirs: theirs, winner: .theirs)
        #expect(result.isClean && result.takenFromMine == ["name"] && result.takenFromTheirs.isEmpty, "\(result.difference.fields.map(\.field))")
        #expect(result.merged.attachments.map(\.id) == ["att-1"])
    }

    @Test("the same field changed differently is a conflict: the winner's value, and the other side's other changes still merged")
    func sameField() {
        var mine = Self.base()
        mine.login?.username = "alice@work"
        mine.name = "GitHub (work)"
        var theirs = Self.base()
        theirs.login?.username = "alice.w"
        theirs.favorite = true
        let mineWins = merge(mine, theirs, winner: .mine)
        #expect(!mineWins.isClean)
        #expect(mineWins.difference.conflicts.map(\.field) == ["login.username"])
        #expect(mineWins.merged.login?.username == "alice@work")
        #expect(mineWins.merged.favorite && mineWins.merged.name == "GitHub (work)")
        let theirsWin = merge(mine, theirs, winner: .theirs)
        #expect(theirsWin.merged.login?.username == "alice.w")
        #expect(theirsWin.merged.favorite && theirsWin.merged.name == "GitHub (work)")
    }

    @Test("both sides making the same change is no conflict")
    func sameChange() {
        var mine = Self.base()
        mine.login?.password = "new-secret"
        let result = merge(mine, mine)
        #expect(result.isClean)
        #expect(result.difference.fields.map(\.outcome) == [.same])
        #expect(result.merged.login?.password == "new-secret")
        #expect(result.merged.passwordHistory.map(\.password) == ["old-secret"], "the base password is kept in the history")
    }

    @Test("two different new passwords: whoever wins, both are in the result, and the old one in the history")
    func passwords() {
        var mine = Self.base()
        mine.login?.password = "mine-secret"
        mine.login?.passwordRevisionDate = Self.t0.adding(microseconds: 2_000_000)
        mine.passwordHistory = [PasswordHistoryView(password: "old-secret", lastUsedDate: Self.t0.adding(microseconds: 2_000_000))]
        var theirs = Self.base()
        theirs.login?.password = "theirs-secret"
        theirs.login?.passwordRevisionDate = Self.t0.adding(microseconds: 1_000_000)
        for winner in [ItemMerge.Side.mine, .theirs] {
            let result = merge(mine, theirs, winner: winner)
            #expect(!result.isClean)
            let password = result.merged.login?.password
            #expect(password == (winner == .mine ? "mine-secret" : "theirs-secret"))
            let history = result.merged.passwordHistory.map(\.password)
            #expect(Set(history) == [winner == .mine ? "theirs-secret" : "mine-secret", "old-secret"], "\(history)")
            #expect(!history.contains(password ?? ""), "the current password is not in its own history")
        }
    }

    @Test("a field cleared on one side and edited on the other is a conflict")
    func clearedAndEdited() {
        var mine = Self.base()
        mine.notes = nil
        var theirs = Self.base()
        theirs.notes = "personal account now"
        let result = merge(mine, theirs, winner: .theirs)
        #expect(result.difference.conflicts.map(\.field) == ["notes"])
        #expect(result.merged.notes == "personal account now")
    }

    @Test("URIs are merged by value: a reorder on one side and an addition on the other both survive")
    func reorderedURIs() {
        var mine = Self.base()
        mine.login?.uris.reverse()
        var theirs = Self.base()
        theirs.login?.uris.append(LoginURIView(uri: "https://api.github.com"))
        let result = merge(mine, theirs, winner: .mine)
        #expect(result.isClean)
        #expect(result.merged.login?.uris.map(\.uri) == ["https://gist.github.com", "https://github.com", "https://api.github.com"])
        // A URI removed on one side and left alone on the other is removed; its match type edited elsewhere is a conflict.
        var removed = Self.base()
        removed.login?.uris.removeFirst()
        var matched = Self.base()
        matched.login?.uris[0].match = .exact
        #expect(merge(removed, Self.base()).merged.login?.uris.map(\.uri) == ["https://gist.github.com"])
        #expect(merge(removed, matched).difference.conflicts.map(\.field) == ["login.uri[https://github.com]"])
    }

    @Test("custom fields by name: edits of different fields merge; a renamed field edited elsewhere is a conflict")
    func customFields() {
        var mine = Self.base()
        mine.fields[0].value = "platform"
        var theirs = Self.base()
        theirs.fields[1].value = "9999"
        theirs.fields.append(FieldView(type: .text, name: "floor", value: "3"))
        let clean = merge(mine, theirs)
        #expect(clean.isClean)
        #expect(clean.merged.fields.map { "\($0.name ?? "")=\($0.value ?? "")" } == ["team=platform", "PIN=9999", "floor=3"])

        var renamed = Self.base()
        renamed.fields[0].name = "squad"
        var edited = Self.base()
        edited.fields[0].value = "infra"
        let conflict = merge(renamed, edited, winner: .mine)
        #expect(conflict.difference.conflicts.map(\.field) == ["field[team]"])
        #expect(conflict.merged.fields.map { $0.name ?? "" } == ["squad", "PIN"])
    }

    @Test("a change of type is taken whole when the other side changed nothing, and is a conflict otherwise")
    func typeChange() {
        var note = Self.base()
        note.type = .secureNote
        note.login = nil
        note.secureNote = SecureNoteWire()
        let clean = merge(note, Self.base(), winner: .theirs)
        #expect(clean.isClean)
        #expect(clean.merged.type == .secureNote && clean.merged.login == nil)
        var edited = Self.base()
        edited.login?.username = "bob"
        let conflict = merge(note, edited, winner: .theirs)
        #expect(conflict.difference.conflicts.map(\.field) == ["type"])
        #expect(conflict.merged.type == .login && conflict.merged.login?.username == "bob")
    }

    @Test("card, identity and SSH-key fields, passkeys by credential id and attachments by id")
    func otherKinds() {
        var base = CipherView(type: .card, name: "Visa")
        base.card = CardView(values: [.number: "4111111111111111", .expMonth: "1", .expYear: "2027"])
        var mine = base
        mine.card?[.expYear] = "2030"
        var theirs = base
        theirs.card?[.code] = "123"
        let card = ItemMerge.merge(base: base, mine: mine, theirs: theirs, winner: .theirs)
        #expect(card.isClean)
        #expect(card.merged.card?.values == [.number: "4111111111111111", .expMonth: "1", .expYear: "2030", .code: "123"])
        #expect(card.difference.fields.first { $0.field == "card.code" }?.secret == true)

        var login = Self.base()
        let passkey = Fido2CredentialView(fields: PlainFields(values: [.credentialId: "cred-1", .rpId: "github.com"]), creationDate: Self.t0)
        var withPasskey = login
        withPasskey.login?.fido2Credentials = [passkey]
        var withAttachment = login
        withAttachment.attachments = [AttachmentView(id: "att-1", fileName: "recovery.txt", key: nil, size: "10")]
        let both = ItemMerge.merge(base: login, mine: withPasskey, theirs: withAttachment, winner: .theirs)
        #expect(both.isClean)
        #expect(both.merged.login?.fido2Credentials == [passkey])
        #expect(both.merged.attachments.map(\.id) == ["att-1"])
        login.attachments = [AttachmentView(id: "att-0", fileName: "old.txt", key: nil, size: "1")]
        var added = login
        added.attachments.append(AttachmentView(id: "att-2", fileName: "scan.pdf", key: nil, size: "100"))
        var addedElsewhere = login
        addedElsewhere.attachments.append(AttachmentView(id: "att-3", fileName: "key.pem", key: nil, size: "5"))
        #expect(ItemMerge.merge(base: login, mine: added, theirs: addedElsewhere, winner: .mine).merged.attachments.map(\.id) ==
                ["att-0", "att-2", "att-3"])
    }

    @Test("the comparison masks secrets unless asked, and lists nothing for an untouched item")
    func difference() {
        var mine = Self.base()
        mine.login?.password = "mine-secret"
        mine.fields[1].value = "0000"
        let result = merge(mine, Self.base())
        let password = result.difference.fields.first { $0.field == "login.password" }
        #expect(password?.mine == "mine-secret" && password?.secret == true)
        let masked = result.difference.masked.fields.first { $0.field == "login.password" }
        #expect(masked?.mine == "••••••" && masked?.base == "••••••")
        #expect(result.difference.masked.fields.first { $0.field == "field[PIN]" }?.mine == "••••••")
        #expect(merge(Self.base(), Self.base()).difference.fields.isEmpty)
    }

    @Test("whatever the edits, a side that changed nothing yields the other side's content, cleanly", arguments: 0..<6)
    func oneSided(variant: Int) {
        var changed = Self.base()
        switch variant {
        case 0: changed.name = "renamed"
        case 1: changed.login?.uris = []
        case 2: changed.fields.removeAll()
        case 3: changed.login?.totp = "otpauth://totp/x?secret=JBSWY3DPEHPK3PXP"
        case 4: changed.reprompt = .password
        default: changed.folderId = "folder-1"
        }
        for winner in [ItemMerge.Side.mine, .theirs] {
            let asMine = merge(changed, Self.base(), winner: winner)
            let asTheirs = merge(Self.base(), changed, winner: winner)
            #expect(asMine.isClean && asTheirs.isClean)
            #expect(ItemMerge.sameContent(asMine.merged, changed))
            #expect(ItemMerge.sameContent(asTheirs.merged, changed))
        }
    }

    @Test("the summary says in words what was merged, and who kept a field both changed")
    func summary() {
        var mine = Self.base()
        mine.login?.username = "alice@work"
        var theirs = Self.base()
        theirs.login?.uris.append(LoginURIView(uri: "https://github.example.com"))
        #expect(merge(mine, theirs).summary(itemName: "GitHub", winner: .mine)
                == "\"GitHub\": merged your username with the other device's new URI https://github.example.com.")
        mine.login?.password = "mine"
        theirs.login?.password = "theirs"
        theirs.fields[0].value = "platform"
        #expect(merge(mine, theirs, winner: .theirs).summary(itemName: "GitHub", winner: .theirs)
                == "\"GitHub\": merged your username with the other device's new URI https://github.example.com and field \"team\";"
                + " password changed on both: the other device's (newer) kept, the other version is in a backup copy.")
        // A URI the other device removed is said to be removed, not kept.
        var replaced = Self.base()
        replaced.login?.uris = [LoginURIView(uri: "https://github.example.com/login")]
        var renamed = Self.base()
        renamed.name = "GitHub (work)"
        let said = merge(renamed, replaced).summary(itemName: "GitHub (work)", winner: .mine)
        #expect(said.hasPrefix("\"GitHub (work)\": merged your name with the other device's ") && said.contains("new URI https://github.example.com/login")
                && said.contains("removal of URI https://github.com") && said.contains("removal of URI https://gist.github.com"), "\(said)")
        #expect(ItemMerge.describe(["card.number", "identity.ssn", "sshKey.privateKey", "login.passkey[x]", "attachment[a1]"])
                == "card number, identity ssn, SSH key privateKey, passkey and attachment")
    }

    @Test("compare lists the fields two versions differ in, by the merge's rules (a reordered URI list is the same)")
    func compare() {
        var a = Self.base()
        var b = Self.base()
        b.notes = "changed"
        b.login?.password = "other"
        b.login?.uris.reverse()
        #expect(ItemMerge.compare(a, b).fields.map(\.field) == ["notes", "login.password"])
        #expect(ItemMerge.compare(a, b).fields.first { $0.field == "login.password" }?.secret == true)
        a.fields[0].value = "platform"
        #expect(ItemMerge.compare(a, b).fields.map(\.field).contains("field[team]"))
        #expect(ItemMerge.compare(a, a).fields.isEmpty)
    }
}
