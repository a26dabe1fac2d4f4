import HTTP1
import HTTPServer
import RelayCore
import RelayCrypto
import RelayTestSupport
import Synchronization
import Testing

@testable import RelayServer

/// The relay's HTTP handler driven in-process: requests go straight to `head` and `request`, answers come back
/// through a closure responder, and time moves only when the test advances the clock. No socket is opened:
/// the state holds no APNs gateway unless a test asks for one, so a push that passes every check is answered
/// 502 `apns` (its environment cannot deliver) right after the per-phone limit, without sending anything.
struct RelayHandlerFixture {
    let clock = ManualClock()
    let keys = RelayKeys([1: SymmetricKey.generate()])
    let configuration: RelayConfiguration
    let handler: RelayHTTPHandler

    /// - Parameter gateways: environments given a key and a gateway (for the grant endpoint, which needs one);
    ///   their origin is a closed loopback port, and nothing here sends to it.
    init(gateways: [APNsEnvironment] = [], configure: (inout RelayConfiguration) -> Void = { _ in }) throws {
        var configuration = RelayConfiguration(topic: "app.openduo.test")
        configuration.apns.sandboxOrigin = "https://127.0.0.1:9"
        configuration.apns.productionOrigin = "https://127.0.0.1:9"
        configure(&configuration)
        self.configuration = configuration
        var apnsKeys: [APNsEnvironment: RelaySecrets.APNsKey] = [:]
        for environment in gateways {
            apnsKeys[environment] = RelaySecrets.APNsKey(keyID: "KEY1234567", key: P256.Signing.PrivateKey())
        }
        let secrets = RelaySecrets(teamID: "TEAM123456", apnsKeys: apnsKeys, relayKeys: keys)
        var made: [APNsEnvironment: APNsGateway] = [:]
        for environment in gateways {
            made[environment] = try APNsGateway(
                environment: environment, configuration: configuration,
                credentials: secrets.credentials(environment)!, clock: clock)
        }
        handler = RelayHTTPHandler(
            state: RelayState(configuration: configuration, secrets: secrets, gateways: made), clock: clock)
    }

    /// A grant for `token`, sealed as the relay seals them, issued at the clock's time now.
    func grant(token: [UInt8]) throws -> String {
        try GrantCodec.seal(
            Grant(environment: .sandbox, issuedAt: clock.unixSeconds, token: token), keyID: 1, keys: keys)
    }

    /// One request through the handler as the server would make it: the head, and, if the handler asks for it,
    /// the body. The answer must come synchronously (nothing here waits for a network). `connection` is the memo of
    /// the connection the request comes on: a fresh one (a connection of its own) unless a test passes one for
    /// several requests.
    func send(
        _ method: String, _ path: String, body: [UInt8] = [], from address: String = "192.0.2.7",
        headers: [(name: String, value: String)] = [], connection: PeerMemo = PeerMemo()
    ) -> HTTP1Response {
        let head = HTTPRequestHead(
            method: method, path: path, headers: HTTPHeaders(headers), peer: SocketPeer.parse(address)!,
            contentLength: body.count, route: handler.route(path: path), peerMemo: connection)
        switch handler.head(head) {
        case .respond(let response):
            return response
        case .later:
            Issue.record("the in-memory limiter decided later")
            return HTTP1Response(status: 0)
        case .readBody(let limit):
            guard body.count <= limit else { return handler.bodyTooLarge(head) }
            let answer = Mutex<HTTP1Response?>(nil)
            handler.request(
                head, body: body, responder: HTTPResponder { response in answer.withLock { $0 = response } })
            guard let response = answer.withLock({ $0 }) else {
                Issue.record("the handler did not answer at once")
                return HTTP1Response(status: 0)
            }
            return response
        }
    }

    /// `POST /v1/push` with a valid body for `grant`.
    func push(
        grant: String, from address: String = "192.0.2.7", headers: [(name: String, value: String)] = [],
        connection: PeerMemo = PeerMemo()
    ) -> HTTP1Response {
        let sealed = Base64.encode(SecureRandom.bytes(count: PushRequest.sealedByteCount))
        return send(
            "POST", "/v1/push", body: PushBody.bytes(grant: grant, sealed: sealed), from: address, headers: headers,
            connection: connection)
    }
}

extension HTTP1Response {
    /// The `error` code of a JSON error answer.
    var error: String? {
        let text = String(decoding: body, as: UTF8.self)
        guard let start = text.range(of: #""error":""#) else { return nil }
        return String(text[start.upperBound...].prefix { $0 != "\"" })
    }

    var text: String { String(decoding: body, as: UTF8.self) }

    func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name }?.value
    }
}
