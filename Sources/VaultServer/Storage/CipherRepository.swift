import Foundation

/// What a cipher write carries, already validated and split into stored columns.
struct CipherWrite: Sendable {
    var type: Int
    /// JSON object text of the encrypted payload (no server-managed keys).
    var data: String
    var organizationID: String?
    var folderID: String?
    var favorite: Bool
    var archivedDate: Int64?
    /// From `lastKnownRevisionDate`; `nil` skips the stale-edit check.
    var lastKnownRevisionDate: Int64?
    /// A create's `Idempotency-Key` (docs/PROTOCOL.md, "Idempotent creates"); kept per user.
    var createKey: String?
}

/// Why a cipher write was refused.
enum CipherWriteOutcome: Sendable {
    case notFound
    case outOfDate
    case forbidden(String)
    case invalid(String)
    /// A repeated create whose first attempt made the item `id`, deleted for good since (or no longer visible).
    case createdSinceDeleted(CreateKind, id: String)
    /// An idempotency key the user sent with a create of another kind.
    case keyReused(String)
}

struct CipherWriteError: Error {
    let outcome: CipherWriteOutcome

    /// The member's access to the item does not allow the change (403, ``APIError/cannotEdit``).
    static let cannotEdit = CipherWriteError(outcome: .forbidden(APIError.cannotEdit.message))
    static let cannotDelete = CipherWriteError(outcome: .forbidden(APIError.cannotDelete.message))
}

extension VaultRepository {
    /// SQL for a cipher's next revision date: now, but always at least 1 ms after the previous one, so
    /// that no two revisions of an item share a millisecond (what clients send back, spec §3.7). Binds
    /// `now` twice.
    static let nextRevision = "CASE WHEN ? > revision_date + 1000 THEN ? ELSE revision_date + 1000 END"

    // MARK: Reading with access

    /// The ciphers `userID` can see (personal ones and organization ones through collections or full
    /// access), optionally only `onlyID`, with folder/favorite/archive state, access, collections and
    /// attachments filled in.
    static func visibleCiphers(userID: String, onlyID: String? = nil, _ session: any SQLSession) async throws -> [CipherRecord] {
        try await visibleCiphers(userID: userID, onlyIDs: onlyID.map { [$0] }, session)
    }

    /// Ciphers with this user's state of them, in creation order: `condition` over `c` (binds: the user for
    /// the state, then those of `condition`), optionally only `idCount` ids (bound last).
    static func ciphersWithStateQuery(where condition: String, idCount: Int?) -> String {
        """
        SELECT \(CipherRecord.selectColumns), s.folder_id, s.favorite, s.archived_date FROM ciphers c
        LEFT JOIN cipher_user_state s ON s.cipher_id = c.id AND s.user_id = ?
        WHERE \(condition)\(idCount.map { " AND c.id IN (\(placeholders($0)))" } ?? "") ORDER BY c.created_at, c.id
        """
    }

    /// The user's own ciphers (binds: the user twice, then the ids). Given ids, each is looked up by its
    /// key: without statistics SQLite would rather walk all of the user's ciphers in creation order (index
    /// ciphers_user_created, no sort) and test each against the list, 10,000 rows read for a bulk request
    /// of 500. `|| ''` keeps the owner test off the index (both dialects); the few rows found are sorted.
    static func ownCiphersQuery(idCount: Int?) -> String {
        ciphersWithStateQuery(where: idCount == nil ? "c.user_id = ?" : "c.user_id || '' = ?", idCount: idCount)
    }

