import ArgumentParser
import Foundation
import VaultClient
import VaultCrypto
import VaultExchange
import VaultModels

/// `bw …` / `vaultsync bw …` (docs/BW-COMPATIBILITY.md).
struct BWCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bw",
        abstract: "Bitwarden's CLI (bw): its commands, flags, JSON and messages, on this offline-first engine.",
        discussion: """
        For scripts written for bw. A link named bw to vaultsync runs these as `bw …`. What is matched and where it differs: docs/BW-COMPATIBILITY.md.

        Examples:
          export BW_SESSION="$(vaultsync bw unlock --raw)"
          vaultsync bw get password GitHub
          vaultsync bw list items --search git | jq '.[].name'
          echo '{"type":1,"name":"New","login":{"username":"me"}}' | vaultsync bw encode | vaultsync bw create item
        """,
        subcommands: [
            BWStatusCommand.self, BWUnlockCommand.self, BWLockCommand.self, BWSyncCommand.self, BWListCommand.self, BWGetCommand.self,
            BWCreateCommand.self, BWEditCommand.self, BWDeleteCommand.self, BWRestoreCommand.self, BWEncodeCommand.self, BWGenerateCommand.self,
            BWLoginCommand.self, BWLogoutCommand.self, BWConfigCommand.self, BWMoveCommand.self, BWServeCommand.self,
        ]
    )
}

/// Items as bw finds and orders them.
enum BWItems {
    /// bw's test for an id: lower-case 8-4-4-4-12 hexadecimal (then only that id is looked up, never a search).
    static func isGUID(_ text: String) -> Bool { UUIDText.isUUID(text, lowercaseOnly: true) }

    /// Every item this device can read, in bw's order: by name (any case, numbers by value), then username.
    static func all(_ context: CLIContext) async throws -> [CipherView] {
        sorted(try await context.engine.items().compactMap { try? $0.result.get() })
    }

    static func sorted(_ items: [CipherView]) -> [CipherView] {
        items.sorted { first, second in
            let order = first.name.compare(second.name, options: [.caseInsensitive, .numeric, .diacriticInsensitive])
            if order != .orderedSame { return order == .orderedAscending }
            return (first.login?.username ?? "") < (second.login?.username ?? "")
        }
    }

    /// bw's basic search: the name, a login's username or a URI holds the text (any case), or the text
    /// (8 characters or more) begins the id; items in the trash only with `trash`.
    /// `query` as bw compares it: trimmed, lower-cased (``normalized(_:)``, once per search).
    static func matches(_ item: CipherView, _ query: String, trash: Bool) -> Bool {
        guard (item.deletedDate != nil) == trash else { return false }
        guard !query.isEmpty else { return true }
        if item.name.lowercased().contains(query) { return true }
        if query.count >= 8, let id = item.id, id.lowercased().hasPrefix(query) { return true }
        if let username = item.login?.username, username.lowercased().contains(query) { return true }
        return item.login?.uris.contains { $0.uri?.lowercased().contains(query) ?? false } ?? false
    }

    /// The items a search finds: the name index narrows them (names, usernames, notes, URIs), then bw's rule.
    static func normalized(_ query: String) -> String { query.trimmingCharacters(in: .whitespaces).lowercased() }

    static func search(_ query: String, trash: Bool, context: CLIContext) async throws -> [CipherView] {
        let trimmed = normalized(query)
        var found = try await context.engine.items(matching: trimmed).compactMap { try? $0.result.get() }
        if trimmed.count >= 8 {
            let known = Set(found.compactMap(\.id))
            for candidate in try await context.engine.items(idPrefix: trimmed) where !known.contains(candidate.id) {
                if let view = try? await context.engine.item(id: candidate.id) { found.append(view) }
            }
        }
        return sorted(found.filter { matches($0, trimmed, trash: trash) })
    }

    /// `bw get`'s rule: an id is looked up alone (the trash included); anything else is searched (not in
    /// the trash); several matches are narrowed by `wanted` (those that have the asked-for field), and
    /// still several (or none of them with it) is an error listing the ids.
    static func find(_ reference: String, context: CLIContext, wanted: ((CipherView) -> Bool)? = nil) async throws -> CipherView {
        let reference = reference.lowercased()
        if isGUID(reference) {
            do {
                return try await context.engine.item(id: reference)
            } catch VaultError.itemNotFound {
                throw BWFailure.notFound
            }
        }
        guard !reference.trimmingCharacters(in: .whitespaces).isEmpty else { throw BWFailure.notFound }
        let found = try await search(reference, trash: false, context: context)
        if found.count == 1 { return found[0] }
        guard !found.isEmpty else { throw BWFailure.notFound }
        let narrowed = wanted.map { found.filter($0) } ?? found
        if narrowed.count == 1 { return narrowed[0] }
        throw BWFailure.multipleResults(narrowed.compactMap(\.id))
    }

