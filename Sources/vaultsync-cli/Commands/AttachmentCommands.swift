import ArgumentParser
import CommandLineSupport
import Foundation
import VaultClient
import VaultModels

/// `vaultsync attachment list|add|get|delete`: files attached to personal items (docs/CLI.md).
struct AttachmentCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "attachment",
        abstract: "Files attached to an item: list, add, get, rename, delete.",
        discussion: """
        ITEM is an id, an id prefix (6+ characters) or a unique name; ATTACHMENT is a file name or an id. \
        Files are encrypted on this device before they leave it (a fresh key per file, wrapped by the item's \
        key). Listing, adding, deleting and renaming work offline (they wait in the queue for the next sync); \
        getting, and renaming, a file this device has never downloaded need the server; a file once downloaded is kept \
        for reading offline (`config attachment-cache`).

        Examples:
          vaultsync attachment list Bank
          vaultsync attachment add Bank ~/scans/card.pdf
          vaultsync attachment add Bank recovery.txt --name "recovery codes.txt"
          vaultsync attachment get Bank card.pdf --output ~/card.pdf
          vaultsync attachment get Bank card.pdf --output - | less
          vaultsync attachment delete Bank card.pdf
        """,
        subcommands: [List.self, Add.self, Get.self, Rename.self, Delete.self],
        defaultSubcommand: List.self
    )

    struct List: VaultCommand {
        static let configuration = CommandConfiguration(commandName: "list", abstract: "The item's attachments (works offline).",
                                                        discussion: "Example:\n  vaultsync attachment list Bank --json")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "The item (id, id prefix or name).") var item: String

        func execute(_ context: CLIContext) async throws {
            let id = try await context.itemID(item)
            let attachments = try await context.engine.attachments(itemID: id)
            if output.json {
                Presentation.printJSON(.array(attachments.map(Presentation.attachmentJSON)))
                return
            }
            if attachments.isEmpty { print("No attachments."); return }
            for attachment in attachments {
                print("\(attachment.id)  \(Presentation.attachmentSize(attachment))  \(Presentation.oneLine(attachment.fileName))"
                      + (attachment.pending ? "  (waiting for the server)" : ""))
            }
        }
    }

    struct Add: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "add",
            abstract: "Attach a file to an item (encrypted here first).",
            discussion: "Example:\n  vaultsync attachment add Bank ~/scans/card.pdf --name card.pdf")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "The item (id, id prefix or name).") var item: String
        @Argument(help: "The file to attach.") var file: String
        @Option(help: "The attachment's file name (default: the file's own name).") var name: String?

        func validate() throws {
            if let name, name.trimmingCharacters(in: .whitespaces).isEmpty { throw ValidationError("--name cannot be empty") }
        }

        func execute(_ context: CLIContext) async throws {
            let id = try await context.itemID(item)
            let path = (file as NSString).expandingTildeInPath
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue else {
                throw CLIError.usage("\(file) is not a file that can be read")
            }
            guard access(path, R_OK) == 0 else { throw CLIError.usage("\(file) cannot be read") }
            // A pipe or a device has no size to announce to the server before the upload (it was reported as the
            // local vault failing, exit 1: RELIABILITY bug 72).
            guard (try? FileManager.default.attributesOfItem(atPath: path)[.type] as? FileAttributeType) == .typeRegular else {
                throw CLIError.usage("\(file) is not a regular file (a pipe or a device): an attachment is read from a file whose size is known; save it to a file first")
            }
            let fileName = name ?? (path as NSString).lastPathComponent
            let progress = ProgressLine()
            let added = try await context.engine.addAttachment(itemID: id, fileAt: path, fileName: fileName, progress: progress.handler)
            progress.end()
            if output.json {
                Presentation.printJSON(Presentation.attachmentJSON(added))
            } else if added.pending {
                Console.note("attached \"\(added.fileName)\" (\(Presentation.attachmentSize(added))), kept here (waiting for the server): it is uploaded at the next sync")
            } else {
                Console.note("attached \"\(added.fileName)\" (\(Presentation.attachmentSize(added))) as \(added.id)")
            }
        }
    }

    struct Get: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "get",
            abstract: "Download and decrypt an attachment.",
            discussion: "Examples:\n  vaultsync attachment get Bank card.pdf --output ~/card.pdf\n  vaultsync attachment get Bank card.pdf --output -")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The item (id, id prefix or name).") var item: String
        @Argument(help: "The attachment (file name or id).") var attachment: String
        @Option(help: "Where to write the file (a new file, created 0600), or - for standard output.") var output: String

        func execute(_ context: CLIContext) async throws {
            let id = try await context.itemID(item)
            let found = try await context.engine.attachment(itemID: id, reference: attachment)
            let progress = ProgressLine()
            if output == "-" {
                try await context.engine.saveAttachment(itemID: id, attachmentID: found.id, progress: progress.handler) { piece in
                    try StandardOutput.write(Array(piece))
                }
                progress.end()
                return
            }
            let target = (output as NSString).expandingTildeInPath
            let file = try NewFile(path: target)
            do {
                let written = try await context.engine.saveAttachment(itemID: id, attachmentID: found.id, progress: progress.handler) { piece in
                    try file.write(piece)
                }
                try file.finish()
                progress.end()
                Console.note("wrote \"\(found.fileName)\" (\(written) bytes) to \(output)")
            } catch {
                progress.end()
                file.discard()
                throw error
            }
        }
    }

    struct Rename: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "rename",
            abstract: "Give an attachment another file name (offline too).",
            discussion: "Bitwarden's API has no rename: the same encrypted file is attached again under the new name and the old one removed (it gets a new id).\nExample:\n  vaultsync attachment rename Bank scan.pdf card-2026.pdf")
        @OptionGroup var global: GlobalOptions
        @OptionGroup var output: OutputOptions
        @Argument(help: "The item (id, id prefix or name).") var item: String
        @Argument(help: "The attachment (file name or id).") var attachment: String
        @Argument(help: "The new file name.") var newName: String

        func validate() throws {
            if newName.trimmingCharacters(in: .whitespaces).isEmpty { throw ValidationError("the new name cannot be empty") }
        }

        func execute(_ context: CLIContext) async throws {
            let id = try await context.itemID(item)
            let found = try await context.engine.attachment(itemID: id, reference: attachment)
            let renamed = try await context.engine.renameAttachment(itemID: id, attachmentID: found.id, to: newName)
            if output.json {
                Presentation.printJSON(.object(["id": .string(renamed.id), "fileName": .string(renamed.fileName), "pending": .bool(renamed.pending)]))
            } else {
                Console.note("renamed \"\(found.fileName)\" to \"\(renamed.fileName)\"\(renamed.pending ? " (waiting for the server)" : "")")
            }
        }
    }

    struct Delete: VaultCommand {
        static let configuration = CommandConfiguration(commandName: "delete", abstract: "Delete an attachment.",
                                                        discussion: "Example:\n  vaultsync attachment delete Bank card.pdf")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The item (id, id prefix or name).") var item: String
        @Argument(help: "The attachment (file name or id).") var attachment: String

        func execute(_ context: CLIContext) async throws {
            let id = try await context.itemID(item)
            let found = try await context.engine.attachment(itemID: id, reference: attachment)
            let waits = try await context.engine.deleteAttachment(itemID: id, attachmentID: found.id)
            let pending = waits ? ((try? await context.engine.pendingCount()) ?? 0) : 0
            Console.note("deleted \"\(found.fileName)\"" + (waits ? " — waiting on this device, \(pending) change\(pending == 1 ? "" : "s") pending: it reaches the server with the next sync" : ""))
        }
    }
}