    /// The same, for a list of ids (`nil`: every visible cipher).
    static func visibleCiphers(userID: String, onlyIDs: [String]?, _ session: any SQLSession) async throws -> [CipherRecord] {
        if let onlyIDs, onlyIDs.isEmpty { return [] }
        let idBind: [SQLValue] = onlyIDs.map { $0.map(SQLValue.text) } ?? []
        let ownRows = try await session.query(ownCiphersQuery(idCount: onlyIDs?.count), [.text(userID), .text(userID)] + idBind)
        var records: [CipherRecord] = []
        if let first = ownRows.first {
            let layout = CipherRecord.Layout(first.columns)
            records = ownRows.map { CipherRecord(row: $0, layout: layout, access: .owner) }
        }

        let memberships = try await session.query(
            "SELECT * FROM memberships WHERE user_id = ? AND status = 2", [.text(userID)]).map(MembershipRecord.init(row:))
        if !memberships.isEmpty {
            let orgIDs = memberships.map(\.organizationID)
            let orgBinds = orgIDs.map(SQLValue.text)
            let orgCiphers = try await session.query(
                ciphersWithStateQuery(where: "c.organization_id IN (\(placeholders(orgIDs.count)))", idCount: onlyIDs?.count),
                [.text(userID)] + orgBinds + idBind)
            let links = try await session.query("""
                SELECT cc.collection_id, cc.cipher_id FROM collection_ciphers cc JOIN collections col ON col.id = cc.collection_id
                WHERE col.organization_id IN (\(placeholders(orgIDs.count)))
                """, orgBinds)
            var collectionsOfCipher: [String: [String]] = [:]
            for link in links {
                collectionsOfCipher[link.text("cipher_id") ?? "", default: []].append(link.text("collection_id") ?? "")
            }
            let rows = try await session.query(
                "SELECT * FROM collection_members WHERE membership_id IN (\(placeholders(memberships.count)))",
                memberships.map { .text($0.id) })
            let managers = Set(memberships.filter(\.managesAssignedCollections).map(\.id))
            var rowOfCollection: [String: CipherAccess] = [:]
            for row in rows {
                rowOfCollection[row.text("collection_id") ?? ""] = CipherAccess(assignment: row, manager: managers.contains(row.text("membership_id") ?? ""))
            }
            let membershipOfOrg = Dictionary(memberships.map { ($0.organizationID, $0) }, uniquingKeysWith: { first, _ in first })
            let layout = CipherRecord.Layout(orgCiphers.first?.columns ?? [])
            for row in orgCiphers {
                guard let orgID = row.text("organization_id"), let membership = membershipOfOrg[orgID] else { continue }
                let collections = (collectionsOfCipher[row.text("id") ?? ""] ?? []).sorted()
                var record: CipherRecord
                if membership.hasFullAccess {
                    record = CipherRecord(row: row, layout: layout, access: .owner)
                    record.collectionIDs = collections
                } else {
                    // organizations.md §4.4, per-flag most permissive over the user's collections.
                    let assigned = collections.filter { rowOfCollection[$0] != nil }
                    guard !assigned.isEmpty else { continue }
                    let access = assigned.compactMap { rowOfCollection[$0] }.reduce(CipherAccess(edit: false, viewPassword: false, manage: false)) {
                        CipherAccess(edit: $0.edit || $1.edit, viewPassword: $0.viewPassword || $1.viewPassword, manage: $0.manage || $1.manage)
                    }
                    record = CipherRecord(row: row, layout: layout, access: access)
                    record.collectionIDs = assigned
                }
                records.append(record)
            }
        }
        if !records.isEmpty {
            // Every visible cipher: the attachments of the user's and their organizations' ciphers in one
            // query (a list of a thousand ids cost a thousand binds and probes); a few ids: by id.
            let attachmentsOfCipher = onlyIDs == nil
                ? try await attachments(userID: userID, organizationIDs: memberships.map(\.organizationID), session)
                : try await attachments(of: records.map(\.id), session)
            for index in records.indices {
                records[index].attachments = attachmentsOfCipher[records[index].id] ?? []
            }
        }
        return records
    }

    /// The uploaded attachments of the ciphers `userID` owns or that belong to `organizationIDs`, by cipher,
    /// oldest first (the caller keeps those of the ciphers it shows).
    static func attachments(userID: String, organizationIDs: [String], _ session: any SQLSession) async throws -> [String: [AttachmentRecord]] {
        let organizations = organizationIDs.isEmpty ? "" : " OR organization_id IN (\(placeholders(organizationIDs.count)))"
        let rows = try await session.query("""
            SELECT id, cipher_id, file_name, akey, file_size FROM attachments
            WHERE upload_id IS NOT NULL AND cipher_id IN (SELECT id FROM ciphers WHERE user_id = ?\(organizations)) ORDER BY created_at, id
            """, [.text(userID)] + organizationIDs.map(SQLValue.text))
        return attachmentsByCipher(rows)
    }

    static func attachmentsByCipher(_ rows: [SQLRow]) -> [String: [AttachmentRecord]] {
        var attachmentsOfCipher: [String: [AttachmentRecord]] = [:]
        for row in rows {
            let attachment = AttachmentRecord(id: row.text("id") ?? "", cipherID: row.text("cipher_id") ?? "",
                                              fileName: row.text("file_name") ?? "", key: row.text("akey"),
                                              fileSize: row.int("file_size") ?? 0)
            attachmentsOfCipher[attachment.cipherID, default: []].append(attachment)
        }
        return attachmentsOfCipher
    }

