import ArgumentParser
import Foundation
import ProcessSpawn
import VaultClient
import VaultCrypto
import VaultModels
import VaultSyncCore

struct ListCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List items (not in the trash or archive unless asked).",
        discussion: """
        Examples:
          vaultsync list
          vaultsync list --search bank --type login
          vaultsync list --folder Work --json
          vaultsync list --organization Family --collection Kids
          vaultsync list --trash
        """)
    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions
    @Option(help: "Only items whose name, username, URI or notes contain TEXT.") var search: String?
    @Option(help: "Only items in FOLDER (name or id; \"none\" for items without a folder).") var folder: String?
    @Option(help: "Only items of TYPE: login, note, card, identity, ssh-key.") var type: String?
    @Flag(help: "Items in the trash.") var trash = false
    @Flag(help: "Archived items.") var archived = false
    @Option(help: "Only items of ORGANIZATION (name or id; \"none\" for personal items).") var organization: String?
    @Option(help: "Only items in COLLECTION (name or id; with --organization when the name is in several).") var collection: String?

    func validate() throws {
        // An empty text listed nothing (RELIABILITY bug 95), as if the vault were empty.
        if search?.isEmpty == true {
            throw ValidationError("--search needs a text to look for; leave out --search to list every item")
        }
    }

    func execute(_ context: CLIContext) async throws {
        let wantedType = try type.map { try CipherType.named($0) }
        let folderFilter: String?? = try await folder.asyncMap { try await context.folderID($0) }
        let folderNames = try await context.folderNames()
        var damaged: [String] = []
        // What each listed item shows, and for --json or a search the whole item (its other fields).
        var rows: [(id: String, pending: PendingChange?, shown: ItemSummary, view: CipherView?)] = []
        // Organization and collection filters, resolved from the last sync (offline too).
        // Read only when asked: a plain `list` stays the one read it was.
        let organizationFilter: String?? = try await organization.asyncMap { reference -> String? in
            reference.lowercased() == "none" ? nil : try OrganizationCommand.resolve(reference, in: try await context.engine.organizations()).id
        }
        var collectionFilter: String?
        if let collection {
            let all = try await context.engine.collections().filter { candidate in
                organizationFilter.map { $0 == candidate.organizationID } ?? true
            }
            collectionFilter = try OrganizationCommand.one(collection, in: all, what: "collection", id: \.id, name: \.name).id
        }
        if output.json || search != nil || collectionFilter != nil {
            // A search decrypts only the items it finds, through the sealed name index (docs/ARCHITECTURE.md).
            let items = if let search { try await context.engine.items(matching: search) } else { try await context.loadItems() }
            for item in items {
                guard case .success(let view) = item.result else {
                    damaged.append(item.id)
                    continue
                }
                if let search, !Self.matches(view, search) { continue }
                rows.append((item.id, item.pending, view.summary, view))
            }
        } else {
            // The text list shows names, usernames and state: nothing else of any item is decrypted.
            for item in try await context.engine.itemSummaries() {
                guard case .success(let summary) = item.result else {
                    damaged.append(item.id)
                    continue
                }
                rows.append((item.id, item.pending, summary, nil))
            }
        }
        rows.removeAll { row in
            organizationFilter.map { row.shown.organizationId?.lowercased() != $0 } ?? false
                || collectionFilter.map { wanted in !(row.view?.collectionIds ?? []).contains { $0.lowercased() == wanted } } ?? false
                || row.shown.isDeleted != trash || (!trash && row.shown.isArchived != archived)
                || wantedType.map { row.shown.type != $0 } ?? false || folderFilter.map { row.shown.folderId != $0 } ?? false
        }
        if let search {
            // Best matches first: the name itself, then names starting with the text, then names holding it,
            // then the rest (a username, URI or note holds it); by name within each.
            let text = search.lowercased()
            func rank(_ name: String) -> Int {
                let name = name.lowercased()
                return name == text ? 0 : name.hasPrefix(text) ? 1 : name.contains(text) ? 2 : 3
            }
            rows.sort { (rank($0.shown.name), $0.shown.name.lowercased()) < (rank($1.shown.name), $1.shown.name.lowercased()) }
        } else {
            rows.sort { $0.shown.name.localizedCaseInsensitiveCompare($1.shown.name) == .orderedAscending }
        }
        if let first = damaged.first {
            let named = damaged.prefix(3).joined(separator: ", ") + (damaged.count > 3 ? ", …" : "")
            Console.note("\(damaged.count) item\(damaged.count == 1 ? " cannot be decrypted and is" : "s cannot be decrypted and are") not listed (\(named)); "
                + "one that is not yours (a server can plant items) can be deleted: vaultsync delete \(first) --permanent")
        }
        if output.json {
            Presentation.printJSON(.array(rows.compactMap { row in row.view.map { Presentation.itemJSON($0, folderNames: folderNames, pending: row.pending) } }))
            return
        }
        if rows.isEmpty {
            Console.note("no items")
            return
        }
        // One row per item, one cell per column, whatever the names hold.
        func cell(_ text: String) -> String { Presentation.oneLine(text).replacingOccurrences(of: "\t", with: " ") }
        func marks(_ row: (id: String, pending: PendingChange?, shown: ItemSummary, view: CipherView?)) -> String {
            var marks = row.shown.favorite ? "★" : ""
            if let pending = row.pending { marks += pending.metadata.state == .needsAttention ? "!" : "↑" }
            return marks
        }
        let cells = rows.map { row in
            [row.id, cell(row.shown.name), row.shown.type.name, cell(row.shown.username ?? ""),
             cell(row.shown.folderId.flatMap { folderNames[$0] } ?? ""), marks(row)]
        }
        guard Console.stdoutIsTTY else {
            // Piped: tab-separated, the whole id, no header (what scripts read).
            for row in cells { print(row.joined(separator: "\t")) }
            return
        }
        // At a terminal: aligned columns under a header; the id's first 8 characters (an id prefix any
        // command takes), ★ a favourite, ↑ a change waiting to be sent, ! one that needs attention.
        let shown = cells.map { [String($0[0].prefix(8))] + $0.dropFirst() }
        for line in Table.render(header: ["ID", "NAME", "TYPE", "USERNAME", "FOLDER", ""], rows: shown) { print(line) }
    }

    static func matches(_ view: CipherView, _ text: String) -> Bool {
        let needles = [view.name, view.login?.username, view.notes] + (view.login?.uris.map(\.uri) ?? [])
        return needles.contains { $0?.localizedCaseInsensitiveContains(text) ?? false }
    }
}

