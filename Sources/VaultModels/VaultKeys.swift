import VaultCrypto

/// The keys that open a vault: the user key and the organization keys (spec §1.1).
///
/// Redacted when printed. Held in memory only while the vault is unlocked.
public struct VaultKeys: Sendable {
    public var userKey: SymmetricCryptoKey
    /// Organization keys by organization id (lowercase).
    public var organizationKeys: [String: SymmetricCryptoKey]

    public init(userKey: SymmetricCryptoKey, organizationKeys: [String: SymmetricCryptoKey] = [:]) {
        self.userKey = userKey
        self.organizationKeys = organizationKeys
    }

    /// The key that owns an item: its organization's key, or the user key for personal items.
    public func ownerKey(organizationId: String?) throws -> SymmetricCryptoKey {
        guard let organizationId else { return userKey }
        guard let key = organizationKeys[organizationId.lowercased()] else {
            throw ModelError.missingOrganizationKey(organizationID: organizationId)
        }
        return key
    }

    /// A new item with its own random item key wrapped by its owner's key (spec §1.10: new items
    /// always get an item key).
    public func newItem(type: CipherType, name: String, organizationId: String? = nil,
                        random: any RandomSource = SystemRandomSource()) throws -> CipherView {
        var view = CipherView(type: type, name: name)
        view.organizationId = organizationId
        view.itemKey = try wrapNewItemKey(organizationId: organizationId, random: random)
        return view
    }

    /// A fresh item key wrapped by the owner's key.
    public func wrapNewItemKey(organizationId: String?, random: any RandomSource = SystemRandomSource()) throws -> EncString {
        let owner = try ownerKey(organizationId: organizationId)
        do {
            return try EncString.wrap(SymmetricCryptoKey.generate(using: random), with: owner, random: random)
        } catch let error as CryptoError {
            throw ModelError.encryptionFailed(field: "key", reason: error)
        }
    }

    /// The key that encrypts an item's fields: the unwrapped item key, or the owner key.
    public func fieldKey(itemKey: EncString?, organizationId: String?, itemID: String?) throws -> SymmetricCryptoKey {
        let owner = try ownerKey(organizationId: organizationId)
        guard let itemKey else { return owner }
        do {
            return try itemKey.decryptKey(key: owner)
        } catch let error as CryptoError {
            throw ModelError.decryptionFailed(itemID: itemID, field: "key", reason: error)
        }
    }
}

extension VaultKeys: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String { "VaultKeys(user key, \(organizationKeys.count) organization keys, redacted)" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}
