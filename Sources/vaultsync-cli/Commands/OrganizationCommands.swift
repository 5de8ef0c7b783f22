import ArgumentParser
import Foundation
import VaultAPI
import VaultClient
import VaultModels

struct OrganizationCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "org",
        abstract: "Create and delete organizations; invite, confirm and remove members; accept invitations, leave, and trust the ones you joined.",
        discussion: """
        A server can announce a membership you never accepted, with an organization key it knows. Such an organization's shared items can be read, but nothing of yours (a new item, an edit of one of its items) is encrypted with its key until you trust it on this device, and a trusted organization whose key later changes is refused again until you trust it anew.

        An invitation is accepted with a one-time code that `org invite` prints for the owner, who gives it to the invitee over another channel: the server sends no mail, so an email alone proves nothing.

        Examples:
          vaultsync org create Family
          vaultsync org list
          vaultsync org invite Family frank@example.com
          vaultsync org accept Family --code ABCD-EFGH-IJKL-MNOP-QRST-UVWX-YZ23
          vaultsync org confirm Family frank@example.com
          vaultsync org trust Family
          vaultsync share "Home wifi" Family --collection Everyone
          vaultsync org remove Family frank@example.com
          vaultsync org leave Family
        """,
        subcommands: [List.self, Create.self, Members.self, Invite.self, Invites.self, Accept.self, Confirm.self, Trust.self, Role.self, Remove.self, Leave.self, Delete.self],
        defaultSubcommand: List.self
    )

    struct List: VaultCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List organizations with their trust on this device.",
                                                        discussion: "Example:\n  vaultsync org list --json")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var output: OutputOptions

        func execute(_ context: CLIContext) async throws {
            let organizations = try await context.engine.organizations()
            // Invitations live on the server only: listed when it answers, said when it does not.
            var invitations: [PendingInvitation] = []
            do {
                invitations = try await context.engine.pendingInvitations()
            } catch VaultError.serverRefused(404, _) {
                // A server without the VaultSync invite list (Bitwarden's own mails its invitations).
            } catch {
                Console.note("Pending invitations are not shown: \(describe(error).message)")
            }
            if output.json {
                let memberships: [JSONValue] = organizations.map { organization in
                    .object([
                        "id": .string(organization.id), "name": .string(organization.name), "status": .int(organization.status),
                        "keyAvailable": .bool(organization.keyAvailable), "trusted": .bool(organization.trusted),
                        "keyChanged": .bool(organization.keyChanged),
                    ])
                }
                let invited: [JSONValue] = invitations.map { invitation in
                    .object([
                        "id": .string(invitation.organizationID), "name": .string(invitation.organizationName), "status": .int(0),
                        "invited": .bool(true), "invitationId": .string(invitation.id),
                        "keyAvailable": .bool(false), "trusted": .bool(false), "keyChanged": .bool(false),
                    ])
                }
                Presentation.printJSON(.array(memberships + invited))
                return
            }
            if organizations.isEmpty && invitations.isEmpty { Console.note("no organizations") }
            for organization in organizations {
                let trust = organization.trusted ? "trusted" : organization.keyChanged ? "KEY CHANGED" :
                    organization.keyAvailable ? "not trusted" : "no key (not confirmed)"
                print("\(organization.id)\t\(Console.styled(organization.name, .bold))\t\(trust)")
            }
            for invitation in invitations {
                print("\(invitation.organizationID)\t\(Console.styled(Console.terminalSafe(invitation.organizationName), .bold))\tinvited "
                    + "(accept with the owner's code: vaultsync org accept \(invitation.organizationID) --code CODE)")
            }
        }
    }

    struct Create: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "create",
            abstract: "Create an organization you own, with a first collection, to share items through.",
            discussion: """
            Online only. Its key is made on this device and reaches the server only wrapped with your public key, as the official clients do; the organization is trusted here at once. Then invite members with `vaultsync org invite`.

            Examples:
              vaultsync org create Family
              vaultsync org create "Acme IT" --collection Servers --json
            """)
        @OptionGroup var global: GlobalOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "The organization's name (at most 50 characters; the server sees it).") var name: String
        @Option(help: "The first collection's name (encrypted: the server never sees it).") var collection = "Default collection"

        func execute(_ context: CLIContext) async throws {
            let existing = try await context.engine.organizations()
            let trimmed = name.trimmingCharacters(in: .whitespacesAndNewlines)
            let id = try await context.engine.createOrganization(name: trimmed, collectionName: collection)
            if output.json {
                Presentation.printJSON(.object(["id": .string(id), "name": .string(trimmed), "collection": .string(collection), "trusted": .bool(true)]))
                return
            }
            let shown = Console.terminalSafe(trimmed)
            print("Created \"\(shown)\" (\(id)), owned by you and trusted on this device, with the collection \"\(Console.terminalSafe(collection))\".")
            if existing.contains(where: { $0.name.caseInsensitiveCompare(trimmed) == .orderedSame }) {
                Console.note("another organization of yours is named \"\(shown)\" too: name this one by its id, \(id)")
            }
            print("Invite members with: vaultsync org invite \(id) EMAIL")
        }
    }

    /// Bitwarden's names of a member's status and type.
    static func statusName(_ status: Int) -> String {
        switch status {
        case 0: return "invited"
        case 1: return "accepted"
        case 2: return "confirmed"
        default: return "status \(status)"
        }
    }

    static func typeName(_ type: Int) -> String {
        switch type {
        case 0: return "owner"
        case 1: return "admin"
        case 2: return "user"
        case 3: return "manager"
        default: return "type \(type)"
        }
    }

    struct Members: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "members",
            abstract: "List an organization's members and invitees, with their status (invited, accepted, confirmed).",
            discussion: "Online only; owners and admins. An accepted member waits for `vaultsync org confirm`.\n\nExample:\n  vaultsync org members Family --json")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "The organization's name or id.") var organization: String

        func execute(_ context: CLIContext) async throws {
            let chosen = try OrganizationCommand.resolve(organization, in: try await context.engine.organizations())
            let members = try await context.engine.organizationMembers(id: chosen.id)
            if output.json {
                Presentation.printJSON(.array(members.map { member in
                    .object([
                        "id": .string(member.id), "userId": member.userID.map(JSONValue.string) ?? .null, "email": .string(member.email),
                        "name": member.name.map(JSONValue.string) ?? .null, "status": .string(OrganizationCommand.statusName(member.status)),
                        "type": .string(OrganizationCommand.typeName(member.type)),
                        "collections": .array(member.collections.map { grant in
                            .object(["id": .string(grant.collectionID), "access": .string(grant.access.rawValue)])
                        }),
                    ])
                }))
                return
            }
            // Each member's collections by name (as the last sync gave them), with their access.
            let names = Dictionary(try await context.engine.collections().map { ($0.id, $0.name ?? $0.id) }, uniquingKeysWith: { first, _ in first })
            for member in members {
                let access = member.type == 0 || member.type == 1 ? "every collection"
                    : member.collections.map { "\(Console.terminalSafe(names[$0.collectionID] ?? $0.collectionID)):\($0.access.rawValue)" }
                        .joined(separator: ", ")
                print("\(member.id)\t\(Console.terminalSafe(member.email))\t\(OrganizationCommand.typeName(member.type))\t"
                    + "\(OrganizationCommand.statusName(member.status))\t\(access)")
            }
        }
    }

    struct Confirm: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "confirm",
            abstract: "Confirm a member who accepted, after checking their fingerprint phrase: they then receive the organization's key.",
            discussion: """
            Online only; owners and admins, on a device where the organization is trusted. The member reads their phrase from `vaultsync fingerprint` (or any Bitwarden client) and tells it to you over another channel than the server. On a terminal the phrase computed from the key the server gives is shown and you are asked whether it matches; scripts give --fingerprint PHRASE, and a phrase that does not match refuses. A server that swaps in a key of its own shows another phrase: refuse it.

            Examples:
              vaultsync org confirm Family frank@example.com
              vaultsync org confirm Family frank@example.com --fingerprint "alpha-bravo-charlie-delta-echo"
            """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The organization's name or id.") var organization: String
        @Argument(help: "The member's email or membership id.") var member: String
        @Option(help: "The member's fingerprint phrase, as they read it to you (any case; dashes or spaces between the words).")
        var fingerprint: String?

        func execute(_ context: CLIContext) async throws {
            let chosen = try OrganizationCommand.resolve(organization, in: try await context.engine.organizations())
            let target = try OrganizationCommand.one(member, in: try await context.engine.organizationMembers(id: chosen.id), what: "member",
                                                     id: \.id, name: \.email)
            let confirmation = try await context.engine.prepareConfirmation(organizationID: chosen.id, member: target)
            let email = Console.terminalSafe(target.email)
            if let fingerprint {
                guard confirmation.matches(fingerprint) else {
                    throw CLIError.verificationFailed("""
                        The phrase given is not \(email)'s phrase as computed from the key the server gives (\(confirmation.phrase)). \
                        Nothing was confirmed: check the phrase with \(email) again; a server handing out another key shows another phrase.
                        """)
                }
            } else {
                guard Console.stdinIsTTY, Console.mayAsk else {
                    throw CLIError.usage("confirming \(email) needs their phrase checked: on a terminal you are asked; a script gives --fingerprint PHRASE")
                }
                FileHandle.standardError.write(Data("\(email)'s fingerprint phrase, from the key the server gives:\n\n    \(confirmation.phrase)\n\n".utf8))
                guard Console.confirm("Is it the phrase \(email) reads from `vaultsync fingerprint`? [y/N] ") else {
                    throw CLIError.aborted("Not confirmed: \(email) stays accepted, without the organization's key.")
                }
            }
            try await context.engine.confirm(confirmation)
            print("Confirmed \(email) in \"\(Console.terminalSafe(chosen.name))\": their next sync brings the organization's key and the items they may see.")
        }
    }

    struct Trust: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "trust",
            abstract: "Trust an organization you joined, with the key the server hands out for it now.",
            discussion: "Example:\n  vaultsync org trust Family")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The organization's name or id.") var organization: String

        func execute(_ context: CLIContext) async throws {
            let chosen = try OrganizationCommand.resolve(organization, in: try await context.engine.organizations())
            try await context.engine.trustOrganization(id: chosen.id)
            print("Trusted \"\(chosen.name)\" (\(chosen.id)) on this device.")
        }
    }

    /// The one organization of this device's list that `reference` names (its id, or its name in any case).
    static func resolve(_ reference: String, in all: [OrganizationSummary]) throws -> OrganizationSummary {
        try one(reference, in: all, what: "organization", id: \.id, name: \.name)
    }

    /// The one of `all` that `reference` names: its id, or its name (an email for members) in any case;
    /// none is not found, several an ambiguity listing them.
    static func one<Object>(_ reference: String, in all: [Object], what: String,
                            id: (Object) -> String, name: (Object) -> String?) throws -> Object {
        let matches = all.filter { id($0) == reference.lowercased() || (name($0) ?? "").caseInsensitiveCompare(reference) == .orderedSame }
        guard let chosen = matches.first else { throw CLIError.notFound(what: what, reference: reference) }
        guard matches.count == 1 else {
            throw CLIError.ambiguous(what: what, reference: reference,
                                     candidates: matches.map { "\(Console.terminalSafe(name($0) ?? "?")) (\(id($0)))" })
        }
        return chosen
    }

    /// The member types an invite can offer (Bitwarden's `OrganizationUserType`).
    enum MemberType: String, CaseIterable, ExpressibleByArgument {
        case user, manager, admin

        var wireValue: Int {
            switch self {
            case .user: return 2
            case .manager: return 3
            case .admin: return 1
            }
        }
    }

    struct Invite: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "invite",
            abstract: "Invite an email to an organization you own or administer, and print the one-time code to accept it with.",
            discussion: """
            Online only. The invitee gets the collections given with --collection NAME[:ACCESS] (ACCESS: edit, the default, read-only, hide-passwords or manage; see `vaultsync collection access --help`); without --collection, every collection of the organization (read-only with --read-only). An admin sees and edits everything. Give the printed code to the invitee over another channel than this server (in person, by phone, in a message you trust): whoever registers the email cannot accept without it. It works once, expires with the invitation (5 days on a VaultSync server) and stops after 5 wrong tries; inviting the email again makes a new code and the old one stops working. Inviting a manager or an admin needs the owner.

            Examples:
              vaultsync org invite Family frank@example.com
              vaultsync org invite Family frank@example.com --role user --collection Kids:read-only --collection Streaming
              vaultsync org invite Family frank@example.com --role manager --read-only --json
            """)
        @OptionGroup var global: GlobalOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "The organization's name or id.") var organization: String
        @Argument(help: "The invitee's email.") var email: String
        @Option(name: [.customLong("role"), .customLong("type")], help: "The member's role: user, manager or admin.") var type: MemberType = .user
        @Flag(help: "The member can read the organization's items and not change them (user or manager; without --collection).") var readOnly = false
        @Option(name: .customLong("collection"),
                help: ArgumentHelp("A collection they get, with their access to it (repeat for several).", valueName: "NAME[:ACCESS]"))
        var collections: [String] = []

        func validate() throws {
            let trimmed = email.trimmingCharacters(in: .whitespaces)
            guard let at = trimmed.firstIndex(of: "@"), at != trimmed.startIndex, trimmed.index(after: at) != trimmed.endIndex,
                  trimmed.count <= 256, !trimmed.contains(where: \.isWhitespace) else {
                throw ValidationError("\"\(email)\" is not an email address")
            }
            if readOnly && type == .admin {
                throw ValidationError("--read-only is for a user or a manager: an admin sees and edits every item of the organization")
            }
            if readOnly && !collections.isEmpty {
                throw ValidationError("--read-only is for an invitation to every collection; with --collection, write NAME:read-only")
            }
        }

        /// `NAME[:ACCESS]`: the access after the last colon when it names one (a name may hold colons itself).
        static func parseGrant(_ text: String) -> (name: String, access: CollectionAccess) {
            if let colon = text.lastIndex(of: ":"), let access = CollectionAccess(rawValue: String(text[text.index(after: colon)...]).lowercased()) {
                return (String(text[..<colon]), access)
            }
            return (text, .edit)
        }

        func execute(_ context: CLIContext) async throws {
            let chosen = try OrganizationCommand.resolve(organization, in: try await context.engine.organizations())
            let invitee = email.trimmingCharacters(in: .whitespaces).lowercased()
            var grants: [CollectionGrant]?
            for text in collections {
                let (name, access) = Self.parseGrant(text)
                let collection: CollectionSummary
                do {
                    collection = try await CollectionCommand.resolve(name, in: chosen, context)
                } catch CLIError.notFound where name == text && text.contains(":") {
                    let suffix = text[text.index(after: text.lastIndex(of: ":")!)...]
                    throw CLIError.usage("\"\(suffix)\" in --collection \(text) is not an access: edit, read-only, hide-passwords or manage")
                }
                grants = (grants ?? []) + [CollectionGrant(collectionID: collection.id, access: access)]
            }
            let invitation = try await context.engine.inviteToOrganization(id: chosen.id, email: invitee, type: type.wireValue,
                                                                           collections: grants, access: readOnly ? .readOnly : .edit)
            if output.json {
                Presentation.printJSON(.object([
                    "organizationId": .string(chosen.id), "organizationName": .string(chosen.name), "email": .string(invitation.email),
                    "invitationId": .string(invitation.id), "type": .string(type.rawValue), "readOnly": .bool(readOnly),
                    "collections": grants.map { .array($0.map { .object(["id": .string($0.collectionID), "access": .string($0.access.rawValue)]) }) } ?? .null,
                    "code": .string(invitation.code), "expirationDate": invitation.expirationDate.map(JSONValue.string) ?? .null,
                ]))
                return
            }
            let name = Console.terminalSafe(chosen.name)
            print("Invited \(invitation.email) to \"\(name)\" as \(type.rawValue)\(readOnly ? " (read-only)" : ""). The one-time code:")
            print("")
            print("    \(Console.terminalSafe(invitation.code))")
            print("")
            print("Give this code to \(invitation.email) yourself, over another channel than this server (in person, by phone, "
                + "in a message you trust); they accept with: vaultsync org accept \(chosen.id) --code CODE")
            let until = invitation.expirationDate.map { " until \(Console.terminalSafe($0))" } ?? ""
            print("It works once\(until), and stops after 5 wrong tries; inviting the email again makes a new code.")
        }
    }

    struct Accept: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "accept",
            abstract: "Accept an invitation to an organization with the one-time code its owner gave you.",
            discussion: """
            Online only. `vaultsync org list` shows your pending invitations. Once accepted, the owner confirms your membership; after that `vaultsync sync` brings its shared items and `vaultsync org trust` lets you add to it.

            Example:
              vaultsync org accept Family --code ABCD-EFGH-IJKL-MNOP-QRST-UVWX-YZ23
            """)
        @OptionGroup var global: GlobalOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "The organization's name or id, as the invitation names it.") var organization: String
        @Option(help: "The one-time code the organization's owner gave you (case, spaces and dashes do not matter).") var code: String

        func validate() throws {
            guard InvitationCode.normalised(code) != nil else {
                throw ValidationError("--code takes the code `vaultsync org invite` printed: \(InvitationCode.length) letters and digits 2-7, "
                    + "in groups of four like ABCD-EFGH-IJKL-MNOP-QRST-UVWX-YZ23")
            }
        }

        func execute(_ context: CLIContext) async throws {
            let symbols = InvitationCode.normalised(code) ?? code
            let invitations = try await context.engine.pendingInvitations()
            let matches = invitations.filter {
                $0.organizationID == organization.lowercased() || $0.organizationName.caseInsensitiveCompare(organization) == .orderedSame
            }
            guard let chosen = matches.first else {
                throw CLIError.missing("No pending invitation to \"\(organization)\" for this account (`vaultsync org list` shows them). "
                    + "An invitation that expired or took 5 wrong codes is gone: ask the owner to invite you again.")
            }
            guard matches.count == 1 else {
                throw CLIError.ambiguous(what: "invitation", reference: organization,
                                         candidates: matches.map { "\(Console.terminalSafe($0.organizationName)) (\($0.organizationID))" })
            }
            try await context.engine.acceptInvitation(chosen, code: InvitationCode.grouped(symbols))
            let name = Console.terminalSafe(chosen.organizationName)
            if output.json {
                Presentation.printJSON(.object([
                    "organizationId": .string(chosen.organizationID), "organizationName": .string(chosen.organizationName),
                    "invitationId": .string(chosen.id), "status": .string("accepted"),
                ]))
                return
            }
            print("Accepted the invitation to \"\(name)\" (\(chosen.organizationID)). Its owner confirms your membership next; "
                + "then `vaultsync sync` brings its shared items, and `vaultsync org trust \(chosen.organizationID)` lets you add to it.")
        }
    }
}

struct FingerprintCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        commandName: "fingerprint",
        abstract: "Show this account's fingerprint phrase: the five words an organization's owner compares before confirming you.",
        discussion: """
        Computed from your public key and account id as Bitwarden's clients compute it, so an owner using any of them sees the same words. Tell the owner your phrase over another channel than the server (in person, by phone); a different phrase on their side means the server handed them another key. The same as `bw get fingerprint me`. Works offline.

        Example:
          vaultsync fingerprint
        """)
    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions

    func execute(_ context: CLIContext) async throws {
        let phrase = try await context.engine.fingerprintPhrase()
        if output.json {
            Presentation.printJSON(.object(["fingerprint": .string(phrase)]))
        } else {
            print(phrase)
        }
    }
}
