import ArgumentParser
import Foundation
import VaultClient
import VaultModels
import VaultSyncCore

struct SyncCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Send queued changes (resolving conflicts without loss) and fetch the latest vault.",
        discussion: """
        Each queued change is checked against the server's current version. When both sides changed the item, they are merged field by field (the default, `config conflicts merge`); where both changed the same field, or under `config conflicts backup`, the newer version wins and the other is kept as a backup item named "NAME - offline conflict yyyy-MM-dd HHmmss.SSS" (UTC). See `vaultsync conflicts`.

        Examples:
          vaultsync sync
          vaultsync sync --json
        """)
    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions

    func execute(_ context: CLIContext) async throws {
        _ = try context.requireServer()
        let showProgress = Console.stderrIsTTY && !output.json
        let engine = context.engine
        let progress = Task {
            guard showProgress else { return }
            for await status in await engine.statusUpdates() {
                if let (done, total) = status.resolving, total > 20 {
                    let width = 30
                    let filled = total == 0 ? width : done * width / total
                    FileHandle.standardError.write(Data("\r[\(String(repeating: "#", count: filled))\(String(repeating: ".", count: width - filled))] \(done)/\(total)".utf8))
                }
            }
        }
        let report: SyncReport
        do {
            report = try await engine.sync()
        } catch {
            progress.cancel()
            if showProgress { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
            // Resolved, then the download failed: what the resolution did is shown first, then why it stopped.
            if case VaultError.syncIncomplete(let partial, _) = error { await show(partial, engine: engine) }
            let (message, status) = describe(error)
            if [.serverUnreachable, .verificationFailed].contains(status), let waiting = try? await engine.pendingCount() {
                // Nothing waits here (all sent, or nothing made): say so, not "changes stay queued".
                guard waiting > 0 else {
                    throw CLIError.stated("Nothing is queued on this device (every change made here has reached the server), but the "
                                          + "latest vault could not be fetched. " + message.replacingOccurrences(of: CLIError.changesStayQueued, with: ""), status)
                }
                Console.note("\(waiting) change\(waiting == 1 ? " stays" : "s stay") queued on this device.")
            }
            throw error
        }
        progress.cancel()
        if showProgress { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
        await show(report, engine: engine)
    }

    /// The changes still pending whose last attempt failed, so they wait for a later one (backoff; a sync
    /// leaves them in line until then, which a person would otherwise not see), and the first moment one goes.
    static func waitingAfterFailure(_ engine: VaultEngine) async -> (count: Int, next: WireDate?) {
        let waiting = ((try? await engine.pendingChanges()) ?? []).compactMap { change -> WireDate? in
            change.metadata.state == .pending ? change.metadata.nextAttemptDate : nil
        }
        return (waiting.count, waiting.min())
    }

    func show(_ report: SyncReport, engine: VaultEngine) async {
        let waiting = report.stillPending > 0 ? await Self.waitingAfterFailure(engine) : (count: 0, next: nil)
        if output.json {
            Presentation.printJSON(.object([
                "resolved": .int(report.resolved),
                "stillPending": .int(report.stillPending),
                "waitingAfterFailure": .int(waiting.count),
                "nextAttempt": Presentation.date(waiting.next),
                "needsAttention": .int(report.needsAttention),
                "backups": .array(report.backups.map { .object(["backupId": .string($0.backupID), "itemId": .string($0.originalID), "name": .string($0.name),
                                                                "reason": .string($0.reason == .conflict ? "conflict" : "password-history")]) }),
                "messages": .array(report.messages.map(JSONValue.string)),
                "received": .int(report.received),
                "removed": .int(report.removedByServer),
            ]))
            return
        }
        print("Synced: \(report.resolved) change\(report.resolved == 1 ? "" : "s") sent, \(report.stillPending) still pending, \(report.needsAttention) need attention.")
        if report.received > 0 || report.removedByServer > 0 {
            var parts: [String] = []
            if report.received > 0 { parts.append("\(report.received) item\(report.received == 1 ? "" : "s") new or changed") }
            if report.removedByServer > 0 { parts.append("\(report.removedByServer) removed (deleted on another device)") }
            print("  From the server: " + parts.joined(separator: ", ") + ".")
        }
        if waiting.count > 0, let next = waiting.next {
            let when = String(next.iso8601.prefix(19)).replacingOccurrences(of: "T", with: " ")
            let counted = waiting.count == 1 ? "1 of the pending changes failed its last attempt and is" : "\(waiting.count) of the pending changes failed their last attempt and are"
            print("  \(counted) tried again from \(when) UTC; `vaultsync pending retry` puts them back in line for the next sync.")
        }
        for backup in report.backups {
            let why = backup.reason == .conflict ? "conflict, both versions kept"
                : "password changed several times offline, the server's earlier version kept for its password history"
            print("  \(why): backup \"\(backup.name)\" (\(backup.backupID)); review with `vaultsync conflicts show \(backup.backupID)`")
        }
        for message in report.messages { print("  \(message)") }
    }
}

struct PendingCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pending",
        abstract: "Changes waiting for the server: list, retry, discard.",
        discussion: """
        Examples:
          vaultsync pending
          vaultsync pending retry
          vaultsync pending discard Bank --yes
        """,
        subcommands: [List.self, Retry.self, Discard.self],
        defaultSubcommand: List.self
    )

    struct List: VaultCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List queued changes.", discussion: "Example:\n  vaultsync pending list --json")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var output: OutputOptions

        func execute(_ context: CLIContext) async throws {
            let changes = try await context.engine.pendingChanges()
            if output.json {
                Presentation.printJSON(.array(changes.map { change in
                    .object([
                        "itemId": .string(change.itemID),
                        "itemKind": .string(change.itemKind.rawValue),
                        "name": Presentation.string(change.itemName),
                        "kind": .string(change.metadata.kind.rawValue),
                        "since": .string(change.metadata.createdDate.iso8601),
                        "updated": .string(change.metadata.updatedDate.iso8601),
                        "attempts": .int(change.metadata.attempts),
                        "lastError": Presentation.string(change.metadata.lastError),
                        "nextAttempt": Presentation.date(change.metadata.nextAttemptDate),
                        "state": .string(change.metadata.state == .needsAttention ? "needs-attention" : "pending"),
                    ])
                }))
                return
            }
            if changes.isEmpty {
                print("Nothing pending.")
                return
            }
            for change in changes {
                let state = change.metadata.state == .needsAttention ? Console.styled("needs attention", .red) : "pending"
                var line = "\(change.itemID)\t\(change.itemName ?? "?")\t\(change.itemKind.rawValue) \(change.metadata.kind.rawValue)\tsince \(change.metadata.createdDate.iso8601.prefix(19))Z\t\(change.metadata.attempts) attempts\t\(state)"
                if let error = change.metadata.lastError { line += "\t\(error)" }
                print(line)
            }
        }
    }

    struct Retry: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "retry",
            abstract: "Put changes that need attention (or one item's) back in line; they go with the next sync.",
            discussion: "Examples:\n  vaultsync pending retry\n  vaultsync pending retry Bank")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "Only this item (id or name).") var item: String?

        func execute(_ context: CLIContext) async throws {
            let id = try await item.asyncMap { try await context.pendingItemID($0) }
            let count = try await context.engine.retryPending(itemID: id)
            print("\(count) change\(count == 1 ? "" : "s") will be retried at the next sync.")
        }
    }

    struct Discard: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "discard",
            abstract: "Give up an item's queued change (says what is lost; needs --yes).",
            discussion: "Example:\n  vaultsync pending discard Bank --yes")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The item (id or name).") var item: String
        @Flag(help: "Confirm.") var yes = false

        func execute(_ context: CLIContext) async throws {
            let id = try await context.pendingItemID(item)
            let description = try await context.engine.describeDiscard(itemID: id)
            guard yes else {
                throw CLIError.aborted("Discarding: \(description.lost). Nothing was changed; repeat with --yes to do it.")
            }
            _ = try await context.engine.discardPending(itemID: id)
            print("Discarded: \(description.lost).")
        }
    }
}

