import Foundation
import Hummingbird
import VaultCrypto
import VaultModels

/// `/api/ciphers…` (spec §2.7) and `/api/folders…` (§2.8).
struct CiphersController {
    let services: ServerServices

    func addRoutes(to api: RouterGroup<VaultRequestContext>) {
        api.get("ciphers") { request, context in try await list(request, context) }
        api.get("ciphers/:id") { request, context in try await get(request, context) }
        api.get("ciphers/:id/details") { request, context in try await get(request, context) }
        api.post("ciphers") { request, context in try await create(request, context, wrapped: false) }
        api.post("ciphers/create") { request, context in try await create(request, context, wrapped: true) }
        api.post("ciphers/import") { request, context in try await importVault(request, context) }
        if services.configuration.bulkUpdateEnabled {
            api.post("vaultsync/ciphers/bulk-update") { request, context in try await bulkUpdate(request, context) }
            api.post("vaultsync/ciphers/bulk-create") { request, context in try await bulkCreate(request, context) }
        }
        for method in [HTTPRequest.Method.put, .post] {
            api.on("ciphers/:id", method: method) { request, context in try await update(request, context) }
            api.on("ciphers/:id/partial", method: method) { request, context in try await partial(request, context) }
            api.on("ciphers/move", method: method) { request, context in try await move(request, context) }
        }
        api.put("ciphers/:id/delete") { request, context in try await lifecycle(request, context, .softDelete, bulk: false) }
        api.put("ciphers/delete") { request, context in try await lifecycle(request, context, .softDelete, bulk: true) }
        api.delete("ciphers/:id") { request, context in try await lifecycle(request, context, .hardDelete, bulk: false) }
        api.post("ciphers/:id/delete") { request, context in try await lifecycle(request, context, .hardDelete, bulk: false) }
        api.delete("ciphers") { request, context in try await lifecycle(request, context, .hardDelete, bulk: true) }
        api.post("ciphers/delete") { request, context in try await lifecycle(request, context, .hardDelete, bulk: true) }
        api.put("ciphers/:id/restore") { request, context in try await lifecycle(request, context, .restore, bulk: false) }
        api.put("ciphers/restore") { request, context in try await lifecycle(request, context, .restore, bulk: true) }
        api.put("ciphers/:id/archive") { request, context in try await lifecycle(request, context, .archive, bulk: false) }
        api.put("ciphers/archive") { request, context in try await lifecycle(request, context, .archive, bulk: true) }
        api.put("ciphers/:id/unarchive") { request, context in try await lifecycle(request, context, .unarchive, bulk: false) }
        api.put("ciphers/unarchive") { request, context in try await lifecycle(request, context, .unarchive, bulk: true) }

        for method in [HTTPRequest.Method.put, .post] {
            api.on("ciphers/:id/share", method: method) { request, context in try await share(request, context) }
            api.on("ciphers/:id/collections", method: method) { request, context in try await collections(request, context, v2: false) }
            api.on("ciphers/:id/collections_v2", method: method) { request, context in try await collections(request, context, v2: true) }
        }
        api.put("ciphers/share") { request, context in try await shareMany(request, context) }
        api.get("ciphers/organization-details") { request, context in
            guard let orgID = request.uri.queryParameters.get("organizationId"), UUID(uuidString: orgID) != nil else { throw APIError.notFound }
            let userID = try context.requireUser()
            guard let membership = try await services.repository.membership(userID: userID, organizationID: orgID.lowercased()),
                  membership.hasFullAccess else { throw APIError.notFound }
            let renderer = services.renderer(for: request)
            let records = try await services.repository.organizationCiphers(organizationID: orgID.lowercased(), userID: userID)
            return JSONResponse.list(records.map { renderer.cipher($0) })
        }

        api.get("folders") { _, context in
            let folders = try await services.repository.folders(userID: try context.requireUser())
            let renderer = services.renderer(for: nil)
            return JSONResponse.list(folders.map { renderer.folder($0).serialized() })
        }
        api.get("folders/:id") { _, context in
            guard let folder = try await services.repository.folder(id: try Self.id(context), userID: try context.requireUser()) else {
                throw APIError.notFound
            }
            return JSONResponse.make(.object(services.renderer(for: nil).folder(folder)))
        }
        api.post("folders") { request, context in
            let (name, id) = try await folderBody(request)
            let key = try CipherRequests.idempotencyKey(request)
            do {
                let userID = try context.requireUser()
                let folder = try await services.repository.createFolder(userID: userID, id: id, name: name,
                                                                        createKey: key, now: services.now())
                await services.notifier.folder(folder, .syncFolderCreate, userID: userID, by: context)
                return JSONResponse.make(.object(services.renderer(for: nil).folder(folder)))
            } catch let error as CipherWriteError {
                throw error.apiError
            }
        }
        for method in [HTTPRequest.Method.put, .post] {
            api.on("folders/:id", method: method) { request, context in
                let (name, _) = try await folderBody(request)
                let userID = try context.requireUser()
                guard let folder = try await services.repository.renameFolder(
                    id: try Self.id(context), userID: userID, name: name, now: services.now()) else { throw APIError.notFound }
                await services.notifier.folder(folder, .syncFolderUpdate, userID: userID, by: context)
                return JSONResponse.make(.object(services.renderer(for: nil).folder(folder)))
            }
        }
        api.delete("folders/:id") { _, context in try await deleteFolder(context) }
        api.post("folders/:id/delete") { _, context in try await deleteFolder(context) }
    }

