import MonotonicTime
import RelayTestSupport
import Testing

@testable import OutboundConnections

/// The stream's decisions, driven with scripted inputs and a test clock: no socket, no TLS library.
@Suite struct ClientStreamMachineTests {
    typealias Machine = ClientStreamMachine
    static let proxy = Machine.Proxy(host: "127.0.0.1", port: 3128, authorization: "Basic dTpw")
    static let second: UInt64 = 1_000_000_000
    /// The test clock's origin.
    static let t0: Instant = 0

    /// The failure a list of actions reports, if any.
    private func failure(in actions: [Machine.Action]) -> ClientStreamFailure? {
        for action in actions { if case .fail(let failure) = action { return failure } }
        return nil
    }

    private func reason(in actions: [Machine.Action]) -> String { failure(in: actions)?.reason ?? "" }

    /// A machine through the proxy, its TCP connection to the proxy up and `CONNECT` sent.
    private func tunnelling(tls: Bool = true, deadline: Instant? = t0 + 5 * second) -> Machine {
        var machine = Machine(
            host: "api.push.apple.com", port: 443, usesTLS: tls, proxy: Self.proxy, deadline: deadline)
        _ = machine.start(now: 0)
        _ = machine.resolved(addressCount: 1)
        _ = machine.connected()
        return machine
    }

    // MARK: Direct

    @Test func aDirectTLSStreamResolvesConnectsHandshakesAndOpens() {
        var machine = Machine(host: "api.push.apple.com", port: 443, usesTLS: true)
        #expect(machine.start(now: 0) == [.resolve(host: "api.push.apple.com", port: 443)])
        #expect(machine.phase == .resolving)
        #expect(machine.writing == .keep)
        #expect(machine.resolved(addressCount: 2) == [.connect(address: 0)])
        #expect(machine.connected() == [.startReading, .startTLS(leftover: [])])
        #expect(machine.phase == .handshaking)
        #expect(machine.handshake(.inProgress) == [])
        #expect(machine.handshake(.done) == [.cancelTimer, .open])
        #expect(machine.isOpen && machine.writing == .send)
    }

    @Test func eachAddressIsTriedInTurnThenTheLastReasonIsTheFailure() {
        var machine = Machine(host: "localhost", port: 443, usesTLS: false)
        _ = machine.start(now: 0)
        #expect(machine.resolved(addressCount: 3) == [.connect(address: 0)])
        #expect(machine.connectionFailed("connection refused") == [.abandonConnection, .connect(address: 1)])
        #expect(machine.connectFailed("network is unreachable") == [.abandonConnection, .connect(address: 2)])
        let last = machine.connectionFailed("connection refused")
        #expect(last.first == .abandonConnection)
        #expect(failure(in: last) == ClientStreamFailure(.connect, ""))
        #expect(reason(in: last) == "connection refused")
        #expect(last.last == .end)
        #expect(machine.phase == .ending)
        #expect(machine.connectionClosed() == [.finish])
        #expect(machine.phase == .closed)
    }

    @Test func noAddressAtAllIsAConnectFailure() {
        var machine = Machine(host: "localhost", port: 443, usesTLS: false)
        _ = machine.start(now: 0)
        let actions = machine.resolved(addressCount: 0)
        #expect(failure(in: actions)?.kind == .connect)
        #expect(reason(in: actions) == "cannot connect")
    }

    @Test func aPlainStreamOpensOnConnect() {
        var machine = Machine(host: "127.0.0.1", port: 6379, usesTLS: false)
        _ = machine.start(now: 0)
        _ = machine.resolved(addressCount: 1)
        #expect(machine.connected() == [.startReading, .cancelTimer, .open])
    }

    @Test func aResolveFailureIsReportedOnceThenTheStreamEnds() {
        var machine = Machine(host: "no such host", port: 443, usesTLS: true)
        _ = machine.start(now: 0)
        let actions = machine.resolveFailed("Name or service not known")
        #expect(actions == [.cancelTimer, .fail(ClientStreamFailure(.resolve, "")), .end])
        #expect(reason(in: actions) == "Name or service not known")
        // Whatever comes after the end is not a second failure.
        #expect(machine.connectionFailed("late") == [])
        #expect(machine.reachedEnd() == [])
        #expect(machine.reset() == [])
    }

    @Test(arguments: [
        (Machine.HandshakeStep.certificateRejected("certificate verify failed"), ClientStreamFailure.Kind.certificate),
        (.failed("no application protocol"), .handshake),
    ])
    func aHandshakeThatFailsSaysHow(step: Machine.HandshakeStep, kind: ClientStreamFailure.Kind) {
        var machine = Machine(host: "api.push.apple.com", port: 443, usesTLS: true)
        _ = machine.start(now: 0)
        _ = machine.resolved(addressCount: 1)
        _ = machine.connected()
        #expect(failure(in: machine.handshake(step))?.kind == kind)
    }

