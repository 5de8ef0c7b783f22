import Testing
import VaultAPI
import VaultModels
import VaultSyncCore

/// The SignalR JSON hub protocol as the client reads it (docs/PROTOCOL.md, "The notifications hub"):
/// records ended by 0x1E, several in one message or one split over two.
@Suite("The hub's JSON protocol")
struct HubJSONProtocolTests {
    @Test("records split at 0x1E, an unfinished tail carried to the next message")
    func splitting() {
        var carry = ""
        #expect(HubJSONProtocol.split("{}\u{1E}{\"type\":6}\u{1E}{\"ty", carry: &carry) == ["{}", #"{"type":6}"#])
        #expect(carry == #"{"ty"#)
        #expect(HubJSONProtocol.split("pe\":6}\u{1E}", carry: &carry) == [#"{"type":6}"#])
        #expect(carry.isEmpty)
        #expect(HubJSONProtocol.handshake == #"{"protocol":"json","version":1}"# + "\u{1E}")
    }

    @Test("the handshake answer, invocations, pings and close messages are read; bad records throw")
    func reading() throws {
        #expect(try HubJSONProtocol.read("{}", awaitingHandshake: true) == .handshake(error: nil))
        #expect(try HubJSONProtocol.read(#"{"error":"Requested protocol 'x' is not available."}"#, awaitingHandshake: true)
                == .handshake(error: "Requested protocol 'x' is not available."))
        #expect(try HubJSONProtocol.read(#"{"type":6}"#, awaitingHandshake: false) == .ping)
        #expect(try HubJSONProtocol.read(#"{"type":7,"error":"bye","allowReconnect":true}"#, awaitingHandshake: false)
                == .close(error: "bye", allowReconnect: true))
        #expect(try HubJSONProtocol.read(#"{"type":7}"#, awaitingHandshake: false) == .close(error: nil, allowReconnect: false))
        #expect(try HubJSONProtocol.read(#"{"type":3,"invocationId":"1"}"#, awaitingHandshake: false) == .other(type: 3))
        let invocation = #"{"type":1,"target":"ReceiveMessage","arguments":[{"ContextId":"d","Type":0,"Payload":{"Id":"I","RevisionDate":"2026-12-01T10:00:00Z"}}]}"#
        guard case .invocation(let target, let arguments) = try HubJSONProtocol.read(invocation, awaitingHandshake: false) else {
            Issue.record("not an invocation")
            return
        }
        let notifications = HubJSONProtocol.notifications(target: target, arguments: arguments)
        #expect(notifications.count == 1 && notifications.first?.type == 0 && notifications.first?.id == "i" && notifications.first?.contextID == "d")
        #expect(HubJSONProtocol.notifications(target: "Other", arguments: arguments).isEmpty)
        #expect(throws: HubJSONProtocol.ReadError.self) { try HubJSONProtocol.read("not json", awaitingHandshake: false) }
        #expect(throws: HubJSONProtocol.ReadError.self) { try HubJSONProtocol.read(#"{"target":"x"}"#, awaitingHandshake: false) }
    }

    @Test("the hub's address: the configured notifications host, else /notifications/hub; ws for http, wss for https")
    func address() {
        #expect(NotificationsConnection.hubURL(baseURL: "http://127.0.0.1:8080", configuredNotifications: nil) == "ws://127.0.0.1:8080/notifications/hub")
        #expect(NotificationsConnection.hubURL(baseURL: "https://vault.example.com", configuredNotifications: "") == "wss://vault.example.com/notifications/hub")
        #expect(NotificationsConnection.hubURL(baseURL: "https://api.bitwarden.com", configuredNotifications: "https://notifications.bitwarden.com")
                == "wss://notifications.bitwarden.com/hub")
        #expect(NotificationsConnection.hubURL(baseURL: "https://x", configuredNotifications: "https://n.example.com/") == "wss://n.example.com/hub")
    }
}