    static func json(_ item: CipherView) -> JSONValue { BitwardenJSON.item(item, shape: .command) }

    static func folderJSON(id: String?, name: String) -> JSONValue {
        .object(JSONObject(entries: [
            .init(key: "object", value: .string("folder")),
            .init(key: "id", value: id.map(JSONValue.string) ?? .null),
            .init(key: "name", value: .string(name)),
        ]))
    }

    static func organizationJSON(_ organization: OrganizationSummary) -> JSONValue {
        .object(JSONObject(entries: [
            .init(key: "object", value: .string("organization")), .init(key: "id", value: .string(organization.id)),
            .init(key: "name", value: .string(organization.name)), .init(key: "status", value: .int(organization.status)),
        ]))
    }

    /// bw's organization member: `{object: "org-member", email, name, id, status, type, twoFactorEnabled}`
    /// (the server's list does not say whether a member uses two-step login: `false`).
    static func memberJSON(_ member: OrganizationMember) -> JSONValue {
        .object(JSONObject(entries: [
            .init(key: "object", value: .string("org-member")), .init(key: "email", value: .string(member.email)),
            .init(key: "name", value: member.name.map(JSONValue.string) ?? .null), .init(key: "id", value: .string(member.id)),
            .init(key: "status", value: .int(member.status)), .init(key: "type", value: .int(member.type)),
            .init(key: "twoFactorEnabled", value: .bool(false)),
        ]))
    }

    /// bw's collection: `{object, id, organizationId, name, externalId}`.
    static func collectionJSON(_ collection: CollectionSummary) -> JSONValue {
        .object(JSONObject(entries: [
            .init(key: "object", value: .string("collection")), .init(key: "id", value: .string(collection.id)),
            .init(key: "organizationId", value: .string(collection.organizationID)),
            .init(key: "name", value: collection.name.map(JSONValue.string) ?? .null),
            .init(key: "externalId", value: collection.externalID.map(JSONValue.string) ?? .null),
        ]))
    }

    /// bw's lookup of a named object: an id alone when `reference` is one, else the names that contain it; one, or an error.
    static func one<Object>(_ reference: String, in objects: [Object], id: (Object) -> String, name: (Object) -> String?) throws -> Object {
        let wanted = reference.lowercased()
        if isGUID(wanted) {
            guard let found = objects.first(where: { id($0) == wanted }) else { throw BWFailure.notFound }
            return found
        }
        let found = objects.filter { (name($0) ?? "").lowercased().contains(wanted) }
        guard !found.isEmpty else { throw BWFailure.notFound }
        guard found.count == 1 else { throw BWFailure.multipleResults(found.map(id)) }
        return found[0]
    }

    /// bw's folders: by name, then "No Folder" (id null) last.
    static func folders(_ context: CLIContext) async throws -> [(id: String?, name: String)] {
        let named = try await context.engine.folders().compactMap { folder in folder.id.map { (id: Optional($0), name: folder.name) } }
        return named.sorted { $0.name.compare($1.name, options: [.caseInsensitive, .numeric]) == .orderedAscending } + [(nil, "No Folder")]
    }
}

struct BWStatusCommand: BWSubcommand {
    static let configuration = CommandConfiguration(commandName: "status", abstract: "bw's status JSON: server, last sync, account, locked or not.")
    static var needsVault: Bool { false }
    @OptionGroup var bw: BWOptions

    func respond(_ context: CLIContext) async throws -> BWResponse {
        guard context.settings.email != nil else { return await Self.status(context, unlocked: false) }
        // Unlocked: what bw means by it, a session (or a given password) that opens the vault, asking nothing.
        return await Self.status(context, unlocked: (try? await context.unlock(prompt: false)) != nil)
    }

    /// bw's status object, for a vault that is `unlocked` or not.
    static func status(_ context: CLIContext, unlocked: Bool) async -> BWResponse {
        var entries: [JSONObject.Entry] = [.init(key: "serverUrl", value: context.settings.server.map(JSONValue.string) ?? .null)]
        guard let email = context.settings.email else {
            entries.append(.init(key: "lastSync", value: .null))
            entries.append(.init(key: "status", value: .string("unauthenticated")))
            return .template(.object(JSONObject(entries: entries)))
        }
        let status = try? await context.engine.status()
        entries.append(.init(key: "lastSync", value: BitwardenJSON.date(status?.lastSync)))
        entries.append(.init(key: "userEmail", value: .string(email)))
        if let userID = await context.engine.currentUserID { entries.append(.init(key: "userId", value: .string(userID))) }
        entries.append(.init(key: "status", value: .string(unlocked ? "unlocked" : "locked")))
        return .template(.object(JSONObject(entries: entries)))
    }
}

