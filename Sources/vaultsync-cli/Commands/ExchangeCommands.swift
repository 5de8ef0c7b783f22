import ArgumentParser
import CommandLineSupport
import Foundation
import VaultClient
import VaultCrypto
import VaultExchange
import VaultModels

extension ImportFormat: ExpressibleByArgument {}

/// How a command gets the password of an export file: `--file-password-stdin`, the
/// VAULTSYNC_FILE_PASSWORD variable, or a prompt on a terminal. Never a flag value (the process list).
struct FilePasswordOptions: ParsableArguments {
    @Flag(name: .customLong("file-password-stdin"), help: "Read the export file's password from standard input (else VAULTSYNC_FILE_PASSWORD, else a prompt).")
    var fromStdin = false

    func password(_ context: CLIContext, prompt: String, confirm: Bool) throws -> String? {
        if fromStdin {
            guard let line = readLine(strippingNewline: true), !line.isEmpty else {
                throw CLIError.usage("--file-password-stdin: no password on standard input")
            }
            return line
        }
        if let value = context.environment["VAULTSYNC_FILE_PASSWORD"], !value.isEmpty { return value }
        guard Console.stdinIsTTY else { return nil }
        guard let first = Console.readSecret(prompt: prompt), !first.isEmpty else { return nil }
        if confirm {
            guard Console.readSecret(prompt: "Again, to confirm: ") == first else { throw CLIError.aborted("the two passwords differ; nothing was written") }
        }
        return first
    }
}