    static func id(_ context: VaultRequestContext) throws -> String {
        guard let id = context.parameters.get("id"), UUID(uuidString: id) != nil else { throw APIError.notFound }
        return id.lowercased()
    }

    func render(_ record: CipherRecord, _ request: Request) -> Response {
        JSONResponse.make(bytes: services.renderer(for: request).cipher(record))
    }

    func list(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let records = try await services.repository.visibleCiphers(userID: try context.requireUser())
        let renderer = services.renderer(for: request)
        return JSONResponse.list(records.map { renderer.cipher($0) })
    }

    func get(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        guard let record = try await services.repository.visibleCipher(id: try Self.id(context), userID: try context.requireUser()) else {
            throw APIError.notFound
        }
        return render(record, request)
    }

    func create(_ request: Request, _ context: VaultRequestContext, wrapped: Bool) async throws -> Response {
        let userID = try context.requireUser()
        let body = try await request.jsonObject(limit: services.configuration.maxBodyBytes)
        let cipherObject: JSONObject
        var collections: [String] = []
        if wrapped {
            guard let inner = body["cipher"]?.objectValue else { throw APIError.invalidModel(["cipher": ["The Cipher field is required."]]) }
            cipherObject = inner
            collections = try CipherRequests.collectionIDs(from: body)
        } else {
            cipherObject = body
        }
        var write = try CipherRequests.write(from: cipherObject, path: wrapped ? "$.cipher" : "$")
        write.lastKnownRevisionDate = nil  // creates skip the check (spec §3.2)
        write.createKey = try CipherRequests.idempotencyKey(request)
        do {
            let record = try await services.repository.createCipher(
                userID: userID, write: write, collectionIDs: collections, requireCollections: wrapped && write.organizationID != nil,
                now: services.now())
            await services.notifier.cipher(record, .syncCipherCreate, by: context)
            return render(record, request)
        } catch let error as CipherWriteError {
            throw error.apiError
        }
    }

    func update(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let userID = try context.requireUser()
        let id = try Self.id(context)
        let write = try CipherRequests.write(from: try await request.jsonObject(limit: services.configuration.maxBodyBytes))
        do {
            let record = try await services.repository.updateCipher(id: id, userID: userID, write: write, now: services.now())
            await services.notifier.cipher(record, .syncCipherUpdate, by: context)
            return render(record, request)
        } catch let error as CipherWriteError {
            throw error.apiError
        }
    }