struct GetCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Show an item, or print one of its fields.",
        discussion: """
        ITEM is an id, an id prefix (6+ characters) or a name; failing those, a name's beginning or part (any case), then an address one of the item's URIs matches by its match setting (github.com, https://github.com/login). Several matches are listed with username, folder and URI; a second argument, the username, picks one. `--field totp` prints the current code.

        Examples:
          vaultsync get "Bank"
          vaultsync get githu
          vaultsync get github.com alice
          vaultsync get Bank --clip
          vaultsync get Bank --field totp
          vaultsync get 3f2a9c --json
        """)
    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions
    @Argument(help: "The item: an id, an id prefix, a name or part of one, or an address its URI matches (github.com, a full URL).") var item: String
    @Argument(help: "Among several items of that name, the one with this username (or one starting so).") var username: String?
    @Option(help: "Print only this field: password, username, totp, notes, uri, name, or any field by the label it is shown under (card.number, identity.email, sshKey.privateKey, field.NAME; the part after the dot alone when it names one field).") var field: String?
    @Flag(help: "Show secrets instead of masking them.") var reveal = false
    @Flag(help: "Copy the field (the password when no --field is given) to the clipboard instead of printing it; cleared after `config clipboard-clear` seconds (default 30) if it still holds it.")
    var clip = false

    func execute(_ context: CLIContext) async throws {
        // Only the names are decrypted to find the item, then only the item itself, not the whole vault
        // (docs/BENCHMARKS.md, P7).
        // A sync running beside this command may give the item its server id meanwhile: the engine follows it.
        let entry: VaultItem
        do {
            entry = try await context.engine.listedItem(id: try await context.itemID(item, username: username))
        } catch VaultError.itemNotFound {
            throw CLIError.notFound(what: "item", reference: item)
        }
        let view = try entry.result.get()
        if clip {
            let name = field ?? "password"
            guard let value = try Self.value(of: name, in: view) else { throw CLIError.missing("\"\(view.name)\" has no \(Self.label(name)).") }
            let seconds = context.settings.clipboardClear ?? Clipboard.defaultClearSeconds
            Console.note(try Clipboard.copyAndClear(value, what: "the \(Self.label(name)) of \"\(view.name)\"", clearAfter: seconds,
                                                    environment: context.environment))
            return
        }
        if let field {
            guard let value = try Self.value(of: field, in: view) else {
                throw CLIError.missing("\"\(view.name)\" has no \(Self.label(field)).")
            }
            if output.json {
                Presentation.printJSON(.object([field: .string(value)]))
            } else if Console.stdoutIsTTY {
                print(value)
            } else {
                Swift.print(value)  // into a pipe or a file: exactly as stored, for scripts
            }
            return
        }
        let folderNames = try await context.folderNames()
        if output.json {
            Presentation.printJSON(Presentation.itemJSON(view, folderNames: folderNames, pending: entry.pending))
            return
        }
        let fields = Presentation.fields(of: view, folderNames: folderNames)
        // One column for every value, however long the longest label ("card.cardholderName").
        let attachmentLabel = view.attachments.count > 1 ? "attachment[\(view.attachments.count)]" : "attachment"
        let width = max(10, (fields.map(\.label.count).max() ?? 0) + 2, view.attachments.isEmpty ? 0 : attachmentLabel.count + 2)
        func label(_ text: String) -> String { text.padding(toLength: width, withPad: " ", startingAt: 0) }
        print(label("id") + entry.id)
        for field in fields {
            print(label(field.label) + Presentation.oneLine(Presentation.masked(field, reveal: reveal)))
        }
        if view.viewPassword == false { print(label("password") + "(hidden by the organization: hide-passwords access)") }
        if !view.attachments.isEmpty {
            let attachments = try await context.engine.attachments(itemID: entry.id)
            for (index, attachment) in attachments.enumerated() {
                print(label(attachments.count == 1 ? "attachment" : "attachment[\(index + 1)]")
                      + "\(Presentation.oneLine(attachment.fileName)) (\(Presentation.attachmentSize(attachment)))"
                      + (attachment.pending ? ", waiting for the server" : ""))
            }
        }
        if let pending = entry.pending {
            print(label("pending") + "\(pending.metadata.kind.rawValue) since \(pending.metadata.createdDate.iso8601)\(pending.metadata.state == .needsAttention ? " — needs attention: \(pending.metadata.lastError ?? "")" : "")")
        }
    }
}

