import ArgumentParser
import Foundation
import VaultClient
import VaultModels

struct FolderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "folder",
        abstract: "List, add, rename and delete folders (works offline).",
        discussion: """
        Examples:
          vaultsync folder list
          vaultsync folder add Work
          vaultsync folder rename Work Office
          vaultsync folder delete Office
        """,
        subcommands: [List.self, Add.self, Rename.self, Delete.self],
        defaultSubcommand: List.self
    )

    struct List: VaultCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List folders.", discussion: "Example:\n  vaultsync folder list --json")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var output: OutputOptions

        func execute(_ context: CLIContext) async throws {
            let folders = try await context.engine.folders().sorted { $0.name.localizedCaseInsensitiveCompare($1.name) == .orderedAscending }
            // The items `list --folder F` shows: neither the trash nor the archive. Archived items were counted while
            // that list left them out (RELIABILITY bug 99). As for `list`, the rest of each item is not decrypted.
            var counts: [String: Int] = [:]
            for item in try await context.engine.itemSummaries() {
                if case .success(let shown) = item.result, !shown.isDeleted, !shown.isArchived, let folder = shown.folderId {
                    counts[folder, default: 0] += 1
                }
            }
            if output.json {
                Presentation.printJSON(.array(folders.map { Presentation.folderJSON($0, itemCount: counts[$0.id ?? ""] ?? 0) }))
                return
            }
            if folders.isEmpty { Console.note("no folders") }
            Table.print(header: ["ID", "NAME", "ITEMS"], rows: folders.map { folder in
                let count = counts[folder.id ?? ""] ?? 0
                return [folder.id ?? "", Presentation.oneLine(folder.name), "\(count) item\(count == 1 ? "" : "s")"]
            })
        }
    }

    /// Refuses `name` when a folder other than `besides` has it (compared without case), quoting that folder's name.
    /// `none` is refused too: FOLDER arguments take it for no folder (`move ITEM none`, `list --folder none`), so a
    /// folder of that name could be named by its id only (`folder add none` made one: RELIABILITY bug 89).
    static func refuseTaken(_ name: String, besides id: String? = nil, _ context: CLIContext) async throws {
        if name.caseInsensitiveCompare("none") == .orderedSame {
            throw CLIError.usage("\"\(name)\" cannot be a folder's name: FOLDER arguments take it for no folder (move ITEM none); choose another name")
        }
        if let taken = try await context.engine.folders().first(where: { $0.id != id && $0.name.caseInsensitiveCompare(name) == .orderedSame }) {
            throw CLIError.usage("a folder named \"\(taken.name)\" exists already")
        }
    }

    struct Add: VaultCommand {
        static let configuration = CommandConfiguration(commandName: "add", abstract: "Add a folder.", discussion: "Example:\n  vaultsync folder add Work")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The folder's name.") var name: String

        func execute(_ context: CLIContext) async throws {
            try await FolderCommand.refuseTaken(name, context)
            let result = try await context.engine.createFolder(name: name)
            print("Added folder \"\(name)\" (\(result.value.id ?? ""))")
            noteOutcome(result.outcome)
        }
    }

    struct Rename: VaultCommand {
        static let configuration = CommandConfiguration(commandName: "rename", abstract: "Rename a folder.", discussion: "Example:\n  vaultsync folder rename Work Office")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The folder (name or id).") var folder: String
        @Argument(help: "The new name.") var name: String

        func execute(_ context: CLIContext) async throws {
            guard let id = try await context.folderID(folder) else { throw CLIError.usage("give a folder") }
            // Another folder's name is refused as `add` refuses it (a rename made two "F2", and every use of the
            // name then asked for an id: RELIABILITY bug 73); a new case of the folder's own name is a rename.
            try await FolderCommand.refuseTaken(name, besides: id, context)
            let outcome = try await context.engine.renameFolder(id: id, name: name)
            print("Renamed \"\(folder)\" to \"\(name)\"")
            noteOutcome(outcome)
        }
    }

    struct Delete: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "delete",
            abstract: "Delete a folder (its items stay, without a folder).", discussion: "Example:\n  vaultsync folder delete Office")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The folder (name or id).") var folder: String

        func execute(_ context: CLIContext) async throws {
            guard let id = try await context.folderID(folder) else { throw CLIError.usage("give a folder") }
            let outcome = try await context.engine.deleteFolder(id: id)
            print("Deleted folder \"\(folder)\" (its items are kept, without a folder)")
            noteOutcome(outcome)
        }
    }
}
