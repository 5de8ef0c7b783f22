import Foundation
import NIOCore
import VaultAPI
import VaultCrypto
import VaultModels
import VaultStore
import VaultSyncCore

extension VaultEngine {
    // MARK: Items

    /// Adds an item. It gets a client-generated id before encryption (seed 001 §16.7), used locally
    /// until the server assigns its own.
    public func addItem(_ item: CipherView) async throws -> SaveResult<CipherView> {
        let current = try requireSession()
        var view = item
        let now = clock.now()
        // Time-ordered, by the time the item is made: the temporary id is the create's idempotency key too, and
        // items queued one after another sit side by side in every index keyed by it (docs/ARCHITECTURE.md).
        if view.id == nil { view.id = TimeOrderedID.make(microseconds: now.microsecondsSinceEpoch) }
        // A folder id shown before a sync gave the folder its server id is followed (docs/ARCHITECTURE.md, "Ids that change").
        if let folderID = view.folderId { view.folderId = try currentFolderID(folderID) ?? folderID }
        if view.itemKey == nil {
            view.itemKey = try modelCall { try current.keys.wrapNewItemKey(organizationId: view.organizationId, random: random) }
        }
        view.creationDate = view.creationDate ?? now
        view.revisionDate = now
        try validate(view)
        let local = try encrypt(view, keys: current.keys)
        let collections = view.collectionIds ?? []
        let input = SaveInput(operation: .create, local: local, previous: nil, isOrganization: view.organizationId != nil)
        let result = try await save(itemID: view.id!) { _, _ in input } online: { api, token, _ in
            // The temporary id names this create in every attempt, renames included (the queued create keeps it).
            try await api.createCipher(local, collectionIDs: collections, idempotencyKey: local.id, token: token)
        }
        return try decryptResult(result, saved: view, keys: current.keys)
    }

    /// Saves an edited item. A changed password goes into the password history (never trimmed: every
    /// password ever saved stays recoverable, seed 000 principle 1).
    ///
    /// `original`: the item as it was read before it was edited. Another program on the same profile (a
    /// second `vaultsync` process) may save the item between that read and this save; the fields this edit
    /// changed are then carried over onto that save instead of writing over it. The same happens, without
    /// `original`, when the other save lands while this one waits for the server (docs/ARCHITECTURE.md,
    /// "Saves from several processes").
    public func updateItem(_ item: CipherView, basedOn original: CipherView? = nil) async throws -> SaveResult<CipherView> {
        let current = try requireSession()
        guard let id = item.id else { throw VaultError.invalidItem("the item has no id (use addItem for new items)") }
        return try await savingThroughRaces(of: id) { id, startedFrom in
            let (edit, read) = try self.followed(item, basedOn: original, to: id)
            return try await self.update(id: id, with: edit, basedOn: read ?? startedFrom, session: current)
        }
    }

    /// One save of an item (one at a time in this engine), started again from what is stored when another
    /// process saved the item meanwhile (``SaveRaced``), or under the item's server id when a sync gave it
    /// one since the caller read it (docs/ARCHITECTURE.md, "Ids that change"). `attempt` gets the id to save and the
    /// version the first attempt's edit was applied to, once there was a race.
    func savingThroughRaces<T: Sendable>(of id: String, _ attempt: (String, CipherView?) async throws -> T) async throws -> T {
        var startedFrom: CipherView?
        var id = id
        for _ in 0..<8 {
            do {
                return try await oneSaveAtATime(of: id) { [id] in try await attempt(id, startedFrom) }
            } catch let raced as SaveRaced {
                startedFrom = startedFrom ?? raced.startedFrom
            } catch let error as VaultError where error.missingID == id {
                guard let swapped = try swappedID(of: id, kind: .cipher) else { throw error }
                id = swapped.id
            }
        }
        throw VaultError.storage("the item kept being saved by another program meanwhile; nothing of this change was stored, try again")
    }

    func update(id: String, with edited: CipherView, basedOn original: CipherView?, session current: UnlockedSession) async throws -> SaveResult<CipherView> {
        var prepared: PreparedEdit?
        let result: SaveResult<CipherWire?>
        do {
            result = try await save(itemID: id, readingItem: true) { facts, tx in
                let edit = try self.preparedEdit(of: id, edited, basedOn: original, stored: facts.stored, session: current, tx)
                prepared = edit
                return edit.input
            } online: { api, token, input in
                guard let local = input.local else { throw VaultError.storage("the edited item is missing") }
                return try await api.updateCipher(local, id: id, lastKnownRevisionDate: input.lastKnownRevision, token: token)
            }
        } catch is SaveRaced {
            let startedFrom = try prepared.flatMap { edit in try edit.previousView ?? modelCall { try edit.input.previous?.decrypted(with: current.keys) } }
            throw SaveRaced(startedFrom: startedFrom)
        }
        guard var view = prepared?.view else { throw VaultError.storage("the edited item is missing") }
        view.revisionDate = prepared?.input.lastKnownRevision
        return try decryptResult(result, saved: view, keys: current.keys)
    }

    /// An edit as a save stores it, made from the stored row (read in the save's transaction): the password
    /// history, the item key and owner kept, the revision it started from.
    struct PreparedEdit {
        var input: SaveInput
        /// The edit as encrypted.
        var view: CipherView
        /// The stored version decrypted, when the edit was carried over onto it.
        var previousView: CipherView?
    }

