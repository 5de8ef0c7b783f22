import VaultCrypto
import VaultModels

/// Three-way merge of one item, field by field, against the version both sides started from (issue
/// 24; docs/ARCHITECTURE.md will place it in the resolver). Pure: no keys, no I/O.
///
/// For every field the base, this device's version ("mine") and the server's ("theirs") are compared:
/// a field changed on one side only is taken from that side; changed on both sides to the same value,
/// that value; changed on both sides to different values, it is a true conflict and the winner's
/// value is taken (the caller decides the winner: the newer version, the existing rule) and the
/// caller keeps the loser as a backup copy. Whenever the two sides set different passwords, both end
/// up in the merged item's password history: nothing secret is dropped.
///
/// Lists are merged by identity, not position: URIs by their value, custom fields by name, passkeys
/// by credential id, attachments by id. The password history is the union of both sides'.
public enum ItemMerge {
    public enum Side: String, Sendable, Equatable {
        case mine, theirs
    }

    /// How one field came out.
    public enum Outcome: String, Sendable, Equatable, Codable {
        /// No side changed it.
        case unchanged
        /// Only this device changed it.
        case mine
        /// Only the server's version changed it.
        case theirs
        /// Both sides made the same change.
        case same
        /// Both sides changed it differently: the winner's value was taken.
        case conflict
    }

    /// One field of the comparison: its three values as text (masked unless asked), and the outcome.
    public struct FieldDifference: Sendable, Equatable, Codable {
        /// `name`, `login.password`, `login.uri[https://a.example]`, `field[PIN]`, `card.number`, …
        public var field: String
        public var base: String?
        public var mine: String?
        public var theirs: String?
        /// The field holds a secret (password, TOTP, card number, hidden field…).
        public var secret: Bool
        public var outcome: Outcome
    }

    /// The comparison the merge used (`ItemDifference` of issue 24): every field that differs anywhere.
    public struct ItemDifference: Sendable, Equatable, Codable {
        public var fields: [FieldDifference]
        /// The version both sides started from, as wire JSON (every field encrypted), when the comparison is kept
        /// with a backup: settling the conflict later takes only the fields that conflicted from the backup.
        public var baseVersion: String?

        public init(fields: [FieldDifference], baseVersion: String? = nil) {
            self.fields = fields
            self.baseVersion = baseVersion
        }

        /// The fields both sides changed differently.
        public var conflicts: [FieldDifference] { fields.filter { $0.outcome == .conflict } }

        /// The same comparison with secret values replaced by a mask (what an app shows by default).
        public var masked: ItemDifference {
            ItemDifference(fields: fields.map { field in
                guard field.secret else { return field }
                var copy = field
                copy.base = copy.base.map { _ in "••••••" }
                copy.mine = copy.mine.map { _ in "••••••" }
                copy.theirs = copy.theirs.map { _ in "••••••" }
                return copy
            }, baseVersion: baseVersion)
        }
    }

    public struct Result: Sendable, Equatable {
        /// The merged item (the winner's identity, dates and key; every field as merged).
        public var merged: CipherView
        public var difference: ItemDifference
        /// No field was changed differently on both sides: push `merged`, make no backup.
        public var isClean: Bool { difference.conflicts.isEmpty }
        /// Fields this device changed that the merged item took (for the summary: "merged your username").
        public var takenFromMine: [String] { difference.fields.filter { $0.outcome == .mine }.map(\.field) }
        /// Fields the server's version changed that the merged item took.
        public var takenFromTheirs: [String] { difference.fields.filter { $0.outcome == .theirs }.map(\.field) }

        /// What the merge did, in a person's words, for the sync summary and status: "\"GitHub\": merged
        /// your username with the other device's URI https://github.com." The winner names who kept a
        /// field both sides changed.
        public func summary(itemName: String, winner: Side) -> String {
            let mine = ItemMerge.describe(difference.fields.filter { $0.outcome == .mine }, side: .mine)
            let theirs = ItemMerge.describe(difference.fields.filter { $0.outcome == .theirs }, side: .theirs)
            var text = "\"\(itemName)\": "
            switch (mine.isEmpty, theirs.isEmpty) {
            case (false, false): text += "merged your \(mine) with the other device's \(theirs)"
            case (false, true): text += "merged your \(mine) into the other device's version"
            case (true, false): text += "kept the other device's \(theirs)"
            case (true, true): text += difference.conflicts.isEmpty ? "both versions agree" : "no field changed on one side only"
            }
            let conflicts = ItemMerge.describe(difference.conflicts.map(\.field))
            if !conflicts.isEmpty {
                text += "; \(conflicts) changed on both: \(winner == .mine ? "yours" : "the other device's") (newer) kept,"
                text += " the other version is in a backup copy"
            }
            return text + "."
        }
    }

