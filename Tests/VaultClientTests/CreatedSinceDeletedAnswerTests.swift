import Testing
import VaultAPI

@Suite("A 410 to a repeated create: the id it names is taken only when it can be part of a key")
struct CreatedSinceDeletedAnswerTests {
    @Test("410 with a usable createdId, without one, with a broken one; other statuses ignore it", arguments: [
        (410, "5f6b2a3e-7d1c-4c9a-9e2b-0a1b2c3d4e5f", "5f6b2a3e-7d1c-4c9a-9e2b-0a1b2c3d4e5f"),
        (410, nil, nil),
        (410, "", nil),
        (410, "has space", nil),
        (410, "ïd", nil),
        (410, String(repeating: "a", count: 101), nil),
        (404, "5f6b2a3e-7d1c-4c9a-9e2b-0a1b2c3d4e5f", nil),
    ] as [(Int, String?, String?)])
    func createdID(status: Int, named: String?, taken: String?) {
        let error = ServerCallError.answer(status: status, message: "gone", createdID: named)
        #expect(error.createdSinceDeletedID == taken)
        #expect(error.isCreatedSinceDeleted == (status == 410), "every 410 still means the create's item was deleted since")
        #expect(error.failure == .status(status))
    }
}