    func preparedEdit(of id: String, _ edited: CipherView, basedOn original: CipherView?, stored: CipherRow?, session current: UnlockedSession,
                      _ tx: StoreTransaction) throws -> PreparedEdit {
        let keys = current.keys
        let (previous, previousRow) = try Self.parsedItem(stored, id: id)
        // Every field of the stored version is decrypted only to carry an edit over onto it; otherwise its name
        // and password are what the save compares (an offline save's decryption: docs/BENCHMARKS.md, measured 2026-11-27).
        let previousView = try original.map { _ in try modelCall { try previous.decrypted(with: keys) } }
        let item = original.map { Self.rebased(edited, from: $0, onto: previousView!) } ?? edited
        // The item key is opened once, for the comparison and the encryption (the edit keeps the stored key and owner).
        let fieldKey = try modelCall { try previous.fieldKey(with: keys) }
        let (previousName, oldPassword) = try previousView.map { ($0.name, $0.login?.password) }
            ?? modelCall { try previous.decryptedNameAndPassword(key: fieldKey) }
        // The revision the caller's view was read at. When the cache has moved on since (a sync stored
        // another device's version while the item was open), that revision is what this edit started from:
        // the server checks the push against it, and a queued edit records it, so the resolver keeps both
        // versions instead of this one overwriting the other (docs/ARCHITECTURE.md, "A view read before a sync").
        let startedFrom = item.revisionDate.flatMap { shown in
            previous.revisionDate.map { ConflictMatrix.isSameRevision(shown, $0) } == false ? shown : nil
        }
        var view = item
        // The item key and ownership are the stored ones; an edit cannot move an item between owners.
        view.itemKey = previous.key
        view.organizationId = previous.organizationId
        // A folder id shown before a sync gave the folder its server id is followed (docs/ARCHITECTURE.md, "Ids that change").
        if let folderID = view.folderId, folderID != previous.folderId,
           let current = try Self.currentFolderID(folderID, userID: current.userID, tx) { view.folderId = current }
        let newPassword = view.login?.password
        let passwordChanged = (oldPassword ?? "") != (newPassword ?? "")
        let now = clock.now()
        if passwordChanged {
            if let oldPassword, !oldPassword.isEmpty,
               !view.passwordHistory.contains(where: { $0.password == oldPassword && $0.lastUsedDate >= now.adding(microseconds: -1_000_000) }) {
                // Newest first, as Bitwarden's clients keep it (docs/PROTOCOL.md, "Password history"): a client that
                // trims the list to its first five then drops the oldest, never the password just replaced.
                view.passwordHistory.insert(PasswordHistoryView(password: oldPassword, lastUsedDate: now), at: 0)
            }
            view.login?.passwordRevisionDate = now
        }
        try validate(view)
        var encrypted = try encrypt(view, keys: keys, fieldKey: fieldKey)
        encrypted.revisionDate = previous.revisionDate
        // An unchanged name keeps its ciphertext (same item key): a create whose answer was lost is
        // found on the server by its byte-identical encrypted name, even after later offline edits.
        if view.name == previousName { encrypted.name = previous.name }
        let input = SaveInput(operation: .edit(passwordChanged: passwordChanged), local: encrypted, previous: previous, startedFrom: startedFrom,
                              storedAsRead: previousRow, isOrganization: view.organizationId != nil)
        return PreparedEdit(input: input, view: view, previousView: previousView)
    }

    /// Moves an item to the trash.
    public func softDeleteItem(id: String) async throws -> SaveOutcome {
        // In the trash already: it keeps the date it was moved there.
        try await changeState(id: id, operation: .softDelete, change: { [clock] in $0.deletedDate = $0.deletedDate ?? clock.now() }) { id, _, api, token in
            try await api.softDeleteCipher(id: id, token: token)
            return try await api.getCipher(id: id, token: token)
        }.outcome
    }

    /// Restores an item from the trash.
    public func restoreItem(id: String) async throws -> SaveOutcome {
        try await changeState(id: id, operation: .restore, change: { $0.deletedDate = nil }) { id, _, api, token in
            try await api.restoreCipher(id: id, token: token)
        }.outcome
    }

    /// Archives or unarchives an item.
    public func setArchived(id: String, _ archived: Bool) async throws -> SaveOutcome {
        try await changeState(id: id, operation: archived ? .archive : .unarchive, change: { [clock] in
            $0.archivedDate = archived ? ($0.archivedDate ?? clock.now()) : nil
        }) { id, _, api, token in
            try await api.archiveCipher(id: id, archived: archived, token: token)
        }.outcome
    }

    /// Moves an item to a folder (`nil`: no folder).
    public func moveItem(id: String, toFolder folderID: String?) async throws -> SaveOutcome {
        let folderID = try folderID.map { shown in
            guard let current = try currentFolderID(shown) else { throw VaultError.folderNotFound(shown) }
            return current
        }
        return try await changeState(id: id, operation: .move, change: { [folderID] in $0.folderId = folderID }) { [folderID] id, local, api, token in
            try await api.updateCipherState(id: id, folderID: folderID, favorite: local.favorite ?? false, token: token)
        }.outcome
    }