    /// The fields in which two versions differ, by the merge's own rules (lists by identity, secrets
    /// flagged): `mine` and `theirs` are the two versions' values, every outcome `.theirs`. What a
    /// conflict review marks as different between a backup (`a`) and the live item (`b`).
    public static func compare(_ a: CipherView, _ b: CipherView) -> ItemDifference {
        merge(base: a, mine: a, theirs: b, winner: .theirs).difference
    }

    /// Field paths in words ("login.username" → "username", "login.uri[https://a]" → "URI https://a"),
    /// to follow "your" or "the other device's".
    public static func describe(_ fields: [String]) -> String {
        var words: [String] = []
        for field in fields {
            let word = describe(field)
            if !words.contains(word) { words.append(word) }
        }
        switch words.count {
        case 0: return ""
        case 1: return words[0]
        default: return words.dropLast().joined(separator: ", ") + " and " + words.last!
        }
    }

    /// The fields one side changed, in words; a field or list entry that side removed is "removal of …"
    /// (a URI deleted on the other device is not "kept"), and a list entry it added is "new …" (a URI
    /// replaced by another reads "removal of URI a, new URI b", not as two removals).
    static func describe(_ fields: [FieldDifference], side: Side) -> String {
        var words: [String] = []
        for field in fields {
            let value = side == .mine ? field.mine : field.theirs
            let removed = field.base != nil && value == nil
            let added = field.base == nil && value != nil && field.field.hasSuffix("]")
            let word = (removed ? "removal of " : added ? "new " : "") + describe(field.field)
            if !words.contains(word) { words.append(word) }
        }
        switch words.count {
        case 0: return ""
        case 1: return words[0]
        default: return words.dropLast().joined(separator: ", ") + " and " + words.last!
        }
    }

    static func describe(_ field: String) -> String {
        let (path, key): (String, String?) = {
            guard let open = field.firstIndex(of: "["), field.hasSuffix("]") else { return (field, nil) }
            return (String(field[..<open]), String(field[field.index(after: open)..<field.index(before: field.endIndex)]))
        }()
        switch path {
        case "login.username": return "username"
        case "login.password": return "password"
        case "login.totp": return "TOTP secret"
        case "login.autofillOnPageLoad": return "autofill setting"
        case "login.uri": return "URI \(key ?? "")"
        case "login.passkey": return "passkey"
        case "field": return "field \"\(key ?? "")\""
        case "attachment": return "attachment"
        case "reprompt": return "master password re-prompt"
        case "type": return "item type"
        default:
            let parts = path.split(separator: ".").map(String.init)
            guard parts.count == 2 else { return path }
            let group = ["card": "card", "identity": "identity", "sshKey": "SSH key"][parts[0]] ?? parts[0]
            return "\(group) \(parts[1])"
        }
    }

    /// Merges `mine` and `theirs`, both changed from `base`. `winner` decides true conflicts.
    public static func merge(base: CipherView, mine: CipherView, theirs: CipherView, winner: Side) -> Result {
        var merger = Merger(winner: winner)
        var merged = winner == .mine ? mine : theirs
        // A change of type is not merged field by field: the side that changed it is taken whole, and
        // if the other side changed anything too that is a conflict (its version goes to the backup).
        if mine.type != theirs.type {
            let changer: ItemMerge.Side = mine.type != base.type ? .mine : .theirs
            let other = changer == .mine ? theirs : mine
            let otherChanged = !sameContent(other, base) || (mine.type != base.type && theirs.type != base.type)
            let taken: ItemMerge.Side = otherChanged ? winner : changer
            merger.fields.append(FieldDifference(field: "type", base: base.type.name, mine: mine.type.name, theirs: theirs.type.name,
                                                 secret: false, outcome: otherChanged ? .conflict : (changer == .mine ? .mine : .theirs)))
            return Result(merged: taken == .mine ? mine : theirs, difference: ItemDifference(fields: merger.fields))
        }
        merged.name = merger.value("name", base.name, mine.name, theirs.name, render: { $0 })
        merged.notes = merger.text("notes", base.notes, mine.notes, theirs.notes)
        merged.folderId = merger.text("folder", base.folderId, mine.folderId, theirs.folderId)
        merged.favorite = merger.value("favorite", base.favorite, mine.favorite, theirs.favorite, render: { String($0) })
        merged.reprompt = merger.value("reprompt", base.reprompt, mine.reprompt, theirs.reprompt, render: { String($0.rawValue) })
        if let login = mergeLogin(base.login, mine.login, theirs.login, merger: &merger) { merged.login = login }
        merged.card = mergeGroup("card", base.card, mine.card, theirs.card, secret: [.number, .code], merger: &merger)
        merged.identity = mergeGroup("identity", base.identity, mine.identity, theirs.identity,
                                     secret: [.ssn, .passportNumber, .licenseNumber], merger: &merger)
        merged.sshKey = mergeGroup("sshKey", base.sshKey, mine.sshKey, theirs.sshKey, secret: [.privateKey], merger: &merger)
        merged.fields = merger.list("field", base.fields, mine.fields, theirs.fields, identity: { $0.name ?? "" },
                                    secret: { $0.type == .hidden }, render: { $0.value ?? "" })
        // Attachments are wrapped by the item key: another side's attachment is only carried over when
        // both sides have the same key (an item key does not change in an edit).
        if mine.itemKey == theirs.itemKey {
            // A download address is the server's, signed for minutes and new in every answer: not content.
            func content(_ list: [AttachmentView]) -> [AttachmentView] { list.map { var kept = $0; kept.url = nil; return kept } }
            merged.attachments = merger.list("attachment", content(base.attachments), content(mine.attachments), content(theirs.attachments),
                                             identity: { $0.id ?? "" }, secret: { _ in false }, render: { $0.fileName ?? "" })
        }
        merged.passwordHistory = passwordHistory(base: base, mine: mine, theirs: theirs, merged: merged)
        return Result(merged: merged, difference: ItemDifference(fields: merger.fields))
    }