    /// The uploaded attachments of `ids`, by cipher, oldest first.
    static func attachments(of ids: [String], _ session: any SQLSession) async throws -> [String: [AttachmentRecord]] {
        var attachmentsOfCipher: [String: [AttachmentRecord]] = [:]
        // Chunked to stay under SQLite's bound-parameter limit on large vaults.
        for chunk in stride(from: 0, to: ids.count, by: 500).map({ Array(ids[$0..<min($0 + 500, ids.count)]) }) {
            let rows = try await session.query("""
                SELECT id, cipher_id, file_name, akey, file_size FROM attachments
                WHERE upload_id IS NOT NULL AND cipher_id IN (\(placeholders(chunk.count))) ORDER BY created_at, id
                """, chunk.map(SQLValue.text))
            attachmentsOfCipher.merge(attachmentsByCipher(rows)) { first, _ in first }
        }
        return attachmentsOfCipher
    }

    /// The cipher `id` as `userID` sees it, for a write: the user's own cipher in one query (owners have
    /// every right), anything else through the full visibility rules of ``visibleCiphers(userID:onlyID:_:)``.
    /// Attachments are not loaded (a write does not change them; ``finishWrite`` adds them).
    static func cipherForWrite(id: String, userID: String, _ session: any SQLSession) async throws -> CipherRecord? {
        if let row = try await session.query("""
            SELECT \(CipherRecord.selectColumns), s.folder_id, s.favorite, s.archived_date FROM ciphers c
            LEFT JOIN cipher_user_state s ON s.cipher_id = c.id AND s.user_id = ?
            WHERE c.id = ? AND c.user_id = ?
            """, [.text(userID), .text(id), .text(userID)]).first {
            return CipherRecord(row: row, access: .owner)
        }
        return try await visibleCiphers(userID: userID, onlyID: id, session).first
    }

    func visibleCiphers(userID: String) async throws -> [CipherRecord] {
        try await read { session in try await Self.visibleCiphers(userID: userID, session) }
    }

    func visibleCipher(id: String, userID: String) async throws -> CipherRecord? {
        try await read { session in try await Self.visibleCiphers(userID: userID, onlyID: id, session).first }
    }

    /// Users whose account revision must move when a cipher changes: the owner, or every confirmed
    /// member of its organization.
    static func affectedUsers(userID: String?, organizationID: String?, _ session: any SQLSession) async throws -> [String] {
        if let organizationID {
            return try await session.query("SELECT user_id FROM memberships WHERE organization_id = ? AND status = 2",
                                           [.text(organizationID)]).compactMap { $0.text("user_id") }
        }
        return userID.map { [$0] } ?? []
    }

    /// Stores `userID`'s folder, favorite and archive state of a cipher; a folder that is not the user's
    /// is dropped (the item lands in no folder). Returns the folder stored.
    @discardableResult
    static func setUserState(cipherID: String, userID: String, folderID: String?, favorite: Bool, archivedDate: Int64?,
                             _ session: any SQLSession) async throws -> String? {
        // One statement: the ownership check is a subquery of the upsert.
        try await session.query("""
            INSERT INTO cipher_user_state (cipher_id, user_id, folder_id, favorite, archived_date)
            VALUES (?, ?, (SELECT id FROM folders WHERE id = ? AND user_id = ?), ?, ?)
            ON CONFLICT (cipher_id, user_id) DO UPDATE SET folder_id = excluded.folder_id, favorite = excluded.favorite,
                archived_date = excluded.archived_date
            RETURNING folder_id
            """, [.text(cipherID), .text(userID), .optionalText(folderID), .text(userID), .bool(favorite), .optionalInt(archivedDate)])
            .first?.text("folder_id")
    }

    // MARK: Writing

    /// Creates a cipher for `userID` (personal) or in an organization with `collectionIDs`.
    func createCipher(userID: String, write: CipherWrite, collectionIDs: [String], requireCollections: Bool, now: Int64) async throws -> CipherRecord {
        try await transaction { session in
            try await Self.create(userID: userID, write: write, collectionIDs: collectionIDs, requireCollections: requireCollections,
                                  now: now, session)
        }
    }

