import VaultModels

/// The difference between the server's clock and this device's, measured from `Date` headers
/// (seed 001 AP-R2: a device clock that is hours off must not decide which edit is newer).
///
/// Each response gives one sample: the server's `Date` (1-second resolution) against the midpoint of
/// the request's send and receive times on the device clock. Its error is at most half the round trip
/// plus one second. The estimate keeps the sample with the smallest error among the recent ones.
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
        // The header truncates to whole seconds: the true server time is in [date, date + 1 s).
        let serverMid = serverDate.microsecondsSinceEpoch + 500_000
        return ServerClockOffset(offsetMicroseconds: serverMid - midpoint,
                                 uncertaintyMicroseconds: roundTrip / 2 + 500_000, measuredAt: receivedAt)
    }

    /// Combines the current estimate with a new sample: the more precise one wins, but an estimate
    /// older than `maximumAge` is replaced (clocks drift, devices sleep, users change time zones).
    public func merged(with sample: ServerClockOffset, maximumAgeMicroseconds: Int64 = 3_600_000_000) -> ServerClockOffset {
        let stale = sample.measuredAt.microsecondsSinceEpoch - measuredAt.microsecondsSinceEpoch > maximumAgeMicroseconds
        return stale || sample.uncertaintyMicroseconds <= uncertaintyMicroseconds ? sample : self
    }

    /// A device-clock instant expressed on the server's clock.
    public func serverTime(forDeviceTime date: WireDate) -> WireDate {
        date.adding(microseconds: offsetMicroseconds)
    }
}
