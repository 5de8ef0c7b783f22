/// How a server call failed, as far as the offline decision needs to know.
public enum CallFailure: Sendable, Equatable {
    /// The server answered with this HTTP status.
    case status(Int)
    /// No answer in time.
    case timeout
    /// Nobody listening (connection refused), or the host could not be resolved/reached.
    case unreachable
    /// The connection broke before a complete answer.
    case connectionLost
    /// TLS could not be established (the handshake broke or timed out); says nothing about the certificate.
    case tls
    /// The server's certificate failed verification (unknown issuer, self-signed, expired, not yet
    /// valid, or issued for another name): nothing was sent. Not "offline": the server may be right
    /// there, but this device cannot tell it from an impostor.
    case certificate
    /// The answer was not what the protocol says (an HTML error page from a proxy, say).
    case malformedResponse
}

/// What to do with a failed call.
public enum FailureClass: Sendable, Equatable {
    /// The server understood and refused: report it to the caller; nothing is queued (seed 001 §16.1).
    case refused
    /// The server could not be reached or could not answer: save locally and queue.
    case offline
    /// The server's certificate is not trusted: nothing was sent. Calls that need the server fail with
    /// the certificate problem; saves are kept locally and queued as when offline, with the problem
    /// named, and the queue waits until the certificate is trusted (a CA file) or fixed on the server.
    case untrusted
}

public enum FailureClassification {
    /// 4xx → refused (400 validation, 401 after the one refresh, 403, 404, 409, 413…), except 408 and 429,
    /// which say "not now" rather than "no". Everything else — 5xx, proxy 502/503/504, timeouts,
    /// refused or reset connections, broken TLS handshakes, unparseable answers — means offline. A
    /// certificate that failed verification is its own class (``FailureClass/untrusted``).
    public static func classify(_ failure: CallFailure) -> FailureClass {
        switch failure {
        case .status(let code):
            if code == 408 || code == 429 { return .offline }
            return (400..<500).contains(code) ? .refused : .offline
        case .timeout, .unreachable, .connectionLost, .tls, .malformedResponse:
            return .offline
        case .certificate:
            return .untrusted
        }
    }

    /// Whether the server may have done the work although no answer arrived: the request may have been
    /// delivered (a timeout, a broken connection, any answer at all) unless no connection was made.
    public static func mayHaveReachedServer(_ failure: CallFailure) -> Bool {
        switch failure {
        case .status, .timeout, .connectionLost, .malformedResponse: true
        case .unreachable, .tls, .certificate: false
        }
    }
}