    @Test func aPeerThatClosesDuringTheHandshakeIsAHandshakeFailure() {
        var machine = Machine(host: "api.push.apple.com", port: 443, usesTLS: true)
        _ = machine.start(now: 0)
        _ = machine.resolved(addressCount: 1)
        _ = machine.connected()
        #expect(failure(in: machine.reachedEnd())?.kind == .handshake)
    }

    // MARK: Open and ending

    private func open() -> Machine {
        var machine = Machine(host: "api.push.apple.com", port: 443, usesTLS: true)
        _ = machine.start(now: 0)
        _ = machine.resolved(addressCount: 1)
        _ = machine.connected()
        _ = machine.handshake(.done)
        return machine
    }

    @Test func aBrokenPipeWhileReadingWaitsForTheEndOfInput() {
        var machine = open()
        #expect(machine.connectionFailed("broken pipe", brokenPipeWhileReading: true) == [])
        #expect(machine.writing == .drop)
        #expect(machine.isOpen)
        let end = machine.reachedEnd()
        #expect(failure(in: end)?.kind == .reset)
        #expect(reason(in: end) == "broken pipe")
    }

    @Test func theEndOfInputOnceOpenIsClosedByPeer() {
        var machine = open()
        #expect(failure(in: machine.reachedEnd())?.kind == .closedByPeer)
    }

    @Test func tlsFailuresOnceOpen() {
        var notify = open()
        #expect(failure(in: notify.tlsFailed("", closeNotify: true))?.kind == .closedByPeer)
        var record = open()
        #expect(failure(in: record.tlsFailed("bad record mac"))?.kind == .tls)
    }

    @Test func closeIsGracefulOnceOpenAndAtOnceBefore() {
        var opened = open()
        #expect(opened.close() == [.closeGracefully])
        #expect(opened.close() == [])
        #expect(opened.connectionClosed() == [.finish])
        var connecting = Machine(host: "x", port: 1, usesTLS: false)
        _ = connecting.start(now: 0)
        #expect(connecting.close() == [.cancelTimer, .end])
        #expect(connecting.resolved(addressCount: 1) == [])
        #expect(connecting.connectionClosed() == [.finish])
    }

    @Test func aConnectionClosedUnderAnOpenStreamIsAResetThenTheClose() {
        var machine = open()
        let actions = machine.connectionClosed()
        #expect(actions == [.cancelTimer, .fail(ClientStreamFailure(.reset, "")), .finish])
        #expect(machine.phase == .closed)
    }

    // MARK: Through a proxy