struct BWUnlockCommand: BWSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "unlock", abstract: "Unlock and print the session key (BW_SESSION); --raw prints the key alone.")
    static var needsVault: Bool { false }
    @OptionGroup var bw: BWOptions
    @Argument(help: "The master password (bw takes it here; safer: --passwordenv or --passwordfile).") var password: String?
    @OptionGroup var passwordOptions: BWPasswordOptions
    @Flag(name: .customLong("check"), help: "Say whether the vault is unlocked.") var check = false

    var passwordSource: (variable: String?, file: String?) { (passwordOptions.variable, passwordOptions.file) }

    func respond(_ context: CLIContext) async throws -> BWResponse {
        guard let email = context.settings.email else { throw BWFailure.notLoggedIn }
        if check {
            guard (try? await context.unlock(prompt: false)) != nil else { throw BWFailure.locked }
            return .message(title: "Vault is unlocked!")
        }
        if let password {
            Console.note("warning: a password given as an argument is visible to other processes (ps); use --passwordenv NAME or --passwordfile FILE")
            try await context.unlockLocally(email: email, password: password)
        } else if context.passwordGiven {
            try await context.unlock(prompt: false)
        } else {
            guard !bw.wants(bw.noInteraction, "BW_NOINTERACTION", in: context.environment) else {
                throw BWFailure(message: "Master password is required. Try again in interactive mode or provide a password file or environment variable.")
            }
            guard let typed = try context.masterPassword(prompt: "? Master password: [input is hidden] ") else {
                throw BWFailure(message: "Master password is required. Try again in interactive mode or provide a password file or environment variable.")
            }
            try await context.unlockLocally(email: email, password: typed)
        }
        let key = try await context.startSession()
        return .message(title: "Your vault is now unlocked!", message: Self.sessionText(key), raw: key)
    }

    /// bw's words after an unlock: how to pass the session key on.
    static func sessionText(_ key: String) -> String {
        """

        To unlock your vault, set your session key to the `BW_SESSION` environment variable. ex:
        $ export BW_SESSION="\(key)"
        > $env:BW_SESSION="\(key)"

        You can also pass the session key to any command with the `--session` option. ex:
        $ bw list items --session \(key)
        """
    }
}

struct BWLockCommand: BWSubcommand {
    static let configuration = CommandConfiguration(commandName: "lock", abstract: "Lock the vault: every session of this profile ends.")
    static var needsVault: Bool { false }
    @OptionGroup var bw: BWOptions

    func respond(_ context: CLIContext) async throws -> BWResponse {
        guard context.settings.email != nil else { throw BWFailure.notLoggedIn }
        context.profile.removeAllSessions()
        // A running agent locks too, as `vaultsync lock` does.
        _ = try? AgentRequests.ask("lock", context)
        await context.engine.lock()
        return .message(title: "Your vault is locked.")
    }
}

struct BWSyncCommand: BWSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "sync", abstract: "Send what waits for the server and fetch the rest; --last prints when the vault last synced.")
    @OptionGroup var bw: BWOptions
    @Flag(name: .customLong("last"), help: "Print the last sync's date (ISO 8601).") var last = false
    @Flag(name: [.customShort("f"), .customLong("force")], help: "A full sync (every sync here is one).") var force = false

    func respond(_ context: CLIContext) async throws -> BWResponse {
        if last { return .string(BitwardenJSON.date(try await context.engine.status().lastSync).stringValue) }
        do {
            _ = try await context.engine.sync()
        } catch {
            throw BWFailure(message: "Syncing failed: " + describe(error).message)
        }
        return .message(title: "Syncing complete.")
    }
}

