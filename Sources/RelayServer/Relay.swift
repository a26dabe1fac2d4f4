import Dispatch
import Foundation
import HTTPServer
import RelayCore
import Synchronization

/// A running relay: its HTTP server, its APNs gateways, and its lifecycle (DESIGN.md, "Lifecycle").
public final class Relay: Sendable {
    private let service: RelayService
    private let server: HTTPServer
    private let stopped = DispatchSemaphore(value: 0)
    private let stopping = Atomic<Bool>(false)

    /// Starts serving at once.
    public init(setup: RelaySetup, clock: any RelayClock = SystemClock()) throws {
        let config = setup.configuration
        var gateways: [APNsEnvironment: APNsGateway] = [:]
        for environment in setup.secrets.environments {
            gateways[environment] = try APNsGateway(
                environment: environment, configuration: config,
                credentials: setup.secrets.credentials(environment)!, clock: clock)
        }
        service = RelayService(
            state: RelayState(configuration: config, secrets: setup.secrets, gateways: gateways), clock: clock)
        var serverConfig = HTTPServerConfiguration(host: config.listen.host, port: config.listen.port)
        serverConfig.threads = config.server.threads
        serverConfig.connectionLimit = config.server.maxConnections
        serverConfig.perAddressConnectionLimit = config.server.maxConnectionsPerAddress
        serverConfig.connectionTimeoutSeconds = config.server.connectionTimeoutSeconds
        server = try HTTPServer(configuration: serverConfig, handler: service)
    }

    /// The bound port (useful when the configuration asked for port 0).
    public var port: UInt16 { server.port }

    /// Stops on SIGTERM or SIGINT: stops accepting, lets pushes finish within the grace period,
    /// answers the rest with 503, and returns. Blocks the calling thread until then.
    public func runUntilSignalled() {
        let sources = [SIGTERM, SIGINT].map { number -> any DispatchSourceSignal in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { [self] in stop() }
            source.resume()
            return source
        }
        stopped.wait()
        sources.forEach { $0.cancel() }
    }

    /// Graceful stop; safe to call more than once and from any thread.
    public func stop() {
        guard !stopping.exchange(true, ordering: .acquiringAndReleasing) else { return }
        server.quiesce()
        let grace = DispatchTime.now() + .seconds(service.current.configuration.server.shutdownGraceSeconds)
        while DispatchTime.now() < grace && (service.pending.count > 0 || server.pendingResponses > 0) {
            usleep(10_000)
        }
        service.abandonPending()
        // Let the last answers leave before the connections close.
        let flush = DispatchTime.now() + .milliseconds(500)
        while DispatchTime.now() < flush && server.pendingResponses > 0 { usleep(5_000) }
        server.stop()
        for gateway in service.current.gateways.values { gateway.shutdown() }
        stopped.signal()
    }

    /// Requests answered by outcome, for the end-of-run line.
    public var counts: [String: Int] { service.metrics.outcomes }
}