extension GetCommand {
    /// The value `--field` names: the common ones by name, the current TOTP code, else a field by its label.
    static func value(of field: String, in view: CipherView) throws -> String? {
        // The server does not send a hide-passwords member these secrets: say why there is none.
        if view.viewPassword == false, ["password", "privatekey", "sshkey.privatekey"].contains(field.lowercased())
            || field.lowercased().hasPrefix("field.") && (try? labelledField(field, of: view)) == nil {
            throw CLIError.missing("The organization hides the passwords of \"\(view.name)\" from you (hide-passwords access): the server does not send them.")
        }
        switch field {
        case "password": return view.login?.password
        case "username": return view.login?.username
        case "notes": return view.notes
        case "uri": return view.login?.uris.first?.uri
        case "name": return view.name
        case "fingerprint" where view.sshKey != nil:
            // An SSH key's fingerprint: the one stored, else the one its public key has.
            return view.sshKey?[.keyFingerprint] ?? view.sshKey?[.publicKey].flatMap(SSHKeyFingerprint.sha256(publicKey:))
        case "totp":
            guard let secret = view.login?.totp else { return nil }
            do {
                return try TOTP(secretOrURI: secret).code(at: Date())
            } catch {
                throw CLIError.usage("the item's TOTP secret cannot be used: \(error)")
            }
        default:
            return try labelledField(field, of: view)
        }
    }

    static func label(_ field: String) -> String { field == "totp" ? "TOTP" : field == "uri" ? "URI" : field }

    /// A field other than the login's six, by the label the item's view shows it under (`card.number`,
    /// `identity.email`, `sshKey.privateKey`, `field.NAME`, any case), or by the part after the dot when only one
    /// field of the item ends so (`number`, `pin`). Only the login's fields could be printed alone (RELIABILITY bug 91):
    /// a card's number, an SSH key or a custom field took `--json` and a JSON tool. `nil`: a field such items have,
    /// this one has not; a name no item can have is a usage error, as before.
    static func labelledField(_ name: String, of view: CipherView) throws -> String? {
        let fields = Presentation.fields(of: view, folderNames: [:]).filter { $0.label.contains(".") }
        let wanted = name.lowercased()
        func after(_ label: String) -> String { label.split(separator: ".", maxSplits: 1).last.map(String.init) ?? label }
        var found = fields.filter { $0.label.lowercased() == wanted }
        if found.isEmpty { found = fields.filter { after($0.label).lowercased() == wanted } }
        if found.count == 1 { return found[0].value }
        if found.count > 1 {
            throw CLIError.stated("\"\(view.name)\" has \(found.count) fields that \"\(name)\" names (\(found.map(\.label).joined(separator: ", "))): "
                                  + "give one of those labels, or use --json", .ambiguous)
        }
        let known = CardField.allCases.map { "card.\($0.rawValue)" } + IdentityField.allCases.map { "identity.\($0.rawValue)" }
            + SSHKeyField.allCases.map { "sshKey.\($0.rawValue)" }
        if wanted.hasPrefix("field."), wanted.count > "field.".count { return nil }
        if known.contains(where: { $0.lowercased() == wanted || after($0).lowercased() == wanted }) { return nil }
        throw CLIError.usage("""
            unknown field "\(name)" (password, username, totp, notes, uri, name, or a label `get` shows: card.number, \
            identity.email, sshKey.privateKey, field.NAME)
            """)
    }
}

