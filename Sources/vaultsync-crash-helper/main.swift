import Foundation
import VaultClient
import VaultModels

// Test helper: performs offline saves in a loop on an existing profile and prints "ACK n" after each
// save returns, so a test can kill it with SIGKILL at any point and check that every acknowledged save
// survived. Usage: vaultsync-crash-helper DATABASE EMAIL PASSWORD COUNT
/// Unbuffered, so a line is out before the next save starts.
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

let arguments = CommandLine.arguments
guard arguments.count == 5, let count = Int(arguments[4]) else {
    FileHandle.standardError.write(Data("usage: vaultsync-crash-helper DATABASE EMAIL PASSWORD COUNT\n".utf8))
    exit(64)
}
var configuration = EngineConfiguration(serverURL: "http://127.0.0.1:9")
configuration.api.requestTimeout = .seconds(2)
do {
    let engine = try VaultEngine(databasePath: arguments[1], configuration: configuration)
    try await engine.unlock(email: arguments[2], password: arguments[3])
    say("READY")
    var lastID: String?
    for index in 0..<count {
        if index % 3 == 2, let id = lastID {
            var view = try await engine.item(id: id)
            view.notes = "crash-edit-\(index)"
            view.login?.password = "crash-password-\(index)"
            _ = try await engine.updateItem(view)
        } else {
            var view = CipherView(type: .login, name: "crash-item-\(index)")
            view.login = LoginView(username: "user-\(index)", password: "crash-password-\(index)")
            lastID = try await engine.addItem(view).value.id
        }
        say("ACK \(index)")
    }
    say("DONE")
} catch {
    FileHandle.standardError.write(Data("crash helper failed: \(error)\n".utf8))
    exit(1)
}
