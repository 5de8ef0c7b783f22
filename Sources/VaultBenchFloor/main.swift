import Foundation
import GRDB
import VaultCrypto
import VaultModels

// VaultBenchFloor: the floor of VaultBench's P7 rows (what a person waits for at the command line).
// The least a Swift program must do to answer `vaultsync get ID --field password` from a profile
// unlocked with a session: start, open the sealed session with VAULTSYNC_SESSION (one decrypt), open
// the vault database read-only, read one row, parse it, unwrap its item key and decrypt one field.
// It links only what that needs (our crypto and models, GRDB), so its start-up is the same class as
// the CLI's (Swift runtime, Foundation, SQLite, BoringSSL) without the CLI's server, networking and
// argument parsing. No checks beyond the cryptographic ones: no expiry, no account, no queue.
//
//   VaultBenchFloor get ID      prints the item's password
//   VaultBenchFloor names       prints every item's name (the floor of `list`: every name decrypted)

/// Why the floor could not answer (the benchmark then fails: its reference is missing).
enum FloorError: Error {
    case usage
    case missing(String)
}

do {
    let arguments = CommandLine.arguments
    guard arguments.count >= 2 else { throw FloorError.usage }
    let environment = ProcessInfo.processInfo.environment
    guard let home = environment["VAULTSYNC_HOME"], let sessionText = environment["VAULTSYNC_SESSION"] else {
        throw FloorError.missing("VAULTSYNC_HOME and VAULTSYNC_SESSION")
    }
    // The session's file (named by a hash of its key, docs/CLI.md): "expires SECONDS", then the sealed
    // session (JSON with the user key in base64).
    let sessionFile = home + "/sessions/" + SessionFileName.forKey(sessionText)
    guard let file = FileManager.default.contents(atPath: sessionFile),
          let sealed = String(decoding: file, as: UTF8.self).split(separator: "\n").last else {
        throw FloorError.missing("the session file")
    }
    let payload = try JSONParser.parseObject(try EncString(String(sealed)).decrypt(key: SymmetricCryptoKey(base64: sessionText)))
    guard let userKey = payload["userKey"]?.stringValue else { throw FloorError.missing("the user key in the session") }
    let keys = VaultKeys(userKey: try SymmetricCryptoKey(base64: userKey))

    var configuration = Configuration()
    configuration.readonly = true
    let database = try DatabaseQueue(path: home + "/vault.sqlite", configuration: configuration)
    switch arguments[1] {
    case "get" where arguments.count == 3:
        guard let json = try database.read({ db in
            try String.fetchOne(db, sql: "SELECT json FROM cipher WHERE id = ?", arguments: [arguments[2]])
        }) else { throw FloorError.missing("item \(arguments[2])") }
        let wire = try CipherWire(jsonBytes: Array(json.utf8))
        let key = try keys.fieldKey(itemKey: wire.key, organizationId: wire.organizationId, itemID: wire.id)
        guard let password = wire.login?.password else { throw FloorError.missing("a password on the item") }
        print(try password.decryptString(key: key))
    case "names":
        let rows = try database.read { db in try String.fetchAll(db, sql: "SELECT json FROM cipher") }
        var out = ""
        for json in rows {
            out += try CipherWire(jsonBytes: Array(json.utf8)).decryptedName(with: keys)
            out += "\n"
        }
        print(out, terminator: "")
    default:
        throw FloorError.usage
    }
} catch {
    FileHandle.standardError.write(Data("VaultBenchFloor: \(error)\n".utf8))
    exit(1)
}