extension CLIContext {
    /// An item or folder with a queued change, by id or name.
    func pendingItemID(_ reference: String) async throws -> String {
        let changes = try await engine.pendingChanges()
        let candidates = changes.map { (id: $0.itemID, name: $0.itemName ?? "") }
        return try await Presentation.find(reference, in: candidates, what: "pending change")
    }
}

struct ConflictsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "conflicts",
        abstract: "Backups made by conflict resolution: list, compare, settle.",
        discussion: """
        Examples:
          vaultsync conflicts
          vaultsync conflicts show BACKUP
          vaultsync conflicts resolve BACKUP --keep mine
        """,
        subcommands: [List.self, Show.self, Resolve.self],
        defaultSubcommand: List.self
    )

    struct List: VaultCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List conflict backups, newest first.",
                                                        discussion: "Example:\n  vaultsync conflicts list --json")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var output: OutputOptions

        func execute(_ context: CLIContext) async throws {
            let backups = try await context.engine.conflictBackups()
            let items = try await context.engine.items()
            func name(_ id: String) -> String? { items.first { $0.id == id }.flatMap { try? $0.result.get().name } }
            if output.json {
                Presentation.printJSON(.array(backups.map { backup in
                    .object([
                        "backupId": .string(backup.backupID),
                        "backupName": Presentation.string(backup.name),
                        "itemId": .string(backup.originalID),
                        "itemName": Presentation.string(name(backup.originalID)),
                        "created": .string(backup.createdAt.iso8601),
                        "backupHolds": .string(backup.losingSide.rawValue),
                        "reviewed": .bool(backup.reviewedAt != nil),
                    ])
                }))
                return
            }
            if backups.isEmpty {
                print("No conflicts.")
                return
            }
            Table.print(header: ["BACKUP", "NAME", "HOLDS", "MADE", "STATE"], rows: backups.map { backup in
                let holds = backup.losingSide == .mine ? "this device's version" : backup.losingSide == .theirs ? "the server's version" : "the losing version"
                let state = backup.reviewedAt == nil ? Console.styled("new", .yellow) : "reviewed"
                return [backup.backupID, Presentation.oneLine(backup.name ?? "?"), "holds \(holds)", "\(backup.createdAt.iso8601.prefix(19))Z", state]
            })
        }
    }

    struct Show: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "show",
            abstract: "The two versions side by side, field by field, differences marked.",
            discussion: "Examples:\n  vaultsync conflicts show BACKUP\n  vaultsync conflicts show BACKUP --reveal")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "The backup (id or name).") var backup: String
        @Flag(help: "Show secrets instead of masking them.") var reveal = false

        func execute(_ context: CLIContext) async throws {
            let comparison = try await ConflictComparison.load(backup, context: context)
            if output.json {
                Presentation.printJSON(comparison.json(reveal: reveal))
            } else {
                for line in comparison.lines(reveal: reveal) { print(line) }
            }
        }
    }

    struct Resolve: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "resolve",
            abstract: "Settle a conflict: keep mine, theirs, or both (works offline).",
            discussion: """
            mine/theirs: the chosen version becomes the live item and the backup goes to the trash (both password histories are kept). both: leave the item and the backup as they are. When the live item was deleted for good, the backup becomes the item again if it holds the version chosen; otherwise that version is gone and nothing is changed.

            Example:
              vaultsync conflicts resolve BACKUP --keep theirs
            """)
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The backup (id or name).") var backup: String
        @Option(help: "mine, theirs or both.") var keep: String

        func execute(_ context: CLIContext) async throws {
            guard let choice = ConflictChoice(rawValue: keep) else { throw CLIError.usage("--keep must be mine, theirs or both") }
            let id = try await context.backupID(backup)
            let result = try await context.engine.resolveConflict(backupID: id, keep: choice)
            switch choice {
            case .both: print("Kept both versions.")
            case .mine, .theirs:
                if let name = result.backupBecameItem {
                    print("Kept \(choice == .mine ? "your" : "their") version: the item had been deleted for good, so the backup is the item again, named \"\(name)\".")
                } else {
                    print("Kept \(choice == .mine ? "your" : "their") version\(result.mergedBackupIntoItem ? " (copied from the backup into the item)" : "")\(result.trashedBackup ? "; the backup is in the trash" : "").")
                }
            }
            noteOutcome(result.outcome)
        }
    }
}