    /// Marks or unmarks an item as a favorite.
    public func setFavorite(id: String, _ favorite: Bool) async throws -> SaveOutcome {
        try await changeState(id: id, operation: .favorite, change: { $0.favorite = favorite }) { id, local, api, token in
            try await api.updateCipherState(id: id, folderID: local.folderId, favorite: favorite, token: token)
        }.outcome
    }

    /// Deletes an item for good. An item that exists only on this device is simply forgotten, with the
    /// files of the attachments staged for it.
    public func permanentlyDeleteItem(id: String) async throws -> SaveOutcome {
        let id = try currentID(of: id)
        let userID = try requireSession().userID
        return try await oneSaveAtATime(of: id) {
            var staged: [StagedAttachment] = []
            let outcome = try await self.save(itemID: id, readingItem: true) { facts, _ in
                staged = facts.existing?.metadata.attachmentAdds ?? []
                let previous = try Self.parsedItem(facts.stored, id: id).0
                return SaveInput(operation: .hardDelete, local: nil, previous: previous, isOrganization: previous.organizationId != nil)
            } online: { api, token, _ in
                // The server has no such item (deleted elsewhere, or planted in a sync answer and never stored):
                // deleting it for good is done, here too, as a queued delete settles on "gone".
                do { try await api.hardDeleteCipher(id: id, token: token) } catch let error as ServerCallError where error.isGone {}
                return nil
            }.outcome
            // Forgotten (its record went with it): nothing will upload these files. A delete that waits for the
            // server keeps them, since an edit made elsewhere meanwhile wins over it and gets them.
            if !staged.isEmpty, try await self.pendingChange(itemKind: .cipher, itemID: id, userID: userID) == nil {
                self.removeStaged(staged, userID: userID)
            }
            return outcome
        }
    }

    /// A state change (trash, archive, folder, favorite) applied to the cached wire form as it is when
    /// the item's turn comes; `online` gets the item's id (its server id, when a sync gave it one since the
    /// caller read it) and that changed form.
    func changeState(id: String, operation: OfflineOperation, change: @escaping @Sendable (inout CipherWire) -> Void,
                     online: @escaping @Sendable (String, CipherWire, BitwardenAPI, String) async throws -> CipherWire?) async throws -> SaveResult<CipherWire?> {
        // Applied to the item as stored when the save writes: another process's save meanwhile is kept.
        try await savingThroughRaces(of: id) { id, _ in
            try await self.save(itemID: id, readingItem: true) { facts, _ in
                let (previous, previousRow) = try Self.parsedItem(facts.stored, id: id)
                var changed = previous
                change(&changed)
                return SaveInput(operation: operation, local: changed, previous: previous, storedAsRead: previousRow,
                                 isOrganization: previous.organizationId != nil)
            } online: { api, token, input in
                guard let local = input.local else { throw VaultError.storage("the changed item is missing") }
                return try await online(id, local, api, token)
            }
        }
    }

    /// Runs the saves of one item (or folder) one at a time. A save reads the stored copy, waits for
    /// the server, then stores its result; a second save of the same item started meanwhile (a GUI
    /// marking a favorite while an edit waits on a slow network) would start from the copy before the
    /// first and write over it, or fail on the queue's one-record-per-item rule. Waiting its turn, it
    /// starts from what the first left. Saves of different items still run side by side.
    func oneSaveAtATime<T: Sendable>(of id: String, _ body: () async throws -> T) async throws -> T {
        while savesInProgress.contains(id) {
            await withCheckedContinuation { savesWaiting[id, default: []].append($0) }
        }
        savesInProgress.insert(id)
        defer {
            savesInProgress.remove(id)
            if var waiting = savesWaiting.removeValue(forKey: id), !waiting.isEmpty {
                let next = waiting.removeFirst()
                if !waiting.isEmpty { savesWaiting[id] = waiting }
                next.resume()
            }
        }
        return try await body()
    }

    /// What a save stores, prepared from what is stored (``SaveFacts``) inside the transaction that read it.
    struct SaveInput: Sendable {
        var operation: OfflineOperation
        /// The version to store (`nil`: the item goes).
        var local: CipherWire?
        /// The stored version the save was made on.
        var previous: CipherWire?
        /// The older revision an edit was made on (a view read before a sync): recorded as the version the
        /// change started from, with no base to merge against (the cache no longer holds it).
        var startedFrom: WireDate? = nil
        /// The stored text `previous` was read from: a save that waited for the server writes nothing when
        /// the item was stored again since (by another process on the profile) and throws ``SaveRaced``.
        var storedAsRead: String? = nil
        var isOrganization: Bool

        /// The revision the server checks the push against.
        var lastKnownRevision: WireDate? { startedFrom ?? previous?.revisionDate }
    }

