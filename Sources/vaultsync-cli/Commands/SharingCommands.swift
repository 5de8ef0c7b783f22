import ArgumentParser
import Foundation
import VaultClient
import VaultModels

/// `share ITEM ORG --collection C…`: a personal item moves into an organization.
struct ShareCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        commandName: "share",
        abstract: "Move a personal item into an organization's collections, where its members can read it (online only).",
        discussion: """
        The item is encrypted for the organization (its own key wrapped with the organization's key; attachments go with it) and sent in one request; it then belongs to the organization, not to you: whoever manages the organization decides who sees it. The organization must be trusted on this device (`vaultsync org trust`). Online only, never queued: offline it is refused at once.

        Examples:
          vaultsync share "Home wifi" Family --collection Everyone
          vaultsync share Netflix Family --collection Kids --collection Parents
        """)
    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions
    @Argument(help: "The item (id, id prefix or name).") var item: String
    @Argument(help: "The organization's name or id.") var organization: String
    @Option(name: .customLong("collection"), help: "A collection to put it in (name or id; repeat for several; at least one).")
    var collections: [String] = []

    func validate() throws {
        guard !collections.isEmpty else {
            throw ValidationError("give at least one --collection (`vaultsync collection list ORG` lists them)")
        }
    }

    func execute(_ context: CLIContext) async throws {
        let id = try await context.itemID(item)
        let name = try await context.engine.item(id: id).name
        let chosen = try OrganizationCommand.resolve(organization, in: try await context.engine.organizations())
        let targets = try await CollectionCommand.resolveAll(collections, in: chosen, context)
        try await context.engine.share(itemID: id, organizationID: chosen.id, collectionIDs: targets.map(\.id))
        if output.json {
            Presentation.printJSON(.object(["id": .string(id), "organizationId": .string(chosen.id),
                                            "collectionIds": .array(targets.map { .string($0.id) })]))
            return
        }
        print("Shared \"\(Console.terminalSafe(name))\" with \"\(Console.terminalSafe(chosen.name))\", in \(CollectionCommand.names(targets)).")
    }
}

extension CollectionCommand {
    /// Each of `references` in `organization`, in order, without repeats.
    static func resolveAll(_ references: [String], in organization: OrganizationSummary, _ context: CLIContext) async throws -> [CollectionSummary] {
        var chosen: [CollectionSummary] = []
        for reference in references {
            let collection = try await resolve(reference, in: organization, context)
            if !chosen.contains(where: { $0.id == collection.id }) { chosen.append(collection) }
        }
        return chosen
    }

    static func names(_ collections: [CollectionSummary]) -> String {
        collections.map { "\"\(Console.terminalSafe($0.name ?? $0.id))\"" }.joined(separator: ", ")
    }

    /// A member's access to a collection as the commands name it; `none` takes it away.
    enum AccessChoice: String, CaseIterable, ExpressibleByArgument {
        case edit, readOnly = "read-only", hidePasswords = "hide-passwords", manage, none

        var access: CollectionAccess? { CollectionAccess(rawValue: rawValue) }
    }