struct AddCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: "Add an item (works offline: it is queued and synced later).",
        discussion: """
        TYPE is login, note, card, identity or ssh-key. With --json, the item comes from FILE ("-" for standard input) in the form `get --json` prints, and TYPE may be omitted.

        Examples:
          vaultsync add login --name GitHub --username alice --generate --uri https://github.com
          vaultsync add note --name "Wi-Fi" --notes "guest network" --hidden-field password=-
          vaultsync add card --name Visa --cardholder "Alice A" --number - --code -
          vaultsync add login --name VPN --username alice --password @vpn-password.txt --hidden-field pin=-
          vaultsync add --json item.json

        Secrets are never flag values (a command line is readable by every user of the machine and stays in the shell history): --password, --totp, --number, --code and --hidden-field NAME=… take where to read the value from: "-" for standard input (a no-echo prompt on a terminal; without a terminal, only one flag can read standard input) or @FILE for the file's first line (a hidden field takes the whole file). An empty value ("") clears the field.
        """)
    @OptionGroup var global: GlobalOptions
    @Argument(help: "login, note, card, identity or ssh-key.") var type: String?
    @OptionGroup var fields: ItemOptions
    @Option(name: .customLong("json"), help: ArgumentHelp("Read the whole item from FILE (\"-\": standard input).", valueName: "FILE"))
    var jsonFile: String?

    func validate() throws {
        try fields.checkSecretSources(jsonFromStandardInput: jsonFile == "-")
        try fields.checkURIs()
    }

    func execute(_ context: CLIContext) async throws {
        let secrets = try fields.readSecrets()
        var itemType: CipherType?
        var object: JSONObject?
        if let jsonFile {
            let parsed = try ItemJSONInput.parse(try ItemJSONInput.readSource(jsonFile))
            object = parsed
            itemType = try ItemJSONInput.type(of: parsed)
        }
        if let type {
            let match = try CipherType.named(type)
            if let itemType, itemType != match { throw CLIError.usage("TYPE \(type) differs from the JSON's type \(itemType.name)") }
            itemType = match
        }
        guard let itemType else { throw CLIError.usage("give the item TYPE (\(CipherType.supportedNames)) or --json FILE") }
        var view = CipherView(type: itemType, name: "")
        if let object { try await ItemJSONInput.apply(object, to: &view, context: context) }
        try await fields.apply(to: &view, secrets: secrets, context: context)
        guard !view.name.isEmpty else { throw CLIError.usage("an item needs a name (--name)") }
        let result = try await context.engine.addItem(view)
        print("Added \"\(result.value.name)\" (\(result.value.id ?? ""))")
        noteFolderGone(asked: view.folderId, stored: result.value.folderId, folder: fields.folder, item: result.value.name, outcome: result.outcome)
        if fields.generate, let password = result.value.login?.password, Console.stdoutIsTTY {
            Console.note("generated password: \(password)")
        }
        noteOutcome(result.outcome)
    }
}