    /// The one path every item change takes (docs/ARCHITECTURE.md, "The path of a change"). `prepare` makes
    /// what the save stores from what is stored now (``SaveFacts``, and the transaction for anything else it reads). A save that is queued without asking
    /// the server (it was unreachable moments ago, or the item has queued work) reads, decides and stores in
    /// one write transaction: nothing, not even another process's save, comes in between. Otherwise the
    /// server comes first; a refusal is reported; when the server cannot be reached the encrypted result is
    /// kept with its queue record, atomically, unless the item was stored again meanwhile (``SaveRaced``).
    func save(itemID: String, readingItem: Bool = false, prepare: (SaveFacts, StoreTransaction) throws -> SaveInput,
              online: @escaping @Sendable (BitwardenAPI, String, SaveInput) async throws -> CipherWire?) async throws -> SaveResult<CipherWire?> {
        let deadline = saveDeadline()
        let current = try requireSession()
        let (userID, key) = (current.userID, current.keys.userKey)
        let (input, queued) = try writeNow { tx -> (SaveInput, (QueuedReason, Int)?) in
            let facts = try Self.saveFacts(kind: .cipher, itemID: itemID, userID: userID, key: key, readingItem: readingItem, tx)
            let input = try prepare(facts, tx)
            guard case .queue(let reason) = try route(facts, isOrganization: input.isOrganization) else { return (input, nil) }
            return (input, (reason, try queueItem(input, itemID: itemID, existing: facts.existing, userID: userID, key: key, tx)))
        }
        if let (reason, count) = queued { return self.queued(input.local, itemID: itemID, reason: reason, count: count) }
        do {
            let serverVersion = try await BitwardenAPI.$requestDeadline.withValue(deadline) {
                try await authorized { api, token in try await online(api, token, input) }
            }
            // An answer that does not decrypt here never replaces a version that does (as a pull keeps it): the
            // save is kept and queued, as for any answer that is not the protocol's (RELIABILITY bug 63).
            if let answer = serverVersion, let local = input.local, Self.answerUnreadable(answer, instead: local, keys: current.keys) {
                throw ServerCallError.invalidResponse("the server's copy of the item does not decrypt on this device")
            }
            await recordContact(success: true)
            try await write { tx in
                let ciphers = tx.ciphers(of: userID)
                // Another process queued a save of the item while this one was on the wire: the server has this
                // save; that one stays queued (its record and local copy), and meets this one at the next sync.
                if input.storedAsRead != nil, try Self.movedOn(itemID: itemID, userID: userID, existing: nil, storedAsRead: nil, tx) { return }
                if let serverVersion {
                    try ciphers.store(serverVersion)
                    if let serverID = serverVersion.id, serverID != itemID { try ciphers.remove(id: itemID) }
                } else {
                    try ciphers.remove(id: itemID)
                }
                // docs/ARCHITECTURE.md: no stale queue record or draft survives a successful save.
                try tx.queue(of: userID).remove(kind: .cipher, itemID: itemID)
                try tx.drafts(of: userID).removeDrafts(ofItem: itemID)
            }
            logger.debug("saved on server", metadata: ["item": "\(itemID)"])
            publishStatus()
            return SaveResult(value: serverVersion, outcome: .synced)
        } catch let error as ServerCallError {
            if error.isOutOfDate {
                // Someone changed it meanwhile: a conflict for the resolver, not an error for the user.
                await recordContact(success: true)
                logger.info("server copy changed meanwhile; queued for conflict resolution", metadata: ["item": "\(itemID)"])
                return try queue(itemID: itemID, input, existing: nil, reason: .changedOnServer)
            }
            if error.isGone, input.local != nil, input.previous != nil, input.operation != .create, !input.isOrganization,
               await serverLacksItem(itemID) {
                // Deleted for good on another device since this one synced: the change is kept and queued, and the
                // next sync treats it as it treats the same change made offline (an edit makes the item again, a
                // state change goes with the deleted item). Refusing it lost what the person typed (RELIABILITY bug 93).
                await recordContact(success: true)
                logger.info("the server no longer has the item; queued for the next sync", metadata: ["item": "\(itemID)"])
                return try queue(itemID: itemID, input, existing: nil, reason: .goneFromServer)
            }
            try await acceptOffline(error, isOrganization: input.isOrganization)
            logger.info(error.certificateProblem == nil ? "server unreachable; saving offline" : "server's certificate refused; saving locally",
                        metadata: ["item": "\(itemID)"])
            return try queue(itemID: itemID, input, existing: nil, createSent: FailureClassification.mayHaveReachedServer(error.failure),
                             reason: error.certificateProblem.map(QueuedReason.untrusted) ?? .offline)
        } catch VaultError.notLoggedIn where !input.isOrganization && configuration.offlineEditsEnabled {
            // Nothing was sent: a profile without a sign-in (a copy made a new device) keeps the change for its login.
            logger.info("no sign-in; saving locally", metadata: ["item": "\(itemID)"])
            return try queue(itemID: itemID, input, existing: nil, reason: .signedOut)
        }
    }

    /// Whether the server answers that it has no item `id` (a 404 to `GET /api/ciphers/{id}`): what tells an item
    /// deleted elsewhere from a route this server lacks (a server without archiving answers 404 to the archive
    /// route for an item it has). Any other answer, or none, is not taken as "gone".
    func serverLacksItem(_ id: String) async -> Bool {
        do {
            return try await reread(id) == nil
        } catch {
            return false
        }
    }

    /// Where a save goes first: to the server, or into the queue without asking it, because the server was
    /// unreachable moments ago, or because the item has queued work (the resolver compares it with the server
    /// as a whole; pushing this change alone could skip that). Organization items are never queued behind
    /// other work, and are refused at once while the server is known to be unreachable.
    func route(_ facts: SaveFacts, isOrganization: Bool) throws -> SaveRoute {
        if isOrganization, facts.contact.map({ failedRecently($0, within: configuration.knownOfflineWindow) }) == true {
            // Refused at once, as when offline, but for what it is when the certificate was the reason.
            if let problem = Self.certificateProblem(of: facts.contact) { throw VaultError.untrustedCertificate(problem) }
            throw VaultError.organizationItemOffline
        }
        guard facts.existing != nil || offlineMomentsAgo(facts) else { return .server }
        if facts.existing != nil, isOrganization { throw VaultError.organizationItemOffline }
        return .queue(queuedReason(facts))
    }