    /// Creates many personal ciphers in one transaction (the bulk-create extension), each exactly as
    /// ``createCipher`` would, idempotency key included; one entry's refusal does not stop the others.
    func createCiphers(userID: String, writes: [CipherWrite], now: Int64) async throws -> [Result<CipherRecord, CipherWriteError>] {
        try await transaction { session in
            var outcomes: [Result<CreateOutcome, CipherWriteError>] = []
            outcomes.reserveCapacity(writes.count)
            for write in writes {
                guard write.organizationID == nil else {
                    outcomes.append(.failure(CipherWriteError(outcome: .invalid("Bulk creates are for personal items only."))))
                    continue
                }
                do {
                    outcomes.append(.success(try await Self.insert(userID: userID, write: write, collectionIDs: [], requireCollections: false,
                                                                   now: now, bumpRevision: false, session)))
                } catch let error as CipherWriteError {
                    outcomes.append(.failure(error))
                }
            }
            // Personal items only: the account's revision moves once for the whole request.
            try await Self.bumpRevision([userID], now: now, session)
            // The new items read back in one query, not three per item.
            let made = outcomes.compactMap { outcome in if case .success(.made(let id)) = outcome { id } else { nil } }
            let records = Dictionary(try await Self.visibleCiphers(userID: userID, onlyIDs: made, session).map { ($0.id, $0) },
                                     uniquingKeysWith: { first, _ in first })
            return outcomes.map { outcome in
                outcome.flatMap { created in
                    switch created {
                    case .earlier(let record): .success(record)
                    case .made(let id): records[id].map { .success($0) } ?? .failure(CipherWriteError(outcome: .notFound))
                    }
                }
            }
        }
    }

    /// What a create did: made a new item (its id), or found the item an earlier attempt with the same
    /// idempotency key made (as it is now).
    enum CreateOutcome: Sendable {
        case made(String)
        case earlier(CipherRecord)
    }

    static func create(userID: String, write: CipherWrite, collectionIDs: [String], requireCollections: Bool, now: Int64,
                       _ session: any SQLSession) async throws -> CipherRecord {
        switch try await insert(userID: userID, write: write, collectionIDs: collectionIDs, requireCollections: requireCollections,
                                now: now, session) {
        case .earlier(let record): return record
        case .made(let id):
            guard let record = try await Self.visibleCiphers(userID: userID, onlyID: id, session).first else {
                throw CipherWriteError(outcome: .notFound)
            }
            return record
        }
    }

    static func insert(userID: String, write: CipherWrite, collectionIDs: [String], requireCollections: Bool, now: Int64,
                       bumpRevision bump: Bool = true, _ session: any SQLSession) async throws -> CreateOutcome {
        // A create retried after its answer was lost, or delayed past the client's timeout and overtaken
        // by the retry, carries the same idempotency key whatever the item was renamed to in between:
        // the key decides alone (docs/PROTOCOL.md, "Idempotent creates"). Without a key every create
        // makes an item: nothing is matched by name (ciphers.create_name, migration 2, is no longer written).
        let createKey = write.createKey.map { CreateKey(userID: userID, key: $0, kind: .cipher) }
        if let createKey, let earlier = try await Self.earlierCreate(createKey, session) {
            return .earlier(try await Self.earlierCipher(id: earlier, userID: userID, session))
        }
        let id = newID()
        if let orgID = write.organizationID {
            try await Self.checkCollectionWrite(userID: userID, organizationID: orgID, collectionIDs: collectionIDs,
                                                requireCollections: requireCollections, session)
        }
        if let createKey, try await !Self.claim(createKey, itemID: id, now: now, session) {
            // Another attempt with the same key committed first: answer with its item.
            guard let earlier = try await Self.earlierCreate(createKey, session) else { throw CipherWriteError(outcome: .notFound) }
            return .earlier(try await Self.earlierCipher(id: earlier, userID: userID, session))
        }
        try await session.query("""
            INSERT INTO ciphers (id, user_id, organization_id, type, data, created_at, revision_date, deleted_date)
            VALUES (?, ?, ?, ?, ?, ?, ?, NULL)
            """, [.text(id), write.organizationID == nil ? .text(userID) : .null, .optionalText(write.organizationID),
                  .int(Int64(write.type)), .text(write.data), .int(now), .int(now)])
        for collectionID in Set(collectionIDs) {
            try await session.query("INSERT INTO collection_ciphers (collection_id, cipher_id) VALUES (?, ?)", [.text(collectionID), .text(id)])
        }
        try await Self.setUserState(cipherID: id, userID: userID, folderID: write.folderID, favorite: write.favorite,
                                    archivedDate: write.archivedDate, session)
        if bump {
            try await Self.bumpRevision(try await Self.affectedUsers(userID: userID, organizationID: write.organizationID, session) + [userID],
                                        now: now, session)
        }
        return .made(id)
    }

