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
public struct ServerClockOffset: Sendable, Codable, Equatable {
    /// server time − device time, in microseconds.
    public var offsetMicroseconds: Int64
    /// Bound on the error of `offsetMicroseconds`, in microseconds.
    public var uncertaintyMicroseconds: Int64
    /// When (device clock) the kept sample was taken.
    public var measuredAt: WireDate

    public init(offsetMicroseconds: Int64, uncertaintyMicroseconds: Int64, measuredAt: WireDate) {
        self.offsetMicroseconds = offsetMicroseconds
        self.uncertaintyMicroseconds = uncertaintyMicroseconds
        self.measuredAt = measuredAt
    }

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
    public func merged(with sample: ServerClockOffset, maximumAgeMicroseconds: Int64 = 3_600_000_000) -> ServerClockOffset {
        let stale = sample.measuredAt.microsecondsSinceEpoch - measuredAt.microsecondsSinceEpoch > maximumAgeMicroseconds
        return stale || sample.uncertaintyMicroseconds <= uncertaintyMicroseconds ? sample : self
    }

    /// The correction applied to device times: the offset when it is larger than its measurement error,
    /// else none. Clocks that agree within the error (a `Date` header has 1-second resolution) are not
    /// "corrected" by noise; a device hours off is corrected by all of it. Either way, two edits less
    /// than the error apart on different clocks cannot be ordered reliably.
    public var correctionMicroseconds: Int64 {
        abs(offsetMicroseconds) > uncertaintyMicroseconds ? offsetMicroseconds : 0
    }

    /// A device-clock instant expressed on the server's clock (with ``correctionMicroseconds``).
    public func serverTime(forDeviceTime date: WireDate) -> WireDate {
        date.adding(microseconds: correctionMicroseconds)
    }
}
