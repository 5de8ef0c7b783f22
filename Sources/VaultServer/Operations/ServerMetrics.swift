import Foundation
import Hummingbird
import Prometheus

/// What `GET /metrics` reports, in Prometheus' text format (docs/OPERATIONS.md, "Watching it"): every
/// request by method, route (the route's pattern, never the path with its ids) and status, with its
/// latency. Each server has a registry of its own (not the process-wide metrics system), so servers in one
/// process (the tests) count apart.
public final class ServerMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    static let latencyBuckets: [Duration] = [.milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25),
                                              .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1),
                                              .seconds(2), .seconds(5), .seconds(10)]

    /// Requests being answered now (a request counts from its head until its answer is handed on).
    let inFlight: Gauge
    /// Each database call's wait for a connection (made once: it is recorded on every call).
    let databaseWait: DurationHistogram

    public init() {
        inFlight = registry.makeGauge(descriptor: Self.requestsInFlight)
        databaseWait = registry.makeDurationHistogram(descriptor: Self.databaseWaitName, buckets: Self.waitBuckets)
    }

    static var requestsInFlight: MetricNameDescriptor { MetricNameDescriptor(namespace: "vaultsync", subsystem: "http", metricName: "requests_in_flight", unitName: "",
                                                       helpText: "Requests being answered on this node now, this scrape included.") }

    static var requests: MetricNameDescriptor { MetricNameDescriptor(namespace: "vaultsync", subsystem: "http", metricName: "requests", unitName: "total",
                                               helpText: "HTTP requests answered, by method, route pattern and status.") }
    static var latency: MetricNameDescriptor { MetricNameDescriptor(namespace: "vaultsync", subsystem: "http", metricName: "request_duration", unitName: "seconds",
                                              helpText: "Time to answer, by method and route pattern.") }

    static var hubConnections: MetricNameDescriptor { MetricNameDescriptor(namespace: "vaultsync", subsystem: "hub", metricName: "connections", unitName: "",
                                                     helpText: "Notification-hub connections open on this node.") }
    static var refusedLogins: MetricNameDescriptor { MetricNameDescriptor(namespace: "vaultsync", subsystem: "logins", metricName: "refused", unitName: "total",
                                                    helpText: "Logins refused for a wrong password or API key, or rate limits and lockouts, by reason.") }
    static var databaseConnections: MetricNameDescriptor { MetricNameDescriptor(namespace: "vaultsync", subsystem: "database", metricName: "connections", unitName: "",
                                                          helpText: "Database connections on this node: the most calls can hold (max), held now (in_use), calls waiting for one (waiting).") }
    static var databaseWaitName: MetricNameDescriptor { MetricNameDescriptor(namespace: "vaultsync", subsystem: "database", metricName: "wait", unitName: "seconds",
                                                   helpText: "Time a call waited for a database connection on this node.") }
    static let waitBuckets: [Duration] = [.microseconds(100), .milliseconds(1), .milliseconds(5), .milliseconds(25), .milliseconds(100),
                                          .milliseconds(500), .seconds(2), .seconds(10)]

    /// A call's wait for a database connection.
    func databaseWaited(_ duration: Duration) {
        databaseWait.record(duration)
    }

    static var loginsRefusedReasons: [String] { ["wrong_password", "wrong_api_key", "wrong_two_step_code", "limited"] }

    /// A refused login; `reason` is one of ``loginsRefusedReasons``.
    func loginRefused(_ reason: String) {
        registry.makeCounter(descriptor: Self.refusedLogins, labels: [("reason", reason)]).increment()
    }

    func requestFinished(method: String, route: String, status: Int, duration: Duration) {
        registry.makeCounter(descriptor: Self.requests, labels: [("method", method), ("route", route), ("status", String(status))]).increment()
        registry.makeDurationHistogram(descriptor: Self.latency, labels: [("method", method), ("route", route)], buckets: Self.latencyBuckets)
            .record(duration)
    }

    /// The text Prometheus scrapes, with the gauges sampled now.
    func exposition(hubConnections: Int, database: DatabaseUse.Sample) -> [UInt8] {
        registry.makeGauge(descriptor: Self.hubConnections).set(Int64(hubConnections))
        for (state, value) in [("max", database.size), ("in_use", database.inUse), ("waiting", database.waiting)] {
            registry.makeGauge(descriptor: Self.databaseConnections, labels: [("state", state)]).set(Int64(value))
        }
        // Every reason from the start (at 0), so that a rate can be computed before the first refusal.
        for reason in Self.loginsRefusedReasons { registry.makeCounter(descriptor: Self.refusedLogins, labels: [("reason", reason)]).increment(by: Int64(0)) }
        return registry.emitToBuffer()
    }
}

/// Times and counts every request for ``ServerMetrics`` (outside the error middleware: an error's status is the one counted).
struct MetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: ServerMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        metrics.inFlight.increment()
        defer { metrics.inFlight.decrement() }
        do {
            let response = try await next(request, context)
            metrics.requestFinished(method: request.method.rawValue, route: context.endpointPath ?? "unmatched",
                                    status: response.status.code, duration: ContinuousClock.now - started)
            return response
        } catch {
            let status = (error as? any HTTPResponseError)?.status.code ?? 500
            metrics.requestFinished(method: request.method.rawValue, route: context.endpointPath ?? "unmatched",
                                    status: status, duration: ContinuousClock.now - started)
            throw error
        }
    }
}