    enum SaveRoute {
        case server
        case queue(QueuedReason)
    }

    /// Inside a save's transaction: whether the item's queue record (or, given `storedAsRead`, its stored
    /// copy) is no longer what the save read (another process on the profile saved it meanwhile).
    static func movedOn(itemID: String, userID: String, existing: PendingChange?, storedAsRead: String?, _ tx: StoreTransaction) throws -> Bool {
        if try tx.queue(of: userID).record(kind: .cipher, itemID: itemID)?.storedDigest != existing?.storedDigest { return true }
        guard let storedAsRead else { return false }
        return try tx.ciphers(of: userID).find(id: itemID)?.json != storedAsRead
    }

    /// Stores the local version and folds the operation into the item's queue record, in one transaction
    /// that first checks, given `storedAsRead`, that nothing was saved since the save read the item.
    func queue(itemID: String, _ input: SaveInput, existing: PendingChange?, createSent: Bool = false, reason: QueuedReason) throws -> SaveResult<CipherWire?> {
        let current = try requireSession()
        let (userID, key) = (current.userID, current.keys.userKey)
        let count = try writeNow { tx in
            if input.storedAsRead != nil, try Self.movedOn(itemID: itemID, userID: userID, existing: existing, storedAsRead: input.storedAsRead, tx) {
                throw SaveRaced(startedFrom: nil)
            }
            return try queueItem(input, itemID: itemID, existing: existing, createSent: createSent, userID: userID, key: key, tx)
        }
        return queued(input.local, itemID: itemID, reason: reason, count: count)
    }

    func queued(_ local: CipherWire?, itemID: String, reason: QueuedReason, count: Int) -> SaveResult<CipherWire?> {
        logger.debug("queued", metadata: ["item": "\(itemID)", "pending": "\(count)"])
        publishStatus()
        return SaveResult(value: local, outcome: reason.outcome(pendingCount: count))
    }

    /// Inside a save's transaction: stores the local version and folds the operation into the item's queue record.
    /// Returns the number of queued changes.
    func queueItem(_ input: SaveInput, itemID: String, existing: PendingChange?, createSent: Bool = false,
                   userID: String, key: SymmetricCryptoKey, _ tx: StoreTransaction) throws -> Int {
        let (local, previous, ciphers) = (input.local, input.previous, tx.ciphers(of: userID))
        // The merge base is the stored text as read (the same version `previous` was parsed from).
        let base = existing == nil && input.startedFrom == nil ? input.storedAsRead ?? previous.map { String(decoding: $0.jsonBytes(), as: UTF8.self) } : nil
        return try enqueue(kind: .cipher, itemID: itemID, operation: input.operation, previousRevision: input.lastKnownRevision,
                                previousState: previous.map(Self.state(of:)), leavingName: Self.nameLeaving(previous?.name, for: local?.name),
                                createSent: createSent, itemKey: (local ?? previous)?.key?.serialized, baseVersion: base,
                                existing: existing, userID: userID, key: key, tx) {
            if let local { try ciphers.store(local) } else { try ciphers.remove(id: itemID) }
        } removeLocal: {
            try ciphers.remove(id: itemID)
        }
    }

    /// Why a save was queued instead of reaching the server.
    enum QueuedReason {
        /// The server could not be reached (now, or moments ago).
        case offline
        /// The server's certificate was refused.
        case untrusted(CertificateProblem)
        /// The server's copy changed since the edit began: the resolver meets the two versions.
        case changedOnServer
        /// The item already had a change waiting, so the server was not asked: this one joins it.
        case behindQueuedChange
        /// The server no longer has the item (deleted for good elsewhere): the next sync decides, as offline.
        case goneFromServer
        /// The profile holds no sign-in: the change waits for the next login.
        case signedOut

        func outcome(pendingCount: Int) -> SaveOutcome {
            switch self {
            case .offline: .savedOffline(pendingCount: pendingCount)
            case .untrusted(let problem): .savedUntrustedServer(pendingCount: pendingCount, problem: problem)
            case .changedOnServer: .savedForConflict(pendingCount: pendingCount)
            case .behindQueuedChange: .savedBehindQueuedChange(pendingCount: pendingCount)
            case .goneFromServer: .savedItemGoneFromServer(pendingCount: pendingCount)
            case .signedOut: .savedSignedOut(pendingCount: pendingCount)
            }
        }
    }

    /// Why a save would be queued before the server is tried: the last contact failed moments ago (offline, or
    /// the certificate refused); for an item whose earlier change still waits, "offline" while the last contact
    /// failed, else joining that change (the server may well be up: it was not asked).
    func queuedReason(_ facts: SaveFacts) -> QueuedReason {
        if offlineMomentsAgo(facts) { return Self.certificateProblem(of: facts.contact).map(QueuedReason.untrusted) ?? .offline }
        return facts.existing != nil && facts.contact?.lastContactFailed != true ? .behindQueuedChange : .offline
    }

