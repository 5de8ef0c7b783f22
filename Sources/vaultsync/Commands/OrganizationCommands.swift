import ArgumentParser
import Foundation
import VaultClient
import VaultModels

struct OrganizationCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "org",
        abstract: "List the account's organizations and trust the ones you joined.",
        discussion: """
        A server can announce a membership you never accepted, with an organization key it knows. Such an organization's shared items can be read, but nothing of yours (a new item, an edit of one of its items) is encrypted with its key until you trust it on this device, and a trusted organization whose key later changes is refused again until you trust it anew.

        Examples:
          vaultsync org list
          vaultsync org trust Family
        """,
        subcommands: [List.self, Trust.self],
        defaultSubcommand: List.self
    )

    struct List: VaultCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List organizations with their trust on this device.",
                                                        discussion: "Example:\n  vaultsync org list --json")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var output: OutputOptions

        func execute(_ context: CLIContext) async throws {
            let organizations = try await context.engine.organizations()
            if output.json {
                Presentation.printJSON(.array(organizations.map { organization in
                    .object([
                        "id": .string(organization.id), "name": .string(organization.name), "status": .int(organization.status),
                        "keyAvailable": .bool(organization.keyAvailable), "trusted": .bool(organization.trusted),
                        "keyChanged": .bool(organization.keyChanged),
                    ])
                }))
                return
            }
            if organizations.isEmpty { Console.note("no organizations") }
            for organization in organizations {
                let trust = organization.trusted ? "trusted" : organization.keyChanged ? "KEY CHANGED" :
                    organization.keyAvailable ? "not trusted" : "no key (not confirmed)"
                print("\(organization.id)\t\(Console.styled(organization.name, .bold))\t\(trust)")
            }
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
            let all = try await context.engine.organizations()
            let matches = all.filter { $0.id == organization.lowercased() || $0.name.caseInsensitiveCompare(organization) == .orderedSame }
            guard let chosen = matches.first else { throw CLIError.notFound(what: "organization", reference: organization) }
            guard matches.count == 1 else {
                throw CLIError.ambiguous(what: "organization", reference: organization, candidates: matches.map { "\($0.name) (\($0.id))" })
            }
            try await context.engine.trustOrganization(id: chosen.id)
            print("Trusted \"\(chosen.name)\" (\(chosen.id)) on this device.")
        }
    }
}
