import Foundation
import Hummingbird
import VaultModels

/// Deleting one's account (docs/PROTOCOL.md, "Account settings"): `DELETE /api/accounts`, and its older twin
/// `POST /api/accounts/delete`, with `{"masterPasswordHash"}` checked as every route that asks for it.
struct AccountDeletionController {
    let services: ServerServices

    func addRoutes(to api: RouterGroup<VaultRequestContext>) {
        api.delete("accounts") { request, context in try await deleteAccount(request, context) }
        api.post("accounts/delete") { request, context in try await deleteAccount(request, context) }
    }

    /// A wrong or missing hash is `400` and deletes nothing. An account that is the only owner of an
    /// organization others belong to is refused (`400`, naming it); one it is alone in goes with it, as on the
    /// official server. Everything else of the account's goes in one transaction, and its tokens stop.
    func deleteAccount(_ request: Request, _ context: VaultRequestContext) async throws -> Response {
        let body = try await request.jsonObject(limit: services.configuration.maxBodyBytes)
        let user = try await SessionsController(services: services).verifiedUser(request, context,
                                                                                  presented: body["masterPasswordHash"]?.stringValue)
        switch try await services.repository.deleteAccount(userID: user.id) {
        case .soleOwner(let names):
            let quoted = names.map { "\"\($0)\"" }.joined(separator: ", ")
            let which = names.count == 1 ? "the organization \(quoted), which has" : "the organizations \(quoted), which have"
            throw APIError(.badRequest, """
                Your account was not deleted: you are the only owner of \(which) other members. Make another member an owner, \
                or delete the organization, then try again.
                """)
        case .deleted(let organizations):
            services.logger.info("account deleted", metadata: ["user": "\(user.id)", "organizations": "\(organizations)"])
            await services.notifier.loggedOut(user.id, contextID: context.claims?.device)
            return JSONResponse.empty()
        }
    }
}

extension VaultRepository {
    enum AccountDeletion: Sendable {
        /// Deleted, with this many organizations the account was alone in.
        case deleted(organizations: Int)
        /// Nothing deleted: the account is the only confirmed owner of these organizations (their names), which
        /// have other members.
        case soleOwner([String])
    }

    /// Deletes an account in one transaction. Organizations it is the only confirmed owner of are looked at
    /// first: one with any other member (whatever the member's status) refuses the whole deletion; one with
    /// none goes too (its items, collections and pending invites with it). Then the account's row goes, and
    /// the schema's cascades take what hangs from it: its items (personal ones; an organization's items have
    /// no user) with their attachments, upload attempts and file chunks, its folders, its folder and
    /// favourite state of organization items, its devices (so their refresh and access tokens), memberships,
    /// two-step login providers and idempotency keys.
    func deleteAccount(userID: String) async throws -> AccountDeletion {
        // PostgreSQL: each such organization's row is locked before its members are counted, so an invite
        // accepted meanwhile (its insert checks the organization's key) waits, then finds the organization gone.
        let lock = database.dialect == .postgres ? " FOR UPDATE" : ""
        return try await transaction { session in
            let owned = try await session.query("""
                SELECT m.organization_id, o.name FROM memberships m JOIN organizations o ON o.id = m.organization_id
                WHERE m.user_id = ? AND m.type = 0 AND m.status = 2 AND NOT EXISTS (
                    SELECT 1 FROM memberships other WHERE other.organization_id = m.organization_id AND other.type = 0
                        AND other.status = 2 AND other.user_id <> m.user_id)
                ORDER BY o.created_at
                """, [.text(userID)])
            var alone: [String] = []
            var shared: [String] = []
            for row in owned {
                guard let organizationID = row.text("organization_id") else { continue }
                try await session.query("SELECT id FROM organizations WHERE id = ?\(lock)", [.text(organizationID)])
                let others = try await session.query("SELECT COUNT(*) AS n FROM memberships WHERE organization_id = ? AND user_id <> ?",
                                                     [.text(organizationID), .text(userID)]).first?.int("n") ?? 0
                if others > 0 { shared.append(row.text("name") ?? organizationID) } else { alone.append(organizationID) }
            }
            guard shared.isEmpty else { return .soleOwner(shared) }
            for organizationID in alone {
                try await session.query("DELETE FROM organizations WHERE id = ?", [.text(organizationID)])
            }
            try await session.query("DELETE FROM users WHERE id = ?", [.text(userID)])
            return .deleted(organizations: alone.count)
        }
    }
}
