import Foundation

/// An account as stored.
struct UserRecord: Sendable {
    var id: String
    var email: String
    var name: String?
    var passwordHash: String
    var passwordSalt: String
    var passwordIterations: Int
    var passwordHint: String?
    var akey: String
    var privateKey: String?
    var publicKey: String?
    var kdfType: Int
    var kdfIterations: Int
    var kdfMemory: Int?
    var kdfParallelism: Int?
    var securityStamp: String
    var createdAt: Int64
    var updatedAt: Int64
    var revisionDate: Int64
    /// `#rrggbb`, or `nil` for the clients' default.
    var avatarColor: String?
    /// JSON `[["a.example", "b.example"], …]`; `nil` for none.
    var equivalentDomains: String?
    /// JSON `[type, …]` of the global equivalent-domain groups the user turned off; `nil` for none.
    var excludedGlobalDomains: String?
    /// When an administrator disabled the account (`nil`: it is enabled).
    var disabledAt: Int64?

    init(row: SQLRow) {
        id = row.text("id") ?? ""
        email = row.text("email") ?? ""
        name = row.text("name")
        passwordHash = row.text("password_hash") ?? ""
        passwordSalt = row.text("password_salt") ?? ""
        passwordIterations = Int(row.int("password_iterations") ?? 0)
        passwordHint = row.text("password_hint")
        akey = row.text("akey") ?? ""
        privateKey = row.text("private_key")
        publicKey = row.text("public_key")
        kdfType = Int(row.int("kdf_type") ?? 0)
        kdfIterations = Int(row.int("kdf_iterations") ?? 0)
        kdfMemory = row.int("kdf_memory").map(Int.init)
        kdfParallelism = row.int("kdf_parallelism").map(Int.init)
        securityStamp = row.text("security_stamp") ?? ""
        createdAt = row.int("created_at") ?? 0
        updatedAt = row.int("updated_at") ?? 0
        revisionDate = row.int("revision_date") ?? 0
        avatarColor = row.text("avatar_color")
        equivalentDomains = row.text("equivalent_domains")
        excludedGlobalDomains = row.text("excluded_global_domains")
        disabledAt = row.int("disabled_at")
    }

    init(id: String, email: String, name: String?, passwordHash: String, passwordSalt: String, passwordIterations: Int,
         passwordHint: String?, akey: String, privateKey: String?, publicKey: String?, kdfType: Int, kdfIterations: Int,
         kdfMemory: Int?, kdfParallelism: Int?, securityStamp: String, now: Int64) {
        self.id = id
        self.email = email
        self.name = name
        self.passwordHash = passwordHash
        self.passwordSalt = passwordSalt
        self.passwordIterations = passwordIterations
        self.passwordHint = passwordHint
        self.akey = akey
        self.privateKey = privateKey
        self.publicKey = publicKey
        self.kdfType = kdfType
        self.kdfIterations = kdfIterations
        self.kdfMemory = kdfMemory
        self.kdfParallelism = kdfParallelism
        self.securityStamp = securityStamp
        createdAt = now
        updatedAt = now
        revisionDate = now
    }
}

/// What a user may do with a cipher (organizations.md §4.4).
struct CipherAccess: Sendable, Equatable {
    var edit: Bool
    var viewPassword: Bool
    var manage: Bool

    static let owner = CipherAccess(edit: true, viewPassword: true, manage: true)

    /// `permissions.delete` / `restore`: manage or edit (the official rule without `limitItemDeletion`).
    var canDelete: Bool { manage || edit }

    /// The access a `collection_members` row gives; a manager (member type 3) manages every collection
    /// they are assigned, whatever the row's flags (the official Manager role: "manage assigned collections").
    init(assignment row: SQLRow, manager: Bool) {
        self = manager ? .owner : CipherAccess(edit: !row.bool("read_only"), viewPassword: !row.bool("hide_passwords"), manage: row.bool("manage"))
    }

    init(edit: Bool, viewPassword: Bool, manage: Bool) {
        self.edit = edit
        self.viewPassword = viewPassword
        self.manage = manage
    }
}

/// Attachment metadata as stored (the file's chunks are read only for downloads).
struct AttachmentRecord: Sendable {
    var id: String
    var cipherID: String
    var fileName: String
    var key: String?
    var fileSize: Int64
    /// The completed upload whose chunks are the file; `nil` until the file is uploaded.
    var uploadID: String? = nil
}