extension CLIContext {
    func backupID(_ reference: String) async throws -> String {
        try await backup(reference).backupID
    }

    /// The conflict backup REFERENCE names (id or name), from one listing.
    func backup(_ reference: String) async throws -> ConflictBackupSummary {
        let backups = try await engine.conflictBackups()
        let candidates = backups.map { (id: $0.backupID, name: $0.name ?? "") }
        let id = try await Presentation.find(reference, in: candidates, what: "conflict backup")
        guard let summary = backups.first(where: { $0.backupID == id }) else { throw CLIError.notFound(what: "conflict backup", reference: reference) }
        return summary
    }
}

/// A conflict's two versions, field by field (`conflicts show`, and the demo).
struct ConflictComparison {
    var summary: ConflictBackupSummary
    var backup: CipherView
    var live: CipherView?
    var folderNames: [String: String]
    /// The comparison of the merge that made the backup (secrets in clear; masked when shown unless
    /// --reveal); `nil` for a backup made without a merge.
    var merge: ItemMerge.ItemDifference? = nil

    static func load(_ reference: String, context: CLIContext) async throws -> ConflictComparison {
        let summary = try await context.backup(reference)
        let id = summary.backupID
        let backup = try await context.engine.item(id: id)
        let live = try? await context.engine.item(id: summary.originalID)
        return ConflictComparison(summary: summary, backup: backup, live: live, folderNames: try await context.folderNames(),
                                  merge: try await context.engine.conflictDifference(backupID: id, reveal: true))
    }

