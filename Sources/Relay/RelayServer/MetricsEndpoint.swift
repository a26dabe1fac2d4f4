import HTTP1
import HTTPServer
import RelayCore

/// The operator's listener (`metrics_listen`): `GET /metrics`, `/healthz` and `/readyz`, and
/// nothing else. Kept off the public port so that scrapes need no exposure to the internet.
final class MetricsEndpoint: HTTPHandler {
    private let service: RelayHTTPHandler
    private let extraCounters: @Sendable () -> [CounterSample]
    /// Families rendered whole elsewhere (the TLS front's), appended as they are.
    private let extraText: @Sendable () -> String

    init(
        service: RelayHTTPHandler,
        extraCounters: @escaping @Sendable () -> [CounterSample],
        extraText: @escaping @Sendable () -> String = { "" }
    ) {
        self.service = service
        self.extraCounters = extraCounters
        self.extraText = extraText
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
                + Self.readiness(service.readinessState()) + extraText()
            return .respond(
                HTTP1Response(
                    status: 200,
                    headers: [
                        HTTP1Headers.Field(name: "content-type", value: "text/plain; version=0.0.4; charset=utf-8")
                    ],
                    body: Array(text.utf8)))
        case "/healthz":
            return .respond(HTTP1Response.json(200, #"{"status":"ok"}"#))
        case "/readyz":
            return .respond(service.readiness(worker: head.worker))
        default:
            return .respond(RelayError.notFound.response(allow: Self.allow))
        }
    }

    func request(_ head: HTTPRequestHead, body: [UInt8], responder: HTTPResponder) {
        responder.respond(RelayError.notFound.response(allow: Self.allow))
    }

    func bodyTooLarge(_ head: HTTPRequestHead) -> HTTP1Response {
        RelayError.tooLarge.response(allow: Self.allow)
    }

    /// `duo_relay_ready` (what `/readyz` would answer) and each APNs environment's state, which `/readyz` reports
    /// without letting it decide: an alert on the state pages for APNs where readiness must not.
    static func readiness(_ readiness: RelayHTTPHandler.Readiness) -> String {
        var out =
            "# HELP duo_relay_ready 1 while /readyz would answer 200: this instance listens, has a configuration in"
            + " force, is not draining and its limits are not unavailable (APNs' state does not count).\n"
            + "# TYPE duo_relay_ready gauge\nduo_relay_ready \(readiness.ready ? 1 : 0)\n"
            + "# HELP duo_relay_apns_environment_state 1 for each configured APNs environment's state now, as /readyz"
            + " \"environments\" (idle: nothing sent yet; failing: the last exchange failed).\n"
            + "# TYPE duo_relay_apns_environment_state gauge\n"
        for (environment, health) in readiness.environments {
            for state in APNsGateway.Health.allCases {
                out +=
                    #"duo_relay_apns_environment_state{environment="\#(environment.name)",state="\#(state.rawValue)"} "#
                    + (state == health ? "1" : "0") + "\n"
            }
        }
        return out
    }

    /// Every path here takes these methods.
    private static let allow = "GET, HEAD"
}