/// A cipher as one user sees it: the stored row, that user's folder/favorite/archive state, and the
/// access and collections computed for them.
struct CipherRecord: Sendable {
    var id: String
    var userID: String?
    var organizationID: String?
    var type: Int
    /// The encrypted payload (name, notes, key, type data, fields, history, unknown extras) as a JSON
    /// object text, spliced into responses without re-parsing.
    var data: String
    var createdAt: Int64
    var revisionDate: Int64
    var deletedDate: Int64?
    var folderID: String?
    var favorite: Bool
    var archivedDate: Int64?
    var access: CipherAccess
    var collectionIDs: [String]
    var attachments: [AttachmentRecord]

    init(row: SQLRow, access: CipherAccess) {
        self.init(row: row, layout: Layout(row.columns), access: access)
    }

    /// Reads a row whose column positions `layout` found: a sync reads a thousand rows of one shape,
    /// and looking each field up by name cost eleven string searches per row.
    init(row: SQLRow, layout: Layout, access: CipherAccess) {
        id = row.text(at: layout.id) ?? ""
        userID = row.text(at: layout.userID)
        organizationID = row.text(at: layout.organizationID)
        type = Int(row.int(at: layout.type) ?? 0)
        data = row.text(at: layout.data) ?? "{}"
        createdAt = row.int(at: layout.createdAt) ?? 0
        revisionDate = row.int(at: layout.revisionDate) ?? 0
        deletedDate = row.int(at: layout.deletedDate)
        folderID = row.text(at: layout.folderID)
        favorite = (row.int(at: layout.favorite) ?? 0) != 0
        archivedDate = row.int(at: layout.archivedDate)
        self.access = access
        collectionIDs = []
        attachments = []
    }

    /// Where a cipher query's columns are (`nil`: absent, read as SQL NULL).
    struct Layout {
        let id, userID, organizationID, type, data, createdAt, revisionDate, deletedDate, folderID, favorite, archivedDate: Int?

        init(_ columns: [String]) {
            id = columns.firstIndex(of: "id")
            userID = columns.firstIndex(of: "user_id")
            organizationID = columns.firstIndex(of: "organization_id")
            type = columns.firstIndex(of: "type")
            data = columns.firstIndex(of: "data")
            createdAt = columns.firstIndex(of: "created_at")
            revisionDate = columns.firstIndex(of: "revision_date")
            deletedDate = columns.firstIndex(of: "deleted_date")
            folderID = columns.firstIndex(of: "folder_id")
            favorite = columns.firstIndex(of: "favorite")
            archivedDate = columns.firstIndex(of: "archived_date")
        }
    }

    /// The columns cipher queries select (with the user's state `s.folder_id, s.favorite, s.archived_date`).
    static let selectColumns = "c.id, c.user_id, c.organization_id, c.type, c.data, c.created_at, c.revision_date, c.deleted_date"
}

/// A folder as stored.
struct FolderRecord: Sendable {
    var id: String
    var name: String
    var revisionDate: Int64

    init(row: SQLRow) {
        id = row.text("id") ?? ""
        name = row.text("name") ?? ""
        revisionDate = row.int("revision_date") ?? 0
    }
}

/// A membership of a user in an organization.
struct MembershipRecord: Sendable {
    var id: String
    var organizationID: String
    var userID: String
    var type: Int
    var status: Int
    var key: String?

    /// Owners and admins see and edit every item of the organization (Vaultwarden's access-all rule).
    var hasFullAccess: Bool { status == 2 && (type == 0 || type == 1) }
    /// Managers (type 3) have full access to the collections they are assigned, and manage them.
    var managesAssignedCollections: Bool { status == 2 && type == 3 }

    init(row: SQLRow) {
        id = row.text("id") ?? ""
        organizationID = row.text("organization_id") ?? ""
        userID = row.text("user_id") ?? ""
        type = Int(row.int("type") ?? 2)
        status = Int(row.int("status") ?? 0)
        key = row.text("akey")
    }
}

/// IDs are lowercase UUID strings.
func newID() -> String { UUID().uuidString.lowercased() }

/// `?, ?, ?` for an `IN` list of `count` values.
func placeholders(_ count: Int) -> String {
    Array(repeating: "?", count: max(count, 1)).joined(separator: ", ")
}
