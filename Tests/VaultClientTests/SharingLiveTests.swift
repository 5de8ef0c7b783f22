import Foundation
import Testing
@testable import VaultClient
import VaultModels
import VaultTestSupport

/// Sharing through the library, with live sync: what the organization decides reaches a member's device
/// without a `sync`.
@Suite("Sharing with live sync")
struct SharingLiveTests {
    @Test("an item shared into a member's collection arrives live; moving it out of their collections, taking the collection's access away and removing the member drop it live")
    func accessChangesArriveLive() async throws {
        let scenario = try await Scenario.start()
        let owner = try await scenario.device(register: true)
        let memberAccount = Scenario(server: scenario.server, email: "member-\(UUID().uuidString.prefix(8).lowercased())@example.com")
        let member = try await memberAccount.device(register: true)

        let organizationID = try await owner.engine.createOrganization(name: "Family", collectionName: "Everyone")
        let everyone = try #require(try await owner.engine.collections().first?.id)
        let kids = try await owner.engine.addCollection(organizationID: organizationID, name: "Kids")
        let invitation = try await owner.engine.inviteToOrganization(
            id: organizationID, email: memberAccount.email, type: 2,
            collections: [CollectionGrant(collectionID: everyone, access: .readOnly), CollectionGrant(collectionID: kids, access: .edit)])
        let pending = try #require(try await member.engine.pendingInvitations().first)
        try await member.engine.acceptInvitation(pending, code: invitation.code)
        let accepted = try #require(try await owner.engine.organizationMembers(id: organizationID).first { $0.email == memberAccount.email })
        #expect(Set(accepted.collections) == [CollectionGrant(collectionID: everyone, access: .readOnly), CollectionGrant(collectionID: kids, access: .edit)])
        let confirmation = try await owner.engine.prepareConfirmation(organizationID: organizationID, member: accepted)
        #expect(confirmation.matches(try await member.engine.fingerprintPhrase()))
        try await owner.engine.confirm(confirmation)
        _ = try await member.engine.sync()
        try await member.engine.trustOrganization(id: organizationID)

        let log = await LiveEventLog.live(member.engine)
        let saved = try await owner.engine.addItem(loginItem("Home wifi", username: "guest", password: "wifi-Secret-1"))
        let id = try #require(saved.value.id)
        try await owner.engine.share(itemID: id, organizationID: organizationID, collectionIDs: [everyone])
        #expect(await log.waitFor { $0 == .itemChanged(id: id, name: "Home wifi") }, "the share arrives without a sync")
        #expect(try await member.engine.view(named: "Home wifi")?.login?.password == "wifi-Secret-1")

        // Moved out of the member's only collection (into Kids, which they are not in yet): gone, live; back again: there.
        try await owner.engine.setCollectionAccess(organizationID: organizationID, collectionID: kids, memberID: accepted.id, access: nil)
        try await owner.engine.setCollections(itemID: id, collectionIDs: [kids])
        #expect(await waitUntil { (try? await member.engine.view(named: "Home wifi")) == nil }, "moved out of sight drops it live")
        try await owner.engine.setCollections(itemID: id, collectionIDs: [everyone])
        #expect(await waitUntil { (try? await member.engine.view(named: "Home wifi")) != nil }, "moved back arrives live")
        try await owner.engine.setCollectionAccess(organizationID: organizationID, collectionID: kids, memberID: accepted.id, access: .edit)

        // Moved to Kids as well, then Everyone's access taken away: still visible through Kids; then Kids' too: gone, live.
        try await owner.engine.setCollections(itemID: id, collectionIDs: [everyone, kids])
        try await owner.engine.setCollectionAccess(organizationID: organizationID, collectionID: everyone, memberID: accepted.id, access: nil)
        #expect(await waitUntil { (try? await member.engine.items().count) == 1 })
        try await owner.engine.setCollectionAccess(organizationID: organizationID, collectionID: kids, memberID: accepted.id, access: nil)
        #expect(await waitUntil { (try? await member.engine.view(named: "Home wifi")) == nil }, "access taken away drops it live")

        // Access given back, then the member removed: the item and the organization leave the member's device live.
        try await owner.engine.setCollectionAccess(organizationID: organizationID, collectionID: kids, memberID: accepted.id, access: .readOnly)
        #expect(await waitUntil { (try? await member.engine.view(named: "Home wifi")) != nil })
        let grants = try await owner.engine.collectionMembers(organizationID: organizationID, collectionID: kids)
        #expect(grants == [CollectionGrant(collectionID: accepted.id, access: .readOnly)])
        try await owner.engine.removeMember(organizationID: organizationID, memberID: accepted.id)
        #expect(await waitUntil { (try? await member.engine.view(named: "Home wifi")) == nil }, "removal drops it live")
        #expect(await waitUntil { (try? await member.engine.organizations().isEmpty) == true })
        await log.stop()

        // The owner cannot leave as the last owner: the refusal is the server's.
        await #expect(throws: VaultError.self) { try await owner.engine.leaveOrganization(id: organizationID) }
        await scenario.finish([owner, member])
    }
}
