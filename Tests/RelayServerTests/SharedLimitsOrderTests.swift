import Foundation
import RedisTestSupport
import RelayCore
import RelayCrypto
import RelayTestSupport
import Testing

@testable import RelayServer

/// With `limits_store: redis`, one call decides a request's address and then its phone, once the body is read and
/// the grant opened, and the answers keep their order (docs/DESIGN.md, "Several instances"): a limited address gets 429
/// `limit: address` whatever its body; otherwise a bad body 400 and a bad grant 401 (the address counted, the phone
/// not); then the phone's limit. Addresses are chosen per request through `X-Forwarded-For`.
@Suite(.serialized) struct SharedLimitsOrderTests {
    let redis: RedisServerProcess
    let relay: Relay
    let keys = RelayKeys([1: SymmetricKey.generate()])

    init() throws {
        redis = try RedisServerProcess()
        relay = try Relay(
            setup: RelaySetup.countingIn(
                redis, keys: keys,
                limits: #""push_limit":{"requests":2,"period_s":60},"#
                    + #""ip_limit":{"requests":3,"period_s":60,"block_s":60,"client_ip_header":"x-forwarded-for"},"#))
    }

    func stop() {
        relay.stop()
        redis.stop()
    }

    /// A push body with a grant for `token` (no APNs environment is configured: a push its limits admit is
    /// answered 502 `apns`).
    func pushBody(token: [UInt8]) throws -> [UInt8] {
        pushBody(
            grant: try GrantCodec.seal(
                Grant(environment: .sandbox, issuedAt: SystemClock().unixSeconds, token: token), keyID: 1, keys: keys))
    }

    /// A well-formed push body around `grant`.
    func pushBody(grant: String) -> [UInt8] {
        PushBody.bytes(grant: grant, sealed: Base64.encode(SecureRandom.bytes(count: PushRequest.sealedByteCount)))
    }

    func post(_ path: String, _ body: [UInt8], from address: String) throws -> RawHTTPClient.Response {
        try RawHTTPClient(port: relay.port).request("POST", path, body: body, headers: ["X-Forwarded-For": address])
    }

    /// The store's keys of one kind (`a` or `p`) and their counts.
    func counts(_ kind: String) throws -> [String] {
        try redis.keysWithTTL().map(\.key).filter { $0.hasPrefix("duo-relay:\(kind):") }.sorted().map {
            try redis.command("HGET", $0, "c").trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    @Test func aLimitedAddressGets429WhateverItsBodyAndABadBodyOrGrantCountsNoPhone() throws {
        defer { stop() }
        let token = SecureRandom.bytes(count: 32)
        let address = "198.51.100.1"
        let answers = [
            try post("/v1/push", Array("not json".utf8), from: address),
            try post("/v1/push", pushBody(grant: "AAAA"), from: address),
            try post("/v1/push", try pushBody(token: token), from: address),
            // The address's budget (3) is spent: 429 for a bad body, a good push and a grant alike.
            try post("/v1/push", Array("not json".utf8), from: address),
            try post("/v1/push", try pushBody(token: token), from: address),
            try post("/v1/grant", Array(#"{"token":"00","environment":"sandbox"}"#.utf8), from: address),
        ]
        #expect(answers.map(\.status) == [400, 401, 502, 429, 429, 429])
        #expect(
            answers.map(\.error) == [
                "bad_request", "grant_invalid", "apns", "rate_limited", "rate_limited", "rate_limited",
            ])
        #expect(answers.suffix(3).allSatisfy { $0.json?["limit"] as? String == "address" })
        #expect(answers.last?.headers["retry-after"] == "60")
        // The address counted every request until its block (then none); the phone only the push that opened.
        #expect(try counts("a") == ["4"])
        #expect(try counts("p") == ["1"])
    }

    @Test func thePhonesLimitComesAfterAnAdmittedAddress() throws {
        defer { stop() }
        let token = SecureRandom.bytes(count: 32)
        let answers = [
            try post("/v1/push", try pushBody(token: token), from: "198.51.100.2"),
            try post("/v1/push", try pushBody(token: token), from: "198.51.100.2"),
            try post("/v1/push", try pushBody(token: token), from: "198.51.100.3"),
        ]
        #expect(answers.map(\.status) == [502, 502, 429])
        #expect(answers.last?.json?["limit"] as? String == "phone")
        #expect(try counts("p") == ["3"])
        #expect(Set(try counts("a")) == ["2", "1"])
    }

    @Test func aBodyRefusedBeforeItIsReadStillCountsAgainstTheAddress() throws {
        defer { stop() }
        let address = "198.51.100.4"
        for _ in 0..<3 {
            let client = try RawHTTPClient(port: relay.port)
            try client.send(
                "POST /v1/push HTTP/1.1\r\nHost: relay\r\nX-Forwarded-For: \(address)\r\nContent-Length: 100000\r\n\r\n"
            )
            #expect(try client.readResponse().status == 413)
        }
        // Counted in the store without waiting: the fourth request may come before the third's count is in.
        try Poll.wait(for: "three requests counted", within: .seconds(10)) { (try? counts("a")) == ["3"] }
        let answer = try post("/v1/push", try pushBody(token: SecureRandom.bytes(count: 32)), from: address)
        #expect(answer.status == 429)
        #expect(answer.json?["limit"] as? String == "address")
        #expect(try counts("p").isEmpty)
    }
}
