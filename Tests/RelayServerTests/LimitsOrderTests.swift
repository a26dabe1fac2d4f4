import Foundation
import RedisTestSupport
import RelayCore
import RelayCrypto
import RelayTestSupport
import Testing

@testable import RelayServer

/// The order of a request's limits (docs/DESIGN.md, "Several instances"), on each implementation: a limited address
/// gets 429 `limit: address` whatever its body; otherwise a bad body 400 and a bad grant 401 (the address counted, the
/// phone not); then the phone's limit; a request refused before its body is read still counts against its address.
/// In memory the address is decided with the head; with `limits_store: redis`, one call decides the address and then
/// the phone once the body is read and the grant opened (and there the store's counts are checked too). Addresses
/// are chosen per request through `X-Forwarded-For`.
@Suite(.serialized) struct LimitsOrderTests {
    enum Store: CaseIterable, CustomTestStringConvertible {
        case memory, redis
        var testDescription: String { self == .memory ? "in memory" : "in Redis" }
    }

    /// A relay on a loopback port with no APNs key (a push its limits admit is answered 502 `apns`), its limits in
    /// memory or in a Redis of its own.
    struct Fixture {
        let redis: RedisServerProcess?
        let relay: Relay
        let keys = RelayKeys([1: SymmetricKey.generate()])

        init(_ store: Store) throws {
            let limits =
                #""push_limit":{"requests":2,"period_s":60},"#
                + #""ip_limit":{"requests":3,"period_s":60,"block_s":60,"client_ip_header":"x-forwarded-for"},"#
            switch store {
            case .redis:
                let redis = try RedisServerProcess()
                self.redis = redis
                relay = try Relay(setup: RelaySetup.countingIn(redis, keys: keys, limits: limits))
            case .memory:
                redis = nil
                let configuration = try RelayConfiguration.parse(
                    Array(
                        (#"{"listen":"127.0.0.1:0","apns":{"topic":"app.openduo.test"},"#
                            + limits + #""server":{"shutdown_grace_s":1}}"#).utf8))
                relay = try Relay(
                    setup: RelaySetup(
                        configuration: configuration,
                        secrets: RelaySecrets(teamID: "TEAM123456", apnsKeys: [:], relayKeys: keys)))
            }
        }

        func stop() {
            relay.stop()
            redis?.stop()
        }

        /// A push body with a grant for `token`.
        func pushBody(token: [UInt8]) throws -> [UInt8] {
            pushBody(
                grant: try GrantCodec.seal(
                    Grant(environment: .sandbox, issuedAt: SystemClock().unixSeconds, token: token), keyID: 1,
                    keys: keys))
        }

        /// A well-formed push body around `grant`.
        func pushBody(grant: String) -> [UInt8] {
            PushBody.bytes(grant: grant, sealed: Base64.encode(SecureRandom.bytes(count: PushRequest.sealedByteCount)))
        }

        func post(_ path: String, _ body: [UInt8], from address: String) throws -> RawHTTPClient.Response {
            try RawHTTPClient(port: relay.port).request(
                "POST", path, body: body, headers: ["X-Forwarded-For": address])
        }

        /// The store's keys of one kind (`a` or `p`) and their counts; nil in memory.
        func counts(_ kind: String) throws -> [String]? {
            guard let redis else { return nil }
            return try redis.keysWithTTL().map(\.key).filter { $0.hasPrefix("duo-relay:\(kind):") }.sorted().map {
                try redis.command("HGET", $0, "c").trimmingCharacters(in: .whitespacesAndNewlines)
            }
        }
    }

    @Test(arguments: Store.allCases)
    func aLimitedAddressGets429WhateverItsBodyAndABadBodyOrGrantCountsNoPhone(_ store: Store) throws {
        let relay = try Fixture(store)
        defer { relay.stop() }
        let token = SecureRandom.bytes(count: 32)
        let address = "198.51.100.1"
        let answers = [
            try relay.post("/v1/push", Array("not json".utf8), from: address),
            try relay.post("/v1/push", relay.pushBody(grant: "AAAA"), from: address),
            try relay.post("/v1/push", try relay.pushBody(token: token), from: address),
            // The address's budget (3) is spent: 429 for a bad body, a good push and a grant alike.
            try relay.post("/v1/push", Array("not json".utf8), from: address),
            try relay.post("/v1/push", try relay.pushBody(token: token), from: address),
            try relay.post("/v1/grant", Array(#"{"token":"00","environment":"sandbox"}"#.utf8), from: address),
        ]
        #expect(answers.map(\.status) == [400, 401, 502, 429, 429, 429])
        #expect(
            answers.map(\.error) == [
                "bad_request", "grant_invalid", "apns", "rate_limited", "rate_limited", "rate_limited",
            ])
        #expect(answers.suffix(3).allSatisfy { $0.json?["limit"] as? String == "address" })
        #expect(answers.last?.headers["retry-after"] == "60")
        if store == .redis {
            // The address counted every request until its block (then none); the phone only the push that opened.
            #expect(try relay.counts("a") == ["4"])
            #expect(try relay.counts("p") == ["1"])
        }
        // The phone counted one push of its two: one more is admitted, the next is its limit.
        let more = [
            try relay.post("/v1/push", try relay.pushBody(token: token), from: "198.51.100.9"),
            try relay.post("/v1/push", try relay.pushBody(token: token), from: "198.51.100.9"),
        ]
        #expect(more.map(\.status) == [502, 429])
        #expect(more.last?.json?["limit"] as? String == "phone")
    }

    @Test(arguments: Store.allCases)
    func thePhonesLimitComesAfterAnAdmittedAddress(_ store: Store) throws {
        let relay = try Fixture(store)
        defer { relay.stop() }
        let token = SecureRandom.bytes(count: 32)
        let answers = [
            try relay.post("/v1/push", try relay.pushBody(token: token), from: "198.51.100.2"),
            try relay.post("/v1/push", try relay.pushBody(token: token), from: "198.51.100.2"),
            try relay.post("/v1/push", try relay.pushBody(token: token), from: "198.51.100.3"),
        ]
        #expect(answers.map(\.status) == [502, 502, 429])
        #expect(answers.last?.json?["limit"] as? String == "phone")
        if store == .redis {
            #expect(try relay.counts("p") == ["3"])
            #expect(Set(try relay.counts("a") ?? []) == ["2", "1"])
        }
    }

    @Test(arguments: Store.allCases)
    func aBodyRefusedBeforeItIsReadStillCountsAgainstTheAddress(_ store: Store) throws {
        let relay = try Fixture(store)
        defer { relay.stop() }
        let address = "198.51.100.4"
        for _ in 0..<3 {
            let client = try RawHTTPClient(port: relay.relay.port)
            try client.send(
                "POST /v1/push HTTP/1.1\r\nHost: relay\r\nX-Forwarded-For: \(address)\r\nContent-Length: 100000\r\n\r\n"
            )
            #expect(try client.readResponse().status == 413)
        }
        if store == .redis {
            // Counted in the store without waiting: the fourth request may come before the third's count is in.
            try Poll.wait(for: "three requests counted", within: .seconds(10)) { (try? relay.counts("a")) == ["3"] }
        }
        let answer = try relay.post("/v1/push", try relay.pushBody(token: SecureRandom.bytes(count: 32)), from: address)
        #expect(answer.status == 429)
        #expect(answer.json?["limit"] as? String == "address")
        if store == .redis { #expect(try relay.counts("p")?.isEmpty == true) }
    }
}
