import VaultCrypto

/// The names of a flat group of encrypted fields (all EncStrings on the wire).
public protocol SecretFieldName: RawRepresentable, CaseIterable, Sendable, Hashable where RawValue == String {}

/// Card fields (spec §2.6), all EncStrings.
public enum CardField: String, SecretFieldName {
    case cardholderName, brand, number, expMonth, expYear, code
}

/// Identity fields (spec §2.6), all EncStrings.
public enum IdentityField: String, SecretFieldName {
    case title, firstName, middleName, lastName, address1, address2, address3, city, state, postalCode,
         country, company, email, phone, ssn, username, passportNumber, licenseNumber
}

/// SSH key fields (spec §2.6), all EncStrings.
public enum SSHKeyField: String, SecretFieldName {
    case privateKey, publicKey, keyFingerprint
}

/// Passkey (FIDO2 credential) fields (spec §2.6), all EncStrings; `creationDate` is separate.
public enum Fido2Field: String, SecretFieldName {
    case credentialId, keyType, keyAlgorithm, keyCurve, keyValue, rpId, rpName, userHandle, userName,
         userDisplayName, counter, discoverable
}

/// The encrypted wire form of a flat field group: every field an EncString or null.
public struct EncryptedFields<Field: SecretFieldName>: JSONObjectConvertible {
    public var values: [Field: EncString]
    /// Keys this version does not model, kept for the round trip.
    public var unknown: JSONObject

    public init(values: [Field: EncString] = [:], unknown: JSONObject = JSONObject()) {
        self.values = values
        self.unknown = unknown
    }

    public subscript(field: Field) -> EncString? {
        get { values[field] }
        set { values[field] = newValue }
    }

    public init(json: JSONObject, path: String) throws {
        var reader = JSONReader(json, path: path)
        var values: [Field: EncString] = [:]
        for field in Field.allCases {
            if let value = try reader.encString(field.rawValue) { values[field] = value }
        }
        self.values = values
        unknown = try reader.unknown
    }

    public func write(into writer: inout JSONWriter) {
        write(to: &writer)
        writer.append(unknown: unknown)
    }

    func write(to writer: inout JSONWriter) {
        for field in Field.allCases { writer.put(field.rawValue, values[field]) }
    }

    /// Decrypts every field with `key`; a failure names the field (`card.number`).
    public func decrypted(key: SymmetricCryptoKey, itemID: String?, path: String) throws -> PlainFields<Field> {
        var plain: [Field: String] = [:]
        for (field, value) in values {
            plain[field] = try decryptField(value, key: key, itemID: itemID, field: "\(path).\(field.rawValue)")
        }
        return PlainFields(values: plain, unknown: unknown)
    }
}

/// The decrypted form of a flat field group. A field that is absent (or null on the wire) has no value.
public struct PlainFields<Field: SecretFieldName>: Sendable, Equatable {
    public var values: [Field: String]
    /// Keys this version does not model, kept for the round trip.
    public var unknown: JSONObject

    public init(values: [Field: String] = [:], unknown: JSONObject = JSONObject()) {
        self.values = values
        self.unknown = unknown
    }

    public subscript(field: Field) -> String? {
        get { values[field] }
        set { values[field] = newValue }
    }

    /// Encrypts every field with `key`.
    public func encrypted(key: SymmetricCryptoKey, random: any RandomSource, path: String) throws -> EncryptedFields<Field> {
        var encrypted: [Field: EncString] = [:]
        for (field, value) in values {
            encrypted[field] = try encryptField(value, key: key, random: random, field: "\(path).\(field.rawValue)")
        }
        return EncryptedFields(values: encrypted, unknown: unknown)
    }
}

public typealias CardWire = EncryptedFields<CardField>
public typealias CardView = PlainFields<CardField>
public typealias IdentityWire = EncryptedFields<IdentityField>
public typealias IdentityView = PlainFields<IdentityField>
public typealias SSHKeyWire = EncryptedFields<SSHKeyField>
public typealias SSHKeyView = PlainFields<SSHKeyField>

/// Decrypts one field, reporting which item and field failed.
func decryptField(_ value: EncString, key: SymmetricCryptoKey, itemID: String?, field: String) throws -> String {
    do {
        return try value.decryptString(key: key)
    } catch let error as CryptoError {
        throw ModelError.decryptionFailed(itemID: itemID, field: field, reason: error)
    }
}

/// Decrypts an optional field.
func decryptOptional(_ value: EncString?, key: SymmetricCryptoKey, itemID: String?, field: String) throws -> String? {
    guard let value else { return nil }
    return try decryptField(value, key: key, itemID: itemID, field: field)
}

/// Encrypts one field, reporting which field failed.
func encryptField(_ value: String, key: SymmetricCryptoKey, random: any RandomSource, field: String) throws -> EncString {
    do {
        return try EncString.encrypt(value, key: key, random: random)
    } catch let error as CryptoError {
        throw ModelError.encryptionFailed(field: field, reason: error)
    }
}

/// Encrypts an optional field.
func encryptOptional(_ value: String?, key: SymmetricCryptoKey, random: any RandomSource, field: String) throws -> EncString? {
    guard let value else { return nil }
    return try encryptField(value, key: key, random: random, field: field)
}
