import APNsSimulator
import Foundation
import RelayCore
import RelayCrypto
import RelayTestSupport
import Testing

/// `POST /v1/push` end to end: the real relay binary and an APNs simulator on loopback.
@Suite(.serialized) struct PushEndpointTests {
    /// The first push to an APNs host given by name starts no thread: the name is looked up on libuv's thread
    /// pool, which the relay starts with its workers (not the first push).
    @Test func theFirstPushToAHostByNameStartsNoThread() throws {
        let fixture = try PushFixture(apnsHost: "localhost")
        let pid = fixture.relay.process.processIdentifier
        func threads() throws -> Set<String> {
            Set(try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task"))
        }
        let grant = try fixture.grant(token: randomToken())
        let before = try threads()
        let response = try fixture.push(grant: grant)
        #expect(response.status == 200)
        #expect(fixture.waitForDeliveries(1).count == 1)
        let started = try threads().subtracting(before)
        let names = started.map {
            (try? String(contentsOfFile: "/proc/\(pid)/task/\($0)/comm", encoding: .utf8))?.trimmingCharacters(
                in: .whitespacesAndNewlines) ?? "?"
        }
        #expect(started.isEmpty, "threads started by the first push: \(names)")
    }

    @Test func deliveredExactlyAsDesigned() throws {
        let fixture = try PushFixture()
        let token = randomToken().uppercased()
        let grant = try fixture.grant(token: token)
        let id = PushFixture.hex64()
        let thread = PushFixture.hex64().lowercased()
        let response = try fixture.relay.connect().request(
            "POST", "/v1/push", body: PushFixture.pushBody(grant: grant, id: id, thread: thread))
        #expect(response.status == 200)
        let delivered = try #require(fixture.waitForDeliveries(1).first)
        #expect(response.json?["apns_id"] as? String == delivered.apnsID)
        #expect(delivered.deviceToken == token.lowercased())
        #expect(delivered.topic == fixture.topic)
        #expect(delivered.pushType == "alert")
        #expect(delivered.priority == "10")
        #expect(delivered.collapseID == id)
        let expiration = try #require(delivered.expiration.flatMap { UInt64($0) })
        let now = UInt64(Date().timeIntervalSince1970)
        #expect(expiration >= now + 86_400 - 10 && expiration <= now + 86_400 + 10)
        #expect(delivered.keyID == fixture.secrets.keyID)
        #expect(
            delivered.payload == #"{"aps":{"alert":{"loc-key":"PUSH"},"mutable-content":1,"thread-id":""# + thread
                + #""},"sealed":""# + PushFixture.sealed + #""}"#)
    }

    @Test func badPushesAreAnsweredWithoutAnyAPNsRequest() throws {
        let fixture = try PushFixture()
        let connection = try fixture.relay.connect()
        let grant = try fixture.grant(token: randomToken(), on: connection)
        let hex = PushFixture.hex64()
        let sealed = PushFixture.sealed
        // One character in the middle of the grant changed: it no longer authenticates.
        var characters = Array(grant)
        characters[characters.count / 2] = characters[characters.count / 2] == "A" ? "B" : "A"
        let tampered = String(characters)
        let cases: [(String, Int, String)] = [
            ("not json", 400, "bad_request"),
            (#"{"sealed":"\#(sealed)","id":"\#(hex)","thread":"\#(hex)"}"#, 400, "bad_request"),
            (#"{"grant":7,"sealed":"\#(sealed)","id":"\#(hex)","thread":"\#(hex)"}"#, 400, "bad_request"),
            (
                #"{"grant":"\#(grant)","sealed":"\#(sealed.dropLast(4))","id":"\#(hex)","thread":"\#(hex)"}"#, 400,
                "bad_request"
            ),
            (
                #"{"grant":"\#(grant)","sealed":"\#(sealed)","id":"\#(hex.dropLast())","thread":"\#(hex)"}"#, 400,
                "bad_request"
            ),
            (#"{"grant":"\#(grant)","sealed":"\#(sealed)","id":"\#(hex)","thread":"xyz"}"#, 400, "bad_request"),
            (#"{"grant":"\#(grant)","sealed":"\#(sealed)","id":"\#(hex)"}"#, 400, "bad_request"),
            (#"{"grant":"nope","sealed":"\#(sealed)","id":"\#(hex)","thread":"\#(hex)"}"#, 401, "grant_invalid"),
            (
                #"{"grant":"\#(tampered)","sealed":"\#(sealed)","id":"\#(hex)","thread":"\#(hex)"}"#, 401,
                "grant_invalid"
            ),
        ]
        for (body, status, error) in cases {
            let response = try connection.request("POST", "/v1/push", body: Array(body.utf8))
            #expect(response.status == status)
            #expect(response.error == error)
        }
        let wrongMethod = try connection.request("GET", "/v1/push")
        #expect(wrongMethod.status == 405)
        let big = try fixture.relay.connect()
        try big.send(Array("POST /v1/push HTTP/1.1\r\nHost: r\r\nContent-Length: 9000\r\n\r\n".utf8))
        #expect(try big.readResponse().error == "too_large")
        #expect(fixture.simulator.statistics.requests == 0)
    }

    @Test func expiredGrantAndRemovedKeys() throws {
        var secrets = TestSecrets()
        secrets.relayKeys = [1: SecureRandom.bytes(count: 32), 2: SecureRandom.bytes(count: 32)]
        let fixture = try PushFixture(secrets: secrets)
        let keys = RelayKeys(secrets.relayKeys.mapValues { try! SymmetricKey(bytes: $0) })
        let token = SecureRandom.bytes(count: 32)
        let now = UInt64(Date().timeIntervalSince1970)
        let expired = try GrantCodec.seal(
            Grant(environment: .sandbox, issuedAt: now - 2_592_000, token: token), keyID: 2, keys: keys)
        let response = try fixture.push(grant: expired)
        #expect(response.status == 401)
        #expect(response.error == "grant_expired")
        // Sealed under key 2, which the relay holds but does not seal with: still opens.
        let fresh = try GrantCodec.seal(
            Grant(environment: .sandbox, issuedAt: now - 10, token: token), keyID: 2, keys: keys)
        #expect(try fixture.push(grant: fresh).status == 200)
        // A grant for an environment the relay has no key for can no longer deliver.
        let production = try GrantCodec.seal(
            Grant(environment: .production, issuedAt: now, token: token), keyID: 1, keys: keys)
        let unavailable = try fixture.push(grant: production)
        #expect(unavailable.status == 502)
        #expect(unavailable.error == "apns")
        // A key id the relay does not hold.
        let other = RelayKeys([9: SymmetricKey.generate()])
        let stranger = try GrantCodec.seal(
            Grant(environment: .sandbox, issuedAt: now, token: token), keyID: 9, keys: other)
        #expect(try fixture.push(grant: stranger).error == "grant_invalid")
    }

    @Test(arguments: [
        (SimulatorFault.status(410, reason: "Unregistered"), 410, "unregistered"),
        (SimulatorFault.status(410, reason: "ExpiredToken"), 410, "unregistered"),
        (SimulatorFault.status(400, reason: "BadDeviceToken"), 410, "unregistered"),
        (SimulatorFault.status(400, reason: "DeviceTokenNotForTopic"), 410, "unregistered"),
        (SimulatorFault.status(429, reason: "TooManyRequests"), 429, "rate_limited"),
        (SimulatorFault.status(429, reason: "TooManyProviderTokenUpdates"), 502, "apns"),
        (SimulatorFault.status(500, reason: "InternalServerError"), 502, "apns"),
        (SimulatorFault.status(503, reason: "ServiceUnavailable"), 502, "apns"),
        (SimulatorFault.status(400, reason: "BadCollapseId"), 502, "apns"),
        (SimulatorFault.status(403, reason: "InvalidProviderToken"), 502, "apns"),
    ])
    func apnsAnswersMapToTheTable(_ fault: SimulatorFault, _ status: Int, _ error: String) throws {
        let fixture = try PushFixture()
        let grant = try fixture.grant(token: randomToken())
        #expect(try fixture.push(grant: grant).status == 200)  // the connection has seen a valid token
        fixture.simulator.inject(fault)
        let response = try fixture.push(grant: grant)
        #expect(response.status == status)
        #expect(response.error == error)
        if status == 429 { #expect(Int(response.headers["retry-after"] ?? "") ?? 0 > 0) }
        // The relay keeps working afterwards.
        #expect(try fixture.push(grant: grant).status == 200)
    }

    @Test func invalidProviderTokenSaysWhichKeyInOneLine() throws {
        let fixture = try PushFixture(simulatorKeys: ["TESTKEY001": P256.Signing.PrivateKey().publicKey])
        let grant = try fixture.grant(token: randomToken())
        for _ in 0..<3 {
            let response = try fixture.push(grant: grant)
            #expect(response.status == 502)
            #expect(response.error == "apns")
        }
        // The line is written before the first 502; the pipe reader may not have collected it yet.
        Poll.until(within: .seconds(10)) { fixture.relay.standardError.contains("InvalidProviderToken") }
        let lines = fixture.relay.standardError.split(separator: "\n").filter { $0.contains("InvalidProviderToken") }
        #expect(lines.count == 1)
        #expect(lines.first?.contains("APNS_KEY_SANDBOX") == true)
    }

    @Test func expiredProviderTokenIsRefreshedAndThePushRetriedOnce() throws {
        let fixture = try PushFixture()
        let grant = try fixture.grant(token: randomToken())
        #expect(try fixture.push(grant: grant).status == 200)
        fixture.simulator.inject(.status(403, reason: "ExpiredProviderToken"))
        #expect(try fixture.push(grant: grant).status == 200)
        #expect(fixture.simulator.statistics.distinctProviderTokens == 2)
        #expect(fixture.waitForDeliveries(2).count == 2)
        // Twice in a row: retried once only, then 502.
        fixture.simulator.inject(.status(403, reason: "ExpiredProviderToken"), count: 2)
        let twice = try fixture.push(grant: grant)
        #expect(twice.status == 502)
        #expect(fixture.simulator.delivered.count == 2)
    }

    /// APNs takes a new provider token within 20 minutes of the last only on the connection that answered
    /// ExpiredProviderToken; the relay's other connections are refused TooManyProviderTokenUpdates when they present
    /// it, and each such connection is replaced (a new connection takes any valid token). So each connection open at
    /// the refresh fails at most the pushes it carries when it first presents the new token, never more.
    @Test func anExpiredProviderTokenOnOneConnectionLeavesNoOtherConnectionFailing() throws {
        // Two streams a connection, so that concurrent pushes open several connections on each worker.
        let fixture = try PushFixture(
            relayConfig: #""server":{"threads":2},"ip_limit":{"requests":100000,"period_s":10,"block_s":10}"#,
            apnsConfig: #""max_connections":8"#, maxConcurrentStreams: 2)
        let grants = try (0..<40).map { _ in try fixture.grant(token: randomToken()) }
        /// A round of pushes from many connections (so both workers and their APNs connections carry some); the
        /// statuses seen.
        func round() -> [Int] {
            concurrently(40) { index -> Int in try fixture.push(grant: grants[index]).status }
                .map { (try? $0.get()) ?? -1 }
        }
        #expect(round().allSatisfy { $0 == 200 })
        let connections = fixture.simulator.statistics.connectionsAccepted
        #expect(connections >= 3)
        fixture.simulator.inject(.status(403, reason: "ExpiredProviderToken"))
        #expect(try fixture.push(grant: grants[0]).status == 200)
        #expect(fixture.simulator.statistics.distinctProviderTokens == 2)
        // Refused pushes are 502 (TooManyProviderTokenUpdates is the relay's own fault, as APNs names it).
        let statuses = (0..<8).flatMap { _ in round() }
        #expect(statuses.allSatisfy { $0 == 200 || $0 == 502 })
        let refused = statuses.count { $0 != 200 }
        #expect(refused <= 2 * connections, "\(refused) of \(statuses.count) pushes refused after the refresh")
        #expect(fixture.simulator.statistics.distinctProviderTokens == 2)
    }

    @Test func perPhoneLimitIsSharedByEveryGrantOfTheToken() throws {
        let fixture = try PushFixture(
            relayConfig:
                #""ip_limit":{"requests":1000,"period_s":10,"block_s":10},"push_limit":{"requests":3,"period_s":60}"#
        )
        let token = randomToken()
        let first = try fixture.grant(token: token)
        let second = try fixture.grant(token: token)
        #expect(first != second)
        #expect(try fixture.push(grant: first).status == 200)
        #expect(try fixture.push(grant: second).status == 200)
        #expect(try fixture.push(grant: first).status == 200)
        let limited = try fixture.push(grant: second)
        #expect(limited.status == 429)
        #expect(limited.error == "rate_limited")
        #expect(Int(limited.headers["retry-after"] ?? "") ?? 0 > 50)
        // Another phone is unaffected.
        #expect(try fixture.push(grant: fixture.grant(token: randomToken())).status == 200)
        #expect(fixture.simulator.statistics.requests == 4)
    }

    @Test func oneProviderTokenAndFewConnectionsForManyConcurrentPushes() throws {
        let fixture = try PushFixture(apnsConfig: #""max_connections":2"#)
        let grants = try (0..<40).map { _ in try fixture.grant(token: randomToken()) }
        let results = concurrently(200) { index -> Int in
            let connection = try fixture.relay.connect()
            var ok = 0
            for round in 0..<3 {
                let response = try fixture.push(grant: grants[(index + round) % grants.count], on: connection)
                if response.status == 200 { ok += 1 }
            }
            return ok
        }
        let delivered = results.reduce(0) { $0 + ((try? $1.get()) ?? 0) }
        // 600 pushes over 40 phones at 20 per phone is exactly the limit.
        #expect(delivered == 600)
        let stats = fixture.simulator.statistics
        #expect(stats.distinctProviderTokens == 1)
        #expect(stats.connectionsAccepted <= 2)
        #expect(stats.maxConcurrentStreamsSeen > 1)
    }

    @Test func stalledAPNsIsAnswered502WithinTheDeadline() throws {
        let fixture = try PushFixture(apnsConfig: #""timeout_ms":1000"#)
        let grant = try fixture.grant(token: randomToken())
        #expect(try fixture.push(grant: grant).status == 200)
        fixture.simulator.inject(.stall)
        let start = Date()
        let response = try fixture.push(grant: grant)
        let elapsed = Date().timeIntervalSince(start)
        #expect(response.status == 502)
        #expect(response.error == "apns")
        // Wall-clock: the relay is a separate process and its APNs deadline (timeout_ms) a real-time timer;
        // bounded from 0.1 s before to 1.5 s after it.
        #expect(elapsed >= 0.9 && elapsed < 2.5)
        #expect(try fixture.push(grant: grant).status == 200)
    }

    @Test func goawayMidBurstGivesEveryPushADefiniteAnswerAndNoDuplicate() throws {
        let fixture = try PushFixture(
            relayConfig:
                #""ip_limit":{"requests":100000,"period_s":10,"block_s":10},"push_limit":{"requests":1000,"period_s":60}"#
        )
        let grant = try fixture.grant(token: randomToken())
        #expect(try fixture.push(grant: grant).status == 200)
        let ids = (0..<300).map { _ in PushFixture.hex64() }
        // GOAWAY once the burst is under way: 30 of its pushes have reached the simulator.
        let injector = Thread {
            Poll.until(within: .seconds(30), every: .milliseconds(1)) { fixture.simulator.statistics.requests >= 31 }
            fixture.simulator.inject(.goaway)
        }
        injector.start()
        let results = concurrently(30) { worker -> [Int] in
            let connection = try fixture.relay.connect()
            return try (0..<10).map { try fixture.push(grant: grant, id: ids[worker * 10 + $0], on: connection).status }
        }
        let statuses = results.flatMap { (try? $0.get()) ?? [] }
        #expect(statuses.count == 300)
        #expect(statuses.allSatisfy { $0 == 200 || $0 == 502 })
        let delivered = fixture.waitForDeliveries(1 + statuses.filter { $0 == 200 }.count)
        let collapseIDs = delivered.compactMap(\.collapseID)
        #expect(Set(collapseIDs).count == collapseIDs.count)
        #expect(collapseIDs.count == 1 + statuses.filter { $0 == 200 }.count)
        #expect(fixture.simulator.statistics.goawaysSent == 1)
    }
}