struct BWListCommand: BWSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List items, folders or organizations as bw's JSON.",
        discussion: "Filters (--folderid, --collectionid, --organizationid; each takes an id, null or notnull) combine with OR; --search combines with them with AND.")
    @OptionGroup var bw: BWOptions
    @Argument(help: "items, folders or organizations.") var object: String
    @Option(name: .customLong("search")) var search: String?
    @Option(name: .customLong("url")) var url: String?
    @Option(name: .customLong("folderid")) var folderID: String?
    @Option(name: .customLong("collectionid")) var collectionID: String?
    @Option(name: .customLong("organizationid")) var organizationID: String?
    @Flag(name: .customLong("trash")) var trash = false

    func respond(_ context: CLIContext) async throws -> BWResponse {
        switch object.lowercased() {
        case "items": return .list(try await items(context).map(BWItems.json))
        case "folders":
            let folders = try await BWItems.folders(context)
            let query = search?.lowercased()
            return .list(folders.filter { folder in query.map { folder.name.lowercased().contains($0) } ?? true }
                .map { BWItems.folderJSON(id: $0.id, name: $0.name) })
        case "organizations":
            let organizations = try await context.engine.organizations()
            let query = search?.lowercased()
            return .list(organizations.filter { organization in query.map { organization.name.lowercased().contains($0) } ?? true }
                .map(BWItems.organizationJSON))
        case "collections":
            let query = search?.lowercased()
            return .list(try await context.engine.collections().filter { collection in
                (organizationID.map { $0.lowercased() == collection.organizationID } ?? true)
                    && (query.map { (collection.name ?? "").lowercased().contains($0) } ?? true)
            }.map(BWItems.collectionJSON))
        case "org-members":
            guard let organizationID, UUID(uuidString: organizationID) != nil else {
                throw BWFailure(message: organizationID.map { "`\($0)` is not a GUID." } ?? "--organizationid <organizationid> required.")
            }
            let query = search?.lowercased()
            return .list(try await context.engine.organizationMembers(id: organizationID).filter { member in
                query.map { member.email.lowercased().contains($0) || (member.name ?? "").lowercased().contains($0) } ?? true
            }.map(BWItems.memberJSON))
        case "org-collections":
            guard let organizationID, BWItems.isGUID(organizationID) else {
                throw BWFailure(message: organizationID.map { "`\($0)` is not a GUID." } ?? "--organizationid <organizationid> required.")
            }
            let query = search?.lowercased()
            return .list(try await context.engine.collections().filter { collection in
                collection.organizationID == organizationID.lowercased() && (query.map { (collection.name ?? "").lowercased().contains($0) } ?? true)
            }.map { collection in
                var object = BWItems.collectionJSON(collection).objectValue ?? JSONObject()
                object["object"] = .string("org-collection")
                object["groups"] = .array([])
                return .object(object)
            })
        default:
            throw BWFailure(message: "Unknown object \"\(object)\". Allowed objects are: items, folders, collections, organizations.")
        }
    }

    func items(_ context: CLIContext) async throws -> [CipherView] {
        var items: [CipherView]
        if let search, !search.trimmingCharacters(in: .whitespaces).isEmpty {
            items = try await BWItems.search(search, trash: trash, context: context)
        } else {
            items = try await BWItems.all(context).filter { ($0.deletedDate != nil) == trash }
        }
        if let url {
            items = items.filter { item in
                item.login?.uris.contains { uri in
                    guard let text = uri.uri else { return false }
                    return URIMatching.matches(text, match: uri.match, address: url)
                } ?? false
            }
        }
        let filters = [folderID, collectionID, organizationID]
        guard filters.contains(where: { $0 != nil }) else { return items }
        return items.filter { item in
            Self.matches(folderID, item.folderId) || Self.matches(organizationID, item.organizationId)
                || collectionID.map { wanted in
                    let ids = item.collectionIds ?? []
                    return wanted == "notnull" ? !ids.isEmpty : wanted == "null" ? ids.isEmpty : ids.contains(wanted)
                } ?? false
        }
    }

    static func matches(_ wanted: String?, _ value: String?) -> Bool {
        guard let wanted else { return false }
        switch wanted {
        case "notnull": return value != nil
        case "null": return value == nil
        default: return value == wanted
        }
    }
}

