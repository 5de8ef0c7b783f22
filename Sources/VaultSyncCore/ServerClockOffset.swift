import VaultModels

/// The difference between the server's clock and this device's, measured from `Date` headers
/// (seed 001 AP-R2: a device clock that is hours off must not decide which edit is newer).
///
/// Each response gives one sample: the server's `Date` against the midpoint of the request's send and
/// receive times on the device clock. A `Date` header has 1-second resolution and servers may cache it
/// for up to a second, so the true server time lies in [date, date + 2 s): the sample takes its middle
/// and its error bound is half the round trip plus one second. The estimate keeps the sample with the
/// smallest error among the recent ones, and only the part of the offset beyond that error is applied
/// (``correctionMicroseconds``).
///
/// The two bounds of a sample are not equally sure. A `Date` header is never later than the server's clock, so
/// "the server is at least this far ahead" always holds. "At most this far" holds only while the header is at most
/// a second stale, and a loaded server's cache can be staler: Hummingbird refreshes its header from a 1-second
/// timer, which fires late under load (docs/RELIABILITY.md, bugs 80 and the `viewReadBeforeSync` flake). One such
/// sample, kept for its short round trip, made a device clock that agrees with the server's "a second fast" for an
/// hour, and reordered two edits a second apart. So a correction that moves this device's times back is applied
/// only when no recent sample allows the clocks to agree (``loosestUpperMicroseconds``).
public struct ServerClockOffset: Sendable, Codable, Equatable {
    /// server time − device time, in microseconds.
    public var offsetMicroseconds: Int64
    /// Bound on the error of `offsetMicroseconds`, in microseconds.
    public var uncertaintyMicroseconds: Int64
    /// When (device clock) the kept sample was taken.
    public var measuredAt: WireDate
    /// The largest upper bound on the offset among the samples since the kept one's window began: a fresh header
    /// among them keeps it at or above the true offset. `nil` in estimates stored before it was kept (then the kept
    /// sample's own bound).
    public var loosestUpperMicroseconds: Int64?

    public init(offsetMicroseconds: Int64, uncertaintyMicroseconds: Int64, measuredAt: WireDate, loosestUpperMicroseconds: Int64? = nil) {
        self.offsetMicroseconds = offsetMicroseconds
        self.uncertaintyMicroseconds = uncertaintyMicroseconds
        self.measuredAt = measuredAt
        self.loosestUpperMicroseconds = loosestUpperMicroseconds
    }

    /// The upper bound this sample alone gives the offset.
    var upperMicroseconds: Int64 { offsetMicroseconds + uncertaintyMicroseconds }

    /// One sample from a response.
    public static func sample(serverDate: WireDate, sentAt: WireDate, receivedAt: WireDate) -> ServerClockOffset {
        let roundTrip = max(0, receivedAt.microsecondsSinceEpoch - sentAt.microsecondsSinceEpoch)
        let midpoint = sentAt.microsecondsSinceEpoch + roundTrip / 2
        // Truncated to whole seconds and possibly cached for one: the true server time is in [date, date + 2 s).
        let serverMid = serverDate.microsecondsSinceEpoch + 1_000_000
        return ServerClockOffset(offsetMicroseconds: serverMid - midpoint,
                                 uncertaintyMicroseconds: roundTrip / 2 + 1_000_000, measuredAt: receivedAt)
    }

    /// Combines the current estimate with a new sample: the more precise one wins, but an estimate
    /// older than `maximumAge` is replaced (clocks drift, devices sleep, users change time zones).
    /// The loosest upper bound travels with the kept sample within its window and starts again with it.
    public func merged(with sample: ServerClockOffset, maximumAgeMicroseconds: Int64 = 3_600_000_000) -> ServerClockOffset {
        let stale = sample.measuredAt.microsecondsSinceEpoch - measuredAt.microsecondsSinceEpoch > maximumAgeMicroseconds
        if stale { return sample }
        var kept = sample.uncertaintyMicroseconds <= uncertaintyMicroseconds ? sample : self
        kept.loosestUpperMicroseconds = max(loosestUpperMicroseconds ?? upperMicroseconds, sample.loosestUpperMicroseconds ?? sample.upperMicroseconds)
        return kept
    }

    /// The correction applied to device times: the offset when it is larger than its measurement error,
    /// else none. Clocks that agree within the error (a `Date` header has 1-second resolution) are not
    /// "corrected" by noise; a device hours off is corrected by all of it. Either way, two edits less
    /// than the error apart on different clocks cannot be ordered reliably.
    public var correctionMicroseconds: Int64 {
        if offsetMicroseconds > uncertaintyMicroseconds { return offsetMicroseconds }
        let behind = offsetMicroseconds < -uncertaintyMicroseconds && (loosestUpperMicroseconds ?? upperMicroseconds) < 0
        return behind ? offsetMicroseconds : 0
    }

    /// A device-clock instant expressed on the server's clock (with ``correctionMicroseconds``).
    public func serverTime(forDeviceTime date: WireDate) -> WireDate {
        date.adding(microseconds: correctionMicroseconds)
    }
}
