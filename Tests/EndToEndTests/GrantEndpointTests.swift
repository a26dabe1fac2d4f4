import Foundation
import RelayCrypto
import RelayTestSupport
import Testing

/// `POST /v1/grant` and the HTTP surface, through the real binary on loopback.
@Suite(.serialized) struct GrantEndpointTests {
    static let token = String(repeating: "0a1B", count: 16)

    func grantBody(_ token: String = token, environment: String = "sandbox") -> [UInt8] {
        Array(#"{"token":"\#(token)","environment":"\#(environment)"}"#.utf8)
    }

    /// A relay whose per-address limit will not get in the way of a test that makes many requests.
    func relay(secrets: TestSecrets = TestSecrets(), extra: String = "") throws -> RelayProcess {
        try RelayProcess(
            config: RelayProcess.config(
                extra: extra.isEmpty ? #""ip_limit":{"requests":1000,"period_s":10,"block_s":10}"# : extra),
            secrets: secrets)
    }

    @Test func grantOpensWithRelayKeysPerDesign() throws {
        let secrets = TestSecrets()
        let relay = try relay(secrets: secrets)
        let before = UInt64(Date().timeIntervalSince1970)
        let response = try relay.connect().request("POST", "/v1/grant", body: grantBody())
        #expect(response.status == 200)
        #expect(response.headers["content-type"] == "application/json")
        let grant = try #require(response.json?["grant"] as? String)
        let expiresAt = try #require(response.json?["expires_at"] as? String)

        // Open it as docs/DESIGN.md says, holding only RELAY_KEYS: no GrantCodec involved.
        let bytes = try #require(Base64.urlDecode(grant))
        #expect(bytes[0] == 0x01)
        #expect(bytes[1] == 1)
        let key = try SymmetricKey(bytes: secrets.relayKeys[1]!)
        let plain = try AES.GCM.open(
            ciphertext: bytes[14..<(bytes.count - 16)], tag: bytes[(bytes.count - 16)...], nonce: bytes[2..<14],
            using: key, authenticating: bytes[0..<2])
        #expect(plain[0] == 0)  // sandbox
        let issuedAt = plain[1...8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        #expect(issuedAt >= before && issuedAt <= before + 5)
        #expect(Array(plain[9...]) == [UInt8](repeating: 0, count: 0) + Self.tokenBytes)

        // expires_at is issued_at + the default 30 days, ISO 8601 UTC to the second.
        let formatter = ISO8601DateFormatter()
        let expiry = try #require(formatter.date(from: expiresAt))
        #expect(UInt64(expiry.timeIntervalSince1970) == issuedAt + 2_592_000)
        #expect(expiresAt.hasSuffix("Z") && expiresAt.count == 20)
    }

    static var tokenBytes: [UInt8] { TestHex.bytes(token) }

    @Test func badInputGetsItsAnswerAndTheServerKeepsServing() throws {
        let relay = try relay()
        let connection = try relay.connect()
        let cases: [(body: [UInt8], status: Int, error: String)] = [
            (Array("not json".utf8), 400, "bad_request"),
            (Array(#"{"environment":"sandbox"}"#.utf8), 400, "bad_request"),
            (Array(#"{"token":"abcd"}"#.utf8), 400, "bad_request"),
            (grantBody("abc"), 400, "bad_request"),
            (grantBody("zz"), 400, "bad_request"),
            (grantBody(String(repeating: "a", count: 1026)), 400, "bad_request"),
            (grantBody(environment: "staging"), 400, "bad_request"),
            (grantBody(environment: "production"), 400, "environment_unavailable"),
        ]
        for (body, status, error) in cases {
            let response = try connection.request("POST", "/v1/grant", body: body)
            #expect(response.status == status, "\(String(decoding: body.prefix(40), as: UTF8.self))")
            #expect(response.error == error)
            #expect(response.headers["content-type"] == "application/json")
        }
        // 1024 characters is the longest token accepted.
        #expect(
            try connection.request("POST", "/v1/grant", body: grantBody(String(repeating: "a", count: 1024))).status
                == 200)

        // Wrong method and unknown paths.
        let wrongMethod = try connection.request("GET", "/v1/grant")
        #expect(wrongMethod.status == 405)
        #expect(wrongMethod.error == "method_not_allowed")
        #expect(wrongMethod.headers["allow"] == "POST")
        #expect(try connection.request("DELETE", "/healthz").headers["allow"] == "GET, HEAD")
        let unknown = try connection.request("POST", "/v1/nothing", body: grantBody())
        #expect(unknown.status == 404)
        #expect(unknown.error == "not_found")
        #expect(try connection.request("GET", "/").error == "not_found")

        // A 1 MB body is refused without being read: the answer comes before we send it.
        let big = try relay.connect()
        try big.send(Array("POST /v1/grant HTTP/1.1\r\nHost: relay\r\nContent-Length: 1048576\r\n\r\n".utf8))
        let tooLarge = try big.readResponse()
        #expect(tooLarge.status == 413)
        #expect(tooLarge.error == "too_large")

        // Still serving, on the same keep-alive connection.
        let health = try connection.request("GET", "/healthz")
        #expect(health.status == 200)
        #expect(health.text == #"{"status":"ok"}"#)
        #expect(try connection.request("POST", "/v1/grant", body: grantBody()).status == 200)
    }

    @Test func perAddressLimitBlocksAndRecovers() throws {
        let relay = try relay(extra: #""ip_limit":{"requests":3,"period_s":1,"block_s":2}"#)
        let connection = try relay.connect()
        for _ in 0..<3 {
            #expect(try connection.request("POST", "/v1/grant", body: grantBody()).status == 200)
        }
        let limited = try connection.request("POST", "/v1/grant", body: grantBody())
        #expect(limited.status == 429)
        #expect(limited.error == "rate_limited")
        #expect(limited.headers["retry-after"] == "2")
        // Every /v1/ request counts, even a 404; /healthz does not.
        #expect(try connection.request("GET", "/v1/other").status == 429)
        #expect(try connection.request("GET", "/healthz").status == 200)
        // Served again once the block has passed (its timing is RelayServerTests' LimitWindowTests).
        #expect(
            Poll.until(within: .seconds(10), every: .milliseconds(250)) {
                (try? connection.request("POST", "/v1/grant", body: grantBody()).status) == 200
            })
    }

    @Test func clientAddressHeaderTrustedOnlyWhenConfigured() throws {
        let trusting = try relay(
            extra: #""ip_limit":{"requests":2,"period_s":60,"block_s":60,"client_ip_header":"X-Forwarded-For"}"#)
        let connection = try trusting.connect()
        for address in ["203.0.113.1", "203.0.113.2", "203.0.113.3"] {
            for _ in 0..<2 {
                let response = try connection.request(
                    "POST", "/v1/grant", body: grantBody(), headers: ["X-Forwarded-For": "198.51.100.7, \(address)"])
                #expect(response.status == 200)
            }
        }
        // The last entry counts: the same address now is over its limit.
        #expect(
            try connection.request(
                "POST", "/v1/grant", body: grantBody(), headers: ["X-Forwarded-For": "203.0.113.1, 203.0.113.3"]
            ).status == 429)
        // IPv6 addresses in one /64 share a limit.
        for suffix in ["1", "2"] {
            #expect(
                try connection.request(
                    "POST", "/v1/grant", body: grantBody(), headers: ["X-Forwarded-For": "2001:db8:1:2::\(suffix)"]
                ).status == 200)
        }
        #expect(
            try connection.request(
                "POST", "/v1/grant", body: grantBody(), headers: ["X-Forwarded-For": "2001:db8:1:2:ffff::9"]
            ).status == 429)

        // Without the setting, the header is ignored: the socket peer is limited.
        let plain = try relay(extra: #""ip_limit":{"requests":2,"period_s":60,"block_s":60}"#)
        let other = try plain.connect()
        for address in ["203.0.113.1", "203.0.113.2"] {
            #expect(
                try other.request("POST", "/v1/grant", body: grantBody(), headers: ["X-Forwarded-For": address]).status
                    == 200)
        }
        #expect(
            try other.request("POST", "/v1/grant", body: grantBody(), headers: ["X-Forwarded-For": "203.0.113.9"])
                .status == 429)
    }

    @Test func nothingIdentifyingIsPrinted() throws {
        let secrets = TestSecrets()
        let relay = try relay(secrets: secrets)
        let connection = try relay.connect()
        let grant = try #require(
            try connection.request("POST", "/v1/grant", body: grantBody()).json?["grant"] as? String)
        _ = try connection.request("POST", "/v1/grant", body: grantBody("zz"))
        _ = try connection.request("POST", "/v1/grant", body: Array("garbage".utf8))
        relay.signal(SIGTERM)
        #expect(try relay.waitForExit() == 0)
        let output = relay.allOutput
        #expect(output.contains("listening on"))
        for secret in [Self.token, Self.token.lowercased(), grant, "127.0.0.1:\(connection.localPort)"]
            + secrets.secretStrings
        {
            #expect(!output.contains(secret))
        }
    }
}