struct EditCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        commandName: "edit",
        abstract: "Edit an item with flags, a JSON file, or $EDITOR (works offline).",
        discussion: """
        Only the given flags change the item. Secret flags (--password, --totp, --number, --code, --hidden-field NAME=…) take "-" (standard input; a no-echo prompt on a terminal) or @FILE, never the secret itself; "" clears the field. With no flags, the item opens in $EDITOR as JSON: the decrypted text lives in memory-backed storage (/dev/shm on Linux; the private per-user temporary folder on macOS) only while the editor runs, and the edit is autosaved as an encrypted draft before it is saved (`vaultsync drafts`). A changed password goes into the password history.

        Examples:
          vaultsync edit Bank --password -          # asks for it, without echo
          vaultsync edit Bank --password @new-password.txt
          vaultsync edit Bank --generate --length 32
          vaultsync edit Bank --json bank.json
          vaultsync edit Bank
        """)
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The item (id, id prefix or name).") var item: String
    @OptionGroup var fields: ItemOptions
    @Option(name: .customLong("json"), help: ArgumentHelp("Apply the keys of FILE's JSON (\"-\": standard input).", valueName: "FILE"))
    var jsonFile: String?
    @Option(name: .customLong("collection"),
            help: "Put an organization's item in exactly these collections (name or id; repeat for several; online only).")
    var collections: [String] = []

    func validate() throws {
        try fields.checkSecretSources(jsonFromStandardInput: jsonFile == "-")
        try fields.checkURIs()
    }

    func execute(_ context: CLIContext) async throws {
        let secrets = try fields.readSecrets()
        let id = try await context.itemID(item)
        let original = try await context.engine.item(id: id)
        if !collections.isEmpty {
            try await setCollections(of: original, context)
            if jsonFile == nil && fields.isEmpty { return }
        }
        var view = original
        let inEditor = jsonFile == nil && fields.isEmpty
        if let jsonFile {
            try await ItemJSONInput.apply(ItemJSONInput.parse(try ItemJSONInput.readSource(jsonFile)), to: &view, context: context)
        } else if inEditor {
            view = try await EditorSession.edit(view, context: context)
        }
        try await fields.apply(to: &view, secrets: secrets, context: context)
        // Values equal to the stored ones change nothing: nothing is saved or queued. Such an edit saved a new
        // revision (which could meet another device's change as a conflict) where the editor said "no changes"
        // (RELIABILITY bug 94). The decrypted item is compared before anything the save adds (a password's history
        // and revision date come only with a changed password).
        if view == original {
            Console.note("no changes: \"\(original.name)\" already has these values")
            return
        }
        // With the version it started from, so that a recovery merges with what changed elsewhere since.
        var draftID: String?
        if inEditor { draftID = try await context.engine.saveDraft(view, basedOn: original) }
        guard !view.name.isEmpty else { throw CLIError.usage("an item needs a name") }
        // Based on the item as read: a save of it by another vaultsync meanwhile is kept, not written over.
        let result = try await context.engine.updateItem(view, basedOn: original)
        if let draftID { try? await context.engine.discardDraft(id: draftID) }
        print("Saved \"\(result.value.name)\"")
        if view.folderId != original.folderId {
            noteFolderGone(asked: view.folderId, stored: result.value.folderId, folder: fields.folder, item: result.value.name, outcome: result.outcome)
        }
        if fields.generate, let password = result.value.login?.password, Console.stdoutIsTTY {
            Console.note("generated password: \(password)")
        }
        noteOutcome(result.outcome)
    }
}

extension EditCommand {
    /// `--collection`: the item's collections become exactly the given ones, in its organization.
    func setCollections(of item: CipherView, _ context: CLIContext) async throws {
        guard let organizationID = item.organizationId, let id = item.id else {
            throw CLIError.usage("\"\(Console.terminalSafe(item.name))\" is a personal item: `vaultsync share ITEM ORG --collection C` moves it into an organization")
        }
        let organization = try OrganizationCommand.resolve(organizationID, in: try await context.engine.organizations())
        let targets = try await CollectionCommand.resolveAll(collections, in: organization, context)
        try await context.engine.setCollections(itemID: id, collectionIDs: targets.map(\.id))
        print("\"\(Console.terminalSafe(item.name))\" is now in \(CollectionCommand.names(targets)).")
    }
}

