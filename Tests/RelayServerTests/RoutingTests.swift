import RelayCore
import Testing

@testable import RelayServer

/// Which answer each path and method gets, straight from the handler.
@Suite struct RoutingTests {
    let fixture: RelayHandlerFixture

    init() throws {
        fixture = try RelayHandlerFixture()
    }

    @Test func aBodyOverItsEndpointsLimitIsAnswered413NamingThatLimit() {
        for (path, limit) in [("/v1/push", PushRequest.bodyLimit), ("/v1/grant", GrantRequest.bodyLimit)] {
            let answer = fixture.send("POST", path, body: [UInt8](repeating: 0x20, count: limit + 1))
            #expect(answer.status == 413)
            #expect(answer.error == "too_large")
            #expect(answer.text.contains("larger than \(limit) bytes, the limit of \(path)"))
        }
    }

    @Test func methodsAndPaths() {
        let wrongMethod = fixture.send("GET", "/v1/grant")
        #expect(wrongMethod.status == 405)
        #expect(wrongMethod.header("allow") == "POST")
        let health = fixture.send("POST", "/healthz")
        #expect(health.status == 405)
        #expect(health.header("allow") == "GET, HEAD")
        #expect(fixture.send("POST", "/v1/other").status == 404)
        #expect(fixture.send("GET", "/").status == 404)
        // No APNs environment: alive, not ready.
        #expect(fixture.send("GET", "/healthz").status == 200)
        let ready = fixture.send("GET", "/readyz")
        #expect(ready.status == 503)
        #expect(ready.text.contains(#""status":"not_ready""#))
    }

    @Test func aRouteSurvivesItsNumber() {
        for path in ["/v1/grant", "/v1/push", "/healthz", "/readyz", "/v1/other", "/v1/", "/", "", "/v2/push"] {
            let route = Route(path: path)
            #expect(Route(number: route.number) == route, "\(path)")
        }
        // Numbers no route has are no endpoint.
        #expect(Route(number: 99).endpoint == .other)
        #expect(Route(number: -3).endpoint == .other)
    }
}