    /// `collection access ORG C [MEMBER ACCESS]`: who may reach a collection's items, and how.
    struct Access: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "access",
            abstract: "Show who has access to a collection, or set one member's access to it.",
            discussion: """
            Online only; owners, admins and the collection's managers. ACCESS is one of:
              edit            view and change the items (an invitation's default)
              read-only       view the items; no change to them or their files
              hide-passwords  view them without passwords, hidden fields, passkeys
                              (the server never sends those)
              manage          change the items, rename the collection, choose who
                              has access
              none            no access: the member's devices drop its items
            Owners and admins reach every collection whatever is set here. Taking access away does not take back what the member already saw: change those passwords (docs/SECURITY.md, "Removing a member").

            Examples:
              vaultsync collection access Family Kids
              vaultsync collection access Family Kids frank@example.com read-only
              vaultsync collection access Family Kids frank@example.com none
            """)
        @OptionGroup var global: GlobalOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "The organization's name or id.") var organization: String
        @Argument(help: "The collection's name or id.") var collection: String
        @Argument(help: "The member's email or membership id (leave out, with ACCESS, to list who has access).") var member: String?
        @Argument(help: "edit, read-only, hide-passwords, manage or none.") var access: AccessChoice?

        func validate() throws {
            if member != nil && access == nil {
                throw ValidationError("give the access too: edit, read-only, hide-passwords, manage or none")
            }
        }

        func execute(_ context: CLIContext) async throws {
            let chosen = try OrganizationCommand.resolve(organization, in: try await context.engine.organizations())
            let target = try await CollectionCommand.resolve(collection, in: chosen, context)
            let members = try await context.engine.organizationMembers(id: chosen.id)
            let label = "\"\(Console.terminalSafe(target.name ?? target.id))\""
            guard let member, let access else {
                let grants = try await context.engine.collectionMembers(organizationID: chosen.id, collectionID: target.id)
                let emails = Dictionary(members.map { ($0.id, $0.email) }, uniquingKeysWith: { first, _ in first })
                if output.json {
                    Presentation.printJSON(.array(grants.map { grant in
                        .object(["memberId": .string(grant.collectionID), "email": emails[grant.collectionID].map(JSONValue.string) ?? .null,
                                 "access": .string(grant.access.rawValue)])
                    }))
                    return
                }
                if grants.isEmpty { Console.note("nobody is assigned to \(label); owners and admins reach it anyway") }
                for grant in grants {
                    print("\(grant.collectionID)\t\(Console.terminalSafe(emails[grant.collectionID] ?? "?"))\t\(grant.access.rawValue)")
                }
                return
            }
            let person = try OrganizationCommand.one(member, in: members, what: "member", id: \.id, name: \.email)
            try await context.engine.setCollectionAccess(organizationID: chosen.id, collectionID: target.id, memberID: person.id,
                                                         access: access.access)
            if output.json {
                Presentation.printJSON(.object(["collectionId": .string(target.id), "memberId": .string(person.id),
                                                "access": .string(access.rawValue)]))
                return
            }
            let who = Console.terminalSafe(person.email)
            print(access == .none ? "\(who) no longer has access to \(label)." : "\(who) now has \(access.rawValue) access to \(label).")
        }
    }
}

extension OrganizationCommand {
    /// On a terminal, asks `question` ([y/N]) unless `yes`; anything but yes ends the command with `refused`.
    /// `orYes`: what cannot be undone for others too needs `--yes` where nobody can be asked.
    static func askFirst(_ question: String, unless yes: Bool, refused: String, orYes: Bool = false) throws {
        guard !yes else { return }
        guard Console.stdinIsTTY else {
            if orYes { throw CLIError.usage("not at a terminal, nobody can be asked: give --yes to go ahead") }
            return
        }
        guard Console.confirm(question + " [y/N] ") else { throw CLIError.aborted(refused) }
    }