/// `$EDITOR` on a decrypted template that never touches a persistent disk.
enum EditorSession {
    static func edit(_ view: CipherView, context: CLIContext) async throws -> CipherView {
        guard let editor = context.environment["VISUAL"] ?? context.environment["EDITOR"], !editor.isEmpty else {
            throw CLIError.usage("no flags given and no $EDITOR set; give flags (see `vaultsync edit --help`) or set EDITOR")
        }
        let directory = try editorDirectory(context: context)
        let path = "\(directory)/vaultsync-edit-\(UUID().uuidString).json"
        let folderNames = try await context.folderNames()
        let template = Presentation.itemJSON(view, folderNames: folderNames, pending: nil).prettyText
        defer { shred(path) }
        guard FileManager.default.createFile(atPath: path, contents: Data(template.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw CLIError.profile("cannot create \(path)")
        }
        // An edit that cannot be applied (a JSON typo, an unknown key) is never thrown away: the editor opens
        // again on the text as edited, the problem in comment lines on top, until it applies or the file is
        // saved unchanged (the user gives up: nothing is saved).
        var (shown, problem): (String, String?) = (template, nil)
        while true {
            try runEditor(editor, on: path, context: context)
            guard let edited = FileManager.default.contents(atPath: path) else { throw CLIError.aborted("the edited file is gone; nothing was saved") }
            let text = String(decoding: edited, as: UTF8.self)
            // Saved unchanged: with a problem on top, the person gives up (nothing is saved, exit 64); else the
            // item as it was, which `edit` takes for no changes (exit 0), as it does for flags with the stored values.
            guard text != shown else {
                if let problem { throw CLIError.aborted("\(problem); nothing was saved") }
                return view
            }
            let body = withoutProblem(text)
            var result = view
            do {
                try await ItemJSONInput.apply(try ItemJSONInput.parse(Array(body.utf8)), to: &result, context: context)
                return result
            } catch {
                problem = describe(error).message
                shown = withProblem(problem ?? "", body)
                FileHandle.standardError.write(Data("vaultsync: \(problem ?? ""); opening the editor again (save without changes to give up)\n".utf8))
                try Data(shown.utf8).write(to: URL(fileURLWithPath: path))
            }
        }
    }

    /// Runs the editor in the terminal's foreground: in this process's own group, with this process's
    /// terminal as its standard descriptors, as git runs its editor. A full-screen editor may then read
    /// and draw on the terminal (in a group of its own it was stopped there, SIGTTIN, on a blank screen),
    /// and the terminal's Ctrl-C reaches it as it reaches this process (which leaves it to the editor:
    /// `EditorSignals`). The terminal's settings are put back after, in case the editor ended without
    /// restoring them. An editor ended by a signal saves nothing, and the message names the signal.
    static func runEditor(_ editor: String, on path: String, context: CLIContext) throws {
        EditorSignals.begin(plaintext: path)
        defer { EditorSignals.end() }
        let terminal = TerminalSettings.save()
        defer { terminal?.restore() }
        let pid: pid_t
        do {
            pid = try Spawn.start("/bin/sh", ["-c", "\(editor) \"$1\"", "vaultsync-editor", path],
                                  environment: editorEnvironment(context.environment), newSession: false)
        } catch {
            throw CLIError.aborted("the editor could not be started (\(error)); nothing was saved")
        }
        EditorSignals.editorStarted(pid)
        let end = Spawn.waitRaw(pid)
        if end.signaled {
            throw CLIError.aborted("the editor was ended by \(Spawn.signalName(end.status)); nothing was saved")
        }
        // The shell reports an editor a signal ended as 128 + the signal.
        if end.status > 128, end.status < 128 + 32 {
            throw CLIError.aborted("the editor was ended by \(Spawn.signalName(end.status - 128)) (exit \(end.status)); nothing was saved")
        }
        guard end.status == 0 else { throw CLIError.aborted("the editor failed (exit \(end.status)); nothing was saved") }
    }

    static let problemPrefix = "// "

    /// The edited text with `problem` on top, as comment lines the next read drops.
    static func withProblem(_ problem: String, _ body: String) -> String {
        let lines = ["vaultsync could not apply this edit: " + problem, "Fix it and save to try again, or save it unchanged to give up (nothing is saved)."]
        return lines.flatMap { $0.split(separator: "\n", omittingEmptySubsequences: false) }.map { problemPrefix + $0 + "\n" }.joined() + body
    }

    /// The text without the comment lines on top (JSON has no comments; an item's JSON never starts with one).
    static func withoutProblem(_ text: String) -> String {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: false)[...]
        while let first = lines.first, first.hasPrefix("//") { lines = lines.dropFirst() }
        return lines.joined(separator: "\n")
    }

    /// The editor's environment: this process's without any VAULTSYNC_ variable. The editor (and every
    /// plugin, language server or shell it starts) needs none of them, and VAULTSYNC_PASSWORD,
    /// VAULTSYNC_SESSION and VAULTSYNC_FILE_PASSWORD open the vault or an export.
    static func editorEnvironment(_ environment: [String: String]) -> [String: String] {
        environment.filter { !$0.key.hasPrefix("VAULTSYNC_") }
    }

    /// Where the decrypted template lives while the editor runs. Linux: memory-backed storage (/dev/shm,
    /// or the per-user XDG_RUNTIME_DIR tmpfs). macOS has neither: the per-user temporary directory
    /// (`confstr(_CS_DARWIN_USER_TEMP_DIR)`, mode 0700, on the FileVault-encrypted system volume); the
    /// file is 0600 there too and overwritten before it is removed.
    static func editorDirectory(context: CLIContext) throws -> String {
        #if os(Linux)
        let candidates = ["/dev/shm", context.environment["XDG_RUNTIME_DIR"]].compactMap { $0 }
        let missing = "no memory-backed directory (/dev/shm or XDG_RUNTIME_DIR) for the editor; use flags or --json"
        #else
        let candidates = [FileManager.default.temporaryDirectory.path]
        let missing = "no private temporary directory for the editor; use flags or --json"
        #endif
        guard let directory = candidates.first(where: { FileManager.default.isWritableFile(atPath: $0) }) else {
            throw CLIError.usage(missing)
        }
        return directory
    }