    /// The merge's comparison as shown: secret values masked unless `reveal`.
    func mergeShown(reveal: Bool) -> ItemMerge.ItemDifference? {
        reveal ? merge : merge?.masked
    }

    /// Rows of (label, live value, backup value, differs).
    var rows: [(label: String, live: Presentation.Field?, backup: Presentation.Field?, differs: Bool)] {
        var liveFields = live.map { Presentation.fields(of: $0, folderNames: folderNames) } ?? []
        var backupFields = Presentation.fields(of: backup, folderNames: folderNames)
        // The backup's name carries the conflict suffix; compare the original names.
        if let index = backupFields.firstIndex(where: { $0.label == "name" }) { backupFields[index].value = BackupName.originalName(of: backup.name) }
        liveFields.removeAll { $0.label.hasPrefix("history[") }
        backupFields.removeAll { $0.label.hasPrefix("history[") }
        var labels: [String] = []
        for field in liveFields + backupFields where !labels.contains(field.label) { labels.append(field.label) }
        // Which rows differ is the library's comparison (ItemMerge.compare, the merge's own rules: URIs and
        // custom fields by identity); the item's trash and archive state is not a field of it.
        var original = backup
        original.name = BackupName.originalName(of: backup.name)
        let changed = live.map { Set(ItemMerge.compare(original, $0).fields.map(\.field)) }
        return labels.map { label in
            let left = liveFields.first { $0.label == label }
            let right = backupFields.first { $0.label == label }
            guard let changed, let shows = Self.comparedField(of: label) else { return (label, left, right, left?.value != right?.value) }
            return (label, left, right, changed.contains(where: shows))
        }
    }