    /// Checks that `userID` may put an item into each collection (full access, or a row that is not read-only).
    static func checkCollectionWrite(userID: String, organizationID: String, collectionIDs: [String], requireCollections: Bool,
                                     _ session: any SQLSession) async throws {
        guard let membership = try await session.query(
            "SELECT * FROM memberships WHERE organization_id = ? AND user_id = ? AND status = 2",
            [.text(organizationID), .text(userID)]).first.map(MembershipRecord.init(row:)) else {
            throw CipherWriteError(outcome: .notFound)
        }
        if requireCollections && collectionIDs.isEmpty {
            throw CipherWriteError(outcome: .invalid("You must select at least one collection."))
        }
        if collectionIDs.isEmpty && !membership.hasFullAccess {
            throw CipherWriteError.cannotEdit
        }
        for collectionID in Set(collectionIDs) {
            guard try await !session.query("SELECT id FROM collections WHERE id = ? AND organization_id = ?",
                                           [.text(collectionID), .text(organizationID)]).isEmpty else {
                throw CipherWriteError(outcome: .invalid("Specified CollectionId does not exist on the specified Organization."))
            }
            if membership.hasFullAccess { continue }
            let row = try await session.query("SELECT * FROM collection_members WHERE collection_id = ? AND membership_id = ?",
                                              [.text(collectionID), .text(membership.id)]).first
            guard let row, CipherAccess(assignment: row, manager: membership.managesAssignedCollections).edit else {
                throw CipherWriteError(outcome: .forbidden("No rights to modify the collection \(collectionID)."))
            }
        }
    }

    /// Replaces a cipher's content. The stale-edit check (spec §3.2) is part of the `UPDATE`'s condition,
    /// so of two concurrent updates from the same base exactly one succeeds.
    ///
    /// The check is the official two-sided one (HTTP 400, official message) with the tolerance narrowed
    /// from 1 s to below 1 ms: the 1 s window exists only because clients send milliseconds, and it
    /// would let two updates from one base within a second both succeed. Revisions are at least 1 ms
    /// apart (``nextRevision``), so a millisecond-precision date still matches its own revision and
    /// never the next one.
    func updateCipher(id: String, userID: String, write: CipherWrite, now: Int64) async throws -> CipherRecord {
        try await transaction { session in
            guard var record = try await Self.cipherForWrite(id: id, userID: userID, session) else {
                throw CipherWriteError(outcome: .notFound)
            }
            guard record.access.edit else { throw CipherWriteError.cannotEdit }
            guard record.organizationID == write.organizationID else {
                throw CipherWriteError(outcome: .invalid("Organization mismatch. Re-sync if you recently moved this item, then try again."))
            }
            let data = record.access.viewPassword ? write.data : PasswordHiding.keepingHidden(write.data, stored: record.data)
            var condition = ""
            var binds: [SQLValue] = [.int(Int64(write.type)), .text(data), .int(now), .int(now), .text(id)]
            if let known = write.lastKnownRevisionDate {
                condition = " AND revision_date > ? AND revision_date < ?"
                binds += [.int(known - 1000), .int(known + 1000)]
            }
            guard let updated = try await session.query(
                "UPDATE ciphers SET type = ?, data = ?, revision_date = \(Self.nextRevision) WHERE id = ?\(condition) RETURNING revision_date",
                binds).first, let revision = updated.int("revision_date") else { throw CipherWriteError(outcome: .outOfDate) }
            record.folderID = try await Self.setUserState(cipherID: id, userID: userID, folderID: write.folderID, favorite: write.favorite,
                                                          archivedDate: record.archivedDate, session)
            try await Self.bumpRevision(try await Self.affectedUsers(userID: record.userID, organizationID: record.organizationID, session),
                                        now: now, session)
            // The answer is the record read above with what this write changed: no second visibility query.
            record.type = write.type
            record.data = data
            record.revisionDate = revision
            record.favorite = write.favorite
            record.attachments = try await Self.attachments(of: [id], session)[id] ?? []
            return record
        }
    }