    /// Decides what a failed server call means: throws for the server's refusals (and for organization
    /// items, or when offline edits are off); returns when the change is to be queued.
    func acceptOffline(_ error: ServerCallError, isOrganization: Bool) async throws {
        switch FailureClassification.classify(error.failure) {
        case .refused:
            await recordContact(success: true)
            throw Self.onlineOnly(error)
        case .offline:
            await recordContact(success: false)
            if isOrganization { throw VaultError.organizationItemOffline }
            guard configuration.offlineEditsEnabled else { throw VaultError.offlineEditsDisabled(error.description) }
        case .untrusted:
            // Nothing was sent. The change may wait here like an offline one, saying why; it goes to the
            // server only once a connection verifies (a CA file added, or the certificate fixed there).
            let problem = error.certificateProblem ?? CertificateProblem(host: "?", port: 0, reasons: [.unknown])
            await recordContact(success: false, certificateProblem: problem)
            if isOrganization || !configuration.offlineEditsEnabled { throw VaultError.untrustedCertificate(problem) }
        }
    }

    /// Writes the local version (or removes it) and the item's folded queue record in one transaction;
    /// returns the number of queued changes.
    func enqueue(kind: PendingItemKind, itemID: String, operation: OfflineOperation, previousRevision: WireDate?,
                 previousState: ItemState? = nil, leavingName: String? = nil, createSent: Bool = false, itemKey: String? = nil,
                 baseVersion: String? = nil, existing: PendingChange?, userID: String, key: SymmetricCryptoKey, _ tx: StoreTransaction,
                 storeLocal: () throws -> Void, removeLocal: () throws -> Void) throws -> Int {
        let decision = QueueRules.apply(operation, to: existing?.metadata, itemRevisionDate: previousRevision, now: clock.now(),
                                        itemState: previousState, leavingName: leavingName, createSent: createSent, itemKey: itemKey,
                                        baseVersion: baseVersion)
        let queue = tx.queue(of: userID)
        switch decision {
        case .forget:
            try removeLocal()
            try queue.remove(kind: kind, itemID: itemID)
        case .upsert(let metadata):
            try storeLocal()
            let recordID = existing?.id ?? UUID().uuidString.lowercased()
            try queue.store(PendingChange(id: recordID, userID: userID, itemID: itemID, itemKind: kind, metadata: metadata), key: key)
        }
        try tx.drafts(of: userID).removeDrafts(ofItem: itemID)
        return try queue.count()
    }

    // MARK: Folders

    /// Creates a folder (offline: with a client-generated id, queued).
    public func createFolder(name: String) async throws -> SaveResult<FolderView> {
        let current = try requireSession()
        try validateFolderName(name)
        let now = clock.now()
        let id = TimeOrderedID.make(microseconds: now.microsecondsSinceEpoch)
        var view = FolderView(id: id, name: name, revisionDate: now)
        let wire = try modelCall { try view.encrypted(with: current.keys, random: random) }
        let result = try await saveFolder(id: id, operation: .create, local: wire, previous: nil) { api, token in
            // The temporary id names this create in every attempt (the queued create keeps it).
            try await api.createFolder(name: wire.name, idempotencyKey: id, token: token)
        }
        view = try modelCall { try (result.value ?? wire).decrypted(with: current.keys) }
        return SaveResult(value: view, outcome: result.outcome)
    }

    public func renameFolder(id: String, name: String) async throws -> SaveOutcome {
        let current = try requireSession()
        try validateFolderName(name)
        let id = try currentID(of: id, kind: .folder)
        return try await oneSaveAtATime(of: id) {
            let previous = try await self.cachedFolder(id: id, userID: current.userID)
            var local = previous
            local.name = try self.modelCall { try EncString.encrypt(name, key: current.keys.userKey, random: self.random) }
            let encryptedName = local.name
            return try await self.saveFolder(id: id, operation: .edit(passwordChanged: false), local: local, previous: previous) { api, token in
                try await api.renameFolder(id: id, name: encryptedName, token: token)
            }.outcome
        }
    }

    /// Deletes a folder; its items stay, without a folder (spec §3.6).
    public func deleteFolder(id: String) async throws -> SaveOutcome {
        let current = try requireSession()
        let id = try currentID(of: id, kind: .folder)
        let outcome = try await oneSaveAtATime(of: id) {
            let previous = try await self.cachedFolder(id: id, userID: current.userID)
            return try await self.saveFolder(id: id, operation: .hardDelete, local: nil, previous: previous) { api, token in
                try await api.deleteFolder(id: id, token: token)
                return nil
            }.outcome
        }
        let userID = current.userID
        // Locally, as the server does: items lose the folder, keeping their revision date. Read and
        // written in one transaction, so that an item saved meanwhile keeps its save.
        try await write { tx in _ = try tx.ciphers(of: userID).moveItems(ofFolder: id, to: nil) }
        return outcome
    }

    /// When a save that starts now must stop waiting for the server: ``APIConfiguration/saveTimeout`` from
    /// now, less what storing the change and its queue record takes afterwards (100 ms kept for it), so that
    /// the save as a whole returns within the timeout (L0: a save on a hanging network measured 3,010 ms
    /// when only the request had the deadline, 2026-12-02).
    func saveDeadline() -> NIODeadline {
        let timeout = configuration.api.saveTimeout
        let reserve = TimeAmount.milliseconds(100)
        return .now() + (timeout > reserve * 2 ? timeout - reserve : timeout)
    }

