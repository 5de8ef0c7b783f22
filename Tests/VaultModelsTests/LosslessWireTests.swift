import Foundation
import Testing
import VaultCrypto
@testable import VaultModels

@Suite("Wire JSON: lossless, case-tolerant, and damage stays local")
struct LosslessWireTests {
    let keys = VaultKeys(userKey: .generate())

    /// A server response carrying fields this version does not model, at every level.
    func serverJSON() throws -> String {
        let view = try keys.newItem(type: .login, name: "Mail").with {
            $0.login = LoginView(uris: [LoginURIView(uri: "https://mail.example")], username: "me", password: "old")
        }
        var object = try view.encrypted(with: keys).jsonObject()
        object["id"] = .string("6b8bd5a4-0c4b-4c5e-9a55-0c6cba1f8f11")
        object["futureTopLevel"] = .object(["deep": .array([.number("12345678901234567890"), .null])])
        object["data"] = .string("{\"Name\":\"x\"}")
        var login = object["login"]!.objectValue!
        login["futureLoginField"] = .string("kept")
        var uris = login["uris"]!.arrayValue!
        var firstURI = uris[0].objectValue!
        firstURI["futureUriField"] = .bool(true)
        uris[0] = .object(firstURI)
        login["uris"] = .array(uris)
        object["login"] = .object(login)
        return JSONValue.object(object).jsonText
    }

    @Test("unknown fields survive decode → decrypt → edit → encrypt → encode (seed 001 CS-2)")
    func unknownFieldsSurviveEdit() throws {
        let wire = try CipherWire(jsonBytes: Array(try serverJSON().utf8))
        var view = try wire.decrypted(with: keys)
        view.login?.password = "new"
        let encoded = try view.encrypted(with: keys).jsonObject()
        #expect(encoded["futureTopLevel"] == .object(["deep": .array([.number("12345678901234567890"), .null])]))
        #expect(encoded["data"] == .string("{\"Name\":\"x\"}"))
        let login = encoded["login"]?.objectValue
        #expect(login?["futureLoginField"] == .string("kept"))
        #expect(login?["uris"]?.arrayValue?.first?.objectValue?["futureUriField"] == .bool(true))
        let reread = try CipherWire(json: encoded, path: "cipher").decrypted(with: keys)
        #expect(reread.login?.password == "new")
        #expect(reread.login?.username == "me")
    }

    @Test("a wire item re-encodes to the same JSON value")
    func wireRoundTrip() throws {
        let text = try serverJSON()
        let wire = try CipherWire(jsonBytes: Array(text.utf8))
        let again = try CipherWire(jsonBytes: wire.jsonBytes())
        #expect(again == wire)
        #expect(try JSONParser.parse(wire.jsonBytes()) == JSONParser.parse(text))
    }

    @Test("PascalCase keys are read like camelCase ones, and written back camelCase")
    func pascalCase() throws {
        let name = try EncString.encrypt("Pascal", key: keys.userKey)
        let text = #"{"Id":"0C3B4F7A-1111-2222-3333-444455556666","Type":2,"Name":"\#(name.serialized)","SecureNote":{"Type":0},"RevisionDate":"2024-01-30T17:55:36.15Z","Favorite":true}"#
        let wire = try CipherWire(jsonBytes: Array(text.utf8))
        #expect(wire.id == "0c3b4f7a-1111-2222-3333-444455556666")
        #expect(wire.type == .secureNote)
        #expect(wire.favorite == true)
        #expect(wire.revisionDate?.iso8601 == "2024-01-30T17:55:36.150000Z")
        #expect(wire.unknown.isEmpty)
        let view = try wire.decrypted(with: keys)
        #expect(view.name == "Pascal")
        let out = wire.jsonObject()
        #expect(out["name"] != nil && out.entries.contains { $0.key == "name" })
        #expect(!out.entries.contains { $0.key == "Name" })
    }

