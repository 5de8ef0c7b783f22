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

    public init() {}

    static var requests: MetricNameDescriptor { MetricNameDescriptor(namespace: "vaultsync", subsystem: "http", metricName: "requests", unitName: "total",
                                               helpText: "HTTP requests answered, by method, route pattern and status.") }
    static var latency: MetricNameDescriptor { MetricNameDescriptor(namespace: "vaultsync", subsystem: "http", metricName: "request_duration", unitName: "seconds",
                                              helpText: "Time to answer, by method and route pattern.") }

    func requestFinished(method: String, route: String, status: Int, duration: Duration) {
        registry.makeCounter(descriptor: Self.requests, labels: [("method", method), ("route", route), ("status", String(status))]).increment()
        registry.makeDurationHistogram(descriptor: Self.latency, labels: [("method", method), ("route", route)], buckets: Self.latencyBuckets)
            .record(duration)
    }

    /// The text Prometheus scrapes.
    public func exposition() -> [UInt8] { registry.emitToBuffer() }
}

/// Times and counts every request for ``ServerMetrics`` (outside the error middleware: an error's status is the one counted).
struct MetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: ServerMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
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