    /// Which of the comparison's field paths a row of the table shows (`nil`: a row the comparison has
    /// no field for, compared as shown).
    static func comparedField(of label: String) -> ((String) -> Bool)? {
        switch label {
        case "name", "type", "folder", "favorite", "notes": return { $0 == label }
        case "username", "password", "totp": return { $0 == "login." + label }
        case "passkeys": return { $0.hasPrefix("login.passkey[") }
        case let uri where uri == "uri" || uri.hasPrefix("uri["): return { $0.hasPrefix("login.uri[") }
        case let field where field.hasPrefix("field."):
            let name = String(field.dropFirst("field.".count))
            return { $0 == "field[\(name)]" || $0.hasPrefix("field[\(name)#") }
        case let group where group.hasPrefix("card.") || group.hasPrefix("identity.") || group.hasPrefix("sshKey."): return { $0 == group }
        default: return nil
        }
    }

    var liveSide: String { summary.losingSide == .mine ? "theirs (live item)" : summary.losingSide == .theirs ? "mine (live item)" : "live item" }
    var backupSide: String { summary.losingSide == .mine ? "mine (backup)" : summary.losingSide == .theirs ? "theirs (backup)" : "backup" }

    func json(reveal: Bool) -> JSONValue {
        .object([
            "backupId": .string(summary.backupID),
            "itemId": .string(summary.originalID),
            "backupHolds": .string(summary.losingSide.rawValue),
            "created": .string(summary.createdAt.iso8601),
            "fields": .array(rows.map { row in
                .object([
                    "field": .string(row.label),
                    "live": row.live.map { .string(Presentation.masked($0, reveal: reveal)) } ?? .null,
                    "backup": row.backup.map { .string(Presentation.masked($0, reveal: reveal)) } ?? .null,
                    "differs": .bool(row.differs),
                ])
            }),
            "merge": mergeShown(reveal: reveal).map { difference in
                .array(difference.fields.map { field in
                    .object(["field": .string(field.field), "base": field.base.map(JSONValue.string) ?? .null,
                             "mine": field.mine.map(JSONValue.string) ?? .null, "theirs": field.theirs.map(JSONValue.string) ?? .null,
                             "outcome": .string(field.outcome.rawValue)])
                })
            } ?? .null,
            "livePasswordHistory": .int(live?.passwordHistory.count ?? 0),
            "backupPasswordHistory": .int(backup.passwordHistory.count),
        ])
    }

    func lines(reveal: Bool) -> [String] {
        func cell(_ field: Presentation.Field?) -> String {
            guard let field else { return "—" }
            let text = Presentation.oneLine(Presentation.masked(field, reveal: reveal))
            return text.count > 34 ? String(text.prefix(33)) + "…" : text
        }
        func pad(_ text: String, _ width: Int) -> String { text.count >= width ? text : text + String(repeating: " ", count: width - text.count) }
        // Columns as wide as their longest entry ("card.cardholderName", "login.uri[https://…]").
        let labelWidth = max(16, (rows.map(\.label.count).max() ?? 0) + 2)
        var lines = [
            "Conflict on \"\(live?.name ?? BackupName.originalName(of: backup.name))\" — backup \(summary.backupID) made \(summary.createdAt.iso8601.prefix(19))Z",
            "  " + pad("field", labelWidth) + pad(liveSide, 36) + backupSide,
        ]
        for row in rows {
            let mark = row.differs ? Console.styled("≠", .yellow) : " "
            lines.append("\(mark) " + pad(row.label, labelWidth) + pad(cell(row.live), 36) + cell(row.backup))
        }
        func entries(_ count: Int) -> String { count == 1 ? "1 entry" : "\(count) entries" }
        lines.append("  password history: \(entries(live?.passwordHistory.count ?? 0)) (live), \(entries(backup.passwordHistory.count)) (backup)")
        if let difference = mergeShown(reveal: reveal) {
            lines.append("  what the merge compared (the version both started from → mine | theirs):")
            let fieldWidth = max(22, (difference.fields.map(\.field.count).max() ?? 0) + 2)
            for field in difference.fields {
                let values = "\(field.base ?? "—") → \(field.mine ?? "—") | \(field.theirs ?? "—")"
                let taken: String
                switch field.outcome {
                case .unchanged: taken = "unchanged"
                case .mine: taken = "mine taken"
                case .theirs: taken = "theirs taken"
                case .same: taken = "same on both"
                case .conflict: taken = "changed on both: the newer kept, the other in this backup"
                }
                lines.append("    " + pad(field.field, fieldWidth) + Presentation.oneLine(values) + "  (\(taken))")
            }
        }
        lines.append("  settle with: vaultsync conflicts resolve \(summary.backupID) --keep mine|theirs|both")
        return lines
    }
}

