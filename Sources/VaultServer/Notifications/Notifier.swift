import Foundation
import Logging
import VaultModels

/// What the controllers call after a change has been committed: works out who may know of it and
/// publishes the notification (docs/PROTOCOL.md, "The notifications hub"). A failure here is logged
/// and never fails the request: the change is stored, and the clients' next sync sees it anyway.
struct Notifier: Sendable {
    let repository: VaultRepository
    let transport: any NotificationTransport
    let logger: Logger
    let now: @Sendable () -> Int64

    /// Ciphers created, updated (a soft delete, a restore, a move, a share are updates) or deleted for
    /// good (`records` as they were before the delete).
    /// `onlyTo`: a change of one user's own state of the items (folder, favorite, archive) reaches only them.
    func ciphers(_ records: [CipherRecord], _ type: PushType, by context: VaultRequestContext, onlyTo: [String]? = nil) async {
        for record in records {
            await cipher(record, type, by: context, onlyTo: onlyTo)
        }
    }

    /// A bulk create or update: SyncVault to the user, and each organization item to the others who see it.
    func bulkChange(_ records: [CipherRecord], userID: String, by context: VaultRequestContext) async {
        guard !records.isEmpty else { return }
        await user(userID, .syncVault, contextID: context.claims?.device)
        for record in records where record.organizationID != nil {
            await cipher(record, .syncCipherUpdate, by: context)
        }
    }

    func cipher(_ record: CipherRecord, _ type: PushType, by context: VaultRequestContext, onlyTo: [String]? = nil) async {
        do {
            let notification: HubNotification
            let audience: [String]
            if let organizationID = record.organizationID {
                // Every collection of the item, not only those of the member who changed it.
                let collections: [String]
                if type == .syncLoginDelete {
                    collections = record.collectionIDs
                } else {
                    collections = try await repository.collectionIDs(ofCipher: record.id)
                }
                if let onlyTo {
                    audience = onlyTo
                } else {
                    audience = try await repository.audience(organizationID: organizationID, collectionIDs: collections)
                }
                notification = .cipher(type, id: record.id, userID: nil, organizationID: organizationID, collectionIDs: collections,
                                       revisionDate: record.revisionDate, contextID: context.claims?.device)
            } else {
                guard let owner = record.userID else { return }
                audience = onlyTo ?? [owner]
                notification = .cipher(type, id: record.id, userID: owner, organizationID: nil, collectionIDs: nil,
                                       revisionDate: record.revisionDate, contextID: context.claims?.device)
            }
            await transport.publish(HubDelivery(userIDs: audience, notification: notification))
        } catch {
            logger.warning("notification not sent", metadata: ["type": "\(type)", "error": "\(error)"])
        }
    }

    func folder(_ folder: FolderRecord, _ type: PushType, userID: String, by context: VaultRequestContext) async {
        await transport.publish(HubDelivery(userIDs: [userID], notification: .folder(
            type, id: folder.id, userID: userID, revisionDate: folder.revisionDate, contextID: context.claims?.device)))
    }

    /// A folder deleted (it has no record any more: the id and the time of the delete).
    func folderDeleted(id: String, userID: String, by context: VaultRequestContext) async {
        await transport.publish(HubDelivery(userIDs: [userID], notification: .folder(
            .syncFolderDelete, id: id, userID: userID, revisionDate: now(), contextID: context.claims?.device)))
    }

    /// SyncVault (an import, a bulk change), SyncOrgKeys (a membership confirmed), SyncSettings.
    func user(_ userID: String, _ type: PushType, contextID: String?) async {
        await transport.publish(HubDelivery(userIDs: [userID], notification: .user(type, userID: userID, date: now(), contextID: contextID)))
    }

    /// Every session of the account ended (password change, key rotation, "deauthorize sessions",
    /// account deletion): LogOut to every connection, then each is closed.
    func loggedOut(_ userID: String, contextID: String?) async {
        await transport.publish(HubDelivery(
            userIDs: [userID], notification: .user(.logOut, userID: userID, date: now(), contextID: contextID),
            close: .init(error: "The session has ended.", allowReconnect: false)))
    }

    /// One device signed out or deactivated: its connections are closed (the account's others stay).
    func deviceRevoked(userID: String, device: String) async {
        await transport.publish(HubDelivery(userIDs: [userID], devices: [device], close: .init(error: "The session has ended.", allowReconnect: false)))
    }
}

extension VaultRepository {
    func collectionIDs(ofCipher id: String) async throws -> [String] {
        try await read { session in
            try await session.query("SELECT collection_id FROM collection_ciphers WHERE cipher_id = ? ORDER BY collection_id", [.text(id)])
                .compactMap { $0.text("collection_id") }
        }
    }

    /// The users who see an organization item in these collections: confirmed owners and admins (full
    /// access), and confirmed members assigned one of the collections (the read rule of
    /// `visibleCiphers(userID:onlyIDs:_:)`).
    func audience(organizationID: String, collectionIDs: [String]) async throws -> [String] {
        try await read { session in
            let inCollections = collectionIDs.isEmpty ? "" : """
                 OR EXISTS (SELECT 1 FROM collection_members cm WHERE cm.membership_id = m.id
                    AND cm.collection_id IN (\(placeholders(collectionIDs.count))))
                """
            return try await session.query("""
                SELECT m.user_id FROM memberships m
                WHERE m.organization_id = ? AND m.status = 2 AND (m.type IN (0, 1)\(inCollections))
                """, [.text(organizationID)] + collectionIDs.map(SQLValue.text)).compactMap { $0.text("user_id") }
        }
    }
}