    @Test func throughAProxyItResolvesTheProxyAndAsksForATunnelByName() {
        var machine = Machine(
            host: "api.push.apple.com", port: 443, usesTLS: true, proxy: Self.proxy, deadline: Self.t0 + 5 * Self.second
        )
        #expect(
            machine.start(now: 0) == [
                .resolve(host: "127.0.0.1", port: 3128), .armTimer(at: Self.t0 + 5 * Self.second),
            ])
        #expect(machine.resolved(addressCount: 1) == [.connect(address: 0)])
        let request =
            "CONNECT api.push.apple.com:443 HTTP/1.1\r\nHost: api.push.apple.com:443\r\n"
            + "Proxy-Authorization: Basic dTpw\r\n\r\n"
        #expect(machine.connected() == [.startReading, .writePlain(Array(request.utf8))])
        #expect(machine.phase == .tunnelling)
        #expect(machine.writing == .keep)
        #expect(machine.tunnelRead(Array("HTTP/1.1 200 Connection est".utf8)) == [])
        #expect(machine.tunnelRead(Array("ablished\r\n\r\n".utf8)) == [.startTLS(leftover: [])])
        #expect(machine.phase == .handshaking)
        #expect(machine.handshake(.done) == [.cancelTimer, .open])
    }

    @Test func withoutCredentialsNoAuthorizationIsSentAndAnIPv6TargetIsBracketed() {
        var machine = Machine(
            host: "::1", port: 2197, usesTLS: true, proxy: Machine.Proxy(host: "proxy.internal", port: 3128))
        _ = machine.start(now: 0)
        _ = machine.resolved(addressCount: 1)
        #expect(
            machine.connected() == [
                .startReading, .writePlain(Array("CONNECT [::1]:2197 HTTP/1.1\r\nHost: [::1]:2197\r\n\r\n".utf8)),
            ])
    }

    @Test func theServersFirstBytesAfterTheAnswerGoToTLS() {
        var machine = tunnelling()
        let record: [UInt8] = [0x16, 0x03, 0x03, 0x00, 0x02, 0x0D, 0x0A]
        let actions = machine.tunnelRead(Array("HTTP/1.0 200 Connection established\r\n\r\n".utf8) + record)
        #expect(actions == [.startTLS(leftover: record)])
    }

    @Test func withoutTLSTheTunnelOpensAndHandsOnTheServersBytes() {
        var machine = tunnelling(tls: false)
        let actions = machine.tunnelRead(Array("HTTP/1.1 200 OK\r\n\r\n+PONG\r\n".utf8))
        #expect(actions == [.cancelTimer, .open, .deliver(Array("+PONG\r\n".utf8))])
    }

    @Test(arguments: [
        (
            "HTTP/1.1 407 Proxy Authentication Required\r\n\r\n",
            "proxy 127.0.0.1:3128 refused the tunnel: 407 Proxy Authentication Required"
        ),
        ("HTTP/1.0 401 Unauthorized\r\n\r\n", "proxy 127.0.0.1:3128 refused the tunnel: 401 Unauthorized"),
        ("HTTP/1.1 403 Forbidden\r\n\r\n", "proxy 127.0.0.1:3128 refused the tunnel: 403 Forbidden"),
    ])
    func aRefusalNamesTheProxyAndItsStatusLine(answer: String, words: String) {
        var machine = tunnelling()
        let actions = machine.tunnelRead(Array(answer.utf8))
        #expect(failure(in: actions) == ClientStreamFailure(.connect, "", tunnel: .refused))
        #expect(reason(in: actions) == words)
        #expect(!reason(in: actions).contains("dTpw"))
        #expect(actions.last == .end)
    }

    @Test func garbageFromTheProxyIsMalformed() {
        var machine = tunnelling()
        let actions = machine.tunnelRead(Array("\u{15}\u{03}\u{03}\u{00}\u{02}".utf8))
        #expect(failure(in: actions) == ClientStreamFailure(.connect, "", tunnel: .malformed))
        #expect(reason(in: actions).hasPrefix("proxy 127.0.0.1:3128 answered CONNECT with no valid HTTP answer"))
    }

    @Test func aProxyThatClosesOrBreaksBeforeAnsweringIsClosed() {
        var closing = tunnelling()
        let closed = closing.reachedEnd()
        #expect(failure(in: closed) == ClientStreamFailure(.connect, "", tunnel: .closed))
        #expect(reason(in: closed) == "proxy 127.0.0.1:3128 closed the connection before opening the tunnel")
        var breaking = tunnelling()
        #expect(failure(in: breaking.connectionFailed("connection reset by peer"))?.tunnel == .closed)
    }

    @Test func anUnreachableProxyIsNamed() {
        var refusing = Machine(host: "api.push.apple.com", port: 443, usesTLS: true, proxy: Self.proxy)
        _ = refusing.start(now: 0)
        _ = refusing.resolved(addressCount: 1)
        let refused = refusing.connectionFailed("connection refused")
        #expect(failure(in: refused) == ClientStreamFailure(.connect, "", tunnel: .unreachable))
        #expect(reason(in: refused) == "proxy 127.0.0.1:3128 cannot be reached: connection refused")
        var unnamed = Machine(
            host: "api.push.apple.com", port: 443, usesTLS: true,
            proxy: Machine.Proxy(host: "proxy.invalid", port: 8080))
        _ = unnamed.start(now: 0)
        let unresolved = unnamed.resolveFailed("Name or service not known")
        #expect(failure(in: unresolved) == ClientStreamFailure(.resolve, "", tunnel: .unreachable))
        #expect(reason(in: unresolved) == "proxy proxy.invalid:8080 cannot be resolved: Name or service not known")
    }

    // MARK: The set-up's deadline (a test clock)

    @Test func aProxyThatDoesNotAnswerInTimeIsATimeout() {
        var machine = tunnelling(deadline: Self.t0 + 5 * Self.second)
        #expect(machine.tunnelRead(Array("HTTP/1.1 2".utf8)) == [])
        // An early wake-up re-arms the timer.
        #expect(machine.timerFired(now: Self.t0 + 4 * Self.second) == [.armTimer(at: Self.t0 + 5 * Self.second)])
        let late = machine.timerFired(now: Self.t0 + 5 * Self.second)
        #expect(failure(in: late) == ClientStreamFailure(.connect, "", tunnel: .timeout))
        #expect(reason(in: late) == "proxy 127.0.0.1:3128 did not answer CONNECT in time")
    }

    @Test func theDeadlineCoversEveryStepOfTheSetUpAndNothingOnceOpen() {
        var connecting = Machine(
            host: "api.push.apple.com", port: 443, usesTLS: true, proxy: Self.proxy, deadline: Self.t0 + Self.second)
        _ = connecting.start(now: 0)
        _ = connecting.resolved(addressCount: 1)
        #expect(failure(in: connecting.timerFired(now: Self.t0 + Self.second))?.tunnel == .unreachable)

        var handshaking = tunnelling(deadline: Self.t0 + Self.second)
        _ = handshaking.tunnelRead(Array("HTTP/1.1 200 OK\r\n\r\n".utf8))
        let late = handshaking.timerFired(now: Self.t0 + 2 * Self.second)
        #expect(failure(in: late) == ClientStreamFailure(.handshake, ""))

        var direct = Machine(host: "api.push.apple.com", port: 443, usesTLS: true, deadline: Self.t0 + Self.second)
        _ = direct.start(now: 0)
        #expect(failure(in: direct.timerFired(now: Self.t0 + Self.second)) == ClientStreamFailure(.connect, ""))

        var opened = tunnelling(deadline: Self.t0 + Self.second)
        _ = opened.tunnelRead(Array("HTTP/1.1 200 OK\r\n\r\n".utf8))
        _ = opened.handshake(.done)
        #expect(opened.timerFired(now: Self.t0 + 10 * Self.second) == [])
        #expect(opened.isOpen)
    }
}

