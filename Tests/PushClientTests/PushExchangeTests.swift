import DuoRelayClient
import Foundation
import PushClient
import Testing

/// `duo-relay push`'s exchange as a machine: where a failure happened decides whether the relay may have the push.
@Suite struct PushExchangeTests {
    static func feed(_ exchange: inout PushExchange, _ text: String) -> PushExchange.Result? {
        Array(text.utf8).withUnsafeBytes { exchange.read($0) }
    }

    @Test(
        "a failure before the connection is made never reached the relay",
        arguments: [
            (PushExchange.ConnectionFailure.resolve("no such name"), PushExchange.Failure.noConnection("no such name")),
            (.connect("connection refused"), .noConnection("connection refused")),
            (.lost("reset"), .noConnection("reset")),
            (
                .certificate("unable to get local issuer certificate"),
                .certificateNotTrusted("unable to get local issuer certificate")
            ),
            (.handshake("no application protocol"), .handshake("no application protocol")),
            (.closedByPeer, .handshake("the server closed the connection")),
        ])
    func beforeTheRequest(failure: PushExchange.ConnectionFailure, expected: PushExchange.Failure) {
        var exchange = PushExchange()
        #expect(exchange.failed(failure) == .failed(expected))
        #expect(!expected.pushMayHaveArrived)
        #expect(exchange.stage == .finished)
        // Over: nothing after the end changes it.
        #expect(exchange.deadlinePassed() == nil)
        #expect(exchange.failed(.closedByPeer) == nil)
    }

    @Test("the deadline before and after the request was written")
    func deadlines() {
        var connecting = PushExchange()
        #expect(connecting.deadlinePassed() == .failed(.timedOutConnecting))
        #expect(!PushExchange.Failure.timedOutConnecting.pushMayHaveArrived)

        var waiting = PushExchange()
        waiting.connected()
        #expect(waiting.stage == .awaitingAnswer)
        #expect(Self.feed(&waiting, "HTTP/1.1 200 OK\r\n") == nil)
        #expect(waiting.deadlinePassed() == .failed(.timedOutAwaitingAnswer))
        #expect(PushExchange.Failure.timedOutAwaitingAnswer.pushMayHaveArrived)
        #expect(Self.feed(&waiting, "Content-Length: 0\r\n\r\n") == nil)
    }

    @Test("bytes before the connection is made are not an answer")
    func bytesBeforeConnected() {
        var exchange = PushExchange()
        #expect(Self.feed(&exchange, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n") == nil)
        #expect(exchange.stage == .connecting)
    }

    @Test("after the request was written: an answer, an answer ended by the close, or a loss the relay may have seen")
    func afterTheRequest() {
        var answered = PushExchange()
        answered.connected()
        #expect(
            Self.feed(&answered, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
                == .answered(RelayAnswer(status: 200, retryAfter: nil, body: Data("{}".utf8))))
        #expect(answered.stage == .finished)

        var closeFramed = PushExchange()
        closeFramed.connected()
        #expect(Self.feed(&closeFramed, "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n\r\n{}") == nil)
        #expect(
            closeFramed.failed(.closedByPeer)
                == .answered(RelayAnswer(status: 503, retryAfter: "1", body: Data("{}".utf8))))

        var closed = PushExchange()
        closed.connected()
        #expect(closed.failed(.closedByPeer) == .failed(.connectionLost("the server closed the connection")))

        var reset = PushExchange()
        reset.connected()
        #expect(reset.failed(.lost("connection reset by peer")) == .failed(.connectionLost("connection reset by peer")))
        #expect(PushExchange.Failure.connectionLost("x").pushMayHaveArrived)

        var garbled = PushExchange()
        garbled.connected()
        #expect(
            Self.feed(&garbled, "SSH-2.0-OpenSSH\r\n\r\n")
                == .failed(.malformedAnswer("the status line does not start with HTTP/1.0 or HTTP/1.1")))
        #expect(PushExchange.Failure.malformedAnswer("x").pushMayHaveArrived)
    }
}

/// The request `push` writes.
@Suite struct PushRequestTests {
    @Test func onePostFramedByItsLengthThenClosed() {
        let body = Array(#"{"grant":"g"}"#.utf8)
        let bytes = PushRequest.bytes(
            path: "/relay/v1/push", authority: "[::1]:8443", userAgent: "duo-relay/1.2.3", body: body)
        #expect(
            String(decoding: bytes, as: UTF8.self)
                == "POST /relay/v1/push HTTP/1.1\r\nHost: [::1]:8443\r\nUser-Agent: duo-relay/1.2.3\r\n"
                + "Content-Type: application/json\r\nContent-Length: 13\r\nConnection: close\r\n\r\n"
                + #"{"grant":"g"}"#)
    }
}