struct BWGetCommand: BWSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "get", abstract: "Get an item or one of its fields (item, username, password, uri, totp, notes, folder) by id or search.")
    @OptionGroup var bw: BWOptions
    @Argument(help: "item, username, password, uri, totp, notes, folder or attachment.") var object: String
    @Argument(help: "An id, or a search.") var reference: String
    @Option(name: .customLong("itemid"), help: "attachment: the item's id.") var itemID: String?
    @Option(name: .customLong("output"), help: "attachment: where to write the file (a folder ending in /, or a file).") var output: String?

    /// A template needs no vault (bw prints it locked or logged out too).
    var needsVaultNow: Bool { object.lowercased() != "template" }

    func respond(_ context: CLIContext) async throws -> BWResponse {
        if object.lowercased() == "attachment" {
            let (name, contents) = try await BWAttachments.contents(reference, itemID: itemID, context: context)
            return try BWAttachments.save(contents, fileName: name, output: output, raw: bw.wants(bw.raw, "BW_RAW", in: context.environment))
        }
        return try await Self.get(object, reference, context: context)
    }

    /// `bw get OBJECT REFERENCE`'s answer (`bw serve`'s GET /object/OBJECT/REFERENCE).
    static func get(_ object: String, _ reference: String, context: CLIContext) async throws -> BWResponse {
        func login(_ item: CipherView) throws -> LoginView {
            guard item.type == .login, let login = item.login else { throw BWFailure(message: "Not a login.") }
            return login
        }
        func present(_ text: String?) -> Bool { !(text ?? "").trimmingCharacters(in: .whitespaces).isEmpty }
        switch object.lowercased() {
        case "item":
            return .object(BWItems.json(try await BWItems.find(reference, context: context)))
        case "username":
            let item = try await BWItems.find(reference, context: context) { present($0.login?.username) }
            guard let value = try login(item).username, present(value) else { throw BWFailure(message: "No username available for this login.") }
            return .string(value)
        case "password":
            let item = try await BWItems.find(reference, context: context) { present($0.login?.password) }
            guard let value = try login(item).password, present(value) else { throw BWFailure(message: "No password available for this login.") }
            return .string(value)
        case "exposed":
            // bw's `get exposed`: the password as `get password` finds it, then the Pwned Passwords count.
            let item = try await BWItems.find(reference, context: context) { present($0.login?.password) }
            guard let value = try login(item).password, present(value) else { throw BWFailure(message: "No password available for this login.") }
            let count: Int
            if let service = context.environment["VAULTSYNC_PWNED_PASSWORDS_URL"], !service.isEmpty {
                count = try await context.engine.timesExposed(password: value, serviceURL: service)
            } else {
                count = try await context.engine.timesExposed(password: value)
            }
            return .string(String(count))
        case "uri":
            let item = try await BWItems.find(reference, context: context) { present($0.login?.uris.first?.uri) }
            guard let value = try login(item).uris.first?.uri, present(value) else { throw BWFailure(message: "No uri available for this login.") }
            return .string(value)
        case "totp":
            let item = try await BWItems.find(reference, context: context) { present($0.login?.totp) }
            guard let secret = try login(item).totp, present(secret) else { throw BWFailure(message: "No TOTP available for this login.") }
            guard let code = try? TOTP(secretOrURI: secret).code(at: Date()) else { throw BWFailure(message: "Couldn't generate TOTP code.") }
            return .string(code)
        case "notes":
            let item = try await BWItems.find(reference, context: context) { present($0.notes) }
            guard let notes = item.notes, present(notes) else { throw BWFailure(message: "No notes available for this item.") }
            return .string(notes)
        case "folder":
            let folders = try await BWItems.folders(context).filter { $0.id != nil }
            let folder = try BWItems.one(reference, in: folders, id: { $0.id ?? "" }, name: \.name)
            return .object(BWItems.folderJSON(id: folder.id, name: folder.name))
        case "template":
            return .template(try BWTemplates.template(reference))
        case "fingerprint":
            // `me` (or this account's id): this account's phrase, offline too; another user's id: the phrase of the
            // public key the server gives for it, as bw computes it.
            let userID = await context.engine.currentUserID
            if reference.lowercased() == "me" || reference.lowercased() == userID {
                return .string(try await context.engine.fingerprintPhrase())
            }
            guard UUID(uuidString: reference) != nil else { throw BWFailure(message: "A user id is a GUID, or `me`.") }
            return .string(try await context.engine.fingerprintPhrase(ofUser: reference))
        case "collection":
            return .object(BWItems.collectionJSON(try BWItems.one(reference, in: try await context.engine.collections(), id: \.id, name: \.name)))
        case "organization":
            return .object(BWItems.organizationJSON(try BWItems.one(reference, in: try await context.engine.organizations(), id: \.id, name: \.name)))
        default:
            throw BWFailure(message: "Unknown object.")
        }
    }
}

/// bw's encoded request: base64 of JSON, from the argument or standard input.
enum BWRequest {
    static func object(_ argument: String?) throws -> JSONObject {
        guard let object = try decoded(argument).objectValue else { throw BWFailure.parseError }
        return object
    }

    /// The base64-encoded JSON of the argument, else of standard input (bw's `encodedJson`).
    static func decoded(_ argument: String?) throws -> JSONValue {
        var encoded = argument ?? ""
        if encoded.isEmpty, !Console.stdinIsTTY {
            encoded = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self)
        }
        encoded = encoded.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !encoded.isEmpty else { throw BWFailure(message: "`requestJson` was not provided.") }
        guard let data = Data(base64Encoded: encoded, options: .ignoreUnknownCharacters),
              let value = try? JSONParser.parse(Array(data)) else { throw BWFailure.parseError }
        return value
    }

    /// A JSON list of collection ids (`bw move`, `bw edit item-collections`).
    static func collectionIDs(_ value: JSONValue) throws -> [String] {
        guard let values = value.arrayValue else { throw BWFailure.parseError }
        return try values.map { value in
            guard let id = value.stringValue, BWItems.isGUID(id.lowercased()) else { throw BWFailure(message: "`\(value.stringValue ?? "?")` is not a GUID.") }
            return id.lowercased()
        }
    }

    /// The item a request describes (bw's item JSON).
    static func item(_ request: JSONObject) throws -> CipherView {
        do {
            return try BitwardenJSON.readItem(request)
        } catch let error as ExchangeError {
            throw BWFailure(message: error.description)
        }
    }
}

