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

/// `TwoFactorProviderType` (docs/PROTOCOL.md, "Two-step login"): the number a server lists in
/// `TwoFactorProviders2` and a client sends as `twoFactorProvider`. The same numbers on the official
/// server and on Vaultwarden.
public struct TwoFactorProviderType: OpenWireEnum, Comparable {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }
    public static let authenticator = TwoFactorProviderType(rawValue: 0)
    public static let email = TwoFactorProviderType(rawValue: 1)
    public static let duo = TwoFactorProviderType(rawValue: 2)
    public static let yubiKey = TwoFactorProviderType(rawValue: 3)
    public static let u2f = TwoFactorProviderType(rawValue: 4)
    /// Not a provider a person uses: the "remember this device" token sent in place of a code.
    public static let remember = TwoFactorProviderType(rawValue: 5)
    public static let organizationDuo = TwoFactorProviderType(rawValue: 6)
    public static let webAuthn = TwoFactorProviderType(rawValue: 7)
    /// The recovery code, which turns two-step login off when it is used.
    public static let recoveryCode = TwoFactorProviderType(rawValue: 8)

    /// A name for people ("authenticator app", "YubiKey", …).
    public var name: String {
        switch rawValue {
        case 0: return "authenticator app"
        case 1: return "email"
        case 2: return "Duo"
        case 3: return "YubiKey"
        case 4: return "U2F key"
        case 5: return "remembered device"
        case 6: return "Duo (organization)"
        case 7: return "security key (WebAuthn/FIDO2)"
        case 8: return "recovery code"
        default: return "provider \(rawValue)"
        }
    }

    public static func < (lhs: TwoFactorProviderType, rhs: TwoFactorProviderType) -> Bool { lhs.rawValue < rhs.rawValue }
}
