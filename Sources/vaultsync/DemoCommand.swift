import ArgumentParser
import Foundation
import VaultCrypto
import VaultModels

/// `vaultsync demo`: the self-contained tour. For now it proves the crypto and data-model layers on
/// this machine; the offline sync story joins it as the client and server land.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Run the self-contained VaultSync demo and verify every step.",
        discussion: """
        Checks the Bitwarden-compatible crypto against the specification's known-answer vectors, creates
        an account's keys, encrypts one item of every type, and reads them back. Exits non-zero if any
        verification fails.

        Example:
          vaultsync demo
        """
    )

    mutating func run() async throws {
        var report = DemoReport()
        report.section("1. Known-answer vectors (Bitwarden SDK)")
        report.check("PBKDF2 master key (TV1)") {
            let key = try MasterKey.derive(password: "67t9b5g67$%Dh89n", salt: "test_key", kdf: .pbkdf2(iterations: 10_000))
            return key.serverAuthorizationHash(password: "x").isEmpty == false
                && key.stretched().base64 == "bx+yLe6YJXKP13xTh63DF46GePk9hKO2ccW9zLwV7WDdf87qZRvKJlY0IhxOHLkQMD1/ptH3wlfoGjBVwfmzmw=="
        }
        report.check("Argon2id master password hash (TV5)") {
            let key = try MasterKey.derive(password: "asdfasdf", salt: "test_salt", kdf: .argon2id(iterations: 4, memoryMiB: 32, parallelism: 2))
            return key.serverAuthorizationHash(password: "asdfasdf") == "PR6UjYmjmppTYcdyTiNbAhPJuQQOmynKbdEl1oyi/iQ="
        }
        report.check("AES-256-CBC-HMAC EncString (TV6)") {
            let key = try SymmetricCryptoKey(bytes: (0..<64).map { UInt8($0) })
            let iv: [UInt8] = [0xd8, 0xda, 0x24, 0x00, 0xc4, 0xba, 0x96, 0x55, 0x31, 0x93, 0x6e, 0xa8, 0xb9, 0xe3, 0x2a, 0xac]
            return try EncString.encrypt(Array("Bitwarden SDK test vector".utf8), key: key, iv: iv).serialized
                == "2.2NokAMS6llUxk26oueMqrA==|6k0QD71SJLy2WEBDkV4esiTrgkP/z7eoSedSesGLGYE=|PE4sb0jpAwZW+tnyPuW43eeWvSxjvdw3xMJlPGbDlYI="
        }
        report.check("tampered data is refused before decryption (TV7)") {
            let key = try SymmetricCryptoKey(base64: "w2LO+nwV4oxwswVYCxlOfRUseXfvU03VzvKQHrqeklPgiMZrspUe6sOBToCnDn9Ay0tuCBn8ykVVRb7PWhub2Q==")
            let foreign = try EncString("2.xzDCDWqRBpHm42EilUvyVw==|nIrWV3l/EeTbWTnAznrK0Q==|sUj8ol2OTgvvTvD86a9i9XUP58hmtCEBqhck7xT5YNk=")
            do {
                _ = try foreign.decryptString(key: key)
                return false
            } catch CryptoError.macMismatch {
                return true
            }
        }

        report.section("2. A new account's keys (600,000-iteration PBKDF2)")
        let email = "demo@vaultsync.local"
        let password = "correct horse battery staple"
        var keys: VaultKeys?
        report.check("derive master key, wrap a new user key and RSA key pair, unlock again") {
            let master = try MasterKey.derive(password: password, salt: email, kdf: .defaultPBKDF2)
            let userKey = SymmetricCryptoKey.generate()
            let protectedKey = try master.encryptUserKey(userKey)
            let rsa = try RSAPrivateKey.generate()
            let encryptedPrivate = try rsa.encrypted(with: userKey)
            let unlocked = try MasterKey.derive(password: password, salt: " DEMO@vaultsync.local", kdf: .defaultPBKDF2)
                .decryptUserKey(protectedKey)
            let reopened = try RSAPrivateKey.decrypt(encryptedPrivate, userKey: unlocked)
            keys = VaultKeys(userKey: unlocked)
            return unlocked == userKey && reopened.publicKey.spkiDER == rsa.publicKey.spkiDER
        }
        report.check("a wrong password is refused") {
            let master = try MasterKey.derive(password: password, salt: email, kdf: .pbkdf2(iterations: 5_000))
            let protectedKey = try master.encryptUserKey(.generate())
            let wrong = try MasterKey.derive(password: "wrong", salt: email, kdf: .pbkdf2(iterations: 5_000))
            do {
                _ = try wrong.decryptUserKey(protectedKey)
                return false
            } catch CryptoError.wrongPassword {
                return true
            }
        }

        report.section("3. One item of every type: encrypt → JSON → decrypt")
        if let keys {
            for type in CipherType.supported {
                report.check("\(type.name): round trip, no plaintext in the JSON") {
                    var item = try keys.newItem(type: type, name: "Demo \(type.name) secret-name")
                    item.notes = "secret-notes"
                    item.login?.password = "secret-password"
                    item.card?[.number] = "4111111111111111"
                    let json = try item.encrypted(with: keys).jsonBytes()
                    let text = String(decoding: json, as: UTF8.self)
                    let back = try CipherWire(jsonBytes: json).decrypted(with: keys)
                    return back == item && !text.contains("secret-") && !text.contains("4111111111111111")
                }
            }
        }
        print("")
        if report.failures > 0 {
            print("demo: \(report.failures) of \(report.total) checks FAILED")
            throw ExitCode(1)
        }
        print("demo: all \(report.total) checks passed")
    }
}

/// Prints each step and what was verified.
struct DemoReport {
    var total = 0
    var failures = 0

    func section(_ title: String) {
        print("\n\(title)")
    }

    mutating func check(_ what: String, _ body: () throws -> Bool) {
        total += 1
        do {
            if try body() {
                print("  ✔ \(what)")
            } else {
                failures += 1
                print("  ✘ \(what): verification failed")
            }
        } catch {
            failures += 1
            print("  ✘ \(what): \(error)")
        }
    }
}
