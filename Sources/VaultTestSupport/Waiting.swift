import Foundation

/// Waits until `condition` holds, checking every 10 ms, for at most `limit`; returns whether it held.
///
/// For something that happens on a healthy build whatever the machine's speed (a request reaching a
/// proxy, a held request being answered): the limit is there only so that a real bug ends the test
/// instead of hanging it, never as a timing margin.
public func waitUntil(limit: Duration = .seconds(120), _ condition: () async -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + limit
    while ContinuousClock.now < deadline {
        if await condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return await condition()
}