    /// Found by the parser fuzz in CI (fixed in 9e4e997): a folder with "id" and "Id" was accepted, and writing it
    /// back kept one of the two, so the second read differed from the first.
    @Test("an object with both spellings of a key (\"id\" and \"Id\") is refused at every level, not half kept")
    func firstLetterTwins() throws {
        let name = try EncString.encrypt("Twin", key: keys.userKey).serialized
        let id = "b84d8309-72b6-4409-ad8f-dcc6e16d5761"
        let cases: [(String, String, String)] = [
            (#"{"id":"\#(id)","name":"\#(name)","Id":"\#(id)"}"#, "folder", "folder.Id"),
            (#"{"Name":"\#(name)","name":"\#(name)"}"#, "folder", "folder.Name"),
            (#"{"name":"\#(name)","future":1,"Future":2}"#, "folder", "folder.future"),
            (#"{"type":2,"name":"\#(name)","secureNote":{"type":0,"Type":0}}"#, "cipher", "cipher.secureNote.Type"),
            (#"{"type":1,"name":"\#(name)","login":{"uris":[{"uri":"\#(name)","Uri":"\#(name)"}]}}"#, "cipher", "cipher.login.uris[0].Uri"),
        ]
        for (text, kind, path) in cases {
            let error: (any Error)?
            do {
                if kind == "folder" { _ = try FolderWire(jsonBytes: Array(text.utf8), path: kind) } else { _ = try CipherWire(jsonBytes: Array(text.utf8), path: kind) }
                error = nil
            } catch let caught {
                error = caught
            }
            guard case .invalidValue(let found, let reason)? = error as? ModelError else {
                Issue.record("\(text): expected an invalid value, got \(String(describing: error))")
                continue
            }
            #expect(found == path, "\(text)")
            #expect(reason.contains("first letter's case"), "\(text)")
        }
        // Objects of many unknown keys take the hashed path (past 32 of them): the same rule.
        let many = (0..<40).map { #""k\#($0)":\#($0)"# }.joined(separator: ",")
        for (extra, refused) in [(#""K7":1"#, true), (#""Name":1"#, true), (#""_k7":1,"1d":2,"1D":3"#, false)] {
            let text = #"{"name":"\#(name)",\#(many),\#(extra)}"#
            if refused {
                #expect(throws: ModelError.self, "\(extra)") { try FolderWire(jsonBytes: Array(text.utf8), path: "folder") }
            } else {
                let wire = try FolderWire(jsonBytes: Array(text.utf8), path: "folder")
                #expect(wire.unknown.count == 43)
                #expect(try FolderWire(jsonBytes: wire.jsonBytes(), path: "folder") == wire)
            }
        }
        // One spelling of each, in either case, is still read and written back losslessly.
        let single = try FolderWire(jsonBytes: Array(#"{"Id":"\#(id)","name":"\#(name)","Future":1}"#.utf8), path: "folder")
        #expect(try FolderWire(jsonBytes: single.jsonBytes(), path: "folder") == single)
    }

    /// Past `KeySpellings.linearLimit` keys, merging and writing unknown keys look keys up hashed; the result
    /// must be what comparing key by key gives: modelled keys win, then the first spelling of each key.
    @Test("many unknown keys are written as key by key would: modelled keys first, each key's first spelling once")
    func manyUnknownKeys() throws {
        let name = try EncString.encrypt("Many", key: keys.userKey)
        let alphabet = ["name", "Name", "id", "Id", "a", "A", "ab", "Ab", "aB", "é", "É", "e\u{301}", "_x", "_X", "1a", "1A",
                        "revisionDate", "RevisionDate", "object", "K", "\u{212A}"]
        var rng = SplitMix64(seed: 30)
        for round in 0..<60 {
            var unknown = JSONObject()
            for index in 0..<[5, 20, 40, 90][round % 4] {
                let base = alphabet[Int(rng.next() % UInt64(alphabet.count))]
                unknown.appendNew(rng.next() % 3 == 0 ? base : base + "\(index % 7)", .number("\(index)"))
            }
            var wire = FolderWire(id: "b84d8309-72b6-4409-ad8f-dcc6e16d5761", name: name, revisionDate: nil)
            wire.unknown = unknown
            var expected: JSONObject = ["id": .string(wire.id!), "name": .string(name.serialized), "revisionDate": .null]
            for entry in unknown.entries where expected.index(of: entry.key) == nil { expected.appendNew(entry.key, entry.value) }
            #expect(wire.jsonObject() == expected, "round \(round)")
            #expect(try JSONParser.parse(wire.jsonBytes()) == .object(expected), "round \(round)")
        }
    }

    @Test("a damaged field names the item and the field")
    func damagedField() throws {
        var view = try keys.newItem(type: .login, name: "Bank")
        view.id = "aaaaaaaa-0000-0000-0000-000000000001"
        view.login?.password = "pw"
        var wire = try view.encrypted(with: keys)
        let other = try EncString.encrypt("x", key: SymmetricCryptoKey.generate())
        wire.login?.password = other
        #expect(throws: ModelError.decryptionFailed(itemID: view.id, field: "login.password", reason: .macMismatch)) {
            try wire.decrypted(with: keys)
        }
        let message = ModelError.decryptionFailed(itemID: view.id, field: "login.password", reason: .macMismatch).localizedDescription
        #expect(message.contains("login.password") && message.contains("aaaaaaaa-0000-0000-0000-000000000001"))
    }

    @Test("one bad item does not hide the others")
    func oneBadItem() throws {
        let good = try (0..<5).map { index in try keys.newItem(type: .secureNote, name: "note \(index)").encrypted(with: keys) }
        var bad = try keys.newItem(type: .secureNote, name: "bad").encrypted(with: keys)
        bad.id = "bad00000-0000-0000-0000-000000000000"
        bad.key = try EncString.wrap(.generate(), with: .generate())
        let results = VaultDecryption.decryptAll(Array(good[0..<2]) + [bad] + Array(good[2...]), keys: keys)
        #expect(results.count == 6)
        let names = results.compactMap { try? $0.get().name }
        #expect(names == (0..<5).map { "note \($0)" })
        guard case .failure(let error) = results[2] else {
            Issue.record("the bad item decrypted")
            return
        }
        #expect(error == .decryptionFailed(itemID: bad.id, field: "key", reason: .macMismatch))
    }

    @Test("the SDK's cipher vector decrypts with the TV7 user key (no item key)")
    func sdkCipher() throws {
        let userKey = try SymmetricCryptoKey(base64: "w2LO+nwV4oxwswVYCxlOfRUseXfvU03VzvKQHrqeklPgiMZrspUe6sOBToCnDn9Ay0tuCBn8ykVVRb7PWhub2Q==")
        let text = """
        {"object":"cipherDetails","id":"fd411a1a-fec8-4070-985d-0e6560860e69","organizationId":null,"folderId":null,
         "type":1,"reprompt":0,"favorite":false,"key":null,
         "name":"2.d3rzo0P8rxV9Hs1m1BmAjw==|JOwna6i0zs+K7ZghwrZRuw==|SJqKreLag1ID+g6H1OdmQr0T5zTrVWKzD6hGy3fDqB0=",
         "notes":null,
         "login":{"uris":[],"username":"2.EBNGgnaMHeO/kYnI3A0jiA==|9YXlrgABP71ebZ5umurCJQ==|GDk5jxiqTYaU7e2AStCFGX+a1kgCIk8j0NEli7Jn0L4=",
                  "password":"2.M7ZJ7EuFDXCq66gDTIyRIg==|B1V+jroo6+m/dpHx6g8DxA==|PIXPBCwyJ1ady36a7jbcLg346pm/7N/06W4UZxc1TUo=",
                  "passwordRevisionDate":null,
                  "totp":"2.hqdioUAc81FsKQmO1XuLQg==|oDRdsJrQjoFu9NrFVy8tcJBAFKBx95gHaXZnWdXbKpsxWnOr2sKipIG43pKKUFuq|3gKZMiboceIB5SLVOULKg2iuyu6xzos22dfJbvx0EHk=",
                  "autofillOnPageLoad":null,"fido2Credentials":null,"uri":null},
         "card":null,"identity":null,"secureNote":null,"sshKey":null,"fields":[],"passwordHistory":[],"attachments":null,
         "collectionIds":[],"edit":true,"viewPassword":true,"organizationUseTotp":true,
         "permissions":{"delete":true,"restore":true},
         "creationDate":"2024-05-31T11:20:58.4566667Z","revisionDate":"2024-05-31T11:20:58.4566667Z",
         "deletedDate":null,"archivedDate":null}
        """
        let view = try CipherWire(jsonBytes: Array(text.utf8)).decrypted(with: VaultKeys(userKey: userKey))
        #expect(view.name == "My test login")
        #expect(view.login?.username == "test_username")
        #expect(view.login?.password == "test_password")
        #expect(view.login?.totp == "DKWOW4PCP3MYFWLN53BLYAMYQEQJU4MJ")
        #expect(view.revisionDate?.iso8601 == "2024-05-31T11:20:58.456666Z")
        #expect(view.permissions == CipherPermissionsWire(delete: true, restore: true))
    }

    @Test("wrong types and malformed values are typed errors with the JSON path", arguments: [
        (#"{"type":"one","name":"x"}"#, ModelError.wrongType(path: "cipher.type", expected: "an integer", found: "string")),
        (#"{"type":1}"#, ModelError.missingField(path: "cipher.name")),
        (#"{"type":1,"name":"plaintext"}"#, nil),
        (#"{"type":1,"name":"2.AAAA|AAAA|AAAA","login":[]}"#, nil),
        (#"{"type":1,"name":null}"#, ModelError.missingField(path: "cipher.name")),
    ] as [(String, ModelError?)])
    func typedErrors(text: String, expected: ModelError?) {
        #expect {
            try CipherWire(jsonBytes: Array(text.utf8), path: "cipher")
        } throws: { error in
            guard let error = error as? ModelError else { return false }
            if let expected { return error == expected }
            if case .invalidValue(let path, _) = error { return path == "cipher.name" }
            if case .wrongType(let path, _, _) = error { return path == "cipher.name" || path == "cipher.login" }
            return false
        }
    }

    @Test("folders round-trip and keep unknown fields")
    func folders() throws {
        let view = FolderView(id: "11111111-2222-3333-4444-555555555555", name: "Work 📁", revisionDate: WireDate(microsecondsSinceEpoch: 1_700_000_000_123_456))
        var object = try view.encrypted(with: keys).jsonObject()
        object["futureFolderField"] = .number("7")
        let wire = try FolderWire(json: object, path: "folder")
        let back = try wire.decrypted(with: keys)
        #expect(back.name == "Work 📁")
        #expect(back.revisionDate == view.revisionDate)
        #expect(try back.encrypted(with: keys).jsonObject()["futureFolderField"] == .number("7"))
    }
}