    static func mergeLogin(_ base: LoginView?, _ mine: LoginView?, _ theirs: LoginView?, merger: inout Merger) -> LoginView? {
        guard mine != nil || theirs != nil else { return nil }
        let empty = LoginView()
        let b = base ?? empty, m = mine ?? empty, t = theirs ?? empty
        var login = (merger.winner == .mine ? mine : theirs) ?? empty
        login.username = merger.text("login.username", b.username, m.username, t.username)
        login.password = merger.text("login.password", b.password, m.password, t.password, secret: true)
        if login.password == m.password, m.password != b.password {
            login.passwordRevisionDate = m.passwordRevisionDate
        } else if login.password == t.password, t.password != b.password {
            login.passwordRevisionDate = t.passwordRevisionDate
        }
        login.totp = merger.text("login.totp", b.totp, m.totp, t.totp, secret: true)
        login.autofillOnPageLoad = merger.optional("login.autofillOnPageLoad", b.autofillOnPageLoad, m.autofillOnPageLoad,
                                               t.autofillOnPageLoad, render: { String($0) })
        login.uris = merger.list("login.uri", b.uris, m.uris, t.uris, identity: { $0.uri ?? "" }, secret: { _ in false },
                                 render: { "\($0.uri ?? "")\($0.match.map { " (match \($0.rawValue))" } ?? "")" })
        let passkeys = merger.list("login.passkey", b.fido2Credentials ?? [], m.fido2Credentials ?? [], t.fido2Credentials ?? [],
                                   identity: { $0.fields[.credentialId] ?? "" }, secret: { _ in true },
                                   render: { $0.fields[.rpId] ?? "" })
        login.fido2Credentials = passkeys.isEmpty && m.fido2Credentials == nil && t.fido2Credentials == nil ? nil : passkeys
        return login
    }

    static func mergeGroup<Field: SecretFieldName>(_ prefix: String, _ base: PlainFields<Field>?, _ mine: PlainFields<Field>?,
                                                   _ theirs: PlainFields<Field>?, secret: Set<Field>,
                                                   merger: inout Merger) -> PlainFields<Field>? {
        guard mine != nil || theirs != nil else { return nil }
        var group = (merger.winner == .mine ? mine : theirs) ?? PlainFields<Field>()
        for field in Field.allCases {
            group[field] = merger.text("\(prefix).\(field.rawValue)", base?[field], mine?[field], theirs?[field],
                                       secret: secret.contains(field))
        }
        return group
    }

    /// Whether two versions hold the same content (identity, dates, server state and permissions aside).
    public static func sameContent(_ a: CipherView, _ b: CipherView) -> Bool {
        var copy = b
        copy.id = a.id
        copy.revisionDate = a.revisionDate
        copy.creationDate = a.creationDate
        copy.deletedDate = a.deletedDate
        copy.archivedDate = a.archivedDate
        copy.edit = a.edit
        copy.viewPassword = a.viewPassword
        copy.organizationUseTotp = a.organizationUseTotp
        copy.permissions = a.permissions
        copy.collectionIds = a.collectionIds
        copy.object = a.object
        copy.unknown = a.unknown
        return copy == a
    }

