import APNsSimulator
import Foundation
import RelayTestSupport
import Synchronization

/// The project's APNs simulator as a plain HTTP/2 test server (``SimulatorConfiguration/responder``) on
/// 127.0.0.1 with the test certificate. It echoes POST bodies (unless `echo` is false), serves `files` to GET,
/// HEAD and (when not echoing) POST, answers 404 otherwise, and names the connection in `x-connection` (1 for
/// the first accepted). A fault plan (``APNsSimulator/setFaultPlan(_:)``) misbehaves on chosen requests; the
/// server logs what it did with each request (``count(_:_:)``).
final class TestHTTP2Server: Sendable {
    /// What the server did with a request.
    enum Event: Sendable, Equatable {
        /// Answered by the responder.
        case processed
        /// Taken and held, or taken as the connection was broken: never answered.
        case received
        /// Refused unprocessed with RST_STREAM (REFUSED_STREAM).
        case refused
    }

    /// The `server` header of every answer.
    static let name = "duo-relay-test-server"

    let simulator: APNsSimulator
    private let log = Log()
    var port: UInt16 { simulator.port }
    var origin: String { "https://127.0.0.1:\(port)" }

    init(
        maxConcurrentStreams: UInt32 = 1000, files: [String: String] = [:], echo: Bool = true,
        key: String = TestPKI.shared.serverKey, certificate: String = TestPKI.shared.serverCertificate,
        faults: (@Sendable (SimulatorFaultContext) -> SimulatorFault?)? = nil
    ) throws {
        let log = self.log
        var configuration = SimulatorConfiguration(
            certificatePEM: try String(contentsOfFile: certificate, encoding: .utf8),
            privateKeyPEM: try String(contentsOfFile: key, encoding: .utf8), teamID: "", keys: [:], topics: [],
            maxConcurrentStreams: maxConcurrentStreams)
        configuration.responder = { request in
            log.record(.processed, request.path)
            var headers = [("server", Self.name), ("x-connection", String(request.connection))]
            if echo && request.method == "POST" {
                return (status: 200, headers: headers, body: request.body)
            }
            guard let file = files[String(request.path.dropFirst())] else {
                return (status: 404, headers: headers, body: [])
            }
            let body = Array(file.utf8)
            headers.append(("content-length", String(body.count)))
            return (status: 200, headers: headers, body: request.method == "HEAD" ? [] : body)
        }
        simulator = try APNsSimulator(configuration: configuration)
        if let faults {
            simulator.setFaultPlan { context in
                let fault = faults(context)
                switch fault {
                case nil: break
                case .resetStream: log.record(.refused, context.path)
                default: log.record(.received, context.path)
                }
                return fault
            }
        }
    }

    deinit { simulator.stop() }

    /// How often the server logged `event` for `path`. Exact once the client has its answer (or its error):
    /// the server logs before it answers, refuses or breaks the connection.
    func count(_ event: Event, _ path: String) -> Int {
        log.entries.withLock { $0.filter { $0.event == event && $0.path == path }.count }
    }

    /// What the server did, shared with its closures.
    private final class Log: Sendable {
        let entries = Mutex<[(event: Event, path: String)]>([])

        func record(_ event: Event, _ path: String) { entries.withLock { $0.append((event, path)) } }
    }

    /// TCP connections established to the server now, counted on the server's side.
    var establishedConnections: Int { LoopbackSocket.establishedCount(toLocalPort: port) }
}

/// A loopback port that accepts connections in the kernel and never answers (a TLS handshake never finishes).
typealias SilentServer = SilentListener

extension SilentListener {
    var origin: String { "https://127.0.0.1:\(port)" }
}