    /// `POST /api/vaultsync/ciphers/bulk-update` — a VaultSync extension (not in the Bitwarden API):
    /// `{"ciphers": [cipher request with "id" and "lastKnownRevisionDate", …]}` (at most
    /// ``ServerConfiguration/bulkUpdateLimit``). Every entry is validated and applied exactly like
    /// `PUT /api/ciphers/{id}`, independently, in one transaction; the answer lists each entry's outcome
    /// in order: `{"id", "status": 200, "cipher": {…}}` or `{"id", "status": 400|404, "message"}`.
    /// Clients use it when it exists and fall back to one PUT per item when a server answers 404.
    func bulkUpdate(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let userID = try context.requireUser()
        let body = try await request.jsonObject(limit: services.configuration.maxImportBytes)
        guard let entries = body["ciphers"]?.arrayValue else { throw APIError.invalidModel(["ciphers": ["The Ciphers field is required."]]) }
        guard entries.count <= services.configuration.bulkUpdateLimit else {
            throw APIError.invalidModel(["ciphers": ["At most \(services.configuration.bulkUpdateLimit) ciphers per request."]])
        }
        var writes: [(id: String, write: CipherWrite)] = []
        for (index, entry) in entries.enumerated() {
            guard let object = entry.objectValue, let id = object["id"]?.stringValue, UUID(uuidString: id) != nil else {
                throw APIError.invalidModel(["ciphers[\(index)].id": ["Every entry needs the cipher's id."]])
            }
            writes.append((id.lowercased(), try CipherRequests.write(from: object, path: "$.ciphers[\(index)]")))
        }
        let results = try await services.repository.updateCiphers(userID: userID, writes: writes, now: services.now())
        await services.notifier.bulkChange(results.compactMap { try? $0.get() }, userID: userID, by: context)
        let renderer = services.renderer(for: request)
        // `"answer": "revision"`: a client that keeps what it sent needs only the new revision date and
        // the folder and favorite the server stored (a folder not the user's is dropped), not the cipher.
        let lean = body["answer"]?.stringValue == "revision"
        var bytes = Array(#"{"object":"list","data":["#.utf8)
        for (index, (entry, result)) in zip(writes, results).enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            switch result {
            case .success(let record) where lean:
                bytes += JSONValue.object(["id": .string(entry.id), "status": .int(200), "revisionDate": Renderer.date(record.revisionDate),
                                           "folderId": record.folderID.map(JSONValue.string) ?? .null,
                                           "favorite": .bool(record.favorite)]).serialized()
            case .success(let record):
                bytes += #"{"id":"#.utf8 + JSONValue.string(entry.id).serialized() + #","status":200,"cipher":"#.utf8
                bytes += renderer.cipher(record) + Array("}".utf8)
            case .failure(let error):
                let apiError = error.apiError
                bytes += JSONValue.object(["id": .string(entry.id), "status": .int(Int(apiError.status.code)),
                                           "message": .string(apiError.message)]).serialized()
            }
        }
        bytes += Array("]}".utf8)
        return JSONResponse.make(bytes: bytes)
    }

