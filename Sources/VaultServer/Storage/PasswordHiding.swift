import VaultModels

/// "Hide passwords" (a collection assignment's `hidePasswords`, organizations.md §4.4) enforced by the
/// server rather than only shown as `viewPassword: false`: a member with it never receives the secrets
/// that a password stands for, and an edit of theirs can never replace them.
///
/// What counts as such a secret: the login's password, its passkeys' private keys, the password
/// history, the values of hidden custom fields (type 1) and an SSH key's private key. Everything else
/// (names, usernames, URIs, notes, the TOTP seed, which the official clients let such members copy codes
/// from) is sent as to any member. The secrets are encrypted either way; hiding them here means a member
/// whose client ignores `viewPassword` still cannot decrypt what they were not given.
enum PasswordHiding {
    /// `data` (a stored cipher payload) without the hidden secrets; unchanged if it is not a JSON object.
    static func hidden(_ data: String) -> String {
        guard var object = try? JSONParser.parseObject(Array(data.utf8)) else { return data }
        object = hiding(object)
        return String(decoding: object.serialized(), as: UTF8.self)
    }

    static func hiding(_ payload: JSONObject) -> JSONObject {
        var object = payload
        if var login = object["login"]?.objectValue {
            if login["password"] != nil { login["password"] = .null }
            if let credentials = login["fido2Credentials"]?.arrayValue {
                login["fido2Credentials"] = .array(credentials.map { value in
                    guard var credential = value.objectValue else { return value }
                    credential["keyValue"] = .null
                    return .object(credential)
                })
            }
            object["login"] = .object(login)
        }
        if object["passwordHistory"] != nil { object["passwordHistory"] = .null }
        if let fields = object["fields"]?.arrayValue {
            object["fields"] = .array(fields.map { value in
                guard var field = value.objectValue, field["type"]?.intValue == 1 else { return value }
                field["value"] = .null
                return .object(field)
            })
        }
        if var key = object["sshKey"]?.objectValue, key["privateKey"] != nil {
            key["privateKey"] = .null
            object["sshKey"] = .object(key)
        }
        // Older clients' flattened copy of the same content.
        if let copy = object["data"]?.objectValue { object["data"] = .object(hiding(copy)) }
        return object
    }

    /// The payload a hide-passwords member's edit stores: their `new` content with every hidden secret
    /// taken from `stored` (they were never given it, so what they send in its place is not a change:
    /// the official "can edit, except passwords"). Hidden fields are matched in order among the hidden
    /// fields whose value the edit left empty; a hidden field the member adds keeps its value.
    static func keepingHidden(_ new: String, stored: String) -> String {
        guard var object = try? JSONParser.parseObject(Array(new.utf8)),
              let previous = try? JSONParser.parseObject(Array(stored.utf8)) else { return stored }
        object = keeping(object, from: previous)
        return String(decoding: object.serialized(), as: UTF8.self)
    }

    static func keeping(_ payload: JSONObject, from previous: JSONObject) -> JSONObject {
        var object = payload
        let oldLogin = previous["login"]?.objectValue
        if var login = object["login"]?.objectValue {
            login["password"] = oldLogin?["password"] ?? .null
            let oldCredentials = oldLogin?["fido2Credentials"]?.arrayValue ?? []
            if let credentials = login["fido2Credentials"]?.arrayValue {
                login["fido2Credentials"] = .array(credentials.enumerated().map { index, value in
                    guard var credential = value.objectValue else { return value }
                    credential["keyValue"] = index < oldCredentials.count ? oldCredentials[index].objectValue?["keyValue"] ?? .null : .null
                    return .object(credential)
                })
            }
            object["login"] = .object(login)
        }
        object["passwordHistory"] = previous["passwordHistory"] ?? .null
        if let fields = object["fields"]?.arrayValue {
            var oldHidden = (previous["fields"]?.arrayValue ?? []).compactMap(\.objectValue)
                .filter { $0["type"]?.intValue == 1 }.map { $0["value"] ?? .null }[...]
            object["fields"] = .array(fields.map { value in
                guard var field = value.objectValue, field["type"]?.intValue == 1, field["value"]?.isNull ?? true else { return value }
                field["value"] = oldHidden.popFirst() ?? .null
                return .object(field)
            })
        }
        if var key = object["sshKey"]?.objectValue {
            key["privateKey"] = previous["sshKey"]?.objectValue?["privateKey"] ?? .null
            object["sshKey"] = .object(key)
        }
        if let copy = object["data"]?.objectValue, let oldCopy = previous["data"]?.objectValue {
            object["data"] = .object(keeping(copy, from: oldCopy))
        }
        return object
    }
}