struct BWCreateCommand: BWSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "create", abstract: "Create an item or a folder from base64-encoded JSON (bw encode), as an argument or on standard input.")
    @OptionGroup var bw: BWOptions
    @Argument(help: "item, folder or attachment.") var object: String
    @Argument(help: "The base64-encoded JSON (else standard input).") var encoded: String?
    @Option(name: .customLong("file"), help: "attachment: the file to attach.") var file: String?
    @Option(name: .customLong("itemid"), help: "attachment: the item's id.") var itemID: String?

    /// A template needs no vault (bw prints it locked or logged out too).
    var needsVaultNow: Bool { object.lowercased() != "template" }

    func respond(_ context: CLIContext) async throws -> BWResponse {
        if object.lowercased() == "attachment" { return try await BWAttachments.create(file: file, itemID: itemID, context: context) }
        return try await Self.create(object, request: try BWRequest.object(encoded), context: context)
    }

    /// The object a request describes, created (`bw serve`'s POST /object/OBJECT takes the JSON itself).
    static func create(_ object: String, request: JSONObject, context: CLIContext) async throws -> BWResponse {
        switch object.lowercased() {
        case "item":
            var view = try BWRequest.item(request)
            if let organization = request["organizationId"]?.stringValue?.lowercased(), !organization.isEmpty {
                // Straight into the organization's collections, as bw does (at least one; the organization trusted here).
                guard try await context.engine.organizations().contains(where: { $0.id == organization }) else {
                    throw BWFailure(message: "Organization \(organization) was not found.")
                }
                let collections = (request["collectionIds"]?.arrayValue ?? []).compactMap { $0.stringValue?.lowercased() }
                guard !collections.isEmpty else { throw BWFailure(message: "An item in an organization needs at least one of its collections (collectionIds).") }
                view.organizationId = organization
                view.collectionIds = collections
            }
            view.folderId = try await BWFolders.checked(request["folderId"]?.stringValue, context: context)
            let saved = try await context.engine.addItem(view)
            return .object(BWItems.json(saved.value))
        case "folder":
            guard let name = request["name"]?.stringValue, !name.isEmpty else { throw BWFailure(message: "A folder needs a name.") }
            let saved = try await context.engine.createFolder(name: name)
            return .object(BWItems.folderJSON(id: saved.value.id, name: saved.value.name))
        default:
            throw BWFailure(message: "Unknown object \"\(object)\". Allowed objects are: item, folder.")
        }
    }
}

enum BWFolders {
    /// A folder id from a request: one of this vault's folders, or none.
    static func checked(_ id: String?, context: CLIContext) async throws -> String? {
        guard let id, !id.isEmpty else { return nil }
        guard try await context.engine.folders().contains(where: { $0.id == id }) else {
            throw BWFailure(message: "Folder \(id) was not found.")
        }
        return id
    }
}

struct BWEditCommand: BWSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "edit", abstract: "Replace an item (by id) or rename a folder from base64-encoded JSON, as an argument or on standard input.")
    @OptionGroup var bw: BWOptions
    @Argument(help: "item or folder.") var object: String
    @Argument(help: "The object's id.") var id: String
    @Argument(help: "The base64-encoded JSON (else standard input).") var encoded: String?

    func respond(_ context: CLIContext) async throws -> BWResponse {
        let value = try BWRequest.decoded(encoded)
        if object.lowercased() == "item-collections", value.arrayValue != nil {
            return try await BWSharing.setCollections(id: id, collectionIDs: try BWRequest.collectionIDs(value), context: context)
        }
        guard let request = value.objectValue else { throw BWFailure.parseError }
        return try await Self.edit(object, id: id, request: request, context: context)
    }

    /// The object `id` as the request describes it (`bw serve`'s PUT /object/OBJECT/ID takes the JSON itself).
    static func edit(_ object: String, id: String, request: JSONObject, context: CLIContext) async throws -> BWResponse {
        let id = id.lowercased()
        switch object.lowercased() {
        case "item":
            let original: CipherView
            do {
                original = try await context.engine.item(id: id)
            } catch VaultError.itemNotFound {
                throw BWFailure.notFound
            }
            guard original.deletedDate == nil else { throw BWFailure(message: "You may not edit a deleted item. Use the restore command first.") }
            var view = try BWRequest.item(request)
            // What the request describes replaces the item's content; where it lives on the server stays.
            view.id = original.id
            view.organizationId = original.organizationId
            view.collectionIds = original.collectionIds
            view.itemKey = original.itemKey
            view.attachments = original.attachments
            view.creationDate = original.creationDate
            view.revisionDate = original.revisionDate
            if request["passwordHistory"] == nil { view.passwordHistory = original.passwordHistory }
            view.folderId = try await BWFolders.checked(request["folderId"]?.stringValue, context: context)
            let saved = try await context.engine.updateItem(view, basedOn: original)
            return .object(BWItems.json(saved.value))
        case "folder":
            guard let name = request["name"]?.stringValue, !name.isEmpty else { throw BWFailure(message: "A folder needs a name.") }
            guard try await context.engine.folders().contains(where: { $0.id == id }) else { throw BWFailure.notFound }
            _ = try await context.engine.renameFolder(id: id, name: name)
            return .object(BWItems.folderJSON(id: id, name: name))
        case "item-collections":
            // An object body (`{"collectionIds": […]}`) is taken too; bw's own is the list itself (``respond(_:)``).
            return try await BWSharing.setCollections(id: id, collectionIDs: try BWRequest.collectionIDs(request["collectionIds"] ?? .null),
                                                      context: context)
        default:
            throw BWFailure(message: "Unknown object \"\(object)\". Allowed objects are: item, item-collections, folder.")
        }
    }
}