    func saveFolder(id: String, operation: OfflineOperation, local: FolderWire?, previous: FolderWire?,
                    online: @escaping @Sendable (BitwardenAPI, String) async throws -> FolderWire?) async throws -> SaveResult<FolderWire?> {
        let deadline = saveDeadline()
        let current = try requireSession()
        let userID = current.userID
        let facts = try saveFacts(kind: .folder, itemID: id, userID: userID)
        let existing = facts.existing
        var createSent = false
        var reason = queuedReason(facts)
        if existing == nil, !offlineMomentsAgo(facts) {
            do {
                let serverVersion = try await BitwardenAPI.$requestDeadline.withValue(deadline) { try await authorized(online) }
                await recordContact(success: true)
                try await write { tx in
                    let folders = tx.folders(of: userID)
                    try folders.remove(id: id)
                    if let serverVersion { try folders.store(serverVersion) }
                    try tx.queue(of: userID).remove(kind: .folder, itemID: id)
                }
                return SaveResult(value: serverVersion, outcome: .synced)
            } catch let error as ServerCallError {
                try await acceptOffline(error, isOrganization: false)
                createSent = FailureClassification.mayHaveReachedServer(error.failure)
                reason = error.certificateProblem.map(QueuedReason.untrusted) ?? .offline
            } catch VaultError.notLoggedIn where configuration.offlineEditsEnabled {
                reason = .signedOut
            }
        }
        let count = try writeNow { tx in
            let folders = tx.folders(of: userID)
            return try enqueue(kind: .folder, itemID: id, operation: operation, previousRevision: previous?.revisionDate,
                               leavingName: Self.nameLeaving(previous?.name, for: local?.name), createSent: createSent,
                               baseVersion: existing == nil ? previous.map { String(decoding: $0.jsonBytes(), as: UTF8.self) } : nil,
                               existing: existing, userID: userID, key: current.keys.userKey, tx) {
                if let local { try folders.store(local) } else { try folders.remove(id: id) }
            } removeLocal: {
                try folders.remove(id: id)
            }
        }
        return SaveResult(value: local, outcome: reason.outcome(pendingCount: count))
    }

    // MARK: Helpers

    /// What a save reads before it decides, in one read transaction (each read transaction is a measurable
    /// part of an offline save: docs/BENCHMARKS.md, measured 2026-11-27).
    struct SaveFacts {
        /// The item's queue record, opened.
        var existing: PendingChange?
        /// The recorded last contact with the server.
        var contact: SyncStateRow?
        /// The item's stored row, when the save asked for it.
        var stored: CipherRow?
    }

    func saveFacts(kind: PendingItemKind, itemID: String, userID: String) throws -> SaveFacts {
        let key = try requireSession().keys.userKey
        return try readNow { tx in try Self.saveFacts(kind: kind, itemID: itemID, userID: userID, key: key, readingItem: false, tx) }
    }

    static func saveFacts(kind: PendingItemKind, itemID: String, userID: String, key: SymmetricCryptoKey, readingItem: Bool,
                          _ tx: StoreTransaction) throws -> SaveFacts {
        let record = try tx.queue(of: userID).record(kind: kind, itemID: itemID)
        return SaveFacts(existing: try record.map { try opened($0, key: key) }, contact: try tx.syncState(of: userID).current(),
                         stored: try readingItem ? tx.ciphers(of: userID).find(id: itemID) : nil)
    }

    /// Whether the save is queued at once without trying the server, because the last contact failed
    /// less than `offlineBurstWindow` seconds ago (and offline edits are on). A burst of saves offline
    /// waits on the network once; nothing is sent, so no create can be on the server.
    func offlineMomentsAgo(_ facts: SaveFacts) -> Bool {
        guard configuration.offlineEditsEnabled else { return false }
        // Live sync's state is the first hint: while it finds the server unreachable, a save goes to the
        // queue at once, and the live loop sends it when the server answers again.
        if liveState == .offline { return true }
        return facts.contact.map { failedRecently($0, within: configuration.offlineBurstWindow) } == true
    }

    /// The previous encrypted name when a save takes it away (a rename, or a delete for good), for a
    /// create's queue record.
    static func nameLeaving(_ previous: EncString?, for new: EncString?) -> String? {
        guard let previous, previous.serialized != new?.serialized else { return nil }
        return previous.serialized
    }

    /// The per-user state of a cached item.
    static func state(of wire: CipherWire) -> ItemState {
        ItemState(deleted: wire.deletedDate != nil, archived: wire.archivedDate != nil, folderID: wire.folderId, favorite: wire.favorite ?? false)
    }

    /// The cached item and its stored text (what a save compares before it writes).
    static func parsedItem(_ row: CipherRow?, id: String) throws -> (CipherWire, String) {
        guard let row else { throw VaultError.itemNotFound(id) }
        do {
            return (try row.wire(), row.json)
        } catch {
            throw VaultError.storage(String(describing: error))
        }
    }