    /// Both sides' histories, with every password the merged item no longer has added (the base's, and
    /// the losing one of a password conflict): newest first, each password once.
    static func passwordHistory(base: CipherView, mine: CipherView, theirs: CipherView, merged: CipherView) -> [PasswordHistoryView] {
        var entries = mine.passwordHistory + theirs.passwordHistory
        for side in [mine, theirs, base] {
            if let password = side.login?.password, !password.isEmpty, password != merged.login?.password,
               !entries.contains(where: { $0.password == password }) {
                let used = side.login?.passwordRevisionDate ?? side.revisionDate ?? WireDate(microsecondsSinceEpoch: 0)
                entries.append(PasswordHistoryView(password: password, lastUsedDate: used))
            }
        }
        var seen: Set<String> = []
        return entries.sorted { $0.lastUsedDate > $1.lastUsedDate }.filter { entry in
            guard entry.password != merged.login?.password else { return false }
            return seen.insert(entry.password).inserted
        }
    }
}

/// Records each field's comparison while picking its value.
struct Merger {
    let winner: ItemMerge.Side
    var fields: [ItemMerge.FieldDifference] = []

    init(winner: ItemMerge.Side) {
        self.winner = winner
    }

    /// The merged value of one field, recorded when any side differs.
    mutating func value<T: Equatable>(_ field: String, _ base: T, _ mine: T, _ theirs: T, secret: Bool = false,
                                      render: (T) -> String) -> T {
        pickOptional(field, Optional(base), Optional(mine), Optional(theirs), secret: secret, render: render)!
    }

    mutating func text(_ field: String, _ base: String?, _ mine: String?, _ theirs: String?, secret: Bool = false) -> String? {
        pickOptional(field, base, mine, theirs, secret: secret, render: { $0 })
    }

    mutating func optional<T: Equatable>(_ field: String, _ base: T?, _ mine: T?, _ theirs: T?, secret: Bool = false,
                                         render: (T) -> String) -> T? {
        pickOptional(field, base, mine, theirs, secret: secret, render: render)
    }

    mutating func pickOptional<T: Equatable>(_ field: String, _ base: T?, _ mine: T?, _ theirs: T?, secret: Bool,
                                                     render: (T) -> String) -> T? {
        let outcome: ItemMerge.Outcome
        let value: T?
        if mine == theirs {
            (outcome, value) = (mine == base ? .unchanged : .same, mine)
        } else if mine == base {
            (outcome, value) = (.theirs, theirs)
        } else if theirs == base {
            (outcome, value) = (.mine, mine)
        } else {
            (outcome, value) = (.conflict, winner == .mine ? mine : theirs)
        }
        if outcome != .unchanged {
            fields.append(ItemMerge.FieldDifference(field: field, base: base.map(render), mine: mine.map(render),
                                                    theirs: theirs.map(render), secret: secret, outcome: outcome))
        }
        return value
    }

    /// A list merged by each element's identity: an element added, removed or changed on one side
    /// follows that side; order: the winner's, then what the other side added, in its order.
    mutating func list<Element: Equatable>(_ field: String, _ base: [Element], _ mine: [Element], _ theirs: [Element],
                                           identity: (Element) -> String, secret: (Element) -> Bool,
                                           render: (Element) -> String) -> [Element] {
        func keyed(_ list: [Element]) -> [(key: String, element: Element)] {
            var counts: [String: Int] = [:]
            return list.map { element in
                let key = identity(element)
                counts[key, default: 0] += 1
                // The same identity twice (two fields named alike) is told apart by its rank.
                return (counts[key]! == 1 ? key : "\(key)#\(counts[key]!)", element)
            }
        }
        let b = keyed(base), m = keyed(mine), t = keyed(theirs)
        func find(_ list: [(key: String, element: Element)], _ key: String) -> Element? { list.first { $0.key == key }?.element }
        let (first, second) = winner == .mine ? (m, t) : (t, m)
        var order = first.map(\.key)
        for entry in second where !order.contains(entry.key) { order.append(entry.key) }
        for entry in b where !order.contains(entry.key) { order.append(entry.key) }
        var result: [Element] = []
        for key in order {
            let (be, me, te) = (find(b, key), find(m, key), find(t, key))
            let isSecret = [be, me, te].compactMap { $0 }.contains(where: secret)
            if let element = pickOptional("\(field)[\(key)]", be, me, te, secret: isSecret, render: render) {
                result.append(element)
            }
        }
        // A reorder alone (the same elements) follows the side that reordered.
        if Set(result.map(identity)) == Set(mine.map(identity)), result.count == mine.count, mine.map(identity) != base.map(identity),
           theirs.map(identity) == base.map(identity) {
            return mine.map { element in result.first { identity($0) == identity(element) } ?? element }
        }
        return result
    }
}