struct ImportCommand: VaultCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Import a vault file from Bitwarden, KeePassXC, Chrome, Firefox or 1Password (works offline).",
        discussion: """
        Every item is encrypted, stored and queued in one transaction: a bad file imports nothing, and the items reach the server at the next sync (which `import` starts when the server is reachable). Folders are matched by name or made. Items already in the vault (same type, name and content) stop the import unless --skip-duplicates or --allow-duplicates is given. See docs/CLI.md for each format's mapping.

        Examples:
          vaultsync import bitwarden_export.json --format bitwarden-json
          vaultsync import passwords.csv --format chrome-csv
          VAULTSYNC_FILE_PASSWORD=… vaultsync import bitwarden_encrypted_export.json --format bitwarden-json
        """)
    @OptionGroup var global: GlobalOptions
    @OptionGroup var output: OutputOptions
    @OptionGroup var filePassword: FilePasswordOptions
    @Argument(help: "The file to import (- for standard input; a pipe such as <(gpg -d export.csv.gpg) works too).") var file: String

    /// The whole input: `-` is standard input; a pipe or a device is read to its end as a file is (an import
    /// from `<(gpg -d …)` was refused, leaving a decrypted export on disk the only way: RELIABILITY bug 71).
    static func readInput(_ file: String, passwordFromStdin: Bool) throws -> Data {
        if file == "-" {
            if passwordFromStdin {
                throw CLIError.usage("the file and --file-password-stdin cannot both come from standard input; give the password with VAULTSYNC_FILE_PASSWORD")
            }
            do { return try FileHandle.standardInput.readToEnd() ?? Data() } catch {
                throw CLIError.usage("cannot read standard input: \(error.localizedDescription)")
            }
        }
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory) else { throw CLIError.usage("no file \(file)") }
        if isDirectory.boolValue { throw CLIError.usage("\(file) is a folder, not a file") }
        let descriptor = open(file, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw CLIError.usage("cannot read \(file): \(String(cString: strerror(errno)))") }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        do { return try handle.readToEnd() ?? Data() } catch {
            throw CLIError.usage("cannot read \(file): \(error.localizedDescription)")
        }
    }
    @Option(help: "The file's format: \(ImportFormat.allCases.map(\.rawValue).joined(separator: ", ")).") var format: ImportFormat
    @Flag(help: "Import only the items not already in the vault.") var skipDuplicates = false
    @Flag(help: "Import every item, even those already in the vault.") var allowDuplicates = false
    @Flag(help: "Do not sync after importing (the items stay queued).") var noSync = false

    func execute(_ context: CLIContext) async throws {
        if skipDuplicates && allowDuplicates { throw CLIError.usage("give only one of --skip-duplicates and --allow-duplicates") }
        let data = try Self.readInput(file, passwordFromStdin: filePassword.fromStdin)
        guard let text = String(data: data, encoding: .utf8) else {
            throw ExchangeError.malformed(entry: file, reason: "not UTF-8 text (export it again as UTF-8)")
        }
        let vault: ImportedVault
        do {
            switch format {
            case .bitwardenJSON:
                var password: String?
                if BitwardenJSON.isPasswordProtected(text) {
                    password = try filePassword.password(context, prompt: "Password of the export file: ", confirm: false)
                    if password == nil { throw ExchangeError.passwordRequired }
                }
                vault = try BitwardenJSON.read(text, password: password)
            default:
                vault = try CSVImporter.read(text, format: format)
            }
        } catch ExchangeError.malformed(let entry, let reason) where entry == "the file" {
            throw ExchangeError.malformed(entry: file, reason: reason)  // named as the person gave it
        }
        let policy: DuplicatePolicy = skipDuplicates ? .skip : allowDuplicates ? .allow : .refuse
        let summary: ImportSummary
        do {
            summary = try await context.engine.importItems(vault, duplicates: policy)
        } catch VaultError.duplicateImport(let count, let total, let examples) {
            let names = examples.map { "\"\($0)\"" }.joined(separator: ", ")
            throw CLIError.usage("""
                \(count) of the \(total) items in \(file) are already in the vault (e.g. \(names)); nothing was imported.
                Add --skip-duplicates to import only the new ones, or --allow-duplicates to import all of them.
                """)
        }
        var synced = false
        if !noSync, context.settings.server != nil {
            do {
                _ = try await context.engine.sync()
                synced = true
            } catch {
                // The import stands (stored and queued); say why it is not on the server yet.
                Console.note("not synced: \(describe(error).message)")
            }
        }
        let pending = (try? await context.engine.pendingCount()) ?? summary.pendingCount
        if output.json {
            Presentation.printJSON(.object(JSONObject(entries: [
                .init(key: "imported", value: .int(summary.importedCount)),
                .init(key: "byType", value: .object(JSONObject(entries: summary.imported.sorted { $0.key.rawValue < $1.key.rawValue }
                    .map { JSONObject.Entry(key: $0.key.name, value: .int($0.value)) }))),
                .init(key: "foldersCreated", value: .array(summary.foldersCreated.map(JSONValue.string))),
                .init(key: "foldersMatched", value: .array(summary.foldersMatched.map(JSONValue.string))),
                .init(key: "duplicatesSkipped", value: .int(summary.duplicatesSkipped)),
                .init(key: "skipped", value: .array(summary.skipped.map { .object(["entry": .string($0.entry), "reason": .string($0.reason)]) })),
                .init(key: "synced", value: .bool(synced)),
                .init(key: "pending", value: .int(pending)),
            ])))
            return
        }
        let byType = summary.imported.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.value) \($0.key.name)\($0.value == 1 ? "" : "s")" }
        print("Imported \(summary.importedCount) item\(summary.importedCount == 1 ? "" : "s")\(byType.isEmpty ? "" : " (\(byType.joined(separator: ", ")))") from \(file).")
        if !summary.foldersCreated.isEmpty { print("Folders created: \(summary.foldersCreated.joined(separator: ", "))") }
        if !summary.foldersMatched.isEmpty { print("Folders already there: \(summary.foldersMatched.joined(separator: ", "))") }
        if summary.duplicatesSkipped > 0 { print("Left out \(summary.duplicatesSkipped) item(s) already in the vault.") }
        if !summary.skipped.isEmpty {
            print("Not imported (\(summary.skipped.count)):")
            for entry in summary.skipped { print("  \(entry.entry): \(entry.reason)") }
        }
        if synced && pending == 0 {
            Console.note("synced with the server")
        } else {
            Console.note("\(pending) change\(pending == 1 ? "" : "s") queued on this device; they reach the server at the next `vaultsync sync`")
        }
    }
}