    /// Many updates in one transaction (the VaultSync bulk extension): each item is checked and
    /// written as ``updateCipher(id:userID:write:now:)`` would, and one item's refusal (not found, out
    /// of date, forbidden) never affects the others. Built for volume: the current records, the user's
    /// folders and the organizations' members are read once for the whole batch, each item then costs
    /// one conditional `UPDATE` (plus a state upsert only when folder or favorite change), and account
    /// revisions are bumped once.
    func updateCiphers(userID: String, writes: [(id: String, write: CipherWrite)], now: Int64) async throws
        -> [Result<CipherRecord, CipherWriteError>] {
        try await transaction { session in
            let current = try await Self.visibleCiphers(userID: userID, onlyIDs: Array(Set(writes.map(\.id))), session)
            var byID = Dictionary(current.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
            let folders = Set(try await session.query("SELECT id FROM folders WHERE user_id = ?", [.text(userID)]).compactMap { $0.text("id") })
            var membersOfOrganization: [String: [String]] = [:]
            var affected = Set<String>()
            var results: [Result<CipherRecord, CipherWriteError>] = []
            for (id, write) in writes {
                guard var record = byID[id] else {
                    results.append(.failure(CipherWriteError(outcome: .notFound)))
                    continue
                }
                guard record.access.edit else {
                    results.append(.failure(CipherWriteError.cannotEdit))
                    continue
                }
                guard record.organizationID == write.organizationID else {
                    results.append(.failure(CipherWriteError(outcome: .invalid(
                        "Organization mismatch. Re-sync if you recently moved this item, then try again."))))
                    continue
                }
                let data = record.access.viewPassword ? write.data : PasswordHiding.keepingHidden(write.data, stored: record.data)
                var condition = ""
                var binds: [SQLValue] = [.int(Int64(write.type)), .text(data), .int(now), .int(now), .text(id)]
                if let known = write.lastKnownRevisionDate {
                    condition = " AND revision_date > ? AND revision_date < ?"
                    binds += [.int(known - 1000), .int(known + 1000)]
                }
                let updated = try await session.query(
                    "UPDATE ciphers SET type = ?, data = ?, revision_date = \(Self.nextRevision) WHERE id = ?\(condition) RETURNING revision_date", binds)
                guard let revision = updated.first?.int("revision_date") else {
                    results.append(.failure(CipherWriteError(outcome: .outOfDate)))
                    continue
                }
                let folder = write.folderID.flatMap { folders.contains($0) ? $0 : nil }
                if folder != record.folderID || write.favorite != record.favorite {
                    _ = try await Self.setUserState(cipherID: id, userID: userID, folderID: folder, favorite: write.favorite,
                                                    archivedDate: record.archivedDate, session)
                }
                record.type = write.type
                record.data = data
                record.revisionDate = revision
                record.folderID = folder
                record.favorite = write.favorite
                byID[id] = record
                if let organizationID = record.organizationID {
                    if membersOfOrganization[organizationID] == nil {
                        membersOfOrganization[organizationID] = try await Self.affectedUsers(userID: nil, organizationID: organizationID, session)
                    }
                    affected.formUnion(membersOfOrganization[organizationID] ?? [])
                } else {
                    affected.insert(record.userID ?? userID)
                }
                results.append(.success(record))
            }
            if !affected.isEmpty { try await Self.bumpRevision(affected.sorted(), now: now, session) }
            return results
        }
    }

    /// Changes only this user's folder and favorite (no cipher revision bump, spec §3.1).
    /// Moves or (un)favorites ciphers. `ignoringUnknown` (the bulk route): ids the user cannot see are passed over,
    /// as the official server filters a bulk request to the user's own items; otherwise they are `404`. A folder
    /// that is not the user's leaves the items in no folder (the official partial update; the bulk move refuses it).
    func updateCipherState(ids: [String], userID: String, folderID: String??, favorite: Bool?, ignoringUnknown: Bool = false,
                           now: Int64) async throws -> [CipherRecord] {
        try await transaction { session in
            var result: [CipherRecord] = []
            for (id, current) in try await Self.named(ids, userID: userID, ignoringUnknown, session) {
                let folder = folderID ?? current.folderID
                try await Self.setUserState(cipherID: id, userID: userID, folderID: folder, favorite: favorite ?? current.favorite,
                                            archivedDate: current.archivedDate, session)
                if let updated = try await Self.visibleCiphers(userID: userID, onlyID: id, session).first { result.append(updated) }
            }
            try await Self.bumpRevision([userID], now: now, session)
            return result
        }
    }

    /// The ciphers `ids` name, in the request's order, read in one query (a bulk request of 500 is a few queries, not
    /// 1,500 in one transaction); an id the user cannot see is passed over when `ignoring` unknown ones, else `404`.
    static func named(_ ids: [String], userID: String, _ ignoring: Bool, _ session: any SQLSession) async throws -> [(String, CipherRecord)] {
        let found = Dictionary(try await visibleCiphers(userID: userID, onlyIDs: ids, session).map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        return try ids.compactMap { id in
            if let record = found[id] { return (id, record) }
            if ignoring { return nil }
            throw CipherWriteError(outcome: .notFound)
        }
    }

    enum Lifecycle: Sendable {
        case softDelete, restore, hardDelete, archive, unarchive
    }

    /// Soft delete, restore, hard delete, archive or unarchive several ciphers at once, all or nothing.
    /// `ignoringUnknown` (the bulk routes): ids the user cannot see are passed over, as the official server filters
    /// a bulk request to the user's own items (one deleted for good on another device failed the whole request).
    /// The items as they are after the change; for a delete for good, as they were before it (with all of
    /// their collections and the delete's time as revision date, for its notification).
    func changeLifecycle(ids: [String], userID: String, action: Lifecycle, ignoringUnknown: Bool = false, now: Int64) async throws -> [CipherRecord] {
        try await transaction { session in
            var result: [CipherRecord] = []
            var affected: [String] = [userID]
            for (id, current) in try await Self.named(ids, userID: userID, ignoringUnknown, session) {
                switch action {
                case .softDelete, .restore, .hardDelete:
                    guard current.access.canDelete else {
                        throw CipherWriteError.cannotDelete
                    }
                case .archive, .unarchive:
                    // Archiving bumps the item's revision (as the official server does), which every member sees:
                    // a read-only member's archive made the editors' next save "out of date". Only those who may
                    // edit the item archive it (docs/SECURITY.md, "Attack review 2026-12-01").
                    guard current.access.edit else {
                        throw CipherWriteError.cannotEdit
                    }
                }
                affected += try await Self.affectedUsers(userID: current.userID, organizationID: current.organizationID, session)
                switch action {
                case .softDelete:
                    // Official: soft-deleting an already deleted item is a no-op (spec §3.1).
                    if current.deletedDate == nil {
                        try await session.query("UPDATE ciphers SET deleted_date = \(Self.nextRevision), revision_date = \(Self.nextRevision) WHERE id = ?",
                                                [.int(now), .int(now), .int(now), .int(now), .text(id)])
                    }
                case .restore:
                    if current.deletedDate != nil {
                        try await session.query("UPDATE ciphers SET deleted_date = NULL, revision_date = \(Self.nextRevision) WHERE id = ?",
                                                [.int(now), .int(now), .text(id)])
                    }
                case .hardDelete:
                    // What the notification of the delete needs, read before the collection links go with the row:
                    // every collection of the item (not only the caller's), and the time of the delete.
                    var gone = current
                    gone.collectionIDs = try await session.query("SELECT collection_id FROM collection_ciphers WHERE cipher_id = ? ORDER BY collection_id",
                                                                 [.text(id)]).compactMap { $0.text("collection_id") }
                    gone.revisionDate = now
                    result.append(gone)
                    try await session.query("DELETE FROM ciphers WHERE id = ?", [.text(id)])
                case .archive, .unarchive:
                    let archived: Int64? = action == .archive ? (current.archivedDate ?? now) : nil
                    if archived != current.archivedDate {
                        try await Self.setUserState(cipherID: id, userID: userID, folderID: current.folderID, favorite: current.favorite,
                                                    archivedDate: archived, session)
                        // Official: archive and unarchive bump the cipher's revision date too.
                        try await session.query("UPDATE ciphers SET revision_date = \(Self.nextRevision) WHERE id = ?", [.int(now), .int(now), .text(id)])
                    }
                }
                if action != .hardDelete, let updated = try await Self.visibleCiphers(userID: userID, onlyID: id, session).first {
                    result.append(updated)
                }
            }
            try await Self.bumpRevision(affected, now: now, session)
            return result
        }
    }

    /// Imports ciphers and folders in one transaction (spec §2.7 import).
    func importVault(userID: String, folders: [(id: String?, name: String)], ciphers: [CipherWrite],
                     relationships: [(cipher: Int, folder: Int)], now: Int64) async throws {
        try await transaction { session in
            var folderIDs: [String] = []
            for folder in folders {
                if let id = folder.id, try await !session.query("SELECT id FROM folders WHERE id = ? AND user_id = ?",
                                                                [.text(id), .text(userID)]).isEmpty {
                    folderIDs.append(id)
                    continue
                }
                let id = newID()
                try await session.query("INSERT INTO folders (id, user_id, name, created_at, revision_date) VALUES (?, ?, ?, ?, ?)",
                                        [.text(id), .text(userID), .text(folder.name), .int(now), .int(now)])
                folderIDs.append(id)
            }
            var folderOfCipher: [Int: String] = [:]
            for relation in relationships where relation.folder >= 0 && relation.folder < folderIDs.count {
                folderOfCipher[relation.cipher] = folderIDs[relation.folder]
            }
            for (index, write) in ciphers.enumerated() {
                let id = newID()
                try await session.query("""
                    INSERT INTO ciphers (id, user_id, organization_id, type, data, created_at, revision_date, deleted_date)
                    VALUES (?, ?, NULL, ?, ?, ?, ?, NULL)
                    """, [.text(id), .text(userID), .int(Int64(write.type)), .text(write.data), .int(now), .int(now)])
                try await Self.setUserState(cipherID: id, userID: userID, folderID: folderOfCipher[index] ?? write.folderID,
                                            favorite: write.favorite, archivedDate: nil, session)
            }
            try await Self.bumpRevision([userID], now: now, session)
        }
    }
}

extension VaultRepository {
    /// An attachment's name and key as a share re-encrypted them for the organization.
    struct SharedAttachment: Sendable {
        var fileName: String
        var key: String
    }

    /// Moves a personal cipher into an organization (spec organizations.md §3.4 share): the client has
    /// re-wrapped the item key with the organization key (and, for an item without a key of its own, sent
    /// each attachment's name and key encrypted again, `attachments`); the server checks the caller owns
    /// the item, may write to each collection, and applies the stale-edit check.

    func shareCipher(id: String, userID: String, write: CipherWrite, collectionIDs: [String], attachments: [String: SharedAttachment] = [:],
                     now: Int64) async throws -> CipherRecord {
        try await transaction { session in
            guard let current = try await Self.visibleCiphers(userID: userID, onlyID: id, session).first, current.userID == userID else {
                throw CipherWriteError(outcome: .notFound)
            }
            guard let orgID = write.organizationID else { throw CipherWriteError(outcome: .invalid("Cipher OrganizationId is required.")) }
            try await Self.checkCollectionWrite(userID: userID, organizationID: orgID, collectionIDs: collectionIDs,
                                                requireCollections: true, session)
            var condition = ""
            var binds: [SQLValue] = [.text(orgID), .int(Int64(write.type)), .text(write.data), .int(now), .int(now), .text(id)]
            if let known = write.lastKnownRevisionDate {
                condition = " AND revision_date > ? AND revision_date < ?"
                binds += [.int(known - 1000), .int(known + 1000)]
            }
            let updated = try await session.query("""
                UPDATE ciphers SET user_id = NULL, organization_id = ?, type = ?, data = ?, revision_date = \(Self.nextRevision)
                WHERE id = ?\(condition) RETURNING id
                """, binds)
            guard !updated.isEmpty else { throw CipherWriteError(outcome: .outOfDate) }
            for collectionID in Set(collectionIDs) {
                try await session.query("INSERT INTO collection_ciphers (collection_id, cipher_id) VALUES (?, ?)", [.text(collectionID), .text(id)])
            }
            for (attachmentID, attachment) in attachments {
                try await session.query("UPDATE attachments SET file_name = ?, akey = ? WHERE id = ? AND cipher_id = ?",
                                        [.text(attachment.fileName), .text(attachment.key), .text(attachmentID), .text(id)])
            }
            try await Self.bumpRevision(try await Self.affectedUsers(userID: nil, organizationID: orgID, session) + [userID], now: now, session)
            guard let record = try await Self.visibleCiphers(userID: userID, onlyID: id, session).first else {
                throw CipherWriteError(outcome: .notFound)
            }
            return record
        }
    }

    /// Replaces the collections of an organization cipher (each added or removed one must be writable).
    func setCipherCollections(id: String, userID: String, collectionIDs: [String], now: Int64) async throws -> CipherRecord? {
        try await transaction { session in
            guard let current = try await Self.visibleCiphers(userID: userID, onlyID: id, session).first,
                  let orgID = current.organizationID else { throw CipherWriteError(outcome: .notFound) }
            guard current.access.edit else { throw CipherWriteError.cannotEdit }
            let existing = Set(try await session.query("""
                SELECT cc.collection_id FROM collection_ciphers cc WHERE cc.cipher_id = ?
                """, [.text(id)]).compactMap { $0.text("collection_id") })
            let wanted = Set(collectionIDs)
            let changed = Array(existing.symmetricDifference(wanted))
            try await Self.checkCollectionWrite(userID: userID, organizationID: orgID, collectionIDs: changed, requireCollections: false, session)
            try await session.query("DELETE FROM collection_ciphers WHERE cipher_id = ?", [.text(id)])
            for collectionID in wanted {
                try await session.query("INSERT INTO collection_ciphers (collection_id, cipher_id) VALUES (?, ?)", [.text(collectionID), .text(id)])
            }
            try await Self.bumpRevision(try await Self.affectedUsers(userID: nil, organizationID: orgID, session), now: now, session)
            return try await Self.visibleCiphers(userID: userID, onlyID: id, session).first
        }
    }

    /// Every cipher of an organization, for its owners and admins.
    func organizationCiphers(organizationID: String, userID: String) async throws -> [CipherRecord] {
        try await read { session in
            try await Self.visibleCiphers(userID: userID, session).filter { $0.organizationID == organizationID }
        }
    }
}