    /// `POST /api/vaultsync/ciphers/bulk-create` — a VaultSync extension (not in the Bitwarden API):
    /// `{"ciphers": [cipher request with "idempotencyKey", …]}` (at most ``ServerConfiguration/bulkUpdateLimit``),
    /// personal items only. Each entry is created exactly like `POST /api/ciphers` with that
    /// `Idempotency-Key` (a repeat answers with the item the first attempt made), in one transaction;
    /// the answer lists each entry's outcome in order: `{"idempotencyKey", "status": 200, "cipher"}` or
    /// `{"idempotencyKey", "status": 400|404, "message"}`. Clients fall back to one POST per item on 404.
    func bulkCreate(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let userID = try context.requireUser()
        let body = try await request.jsonObject(limit: services.configuration.maxImportBytes)
        guard let entries = body["ciphers"]?.arrayValue else { throw APIError.invalidModel(["ciphers": ["The Ciphers field is required."]]) }
        guard entries.count <= services.configuration.bulkUpdateLimit else {
            throw APIError.invalidModel(["ciphers": ["At most \(services.configuration.bulkUpdateLimit) ciphers per request."]])
        }
        var keys: [String] = []
        var writes: [CipherWrite] = []
        for (index, entry) in entries.enumerated() {
            guard let object = entry.objectValue else { throw APIError.invalidModel(["ciphers[\(index)]": ["Every entry is a cipher object."]]) }
            let key = try CipherRequests.checkedIdempotencyKey(object["idempotencyKey"]?.stringValue ?? "", field: "ciphers[\(index)].idempotencyKey")
            var write = try CipherRequests.write(from: object, path: "$.ciphers[\(index)]")
            write.lastKnownRevisionDate = nil
            write.createKey = key
            keys.append(key)
            writes.append(write)
        }
        let results = try await services.repository.createCiphers(userID: userID, writes: writes, now: services.now())
        await services.notifier.bulkChange(results.compactMap { try? $0.get() }, userID: userID, by: context)
        let renderer = services.renderer(for: request)
        var bytes = Array(#"{"object":"list","data":["#.utf8)
        for (index, (key, result)) in zip(keys, results).enumerated() {
            if index > 0 { bytes.append(UInt8(ascii: ",")) }
            switch result {
            case .success(let record):
                bytes += #"{"idempotencyKey":"#.utf8 + JSONValue.string(key).serialized() + #","status":200,"cipher":"#.utf8
                bytes += renderer.cipher(record) + Array("}".utf8)
            case .failure(let error):
                let apiError = error.apiError
                var entry: JSONObject = ["idempotencyKey": .string(key), "status": .int(Int(apiError.status.code)),
                                         "message": .string(apiError.message)]
                if let createdID = apiError.createdID { entry["createdId"] = .string(createdID) }
                bytes += JSONValue.object(entry).serialized()
            }
        }
        bytes += Array("]}".utf8)
        return JSONResponse.make(bytes: bytes)
    }

    func partial(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let body = try await request.jsonObject(limit: services.configuration.maxBodyBytes)
        let folder = try Self.optionalID(body, "folderId")
        do {
            let records = try await services.repository.updateCipherState(
                ids: [try Self.id(context)], userID: try context.requireUser(), folderID: .some(folder),
                favorite: body["favorite"]?.boolValue ?? false, now: services.now())
            guard let record = records.first else { throw APIError.notFound }
            await services.notifier.cipher(record, .syncCipherUpdate, by: context, onlyTo: [try context.requireUser()])
            return render(record, request)
        } catch let error as CipherWriteError {
            throw error.apiError
        }
    }

    func move(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let body = try await request.jsonObject(limit: services.configuration.maxBodyBytes)
        let ids = try CipherRequests.ids(from: body)
        let folder = try Self.optionalID(body, "folderId")
        let userID = try context.requireUser()
        // The official move refuses a folder that is not the user's (it took the items out of their folders:
        // RELIABILITY bug 69); ids the user cannot see are passed over.
        if let folder, try await services.repository.folder(id: folder, userID: userID) == nil {
            throw APIError(.badRequest, "Invalid folder.")
        }
        do {
            let records = try await services.repository.updateCipherState(ids: ids, userID: userID, folderID: .some(folder),
                                                                          favorite: nil, ignoringUnknown: true, now: services.now())
            // Folders are each user's own: only the mover's devices hear of it.
            await services.notifier.ciphers(records, .syncCipherUpdate, by: context, onlyTo: [userID])
            return JSONResponse.empty()
        } catch let error as CipherWriteError {
            throw error.apiError
        }
    }

    static func optionalID(_ body: JSONObject, _ key: String) throws -> String? {
        guard let value = body[key], !value.isNull else { return nil }
        guard let text = value.stringValue else { throw APIError.invalidModel([key: ["\(key) must be a string."]]) }
        if text.isEmpty { return nil }
        guard UUID(uuidString: text) != nil else { throw APIError.invalidModel([key: ["\(key) must be a UUID."]]) }
        return text.lowercased()
    }

    func lifecycle(_ request: Request, _ context: VaultRequestContext, _ action: VaultRepository.Lifecycle, bulk: Bool) async throws -> Response {
        let userID = try context.requireUser()
        let ids = bulk ? try CipherRequests.ids(from: try await request.jsonObject(limit: services.configuration.maxBodyBytes)) : [try Self.id(context)]
        let records: [CipherRecord]
        do {
            records = try await services.repository.changeLifecycle(ids: ids, userID: userID, action: action, ignoringUnknown: bulk, now: services.now())
        } catch let error as CipherWriteError {
            throw error.apiError
        }
        switch action {
        case .hardDelete: await services.notifier.ciphers(records, .syncLoginDelete, by: context)
        case .softDelete, .restore: await services.notifier.ciphers(records, .syncCipherUpdate, by: context)
        // Archiving is the user's own state of the item.
        case .archive, .unarchive: await services.notifier.ciphers(records, .syncCipherUpdate, by: context, onlyTo: [userID])
        }
        switch action {
        case .softDelete, .hardDelete:
            return JSONResponse.empty()
        case .restore, .archive, .unarchive:
            let renderer = services.renderer(for: request)
            if bulk { return JSONResponse.list(records.map { renderer.cipher($0) }) }
            guard let record = records.first else { throw APIError.notFound }
            return render(record, request)
        }
    }

    func importVault(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let userID = try context.requireUser()
        let body = try await request.jsonObject(limit: services.configuration.maxImportBytes)
        let cipherValues = try RequestLimits.check(body["ciphers"]?.arrayValue ?? [], field: "ciphers", limit: RequestLimits.importCiphers)
        let folderValues = try RequestLimits.check(body["folders"]?.arrayValue ?? [], field: "folders", limit: RequestLimits.importFolders)
        let relationValues = try RequestLimits.check(body["folderRelationships"]?.arrayValue ?? [], field: "folderRelationships",
                                                     limit: RequestLimits.importFolderRelationships)
        var writes: [CipherWrite] = []
        for (index, value) in cipherValues.enumerated() {
            guard let object = value.objectValue else { throw APIError.invalidModel(["ciphers[\(index)]": ["Must be an object."]]) }
            var write = try CipherRequests.write(from: object, path: "$.ciphers[\(index)]")
            guard write.organizationID == nil else {
                throw APIError.invalidModel(["ciphers[\(index)].organizationId": ["Import into an organization is not supported here."]])
            }
            write.folderID = nil
            writes.append(write)
        }
        var folders: [(id: String?, name: String)] = []
        for (index, value) in folderValues.enumerated() {
            guard let object = value.objectValue, let name = object["name"]?.stringValue, (try? EncString(name)) != nil else {
                throw APIError.invalidModel(["folders[\(index)].name": ["folders[\(index)].name is not a valid encrypted string."]])
            }
            folders.append((try Self.optionalID(object, "id"), name))
        }
        var relations: [(cipher: Int, folder: Int)] = []
        for value in relationValues {
            guard let object = value.objectValue, let key = object["key"]?.intValue, let folder = object["value"]?.intValue,
                  key >= 0, key < writes.count, folder >= 0, folder < folders.count else {
                throw APIError.invalidModel(["folderRelationships": ["Each relationship needs a valid cipher index (key) and folder index (value)."]])
            }
            relations.append((key, folder))
        }
        try await services.repository.importVault(userID: userID, folders: folders, ciphers: writes, relationships: relations, now: services.now())
        await services.notifier.user(userID, .syncVault, contextID: context.claims?.device)
        return JSONResponse.empty()
    }

    func share(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let body = try await request.jsonObject(limit: services.configuration.maxBodyBytes)
        guard let cipher = body["cipher"]?.objectValue else { throw APIError.invalidModel(["cipher": ["The Cipher field is required."]]) }
        let write = try CipherRequests.write(from: cipher, path: "$.cipher")
        do {
            let record = try await services.repository.shareCipher(
                id: try Self.id(context), userID: try context.requireUser(), write: write,
                collectionIDs: try CipherRequests.collectionIDs(from: body), attachments: try Self.sharedAttachments(cipher), now: services.now())
            await services.notifier.cipher(record, .syncCipherUpdate, by: context)
            return render(record, request)
        } catch let error as CipherWriteError {
            throw error.apiError
        }
    }

    /// `cipher.attachments2` of a share: each attachment's name and key encrypted for the organization
    /// (`{id: {"fileName", "key"}}`), which the official clients send when the item had no key of its own.
    static func sharedAttachments(_ cipher: JSONObject) throws -> [String: VaultRepository.SharedAttachment] {
        guard let entries = cipher["attachments2"]?.objectValue else { return [:] }
        _ = try RequestLimits.check(entries.map(\.value), field: "attachments2", limit: RequestLimits.sharedCiphers)
        var result: [String: VaultRepository.SharedAttachment] = [:]
        for entry in entries {
            guard UUID(uuidString: entry.key) != nil, let object = entry.value.objectValue,
                  let name = object["fileName"]?.stringValue, (try? EncString(name)) != nil,
                  let key = object["key"]?.stringValue, (try? EncString(key)) != nil else {
                throw APIError.invalidModel(["attachments2": ["Each attachment needs its fileName and key as encrypted strings."]])
            }
            result[entry.key.lowercased()] = .init(fileName: name, key: key)
        }
        return result
    }

    func shareMany(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let userID = try context.requireUser()
        let body = try await request.jsonObject(limit: services.configuration.maxImportBytes)
        guard let ciphers = body["ciphers"]?.arrayValue, !ciphers.isEmpty else {
            throw APIError.invalidModel(["ciphers": ["The Ciphers field is required."]])
        }
        try RequestLimits.check(ciphers, field: "ciphers", limit: RequestLimits.sharedCiphers)
        let collections = try CipherRequests.collectionIDs(from: body)
        var records: [CipherRecord] = []
        for (index, value) in ciphers.enumerated() {
            guard let object = value.objectValue, let id = object["id"]?.stringValue, UUID(uuidString: id) != nil else {
                throw APIError.invalidModel(["ciphers[\(index)].id": ["Each cipher needs its id."]])
            }
            let write = try CipherRequests.write(from: object, path: "$.ciphers[\(index)]")
            do {
                records.append(try await services.repository.shareCipher(id: id.lowercased(), userID: userID, write: write,
                                                                         collectionIDs: collections, attachments: try Self.sharedAttachments(object),
                                                                         now: services.now()))
            } catch let error as CipherWriteError {
                throw error.apiError
            }
        }
        await services.notifier.ciphers(records, .syncCipherUpdate, by: context)
        let renderer = services.renderer(for: request)
        return JSONResponse.list(records.map { renderer.cipher($0) })
    }

    func collections(_ request: Request, _ context: VaultRequestContext, v2: Bool) async throws -> Response {
        let body = try await request.jsonObject(limit: services.configuration.maxBodyBytes)
        let id = try Self.id(context)
        let userID = try context.requireUser()
        do {
            // Who saw the item before the change: those who no longer do are told it is gone for them (a
            // delete notification: the item's revision did not change, so an update would read as current).
            let before = try await services.repository.read { session in try await VaultRepository.visibleCiphers(userID: userID, onlyID: id, session).first }
            var audienceBefore: Set<String> = []
            if let organizationID = before?.organizationID {
                audienceBefore = try await services.repository.audience(ofCipher: id, organizationID: organizationID)
            }
            let record = try await services.repository.setCipherCollections(
                id: id, userID: userID, collectionIDs: try CipherRequests.collectionIDs(from: body), now: services.now())
            if let organizationID = before?.organizationID, let changed = record ?? before {
                if record != nil { await services.notifier.cipher(changed, .syncCipherUpdate, by: context) }
                let lost = audienceBefore.subtracting(try await services.repository.audience(ofCipher: id, organizationID: organizationID))
                if !lost.isEmpty { await services.notifier.cipher(changed, .syncLoginDelete, by: context, onlyTo: lost.sorted()) }
            }
            let renderer = services.renderer(for: request)
            if v2 {
                var object = JSONObject()
                object["object"] = .string("optionalCipherDetails")
                object["unavailable"] = .bool(record == nil)
                object["cipher"] = try record.map { .object(try JSONParser.parseObject(renderer.cipher($0))) } ?? .null
                return JSONResponse.make(.object(object))
            }
            guard let record else { throw APIError.notFound }
            return render(record, request)
        } catch let error as CipherWriteError {
            throw error.apiError
        }
    }

    func folderBody(_ request: Request) async throws -> (String, String?) {
        let body = try await request.jsonObject(limit: services.configuration.maxBodyBytes)
        guard let name = body["name"]?.stringValue else { throw APIError.invalidModel(["name": ["The Name field is required."]]) }
        guard (try? EncString(name)) != nil else { throw APIError.invalidModel(["name": ["name is not a valid encrypted string."]]) }
        guard name.utf8.count <= 1000 else {
            throw APIError.invalidModel(["name": ["The field name exceeds the maximum encrypted value length of 1000 characters."]])
        }
        return (name, try Self.optionalID(body, "id"))
    }

    func deleteFolder(_ context: VaultRequestContext) async throws -> Response {
        let id = try Self.id(context)
        let userID = try context.requireUser()
        let deleted = try await services.repository.deleteFolders(ids: [id], userID: userID, now: services.now())
        guard deleted > 0 else { throw APIError.notFound }
        await services.notifier.folderDeleted(id: id, userID: userID, by: context)
        return JSONResponse.empty()
    }
}