/// A file the CLI creates for output: new only (never overwriting), 0600, removed again if the
/// command fails half-way (a half-written file must not pass for the attachment).
final class NewFile: @unchecked Sendable {
    let path: String
    private let descriptor: Int32

    init(path: String) throws {
        self.path = path
        descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            if errno == EEXIST { throw CLIError.usage("\(path) exists already; name a new file (an attachment is never written over one)") }
            throw CLIError.profile("cannot create \(path): \(String(cString: strerror(errno)))")
        }
    }

    func write(_ piece: ArraySlice<UInt8>) throws {
        var done = 0
        while done < piece.count {
            let count = piece.withUnsafeBytes { Foundation.write(descriptor, $0.baseAddress! + done, $0.count - done) }
            guard count > 0 else { throw CLIError.profile("cannot write \(path): \(String(cString: strerror(errno)))") }
            done += count
        }
    }

    func finish() throws {
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw CLIError.profile("cannot write \(path): \(String(cString: strerror(errno)))") }
    }

    func discard() {
        close(descriptor)
        unlink(path)
    }
}

/// A progress line on standard error while an attachment moves, only when that is a terminal (a script
/// reading the output sees none of it): "uploading  42% (210.0 of 500.0 MiB)", redrawn in place.
final class ProgressLine: @unchecked Sendable {
    private let lock = NSLock()
    private var shown = false
    private var last: (String, Int) = ("", -1)

    var handler: AttachmentProgressHandler? {
        guard Console.stderrIsTTY else { return nil }
        return { [self] progress in draw(progress) }
    }

    private func draw(_ progress: AttachmentProgress) {
        let percent = progress.total > 0 ? min(100, progress.done * 100 / progress.total) : 0
        lock.withLock {
            guard (progress.phase.rawValue, percent) != last else { return }
            last = (progress.phase.rawValue, percent)
            let mib = { (bytes: Int) in String(format: "%.1f", Double(bytes) / 1_048_576) }
            let text = "\(progress.phase.rawValue) \(percent)% (\(mib(progress.done)) of \(mib(progress.total)) MiB)"
            FileHandle.standardError.write(Data(("\r\u{1B}[K" + text).utf8))
            shown = true
        }
    }

    func end() {
        lock.withLock {
            if shown { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
            shown = false
        }
    }
}
