import ArgumentParser
import Foundation
import VaultClient
import VaultModels

struct CollectionCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "collection",
        abstract: "List, add, rename and delete an organization's collections, and choose who has access to them.",
        discussion: """
        A collection groups an organization's items and says who may see them. Its name is encrypted with the organization's key: the server never reads it. Adding, renaming and deleting are online only, for owners and admins, on a device where the organization is trusted (`vaultsync org trust`); listing reads the last sync, offline too.

        Examples:
          vaultsync collection list Family
          vaultsync collection add Family Kids
          vaultsync collection rename Family Kids Children
          vaultsync collection delete Family Children
          vaultsync collection access Family Kids frank@example.com read-only
        """,
        subcommands: [List.self, Add.self, Rename.self, Delete.self, Access.self],
        defaultSubcommand: List.self
    )

    /// The one collection of `organization` that `reference` names (its id, or its name in any case).
    static func resolve(_ reference: String, in organization: OrganizationSummary, _ context: CLIContext) async throws -> CollectionSummary {
        let all = try await context.engine.collections().filter { $0.organizationID == organization.id }
        return try OrganizationCommand.one(reference, in: all, what: "collection", id: \.id, name: \.name)
    }

    struct List: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "list", abstract: "List collections (of one organization, or of all), from the last sync.",
            discussion: "Example:\n  vaultsync collection list Family --json")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "The organization's name or id (all organizations when left out).") var organization: String?

        func execute(_ context: CLIContext) async throws {
            let organizations = try await context.engine.organizations()
            let only = try organization.map { try OrganizationCommand.resolve($0, in: organizations) }
            let collections = try await context.engine.collections().filter { only == nil || $0.organizationID == only?.id }
            let names = Dictionary(organizations.map { ($0.id, $0.name) }, uniquingKeysWith: { first, _ in first })
            if output.json {
                Presentation.printJSON(.array(collections.map { collection in
                    .object([
                        "id": .string(collection.id), "organizationId": .string(collection.organizationID),
                        "organizationName": names[collection.organizationID].map(JSONValue.string) ?? .null,
                        "name": collection.name.map(JSONValue.string) ?? .null,
                    ])
                }))
                return
            }
            if collections.isEmpty { Console.note("no collections") }
            for collection in collections {
                let organizationName = Console.terminalSafe(names[collection.organizationID] ?? collection.organizationID)
                print("\(collection.id)\t\(organizationName)\t\(Console.terminalSafe(collection.name ?? "(name does not decrypt here)"))")
            }
        }
    }

    struct Add: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "add", abstract: "Add a collection to an organization you own or administer.",
            discussion: "Online only. Example:\n  vaultsync collection add Family Kids")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "The organization's name or id.") var organization: String
        @Argument(help: "The new collection's name (encrypted: the server never sees it).") var name: String

        func execute(_ context: CLIContext) async throws {
            let chosen = try OrganizationCommand.resolve(organization, in: try await context.engine.organizations())
            let id = try await context.engine.addCollection(organizationID: chosen.id, name: name)
            let trimmed = name.trimmingCharacters(in: .whitespacesAndNewlines)
            if output.json {
                Presentation.printJSON(.object(["id": .string(id), "organizationId": .string(chosen.id), "name": .string(trimmed)]))
                return
            }
            print("Added the collection \"\(Console.terminalSafe(trimmed))\" (\(id)) to \"\(Console.terminalSafe(chosen.name))\".")
        }
    }

    struct Rename: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "rename", abstract: "Rename a collection; who has access stays as it is.",
            discussion: "Online only. Example:\n  vaultsync collection rename Family Kids Children")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The organization's name or id.") var organization: String
        @Argument(help: "The collection's name or id.") var collection: String
        @Argument(help: "Its new name.") var name: String

        func execute(_ context: CLIContext) async throws {
            let chosen = try OrganizationCommand.resolve(organization, in: try await context.engine.organizations())
            let target = try await CollectionCommand.resolve(collection, in: chosen, context)
            try await context.engine.renameCollection(organizationID: chosen.id, id: target.id, name: name)
            print("Renamed the collection \"\(Console.terminalSafe(target.name ?? target.id))\" to "
                + "\"\(Console.terminalSafe(name.trimmingCharacters(in: .whitespacesAndNewlines)))\".")
        }
    }

    struct Delete: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "delete", abstract: "Delete a collection; its items stay in the organization, in their other collections.",
            discussion: "Online only. Example:\n  vaultsync collection delete Family Children")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The organization's name or id.") var organization: String
        @Argument(help: "The collection's name or id.") var collection: String

        func execute(_ context: CLIContext) async throws {
            let chosen = try OrganizationCommand.resolve(organization, in: try await context.engine.organizations())
            let target = try await CollectionCommand.resolve(collection, in: chosen, context)
            try await context.engine.deleteCollection(organizationID: chosen.id, id: target.id)
            print("Deleted the collection \"\(Console.terminalSafe(target.name ?? target.id))\" from \"\(Console.terminalSafe(chosen.name))\".")
        }
    }
}
