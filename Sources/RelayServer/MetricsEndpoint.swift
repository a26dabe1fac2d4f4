import HTTPServer
import RelayCore

/// The operator's listener (`metrics_listen`): `GET /metrics`, `/healthz` and `/readyz`, and
/// nothing else. Kept off the public port so that scrapes need no exposure to the internet.
final class MetricsEndpoint: HTTPHandler {
    private let service: RelayHTTPHandler
    private let extraCounters: @Sendable () -> [CounterSample]

    init(
        service: RelayHTTPHandler,
        extraCounters: @escaping @Sendable () -> [CounterSample]
    ) {
        self.service = service
        self.extraCounters = extraCounters
    }

    func head(_ head: HTTPRequestHead) -> HeadDecision {
        guard head.method == "GET" || head.method == "HEAD" else {
            return .respond(RelayError.methodNotAllowed.response(allow: Self.allow))
        }
        switch head.path {
        case "/metrics":
            let text =
                service.metrics.render(inFlight: service.inFlight, counters: extraCounters())
                + (service.limitsStore?.renderMetrics() ?? "")
                + "# HELP duo_relay_ready 1 while /readyz would answer 200 (APNs environments and limits usable).\n"
                + "# TYPE duo_relay_ready gauge\nduo_relay_ready \(service.readinessState().ready ? 1 : 0)\n"
            return .respond(
                HTTPResponse(
                    status: 200, headers: [("content-type", "text/plain; version=0.0.4; charset=utf-8")],
                    body: Array(text.utf8)))
        case "/healthz":
            return .respond(HTTPResponse.json(200, #"{"status":"ok"}"#))
        case "/readyz":
            return .respond(service.readiness(worker: head.worker))
        default:
            return .respond(RelayError.notFound.response(allow: Self.allow))
        }
    }

    func request(_ head: HTTPRequestHead, body: [UInt8], responder: HTTPResponder) {
        responder.respond(RelayError.notFound.response(allow: Self.allow))
    }

    func bodyTooLarge(_ head: HTTPRequestHead) -> HTTPResponse {
        RelayError.tooLarge.response(allow: Self.allow)
    }

    /// Every path here takes these methods.
    private static let allow = "GET, HEAD"
}