struct ExportCommand: VaultCommand {
    enum Format: String, ExpressibleByArgument, CaseIterable {
        case json, csv
        case encryptedJSON = "encrypted-json"
    }

    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Export the vault as Bitwarden JSON, CSV or password-protected JSON (works offline).",
        discussion: """
        The formats are Bitwarden's own, so the file imports into Bitwarden and the managers that read its exports. The trash is left out, and organization items unless --organization is given. The file is created with mode 0600 and never replaced: name a new file. Refused while any item cannot be decrypted. CSV carries logins and notes only (as Bitwarden's); use json for cards, identities and SSH keys.

        Examples:
          vaultsync export --format json --output vault.json
          vaultsync export --format encrypted-json --output vault.enc.json    (asks for a file password)
          vaultsync export --format csv > vault.csv
        """)
    @OptionGroup var global: GlobalOptions
    @OptionGroup var filePassword: FilePasswordOptions
    @Option(help: "json, csv or encrypted-json.") var format: Format
    @Option(help: "The file to write (- or none: standard output). It must not exist yet.") var output: String?
    @Flag(help: "Include items of organizations (shared items).") var organization = false

    func execute(_ context: CLIContext) async throws {
        // "-" is standard output, as for `attachment get` (it wrote a plaintext file named "-": RELIABILITY bug 70).
        let output = output == "-" ? nil : output
        if output?.isEmpty == true { throw CLIError.usage("--output needs a file name (or - for standard output)") }
        // A symbolic link counts, even one to nothing (RELIABILITY bug 66: it was found only when writing, exit 1).
        if let output, FileManager.default.fileExists(atPath: output) || (try? FileManager.default.destinationOfSymbolicLink(atPath: output)) != nil {
            throw CLIError.usage("\(output) exists already; name a new file (an export never overwrites one)")
        }
        let (items, folders) = try await context.engine.exportContents(includeOrganizations: organization)
        let text: String
        var note: String?
        var exported = items.count
        switch format {
        case .json:
            text = BitwardenJSON.export(items: items, folders: folders)
        case .csv:
            let result = BitwardenCSVExport.export(items: items, folders: folders)
            text = result.text
            exported -= result.notCarried.count
            if !result.notCarried.isEmpty {
                note = "\(result.notCarried.count) item(s) that CSV cannot carry (cards, identities, SSH keys) were left out; use --format json to keep them"
            }
        case .encryptedJSON:
            guard let password = try filePassword.password(context, prompt: "Password for the export file: ", confirm: true) else {
                throw CLIError.usage("an encrypted export needs a password: --file-password-stdin, VAULTSYNC_FILE_PASSWORD, or run it on a terminal")
            }
            text = try BitwardenJSON.exportEncrypted(items: items, folders: folders, password: password, kdf: try await context.engine.accountKdf())
        }
        if let output {
            try Self.writeNew(Data(text.utf8), to: output)
            Console.note("exported \(exported) item\(exported == 1 ? "" : "s") and \(folders.count) folder\(folders.count == 1 ? "" : "s") to \(output)")
        } else {
            try StandardOutput.write(Array(text.utf8))
        }
        if let note { Console.note(note) }
    }

    /// Creates `path` with mode 0600 (O_EXCL: never an existing file or a symlink's target) and writes `data`.
    static func writeNew(_ data: Data, to path: String) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            if errno == EEXIST { throw CLIError.usage("\(path) exists already; name a new file (an export never overwrites one)") }
            throw CLIError.profile("cannot create \(path): \(String(cString: strerror(errno)))")
        }
        let handle = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        do {
            try handle.write(contentsOf: data)
            try handle.synchronize()
        } catch {
            try? FileManager.default.removeItem(atPath: path)
            throw CLIError.profile("cannot write \(path): \(error)")
        }
    }
}
