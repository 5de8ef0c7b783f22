import Foundation
import VaultModels

/// The longest list each request body may carry (docs/PROTOCOL.md, "Request limits"). A longer one is
/// refused with `400` naming the field and the limit before anything else is read or done, so a body
/// within the size limit cannot still make the server loop or query far more than any client needs.
/// Lists inside one item (URIs, fields, password history) are bounded by the body size and the field
/// lengths instead.
enum RequestLimits {
    /// `ids` of the bulk routes (delete, restore, archive, move, hard delete) and of
    /// `organizations/{id}/users/public-keys`: the official cloud server's 500.
    static let ids = 500
    /// `ciphers` of a bulk share (`PUT /api/ciphers/share`).
    static let sharedCiphers = 500
    /// `collectionIds` of a create, share or collection change.
    static let collectionIDs = 1_000
    /// `emails` of one invite: the official 20.
    static let inviteEmails = 20
    /// `collections` of an invite and `users` of a collection.
    static let accessEntries = 2_000
    /// An import: the official self-hosted defaults (`importCiphersLimitation`).
    static let importCiphers = 40_000
    static let importFolders = 2_000
    static let importFolderRelationships = 80_000
    /// `equivalentDomains` of `PUT /api/settings/domains`: groups, and domains in one group (every sync carries them).
    static let equivalentDomainGroups = 1_000
    static let equivalentDomainsPerGroup = 200

    /// `values` unless longer than `limit` (400 naming `field`).
    @discardableResult
    static func check(_ values: [JSONValue], field: String, limit: Int) throws -> [JSONValue] {
        guard values.count <= limit else {
            throw APIError.invalidModel([field: ["At most \(limit) entries in \(field) per request; this one has \(values.count)."]])
        }
        return values
    }
}