/// Sharing with an organization (`move`, `edit item-collections`): online only, as `vaultsync share`.
enum BWSharing {
    /// `bw move`: a personal item into the organization's `collectionIDs`; answers the item as shared.
    static func move(id: String, organizationID: String, collectionIDs: [String], context: CLIContext) async throws -> BWResponse {
        let id = id.lowercased(), organization = organizationID.lowercased()
        guard try await BWItemsExist.item(id, context: context) else { throw BWFailure.notFound }
        guard BWItems.isGUID(organization), try await context.engine.organizations().contains(where: { $0.id == organization }) else {
            throw BWFailure(message: "Organization \(organizationID) was not found.")
        }
        guard !collectionIDs.isEmpty else { throw BWFailure(message: "An item in an organization needs at least one of its collections.") }
        try await context.engine.share(itemID: id, organizationID: organization, collectionIDs: collectionIDs)
        return .object(BWItems.json(try await context.engine.item(id: id)))
    }

    /// `bw edit item-collections`: an organization item's collections become `collectionIDs`; answers the item.
    static func setCollections(id: String, collectionIDs: [String], context: CLIContext) async throws -> BWResponse {
        let id = id.lowercased()
        guard try await BWItemsExist.item(id, context: context) else { throw BWFailure.notFound }
        try await context.engine.setCollections(itemID: id, collectionIDs: collectionIDs)
        return .object(BWItems.json(try await context.engine.item(id: id)))
    }
}

struct BWMoveCommand: BWSubcommand {
    static let configuration = CommandConfiguration(commandName: "move", abstract: "Move a personal item into an organization's collections (online only).")
    @OptionGroup var bw: BWOptions
    @Argument(help: "The item's id.") var id: String
    @Argument(help: "The organization's id.") var organizationID: String
    @Argument(help: "The base64-encoded JSON list of collection ids (else standard input).") var encoded: String?

    func respond(_ context: CLIContext) async throws -> BWResponse {
        try await BWSharing.move(id: id, organizationID: organizationID, collectionIDs: try BWRequest.collectionIDs(try BWRequest.decoded(encoded)),
                                 context: context)
    }
}

struct BWDeleteCommand: BWSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "delete", abstract: "Move an item to the trash (--permanent: delete it for good), or delete a folder, by id.")
    @OptionGroup var bw: BWOptions
    @Argument(help: "item, folder or attachment.") var object: String
    @Argument(help: "The object's id.") var id: String
    @Flag(name: [.customShort("p"), .customLong("permanent")]) var permanent = false
    @Option(name: .customLong("itemid"), help: "attachment: the item's id.") var itemID: String?

    func respond(_ context: CLIContext) async throws -> BWResponse {
        let id = id.lowercased()
        switch object.lowercased() {
        case "item":
            guard try await BWItemsExist.item(id, context: context) else { throw BWFailure.notFound }
            _ = permanent ? try await context.engine.permanentlyDeleteItem(id: id) : try await context.engine.softDeleteItem(id: id)
            return .string(nil)
        case "folder":
            guard try await context.engine.folders().contains(where: { $0.id == id }) else { throw BWFailure.notFound }
            _ = try await context.engine.deleteFolder(id: id)
            return .string(nil)
        case "attachment":
            guard let itemID, !itemID.isEmpty else { throw BWFailure(message: "`itemid` option is required.") }
            let item = try await BWAttachments.item(itemID, context: context)
            guard let attachment = try await context.engine.attachments(itemID: item).first(where: { $0.id == id }) else {
                throw BWFailure(message: "Attachment `\(id)` was not found.")
            }
            _ = try await context.engine.deleteAttachment(itemID: item, attachmentID: attachment.id)
            return .string(nil)
        default:
            throw BWFailure(message: "Unknown object \"\(object)\". Allowed objects are: item, folder, attachment.")
        }
    }
}

