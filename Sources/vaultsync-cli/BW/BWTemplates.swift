import VaultModels

/// `bw get template OBJECT`: the request shapes bw prints for `create` and `edit` (its export models'
/// `template()`, as released from 2024 to mid-2025, keys in the order bw writes them).
enum BWTemplates {
    static func template(_ name: String) throws -> JSONValue {
        func object(_ entries: [(String, JSONValue)]) -> JSONValue {
            .object(JSONObject(entries: entries.map { JSONObject.Entry(key: $0.0, value: $0.1) }))
        }
        switch name.lowercased() {
        case "item":
            return object([
                ("organizationId", .null), ("collectionIds", .null), ("folderId", .null), ("type", .int(1)), ("name", .string("Item name")),
                ("notes", .string("Some notes about this item.")), ("favorite", .bool(false)), ("fields", .array([])), ("login", .null),
                ("secureNote", .null), ("card", .null), ("identity", .null), ("sshKey", .null), ("reprompt", .int(0)),
                ("passwordHistory", .array([])), ("creationDate", .null), ("revisionDate", .null), ("deletedDate", .null),
            ])
        case "item.field":
            return object([("name", .string("Field name")), ("value", .string("Some value")), ("type", .int(0))])
        case "item.login":
            return object([
                ("uris", .array([])), ("username", .string("jdoe")), ("password", .string("myp@ssword123")),
                ("totp", .string("JBSWY3DPEHPK3PXP")), ("fido2Credentials", .array([])),
            ])
        case "item.login.uri":
            return object([("uri", .string("https://google.com")), ("match", .null)])
        case "item.card":
            return object([
                ("cardholderName", .string("John Doe")), ("brand", .string("visa")), ("number", .string("4242424242424242")),
                ("expMonth", .string("04")), ("expYear", .string("2023")), ("code", .string("123")),
            ])
        case "item.identity":
            return object([
                ("title", .string("Mr")), ("firstName", .string("John")), ("middleName", .string("William")), ("lastName", .string("Doe")),
                ("address1", .string("123 Any St")), ("address2", .string("Apt #123")), ("address3", .null), ("city", .string("New York")),
                ("state", .string("NY")), ("postalCode", .string("10001")), ("country", .string("US")), ("company", .string("Acme Inc.")),
                ("email", .string("john@company.com")), ("phone", .string("5555551234")), ("ssn", .string("000-123-4567")),
                ("username", .string("jdoe")), ("passportNumber", .string("US-123456789")), ("licenseNumber", .string("D123-12-123-12333")),
            ])
        case "item.securenote":
            return object([("type", .int(0))])
        case "folder":
            return object([("name", .string("Folder name"))])
        case "collection":
            return object([("organizationId", .string("00000000-0000-0000-0000-000000000000")), ("name", .string("Collection name")),
                           ("externalId", .null)])
        case "item-collections":
            return .array([.string("collection-id1"), .string("collection-id2")])
        default:
            throw BWFailure(message: "Unknown template object.")
        }
    }
}