struct DraftsCommand: AsyncParsableCommand {
    /// DRAFT as ITEM is read (id, a 6+ character id prefix, or the name of the item it edits): the full id was
    /// needed, where every other command takes a prefix (RELIABILITY bug 73).
    static func draftID(_ reference: String, _ context: CLIContext) async throws -> String {
        let drafts = try await context.engine.drafts()
        return try await Presentation.find(reference, in: drafts.map { (id: $0.id, name: $0.item.name) }, what: "draft")
    }

    static let configuration = CommandConfiguration(
        commandName: "drafts",
        abstract: "Autosaved edits (encrypted): list, recover, discard.",
        discussion: """
        `edit` autosaves what you typed in the editor as an encrypted draft before saving it; if the save did not happen (crash, refused), recover it here.

        Examples:
          vaultsync drafts
          vaultsync drafts recover DRAFT
          vaultsync drafts discard DRAFT
        """,
        subcommands: [List.self, Recover.self, Discard.self],
        defaultSubcommand: List.self
    )

    struct List: VaultCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "List drafts, newest first.", discussion: "Example:\n  vaultsync drafts list --json")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var output: OutputOptions

        func execute(_ context: CLIContext) async throws {
            let drafts = try await context.engine.drafts()
            if output.json {
                Presentation.printJSON(.array(drafts.map { draft in
                    .object(["draftId": .string(draft.id), "itemId": Presentation.string(draft.itemID), "name": .string(draft.item.name),
                             "type": .string(draft.item.type.name), "updated": .string(draft.updatedDate.iso8601)])
                }))
                return
            }
            if drafts.isEmpty { print("No drafts.") }
            Table.print(header: ["DRAFT", "NAME", "OF", "UPDATED"], rows: drafts.map { draft in
                [draft.id, Presentation.oneLine(draft.item.name), draft.itemID.map { "edit of \($0)" } ?? "new item", "\(draft.updatedDate.iso8601.prefix(19))Z"]
            })
        }
    }

    struct Recover: VaultCommand {
        static let configuration = CommandConfiguration(commandName: "recover", abstract: "Save a draft as the item (works offline).",
                                                        discussion: "Example:\n  vaultsync drafts recover DRAFT")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The draft (id, id prefix of 6+ characters, or its item's name).") var draft: String

        func execute(_ context: CLIContext) async throws {
            let draft = try await DraftsCommand.draftID(draft, context)
            let found = try await context.engine.draft(id: draft)
            let outcome: SaveOutcome
            if let itemID = found.itemID, (try? await context.engine.item(id: itemID)) != nil {
                // Based on the version the edit started from: what another device changed since is merged, not reverted.
                outcome = try await context.engine.updateItem(found.item, basedOn: found.base).outcome
            } else {
                var item = found.item
                item.id = nil
                outcome = try await context.engine.addItem(item).outcome
            }
            // A successful save already removes the item's drafts; a new item's draft goes here.
            try? await context.engine.discardDraft(id: draft)
            print("Recovered \"\(found.item.name)\".")
            noteOutcome(outcome)
        }
    }

    struct Discard: VaultCommand {
        static let configuration = CommandConfiguration(commandName: "discard", abstract: "Delete a draft.", discussion: "Example:\n  vaultsync drafts discard DRAFT")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The draft (id, id prefix of 6+ characters, or its item's name).") var draft: String

        func execute(_ context: CLIContext) async throws {
            try await context.engine.discardDraft(id: try await DraftsCommand.draftID(draft, context))
            print("Discarded the draft.")
        }
    }
}
