import Testing
import VaultModels
@testable import VaultSyncCore

/// The live messages' decisions (docs/PROTOCOL.md, "The notifications hub"): what each push type
/// makes the engine do, echoes and other accounts ignored.
@Suite("Live messages")
struct LiveMessageTests {
    let device = "5b1e5a0c-1111-4c6f-9a57-000000000001"
    let user = "0f0e0d0c-2222-4b3a-8c1d-000000000002"
    let item = "a1b2c3d4-3333-4e5f-8a9b-000000000003"

    func message(_ type: PushType, context: String? = "other-device", id: String? = nil, userID: String? = nil) -> PushNotification {
        PushNotification(type: type.rawValue, contextID: context, id: id, userID: userID)
    }

    @Test("every push type has its action; the numbers are Bitwarden's")
    func actions() {
        #expect(PushType.syncCipherUpdate.rawValue == 0 && PushType.syncLoginDelete.rawValue == 2 && PushType.syncVault.rawValue == 5
                && PushType.syncFolderUpdate.rawValue == 8 && PushType.syncCipherDelete.rawValue == 9 && PushType.logOut.rawValue == 11
                && PushType.authRequestResponse.rawValue == 16)
        let decide = { LiveAction.decide($0, deviceIdentifier: self.device, userID: self.user) }
        #expect(decide(message(.syncCipherCreate, id: item)) == .fetchItem(id: item, revisionDate: nil))
        #expect(decide(message(.syncCipherUpdate, id: item)) == .fetchItem(id: item, revisionDate: nil))
        #expect(decide(message(.syncLoginDelete, id: item)) == .removeItem(id: item))
        #expect(decide(message(.syncCipherDelete, id: item)) == .removeItem(id: item))
        #expect(decide(message(.syncFolderCreate, id: item)) == .syncFolders)
        #expect(decide(message(.syncFolderUpdate, id: item)) == .syncFolders)
        #expect(decide(message(.syncFolderDelete, id: item)) == .removeFolder(id: item))
        for type in [PushType.syncCiphers, .syncVault, .syncOrgKeys, .syncSettings] {
            #expect(decide(message(type, userID: user)) == .fullSync, "\(type)")
        }
        for type in [PushType.syncSendCreate, .syncSendUpdate, .syncSendDelete, .authRequest, .authRequestResponse] {
            #expect(decide(message(type, id: item)) == .ignore, "\(type)")
        }
        #expect(decide(PushNotification(type: 99, id: item)) == .ignore, "an unknown number")
        #expect(decide(message(.syncCipherUpdate)) == .fullSync, "no id: the whole vault is fetched")
    }

    @Test("this device's own echo changes nothing, except LogOut; another account's LogOut is ignored")
    func echoes() {
        let decide = { LiveAction.decide($0, deviceIdentifier: self.device, userID: self.user) }
        #expect(decide(message(.syncCipherUpdate, context: device.uppercased(), id: item)) == .ignore)
        #expect(decide(message(.syncVault, context: device)) == .ignore)
        #expect(decide(message(.logOut, context: device, userID: user)) == .logOut)
        #expect(decide(message(.logOut, context: nil, userID: user.uppercased())) == .logOut)
        #expect(decide(message(.logOut, userID: "someone-else")) == .ignore)
    }

    @Test("a message's object is read in any key case, PascalCase or camelCase")
    func parsing() throws {
        let pascal = try JSONParser.parseObject(Array(#"{"ContextId":"dev","Type":1,"Payload":{"Id":"ABC","UserId":"U","RevisionDate":"2026-12-01T10:00:00.123Z"}}"#.utf8))
        let camel = try JSONParser.parseObject(Array(#"{"contextId":"dev","type":1,"payload":{"id":"abc","userId":"u","revisionDate":"2026-12-01T10:00:00.123Z"}}"#.utf8))
        let a = try #require(PushNotification(pascal))
        let b = try #require(PushNotification(camel))
        #expect(a == b)
        #expect(a.type == 1 && a.contextID == "dev" && a.id == "abc" && a.userID == "u" && a.revisionDate != nil)
        #expect(PushNotification(try JSONParser.parseObject(Array(#"{"Payload":{}}"#.utf8))) == nil, "no type")
    }

    @Test("reconnection backs off with jitter and never waits more than 30 s; a connection syncs when the revision moved or changes wait")
    func reconnectAndCatchUp() {
        let schedule = ReconnectSchedule()
        for failures in 1...50 {
            for unit in [0.0, 0.5, 0.999] {
                let delay = schedule.delay(afterFailures: failures, unit: unit)
                #expect(delay > 0 && delay <= 30)
            }
        }
        #expect(schedule.delay(afterFailures: 1, unit: 0) < schedule.delay(afterFailures: 6, unit: 0))
        #expect(syncNeededOnConnect(serverRevision: 5, lastSyncRevision: 5, pendingCount: 0) == false)
        #expect(syncNeededOnConnect(serverRevision: 6, lastSyncRevision: 5, pendingCount: 0))
        #expect(syncNeededOnConnect(serverRevision: 5, lastSyncRevision: 5, pendingCount: 1))
        #expect(syncNeededOnConnect(serverRevision: 5, lastSyncRevision: nil, pendingCount: 0))
    }
}
