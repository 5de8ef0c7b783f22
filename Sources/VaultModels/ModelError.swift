#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import VaultCrypto

/// Every way reading, writing, encrypting or decrypting a vault model can fail.
public enum ModelError: Error, Sendable, Equatable {
    /// The bytes are not valid JSON; `offset` is the byte where parsing stopped.
    case invalidJSON(offset: Int, reason: String)
    /// A required field is absent or null; `path` is its JSON path (`cipher.login.uris[0].uri`).
    case missingField(path: String)
    /// A field has the wrong JSON type.
    case wrongType(path: String, expected: String, found: String)
    /// A field has the right type but an invalid value (a malformed EncString, a bad date…).
    case invalidValue(path: String, reason: String)
    /// One field of one item could not be decrypted. The rest of the vault is unaffected.
    case decryptionFailed(itemID: String?, field: String, reason: CryptoError)
    /// Encryption of a field failed.
    case encryptionFailed(field: String, reason: CryptoError)
    /// No key is known for the organization that owns an item.
    case missingOrganizationKey(organizationID: String)
    /// The item's type-specific data does not match its type.
    case typeMismatch(itemID: String?, reason: String)
}

extension ModelError: LocalizedError {
    public var errorDescription: String? {
        switch self {
        case .invalidJSON(let offset, let reason):
            return "Invalid JSON at byte \(offset): \(reason)."
        case .missingField(let path):
            return "Missing required field '\(path)'."
        case .wrongType(let path, let expected, let found):
            return "Field '\(path)' should be \(expected), found \(found)."
        case .invalidValue(let path, let reason):
            return "Field '\(path)' is invalid: \(reason)."
        case .decryptionFailed(let itemID, let field, let reason):
            return "Could not decrypt '\(field)' of item \(itemID ?? "(new item)"): \(reason.description)"
        case .encryptionFailed(let field, let reason):
            return "Could not encrypt '\(field)': \(reason.description)"
        case .missingOrganizationKey(let organizationID):
            return "No key is available for organization \(organizationID); sync to fetch it."
        case .typeMismatch(let itemID, let reason):
            return "Item \(itemID ?? "(new item)") is inconsistent: \(reason)."
        }
    }
}

extension ModelError: CustomStringConvertible {
    public var description: String { errorDescription ?? "ModelError" }
}
