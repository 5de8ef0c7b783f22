import Hummingbird
import Logging
import ServiceLifecycle

/// A test server's run on a loopback port: its service group, the task running it, and the bound port.
struct LoopbackRun: Sendable {
    let group: ServiceGroup
    let task: Task<Void, any Error>
    let port: Int

    /// Builds an application with `make` (which reports its bound port through the callback it is
    /// given), runs it in a service group of its own and returns once it listens.
    static func start<App: ApplicationProtocol>(
        label: String, _ make: (@escaping @Sendable (Int) async -> Void) async throws -> App
    ) async throws -> LoopbackRun {
        let (stream, continuation) = AsyncStream<Int>.makeStream()
        let app = try await make { port in
            continuation.yield(port)
            continuation.finish()
        }
        let group = ServiceGroup(configuration: .init(services: [app], gracefulShutdownSignals: [], logger: Logger(label: label)))
        let task = Task { try await group.run() }
        var port = 0
        for await bound in stream {
            port = bound
            break
        }
        return LoopbackRun(group: group, task: task, port: port)
    }

    /// A server on a free loopback port answering with `router`.
    static func start(router: Router<BasicRequestContext>, label: String) async throws -> LoopbackRun {
        try await start(label: label) { onRunning in
            Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                        onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? 0) }, logger: Logger(label: label))
        }
    }

    /// Shuts the server down gracefully and waits until it no longer listens.
    func stop() async {
        await group.triggerGracefulShutdown()
        _ = try? await task.value
    }
}