    /// `edit`, made on `original`, carried over onto `current` (another save stored since `original` was read):
    /// the fields the edit changed are the edit's, the others `current`'s. A field both changed is the edit's
    /// when the other change was a save on this device (the later save wins; a replaced password goes to the
    /// history). When it came through the server (another device's version pulled since), the edit keeps the
    /// revision it was read at: its push meets "out of date" and the resolver keeps both versions, as for any
    /// view read before a sync. Otherwise the edit is based on `current`'s revision.
    static func rebased(_ edit: CipherView, from original: CipherView, onto current: CipherView) -> CipherView {
        guard current != original else { return edit }
        let merge = ItemMerge.merge(base: original, mine: edit, theirs: current, winner: .mine)
        var merged = merge.merged
        if edit.archivedDate == original.archivedDate { merged.archivedDate = current.archivedDate }
        if edit.deletedDate == original.deletedDate { merged.deletedDate = current.deletedDate }
        let sameRevision = switch (original.revisionDate, current.revisionDate) {
        case (let read?, let now?): ConflictMatrix.isSameRevision(read, now)
        case (nil, nil): true
        default: false
        }
        merged.revisionDate = merge.isClean || sameRevision ? current.revisionDate : original.revisionDate
        return merged
    }

    func cachedCipher(id: String, userID: String) async throws -> CipherWire {
        try Self.parsedItem(try readNow({ tx in try tx.ciphers(of: userID).find(id: id) }), id: id).0
    }

    func cachedFolder(id: String, userID: String) async throws -> FolderWire {
        guard let row = try readNow({ tx in try tx.folders(of: userID).find(id: id) }) else {
            throw VaultError.folderNotFound(id)
        }
        do {
            return try row.wire()
        } catch {
            throw VaultError.storage(String(describing: error))
        }
    }

    func pendingChange(itemKind: PendingItemKind, itemID: String, userID: String) async throws -> PendingChange? {
        let key = try requireSession().keys.userKey
        guard let row = try readNow({ tx in try tx.queue(of: userID).record(kind: itemKind, itemID: itemID) }) else { return nil }
        return try Self.opened(row, key: key)
    }

    /// A queue record opened, or a storage error saying it cannot be.
    static func opened(_ row: PendingChangeRow, key: SymmetricCryptoKey) throws -> PendingChange {
        do {
            return try row.open(key: key)
        } catch {
            throw VaultError.storage(String(describing: error))
        }
    }

    /// Refuses what the server would refuse, before anything is stored or queued.
    func validate(_ view: CipherView) throws {
        // White space by Unicode's property (what Foundation's `whitespacesAndNewlines` holds), without Foundation's
        // string bridging: it was 2% of an offline save (docs/BENCHMARKS.md, measured 2026-11-27).
        if view.name.unicodeScalars.allSatisfy(\.properties.isWhitespace) { throw VaultError.invalidItem("a name is required") }
        let present: [(CipherType, Bool)] = [(.login, view.login != nil), (.secureNote, view.secureNote != nil), (.card, view.card != nil),
                                              (.identity, view.identity != nil), (.sshKey, view.sshKey != nil)]
        if CipherType.supported.contains(view.type) {
            for (type, isPresent) in present where isPresent && type != view.type {
                throw VaultError.invalidItem("a \(view.type.name) item cannot have \(type.name) fields")
            }
        }
        if let folderID = view.folderId, UUID(uuidString: folderID) == nil { throw VaultError.invalidItem("the folder id is not an id") }
    }

    func validateFolderName(_ name: String) throws {
        if name.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty { throw VaultError.invalidFolder("a folder name is required") }
        if name.utf8.count > 600 { throw VaultError.invalidFolder("the name is longer than the server accepts") }
    }

    /// Encrypts and checks the server's length limits.
    func encrypt(_ view: CipherView, keys: VaultKeys, fieldKey: SymmetricCryptoKey? = nil) throws -> CipherWire {
        if let organizationID = view.organizationId {
            try requireTrustedOrganization(organizationID, keys: keys, userID: try requireSession().userID)
        }
        let wire = try modelCall { try view.encrypted(with: keys, fieldKey: fieldKey, random: random) }
        if let violation = wire.limitViolations.first {
            throw VaultError.invalidItem("\(violation.path) is too long for the server (\(violation.length) encrypted characters, at most \(violation.limit))")
        }
        return wire
    }

    /// The saved item as the caller gets it back: the server's answer decrypted, or, when the save was
    /// kept here, `saved`, the view its stored version was just encrypted from (the round trip is the
    /// identity, `CipherRoundTripTests`), instead of decrypting every field again.
    func decryptResult(_ result: SaveResult<CipherWire?>, saved: CipherView, keys: VaultKeys) throws -> SaveResult<CipherView> {
        guard let wire = result.value else { throw VaultError.storage("the saved item is missing") }
        if case .synced = result.outcome { return SaveResult(value: try modelCall { try wire.decrypted(with: keys) }, outcome: result.outcome) }
        return SaveResult(value: saved, outcome: result.outcome)
    }

    func modelCall<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as ModelError {
            throw VaultError.model(error)
        } catch let error as CryptoError {
            throw VaultError.crypto(error)
        }
    }
}

/// A save found the item stored again since it read it (another process on the same profile): nothing was
/// written; the save starts again from what is stored now (``VaultEngine/updateItem(_:basedOn:)``).
struct SaveRaced: Error {
    /// The version the first attempt's edit was applied to (what the retry carries the edit over from).
    var startedFrom: CipherView? = nil
}