enum BWItemsExist {
    static func item(_ id: String, context: CLIContext) async throws -> Bool {
        do {
            _ = try await context.engine.readableItem(id: id)
            return true
        } catch VaultError.itemNotFound {
            return false
        }
    }
}

struct BWRestoreCommand: BWSubcommand {
    static let configuration = CommandConfiguration(commandName: "restore", abstract: "Restore an item from the trash, by id.")
    @OptionGroup var bw: BWOptions
    @Argument(help: "item.") var object: String
    @Argument(help: "The item's id.") var id: String

    func respond(_ context: CLIContext) async throws -> BWResponse {
        guard object.lowercased() == "item" else { throw BWFailure(message: "Unknown object \"\(object)\". Allowed objects are: item.") }
        let id = id.lowercased()
        guard try await BWItemsExist.item(id, context: context) else { throw BWFailure.notFound }
        _ = try await context.engine.restoreItem(id: id)
        return .string(nil)
    }
}

struct BWEncodeCommand: BWSubcommand {
    static let configuration = CommandConfiguration(commandName: "encode", abstract: "Base64 of standard input (for create and edit).")
    static var needsVault: Bool { false }
    @OptionGroup var bw: BWOptions

    func respond(_ context: CLIContext) async throws -> BWResponse {
        guard !Console.stdinIsTTY else { throw BWFailure(message: "No stdin was piped in.") }
        return .string(FileHandle.standardInput.readDataToEndOfFile().base64EncodedString())
    }
}

struct BWGenerateCommand: BWSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "generate", abstract: "A password (default: -uln --length 14) or a passphrase (--passphrase: 3 words, \"-\").")
    static var needsVault: Bool { false }
    @OptionGroup var bw: BWOptions
    @Flag(name: [.customShort("u"), .customLong("uppercase")]) var uppercase = false
    @Flag(name: [.customShort("l"), .customLong("lowercase")]) var lowercase = false
    @Flag(name: [.customShort("n"), .customLong("number")]) var number = false
    @Flag(name: [.customShort("s"), .customLong("special")]) var special = false
    @Flag(name: [.customShort("p"), .customLong("passphrase")]) var passphrase = false
    @Option(name: .customLong("length")) var length: String?
    @Option(name: .customLong("words")) var words: String?
    @Option(name: .customLong("minNumber")) var minNumber: String?
    @Option(name: .customLong("minSpecial")) var minSpecial: String?
    @Option(name: .customLong("separator")) var separator: String?
    @Flag(name: [.customShort("c"), .customLong("capitalize")]) var capitalize = false
    @Flag(name: .customLong("includeNumber")) var includeNumber = false
    @Flag(name: .customLong("ambiguous"), help: "Include characters that are easily confused (I, O, l, 0, 1).") var ambiguous = false

    func respond(_ context: CLIContext) async throws -> BWResponse {
        if passphrase {
            // bw: at least 3 words; "space" and "empty" name those separators; a longer one is cut to its first character.
            let count = max(PassphraseOptions.wordRange.lowerBound, min(PassphraseOptions.wordRange.upperBound, words.flatMap { Int($0) } ?? 3))
            let joiner: String = switch separator {
            case nil: "-"
            case "space": " "
            case "empty": ""
            case let given?: String(given.prefix(1))
            }
            let options = PassphraseOptions(words: count, separator: joiner, capitalize: capitalize, includeNumber: includeNumber)
            return .string(try PasswordGenerator.passphrase(options).value)
        }
        let none = !(uppercase || lowercase || number || special)
        let size = max(PasswordOptions.lengthRange.lowerBound, min(PasswordOptions.lengthRange.upperBound, length.flatMap { Int($0) } ?? 14))
        let digits = none || number, symbols = special
        let options = PasswordOptions(length: size, uppercase: none || uppercase, lowercase: none || lowercase, digits: digits, symbols: symbols,
                                      minimumUppercase: none || uppercase ? 1 : 0, minimumLowercase: none || lowercase ? 1 : 0,
                                      minimumDigits: digits ? min(9, max(0, minNumber.flatMap { Int($0) } ?? 1)) : 0,
                                      minimumSymbols: symbols ? min(9, max(0, minSpecial.flatMap { Int($0) } ?? 0)) : 0,
                                      avoidAmbiguous: !ambiguous)
        return .string(try PasswordGenerator.password(options).value)
    }
}