    /// Overwrites and removes the plaintext template.
    static func shred(_ path: String) {
        if let handle = FileHandle(forWritingAtPath: path) {
            let size = (try? handle.seekToEnd()) ?? 0
            try? handle.seek(toOffset: 0)
            handle.write(Data(count: Int(size)))
            try? handle.close()
        }
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// What a signal does while `$EDITOR` has the decrypted item open.
///
/// A signal's default action ended this process there and left the plaintext file in /dev/shm until the next
/// reboot, unshredded (RELIABILITY bug 88): a Ctrl-C meant for the editor (the terminal sends it to both, and vim
/// ignores it), a closed terminal or SSH connection (SIGHUP), a SIGTERM. As git does for its editor, SIGINT and
/// SIGQUIT do nothing here while the editor runs: they are the editor's to act on. SIGTERM and SIGHUP overwrite
/// and remove the file, pass the signal on to the editor (which could otherwise write the text back) and exit
/// 128 + the signal, saving nothing. Only SIGKILL can still leave the file behind.
///
/// Handlers, not SIG_IGN: an ignored signal stays ignored in a child that does not reset it, a handled one is
/// back to its default action there (and `Spawn` resets every signal of the editor to its default). They run inside the signal, so they use only calls
/// that are safe there (open, fstat, write, unlink, kill, _exit) and what was prepared before they were set.
enum EditorSignals {
    nonisolated(unsafe) private static var path: UnsafeMutablePointer<CChar>?
    nonisolated(unsafe) private static var editor: pid_t = 0
    nonisolated(unsafe) private static var zeros: UnsafeMutablePointer<UInt8>?
    nonisolated(unsafe) private static var message: UnsafeMutablePointer<CChar>?

    static func begin(plaintext: String) {
        if zeros == nil {
            zeros = .allocate(capacity: 4096)
            zeros?.initialize(repeating: 0, count: 4096)
        }
        if message == nil { message = strdup("\nvaultsync: stopped by a signal; the edit was not saved, and its decrypted file was removed\n") }
        path = strdup(plaintext)
        editor = 0
        signal(SIGINT) { _ in }
        signal(SIGQUIT) { _ in }
        for number in [SIGTERM, SIGHUP] {
            signal(number) { number in
                if let path = EditorSignals.path {
                    let descriptor = open(path, O_WRONLY)
                    if descriptor >= 0 {
                        var status = stat()
                        var left = fstat(descriptor, &status) == 0 ? Int(status.st_size) : 0
                        while left > 0, let zeros = EditorSignals.zeros {
                            let written = write(descriptor, zeros, min(left, 4096))
                            if written <= 0 { break }
                            left -= written
                        }
                        close(descriptor)
                    }
                    unlink(path)
                }
                if EditorSignals.editor > 0 { kill(EditorSignals.editor, number) }
                if let message = EditorSignals.message { _ = write(2, message, strlen(message)) }
                _exit(128 + number)
            }
        }
    }

    static func editorStarted(_ pid: pid_t) {
        editor = pid
    }

    /// The editor is done: every signal does what it did before.
    static func end() {
        for number in [SIGINT, SIGQUIT, SIGTERM, SIGHUP] { signal(number, SIG_DFL) }
        editor = 0
        free(path)
        path = nil
    }
}

/// The terminal's settings (echo, line mode) as they were before a child took the terminal over, put back
/// after it ended: an editor that crashes or is killed leaves the terminal raw and silent otherwise.
struct TerminalSettings {
    let descriptor: Int32
    let saved: termios

    static func save(descriptor: Int32 = 0) -> TerminalSettings? {
        guard isatty(descriptor) == 1 else { return nil }
        var settings = termios()
        guard tcgetattr(descriptor, &settings) == 0 else { return nil }
        return TerminalSettings(descriptor: descriptor, saved: settings)
    }

    func restore() {
        var settings = saved
        _ = tcsetattr(descriptor, TCSADRAIN, &settings)
    }
}

/// One-argument state changes: delete, restore, archive, unarchive, favorite.
struct DeleteCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Move an item to the trash, or delete it for good with --permanent (works offline).",
        discussion: """
        Examples:
          vaultsync delete "Old router"
          vaultsync delete "Old router" --permanent
        """)
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The item (id, id prefix or name).") var item: String
    @Flag(help: "Delete for good (cannot be undone once synced).") var permanent = false

