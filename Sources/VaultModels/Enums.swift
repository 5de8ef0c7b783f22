/// A wire enum that keeps values it does not know (a newer server's additions survive a round trip).
public protocol OpenWireEnum: RawRepresentable, Sendable, Hashable, CustomStringConvertible where RawValue == Int {
    init(rawValue: Int)
}

extension OpenWireEnum {
    public var description: String { String(rawValue) }
}

/// `CipherType` (spec §2.0): 1 Login, 2 SecureNote, 3 Card, 4 Identity, 5 SshKey; 6–8 are newer types
/// that VaultSync carries through untouched.
public struct CipherType: OpenWireEnum {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let login = CipherType(rawValue: 1)
    public static let secureNote = CipherType(rawValue: 2)
    public static let card = CipherType(rawValue: 3)
    public static let identity = CipherType(rawValue: 4)
    public static let sshKey = CipherType(rawValue: 5)
    /// The types VaultSync can decrypt and edit.
    public static let supported: [CipherType] = [.login, .secureNote, .card, .identity, .sshKey]

    /// The wire key of this type's data object (`login`, `card`, …), `nil` for unknown types.
    public var dataKey: String? {
        switch rawValue {
        case 1: return "login"
        case 2: return "secureNote"
        case 3: return "card"
        case 4: return "identity"
        case 5: return "sshKey"
        default: return nil
        }
    }

    /// A human name ("login", "note", …).
    public var name: String {
        switch rawValue {
        case 1: return "login"
        case 2: return "note"
        case 3: return "card"
        case 4: return "identity"
        case 5: return "ssh-key"
        default: return "type-\(rawValue)"
        }
    }
}

/// `FieldType`: 0 Text, 1 Hidden, 2 Boolean, 3 Linked.
public struct FieldType: OpenWireEnum {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let text = FieldType(rawValue: 0)
    public static let hidden = FieldType(rawValue: 1)
    public static let boolean = FieldType(rawValue: 2)
    public static let linked = FieldType(rawValue: 3)
}

/// `UriMatchType`: 0 Domain, 1 Host, 2 StartsWith, 3 Exact, 4 RegularExpression, 5 Never (nil = default).
public struct URIMatchType: OpenWireEnum {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let domain = URIMatchType(rawValue: 0)
    public static let host = URIMatchType(rawValue: 1)
    public static let startsWith = URIMatchType(rawValue: 2)
    public static let exact = URIMatchType(rawValue: 3)
    public static let regularExpression = URIMatchType(rawValue: 4)
    public static let never = URIMatchType(rawValue: 5)
}

/// `CipherRepromptType`: 0 None, 1 Password.
public struct RepromptType: OpenWireEnum {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let none = RepromptType(rawValue: 0)
    public static let password = RepromptType(rawValue: 1)
}

/// `SecureNoteType`: 0 Generic.
public struct SecureNoteType: OpenWireEnum {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let generic = SecureNoteType(rawValue: 0)
}