    /// `org invites`: this account's pending invitations.
    struct Invites: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "invites",
            abstract: "List the invitations to this account that it can still accept.",
            discussion: "Online only. Accept one with the code its owner gave you: vaultsync org accept ORG --code CODE\n\nExample:\n  vaultsync org invites --json")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var output: OutputOptions

        func execute(_ context: CLIContext) async throws {
            let invitations = try await context.engine.pendingInvitations()
            if output.json {
                Presentation.printJSON(.array(invitations.map { invitation in
                    .object(["id": .string(invitation.id), "organizationId": .string(invitation.organizationID),
                             "organizationName": .string(invitation.organizationName), "type": .string(OrganizationCommand.typeName(invitation.type))])
                }))
                return
            }
            if invitations.isEmpty { Console.note("no pending invitations") }
            for invitation in invitations {
                print("\(invitation.organizationID)\t\(Console.terminalSafe(invitation.organizationName))\t\(OrganizationCommand.typeName(invitation.type))")
            }
        }
    }

    /// `org role ORG MEMBER ROLE`.
    struct Role: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "role",
            abstract: "Change a member's role: owner, admin, manager or user.",
            discussion: """
            Online only; owners and admins (only an owner makes owners and admins, or changes them). The member's collections stay as they are; owners and admins reach every collection anyway. An organization keeps at least one confirmed owner: make another member an owner before you leave.

            Examples:
              vaultsync org role Family frank@example.com admin
              vaultsync org role Family frank@example.com owner
            """)
        enum Choice: String, CaseIterable, ExpressibleByArgument {
            case owner, admin, manager, user
            var wireValue: Int { switch self { case .owner: 0; case .admin: 1; case .user: 2; case .manager: 3 } }
        }
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The organization's name or id.") var organization: String
        @Argument(help: "The member's email or membership id.") var member: String
        @Argument(help: "owner, admin, manager or user.") var role: Choice

        func execute(_ context: CLIContext) async throws {
            let chosen = try OrganizationCommand.resolve(organization, in: try await context.engine.organizations())
            let target = try OrganizationCommand.one(member, in: try await context.engine.organizationMembers(id: chosen.id), what: "member",
                                                     id: \.id, name: \.email)
            try await context.engine.updateMember(organizationID: chosen.id, member: target, type: role.wireValue)
            print("\(Console.terminalSafe(target.email)) is now \(role == .owner || role == .admin ? "an" : "a") \(role.rawValue) of \"\(Console.terminalSafe(chosen.name))\".")
        }
    }

    /// `org remove ORG MEMBER`.
    struct Remove: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "remove",
            abstract: "Remove a member from an organization, or withdraw an invitation.",
            discussion: """
            Online only; owners and admins (only an owner removes an owner or an admin). The member's devices drop the organization's items at once when live, at their next sync otherwise. The organization is not re-keyed, as in Bitwarden: what they could read, they may have kept. Change the shared passwords that matter (docs/SECURITY.md, "Removing a member").

            Example:
              vaultsync org remove Family frank@example.com
            """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The organization's name or id.") var organization: String
        @Argument(help: "The member's email or membership id.") var member: String

        func execute(_ context: CLIContext) async throws {
            let chosen = try OrganizationCommand.resolve(organization, in: try await context.engine.organizations())
            let target = try OrganizationCommand.one(member, in: try await context.engine.organizationMembers(id: chosen.id), what: "member",
                                                     id: \.id, name: \.email)
            try await context.engine.removeMember(organizationID: chosen.id, memberID: target.id)
            let who = Console.terminalSafe(target.email)
            print(target.status == 0 ? "Withdrew the invitation of \(who) to \"\(Console.terminalSafe(chosen.name))\"."
                : "Removed \(who) from \"\(Console.terminalSafe(chosen.name))\". Change the shared passwords they should no longer know.")
        }
    }

    /// `org leave ORG`.
    struct Leave: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "leave",
            abstract: "Leave an organization: its items leave this device and your others.",
            discussion: """
            Online only. On a terminal you are asked first (--yes skips it). The last owner cannot leave: make another member an owner, or delete the organization.

            Example:
              vaultsync org leave Family
            """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The organization's name or id.") var organization: String
        @Flag(help: "Do not ask.") var yes = false

        func execute(_ context: CLIContext) async throws {
            let chosen = try OrganizationCommand.resolve(organization, in: try await context.engine.organizations())
            let name = Console.terminalSafe(chosen.name)
            try OrganizationCommand.askFirst("Leave \"\(name)\"? Its items leave your devices, and only its owners can invite you again.",
                                             unless: yes, refused: "nothing was changed")
            try await context.engine.leaveOrganization(id: chosen.id)
            print("Left \"\(name)\".")
        }
    }

    /// `org delete ORG`.
    struct Delete: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "delete",
            abstract: "Delete an organization you own, with its items, attachments and collections, for every member.",
            discussion: """
            Online only; owners; the master password is asked again (or --password-file, VAULTSYNC_PASSWORD). On a terminal you are asked first; elsewhere --yes is needed. This cannot be undone: export what you want to keep first.

            Example:
              vaultsync org delete Family
            """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The organization's name or id.") var organization: String
        @Flag(help: "Do not ask.") var yes = false

        func execute(_ context: CLIContext) async throws {
            let chosen = try OrganizationCommand.resolve(organization, in: try await context.engine.organizations())
            let name = Console.terminalSafe(chosen.name)
            try OrganizationCommand.askFirst("Delete \"\(name)\" and every item in it, for all its members? This cannot be undone.",
                                             unless: yes, refused: "nothing was deleted", orYes: true)
            let password = try requirePassword(context, for: "Deleting an organization")
            try await context.engine.deleteOrganization(id: chosen.id, password: password)
            print("Deleted \"\(name)\" with its items.")
        }
    }
}