    func execute(_ context: CLIContext) async throws {
        let id = try await context.itemID(item, choice: permanent ? .any : .listed)
        // An item this device cannot decrypt (a server can plant one) can still be deleted, by its id.
        let current = try await context.engine.readableItem(id: id)
        let name = current.map { "\"\($0.name)\"" } ?? "the item \(id), which cannot be decrypted,"
        if !permanent, current?.isDeleted == true {
            return print("\(name) is in the trash already (`delete --permanent` deletes it for good).")
        }
        let outcome = permanent ? try await context.engine.permanentlyDeleteItem(id: id) : try await context.engine.softDeleteItem(id: id)
        print(permanent ? "Deleted \(name) permanently" : "Moved \(name) to the trash")
        noteOutcome(outcome)
    }
}

struct RestoreCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore", abstract: "Restore an item from the trash (works offline).",
        discussion: "Example:\n  vaultsync restore \"Old router\"")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The item (id, id prefix or name).") var item: String

    func execute(_ context: CLIContext) async throws {
        let id = try await context.itemID(item, choice: .inTrash)
        let current = try await context.engine.item(id: id)
        guard current.isDeleted else { return print("\"\(current.name)\" is not in the trash: nothing to restore.") }
        let outcome = try await context.engine.restoreItem(id: id)
        print("Restored \"\(current.name)\"")
        noteOutcome(outcome)
    }
}

struct ArchiveCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        commandName: "archive", abstract: "Archive an item (works offline).", discussion: "Example:\n  vaultsync archive \"Old job\"")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The item (id, id prefix or name).") var item: String

    func execute(_ context: CLIContext) async throws {
        let id = try await context.itemID(item)
        let current = try await context.engine.item(id: id)
        guard !current.isArchived else { return print("\"\(current.name)\" is archived already.") }
        // Archived in the trash, it showed in neither `list --archived` nor the vault (RELIABILITY bug 73).
        guard !current.isDeleted else {
            throw CLIError.usage("\"\(current.name)\" is in the trash: restore it first (`vaultsync restore`), then archive it")
        }
        noteOutcome(try await context.engine.setArchived(id: id, true))
        print("Archived \"\(current.name)\"")
    }
}

struct UnarchiveCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        commandName: "unarchive", abstract: "Take an item out of the archive (works offline).",
        discussion: "Example:\n  vaultsync unarchive \"Old job\"")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The item (id, id prefix or name).") var item: String

    func execute(_ context: CLIContext) async throws {
        let id = try await context.itemID(item, choice: .inArchive)
        let current = try await context.engine.item(id: id)
        guard current.isArchived else { return print("\"\(current.name)\" is not archived: nothing to take out.") }
        noteOutcome(try await context.engine.setArchived(id: id, false))
        print("Unarchived \"\(current.name)\"")
    }
}

struct MoveCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        commandName: "move", abstract: "Move an item to a folder (\"none\": out of any folder; works offline).",
        discussion: "Examples:\n  vaultsync move Bank Finance\n  vaultsync move Bank none")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The item (id, id prefix or name).") var item: String
    @Argument(help: "The folder (name or id; \"none\").") var folder: String

    func execute(_ context: CLIContext) async throws {
        let id = try await context.itemID(item)
        let folderID = try await context.folderID(folder)
        let current = try await context.engine.item(id: id)
        guard current.folderId != folderID else {
            return print("\"\(current.name)\" is in \(folderID == nil ? "no folder" : "\"\(folder)\"") already.")
        }
        let outcome = try await context.engine.moveItem(id: id, toFolder: folderID)
        let moved = try await context.engine.item(id: id)
        let lost = folderID != nil && moved.folderId == nil && outcome == .synced
        print("Moved \"\(moved.name)\" to \(folderID == nil || lost ? "no folder" : "\"\(folder)\"")")
        noteFolderGone(asked: folderID, stored: moved.folderId, folder: folder, item: moved.name, outcome: outcome)
        noteOutcome(outcome)
    }
}

struct FavoriteCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        commandName: "favorite", abstract: "Mark an item as favorite (--off to unmark; works offline).",
        discussion: "Examples:\n  vaultsync favorite Bank\n  vaultsync favorite Bank --off")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The item (id, id prefix or name).") var item: String
    @Flag(help: "Unmark.") var off = false

    func execute(_ context: CLIContext) async throws {
        let id = try await context.itemID(item)
        let current = try await context.engine.item(id: id)
        guard current.favorite == off else {
            return print(off ? "\"\(current.name)\" is not a favorite: nothing to change." : "\"\(current.name)\" is a favorite already.")
        }
        let outcome = try await context.engine.setFavorite(id: id, !off)
        print("\(off ? "Unmarked" : "Marked") \"\(try await context.engine.item(id: id).name)\" as favorite")
        noteOutcome(outcome)
    }
}
