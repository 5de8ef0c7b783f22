import Foundation
import VaultClient

/// bw's attachment commands: `create attachment --file PATH --itemid ID`, `get attachment NAME-OR-ID
/// --itemid ID [--output PATH]`, `delete attachment ID --itemid ID`. The same engine calls as
/// `vaultsync attachment` (encrypted before it is staged; queued with the item when the server is away).
enum BWAttachments {
    /// The item `--itemid` names, found by bw's rule (an id, or a search with one match).
    static func item(_ reference: String, context: CLIContext) async throws -> String {
        guard let id = try await BWItems.find(reference, context: context).id else { throw BWFailure.notFound }
        return id
    }

    static func create(file: String?, itemID: String?, context: CLIContext) async throws -> BWResponse {
        guard let file, !file.isEmpty else { throw BWFailure(message: "`file` option is required.") }
        guard let itemID, !itemID.isEmpty else { throw BWFailure(message: "`itemid` option is required.") }
        let id = try await item(itemID, context: context)
        let path = (file as NSString).expandingTildeInPath
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), !isFolder.boolValue,
              FileManager.default.isReadableFile(atPath: path) else {
            throw BWFailure(message: "Cannot read the file \(file).")
        }
        _ = try await context.engine.addAttachment(itemID: id, fileAt: path, fileName: (path as NSString).lastPathComponent)
        return .object(BWItems.json(try await context.engine.item(id: id)))
    }

    /// bw's rule: the attachment whose id is `reference`, else the one whose file name contains it (any
    /// case); none or several is an error. Returns its file name and decrypted contents.
    static func contents(_ reference: String, itemID: String?, context: CLIContext) async throws -> (fileName: String, contents: [UInt8]) {
        guard let itemID, !itemID.isEmpty else { throw BWFailure(message: "`itemid` option is required.") }
        let id = try await item(itemID, context: context)
        let wanted = reference.lowercased()
        let all = try await context.engine.attachments(itemID: id)
        let found = all.first(where: { $0.id.lowercased() == wanted }).map { [$0] }
            ?? all.filter { $0.fileName.lowercased().contains(wanted) }
        guard !found.isEmpty else { throw BWFailure(message: "Attachment `\(reference)` was not found.") }
        guard found.count == 1 else { throw BWFailure.multipleResults(found.map(\.id)) }
        return (found[0].fileName, try await context.engine.attachmentContents(itemID: id, attachmentID: found[0].id))
    }

    /// bw's `saveResultToFile`: no `--output`, the file's name in the current folder; a path ending in `/`,
    /// that folder (made if needed); else the path itself. Written with mode 600; the message names the
    /// file and `--raw` prints its path. `--output -` writes the contents to standard output instead.
    static func save(_ contents: [UInt8], fileName: String, output: String?, raw: Bool) throws -> BWResponse {
        if output == "-" {
            FileHandle.standardOutput.write(Data(contents))
            return .string(nil)
        }
        // The name is the server's (decrypted): only its last component is used, never a path it carries.
        let safeName = (fileName as NSString).lastPathComponent.isEmpty ? "attachment" : (fileName as NSString).lastPathComponent
        var path: String
        if let output, !output.isEmpty {
            let expanded = (output as NSString).expandingTildeInPath
            if expanded.hasSuffix("/") {
                do {
                    try FileManager.default.createDirectory(atPath: expanded, withIntermediateDirectories: true)
                } catch {
                    throw BWFailure(message: "Cannot make the folder \(output): \(error.localizedDescription)")
                }
                path = expanded + safeName
            } else {
                path = expanded
            }
        } else {
            path = FileManager.default.currentDirectoryPath + "/" + safeName
        }
        path = URL(fileURLWithPath: path).standardizedFileURL.path
        guard FileManager.default.createFile(atPath: path, contents: Data(contents), attributes: [.posixPermissions: 0o600]) else {
            throw BWFailure(message: "Cannot write \(path).")
        }
        return .message(title: "Saved \(path)", raw: path)
    }
}