extension ClientStreamMachineTests {
    @Test func anOwnerThatGivesUpOnASilentProxyHearsWhy() {
        var machine = tunnelling(deadline: nil)
        let actions = machine.giveUp()
        #expect(actions.first == .cancelTimer)
        #expect(actions.last == .end)
        guard case .fail(let failure) = actions[1] else {
            Issue.record("no failure: \(actions)")
            return
        }
        #expect(failure == ClientStreamFailure(.connect, "", tunnel: .timeout))
        #expect(failure.reason == "proxy 127.0.0.1:3128 did not answer CONNECT in time")
        // Elsewhere, giving up is a reset: no failure.
        var direct = Machine(host: "api.push.apple.com", port: 443, usesTLS: true)
        _ = direct.start(now: 0)
        #expect(direct.giveUp() == [.cancelTimer, .end])
    }
}

extension ClientStreamMachineTests {

    /// Whatever happens in whatever order, the owner hears at most one failure, at most one close and nothing after
    /// it, and the stream opens at most once, never after it has failed.
    @Test(arguments: 0..<200)
    func anySequenceOfInputsEndsOnceAndSaysSoOnce(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        var machine = Machine(
            host: "api.push.apple.com", port: 443, usesTLS: Bool.random(using: &random),
            proxy: Bool.random(using: &random) ? Self.proxy : nil,
            deadline: Bool.random(using: &random) ? Self.t0 + 5 * Self.second : nil)
        var actions = machine.start(now: 0)
        var now: Instant = 0
        let answers = [
            "HTTP/1.1 200 OK\r\n\r\n", "HTTP/1.1 407 Proxy Authentication Required\r\n\r\n", "garbage", "HTTP/1.1 2",
            "00 OK\r\n\r\n",
        ]
        for _ in 0..<30 {
            now += UInt64.random(in: 0...Self.second, using: &random)
            switch Int.random(in: 0..<14, using: &random) {
            case 0: actions += machine.resolved(addressCount: Int.random(in: 0...3, using: &random))
            case 1: actions += machine.resolveFailed("no such name")
            case 2: actions += machine.connectFailed("refused")
            case 3: actions += machine.connected()
            case 4: actions += machine.tunnelRead(Array(answers.randomElement(using: &random)!.utf8))
            case 5: actions += machine.handshake(.done)
            case 6: actions += machine.handshake(.failed("bad"))
            case 7: actions += machine.reachedEnd()
            case 8:
                actions += machine.connectionFailed("reset", brokenPipeWhileReading: Bool.random(using: &random))
            case 9: actions += machine.timerFired(now: now)
            case 10: actions += machine.close()
            case 11: actions += machine.reset()
            case 12: actions += machine.giveUp()
            default: actions += machine.connectionClosed()
            }
        }
        let failures = actions.filter { if case .fail = $0 { true } else { false } }
        let finishes = actions.indices.filter { actions[$0] == .finish }
        #expect(failures.count <= 1, "seed \(seed): \(actions)")
        #expect(finishes.count <= 1, "seed \(seed): \(actions)")
        if let finish = finishes.first {
            #expect(finish == actions.count - 1, "seed \(seed): actions after the close: \(actions)")
            #expect(machine.phase == .closed)
        }
        let opens = actions.indices.filter { actions[$0] == .open }
        #expect(opens.count <= 1, "seed \(seed): \(actions)")
        if let open = opens.first,
            let failure = actions.firstIndex(where: { if case .fail = $0 { true } else { false } })
        {
            #expect(open < failure, "seed \(seed): opened after failing: \(actions)")
        }
    }
}
