import Dispatch
import Foundation
import RedisClient
import RedisTestSupport
import RelayCore
import RelayTestSupport
import Synchronization
import Testing

/// The pipeline against a real redis-server: AUTH, pipelining, NOSCRIPT, restarts, TLS.
@Suite("RedisPipeline against redis-server", .serialized)
struct RedisPipelineTests {
    static let policy = LimitPolicy(requests: 1_000_000, periodSeconds: 60)
    static let arguments = SharedLimitsScript.arguments(address: policy, phone: policy)

    /// The script's arguments with `policy` for both limits (the tests' calls name an address key only).
    static func arguments(_ policy: LimitPolicy) -> [[UInt8]] {
        SharedLimitsScript.arguments(address: policy, phone: policy)
    }

    @Test func manyConcurrentCallersShareTheConnectionAndEachGetsItsReply() throws {
        let server = try RedisServerProcess()
        let pipeline = try RedisPipeline.connected(to: server, script: SharedLimitsScript.source)
        defer { pipeline.shutdown() }
        try #require(pipeline.isConnected)
        let count = 2_000
        let answered = Atomic<Int>(0)
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.concurrentPerform(iterations: count) { index in
            let key = Array("t:p:\(index % 50)".utf8)
            let sent = pipeline.evaluate(
                keys: [key], arguments: Self.arguments(LimitPolicy(requests: 40, periodSeconds: 60))
            ) { result in
                if case .success = result { answered.add(1, ordering: .relaxed) }
                done.signal()
            }
            if !sent { done.signal() }
        }
        for _ in 0..<count { done.wait() }
        #expect(answered.load(ordering: .relaxed) == count)
        // 40 per key were allowed, each counted once: the replies went to their own callers.
        for key in ["t:p:0", "t:p:49"] {
            #expect(try server.command("HGET", key, "c").trimmingCharacters(in: .whitespacesAndNewlines) == "40")
        }
        // Pipelined: far fewer connections than callers (one).
        #expect(pipeline.currentStatistics.connectionsOpened == 1)
    }

    @Test func preparedCallsCountLikeGeneralOnesWhicheverWayEachCallerGoes() throws {
        let server = try RedisServerProcess()
        let pipeline = try RedisPipeline.connected(to: server, script: SharedLimitsScript.source)
        defer { pipeline.shutdown() }
        try #require(pipeline.isConnected)
        let arguments = Self.arguments(LimitPolicy(requests: 30, periodSeconds: 60))
        let call = pipeline.prepare(keyLengths: [8], arguments: arguments)
        let count = 1_000
        let allowed = Mutex<[String: Int]>([:])
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.concurrentPerform(iterations: count) { index in
            let key = "t:p:" + String(1_000 + index % 20)
            let record: RedisPipeline.Completion = { result in
                if case .success(RedisScriptAnswer(0)) = result { allowed.withLock { $0[key, default: 0] += 1 } }
                done.signal()
            }
            let sent =
                index % 2 == 0
                ? pipeline.evaluate(call, keys: [Array(key.utf8)], completion: record)
                : pipeline.evaluate(keys: [Array(key.utf8)], arguments: arguments, completion: record)
            if !sent { done.signal() }
        }
        for _ in 0..<count { done.wait() }
        // 50 calls per key, half of them prepared: exactly 30 allowed and all 50 counted for every key.
        let counts = allowed.withLock { $0 }
        #expect(counts.count == 20)
        #expect(counts.values.allSatisfy { $0 == 30 })
        for key in ["t:p:1000", "t:p:1019"] {
            #expect(try server.command("HGET", key, "c").trimmingCharacters(in: .whitespacesAndNewlines) == "50")
        }
    }

    @Test func aWrongPasswordIsReportedAsAuthAndNothingIsSent() throws {
        let server = try RedisServerProcess()
        let log = Recorder<RedisPipeline.Event>()
        let pipeline = try RedisPipeline.connected(
            to: server, script: SharedLimitsScript.source, password: "not-the-password", log: log)
        defer { pipeline.shutdown() }
        #expect(!pipeline.isConnected)
        #expect(log.wait { $0.first == .lost(RedisClientError(.auth, "")) })
        #expect(pipeline.evaluateAndWait(keys: [Array("t:p:x".utf8)], arguments: Self.arguments) == nil)
        #expect(try server.keysWithTTL().isEmpty)
        // One loss is reported once, however often the reconnection fails.
        #expect(Poll.until(within: .seconds(10)) { pipeline.currentStatistics.errors["auth", default: 0] >= 2 })
        #expect(log.all.count == 1)
    }

    @Test func noScriptAfterAFlushLoadsTheScriptAgainAndRetries() throws {
        let server = try RedisServerProcess()
        let pipeline = try RedisPipeline.connected(to: server, script: SharedLimitsScript.source)
        defer { pipeline.shutdown() }
        let key = Array("t:p:noscript".utf8)
        #expect(try pipeline.evaluateAndWait(keys: [key], arguments: Self.arguments)?.get() == 0)
        try server.command("SCRIPT", "FLUSH")
        #expect(try pipeline.evaluateAndWait(keys: [key], arguments: Self.arguments)?.get() == 0)
        #expect(pipeline.currentStatistics.scriptReloads == 1)
        #expect(try server.command("HGET", "t:p:noscript", "c").trimmingCharacters(in: .whitespacesAndNewlines) == "2")
        #expect(pipeline.currentStatistics.connectionsOpened == 1)
    }

    @Test func aRestartedServerIsReconnectedOnItsOwnAndTheScriptLoadedAgain() throws {
        let server = try RedisServerProcess()
        let log = Recorder<RedisPipeline.Event>()
        let pipeline = try RedisPipeline.connected(to: server, script: SharedLimitsScript.source, log: log) {
            $0.timeout = .milliseconds(500)
        }
        defer { pipeline.shutdown() }
        let key = Array("t:p:restart".utf8)
        #expect(try pipeline.evaluateAndWait(keys: [key], arguments: Self.arguments)?.get() == 0)
        server.stop()
        // Every request is answered (refused at once or failed); that none waits past the timeout is the machine's
        // test (RedisPipelineMachineTests, with a test clock).
        #expect(log.wait { $0.contains { if case .lost = $0 { true } else { false } } })
        for _ in 0..<20 {
            if let result = pipeline.evaluateAndWait(keys: [key], arguments: Self.arguments) {
                #expect(throws: RedisClientError.self) { try result.get() }
            }
        }
        try server.restart()
        #expect(log.wait { $0.last == .connected && $0.count == 3 })
        #expect(try pipeline.evaluateAndWait(keys: [key], arguments: Self.arguments)?.get() == 0)
        #expect(try server.command("HGET", "t:p:restart", "c").trimmingCharacters(in: .whitespacesAndNewlines) == "1")
    }

    @Test func tlsWithATrustedCAWorksAndAnUntrustedCertificateIsNeverUsed() throws {
        let pki = TestPKI.shared
        let files = RedisServerProcess.TLSFiles(certificate: pki.serverCertificate, key: pki.serverKey, ca: pki.caFile)
        let server = try RedisServerProcess(tls: files)
        let trusted = try RedisPipeline.connected(to: server, script: SharedLimitsScript.source) {
            $0.useTLS = true
            $0.caFile = files.ca
        }
        defer { trusted.shutdown() }
        #expect(trusted.isConnected)
        #expect(try trusted.evaluateAndWait(keys: [Array("t:p:tls".utf8)], arguments: Self.arguments)?.get() == 0)

        // Another CA's certificate, or the right CA for another name: never used, reported as TLS.
        let wrongName = RedisServerProcess.TLSFiles(
            certificate: pki.elsewhereCertificate, key: pki.elsewhereKey, ca: pki.bothCAsFile)
        for (caFile, serverFiles) in [(pki.otherCAFile, files), (pki.bothCAsFile, wrongName)] {
            let target =
                serverFiles.certificate == files.certificate ? server : try RedisServerProcess(tls: serverFiles)
            let log = Recorder<RedisPipeline.Event>()
            let untrusted = try RedisPipeline.connected(to: target, script: SharedLimitsScript.source, log: log) {
                $0.useTLS = true
                $0.caFile = caFile
            }
            defer { untrusted.shutdown() }
            #expect(!untrusted.isConnected)
            #expect(log.wait { $0.first == .lost(RedisClientError(.tls, "")) })
            #expect(untrusted.evaluateAndWait(keys: [Array("t:p:untrusted".utf8)], arguments: Self.arguments) == nil)
        }
        #expect(try server.keysWithTTL().map(\.key) == ["t:p:tls"])
    }
}

/// A server that breaks the protocol: the requests affected get a failure at once, the connection
/// is replaced, nothing crashes.
@Suite("RedisPipeline against a broken server", .serialized)
struct RedisPipelineFaultTests {
    func pipeline(
        _ fake: FakeRedisServer, log: Recorder<RedisPipeline.Event> = Recorder<RedisPipeline.Event>(),
        timeout: Duration = .seconds(2)
    ) throws
        -> RedisPipeline
    {
        var configuration = RedisClientConfiguration(
            host: "127.0.0.1", port: fake.port, script: SharedLimitsScript.source)
        configuration.timeout = timeout
        let pipeline = try RedisPipeline(configuration: configuration) { log.record($0) }
        pipeline.start()
        _ = pipeline.awaitFirstAttempt(timeout: .seconds(5))
        return pipeline
    }

    func digest() throws -> String {
        RedisPipeline.scriptDigest(of: SharedLimitsScript.source)
    }

    @Test(arguments: [FakeRedisServer.Behaviour.garbage, .wrongType, .closeAfter(2), .unsolicited])
    func brokenRepliesFailAtOnceAndTheConnectionIsReplaced(_ behaviour: FakeRedisServer.Behaviour) throws {
        let fake = try FakeRedisServer(behaviour: behaviour, digest: try digest())
        defer { fake.stop() }
        let log = Recorder<RedisPipeline.Event>()
        // A long timeout: the failures below must not be timeouts.
        let pipeline = try pipeline(fake, log: log, timeout: .seconds(5))
        defer { pipeline.shutdown() }
        #expect(log.wait { !$0.isEmpty })
        var failures: [RedisClientError] = []
        for round in 0..<6 {
            // Several calls in flight at once, as under load: each request with arguments of its own, so that none
            // joins another's call.
            let results = Mutex<[Result<RedisScriptAnswer, RedisClientError>]>([])
            let group = DispatchGroup()
            for index in 0..<5 {
                group.enter()
                let sent = pipeline.evaluate(
                    keys: [Array("t:p:\(round)-\(index)".utf8)],
                    arguments: RedisPipelineTests.arguments(LimitPolicy(requests: 1_000 + index, periodSeconds: 60))
                ) { result in
                    results.withLock { $0.append(result) }
                    group.leave()
                }
                if !sent { group.leave() }
            }
            #expect(group.wait(timeout: .now() + 30) == .success)
            failures += results.withLock {
                $0.compactMap { if case .failure(let error) = $0 { error } else { nil } }
            }
            // The next round once the pipeline has connected again (its reconnection delay is 50 ms and up), so that
            // every round's calls are sent rather than refused at once.
            #expect(Poll.until(within: .seconds(10)) { pipeline.isConnected })
        }
        #expect(!failures.isEmpty)
        // At once, not after the (long) timeout: the broken reply itself failed them.
        #expect(!failures.contains(RedisClientError(.timeout, "")))
        // Replaced, not given up on: the pipeline connected again.
        #expect(fake.connections.load(ordering: .relaxed) >= 2)
        #expect(
            log.all.contains(.lost(RedisClientError(.protocolError, "")))
                || log.all.contains(.lost(RedisClientError(.closed, ""))))
    }

    @Test func aSilentServerTimesOutEveryRequestWithinTheTimeout() throws {
        let fake = try FakeRedisServer(behaviour: .silent, digest: try digest())
        defer { fake.stop() }
        let log = Recorder<RedisPipeline.Event>()
        let pipeline = try pipeline(fake, log: log, timeout: .milliseconds(100))
        defer { pipeline.shutdown() }
        #expect(pipeline.isConnected)
        // Answered with a timeout (how soon, on a test clock: RedisPipelineMachineTests.noRequestWaitsPastTheTimeout).
        let result = try #require(
            pipeline.evaluateAndWait(keys: [Array("t:p:silent".utf8)], arguments: RedisPipelineTests.arguments))
        #expect(throws: RedisClientError(.timeout, "")) { try result.get() }
        #expect(log.wait { $0.contains(.lost(RedisClientError(.timeout, ""))) })
    }

    @Test func anAllowingFakeIsUsableSoTheFaultsAboveAreTheServersOwn() throws {
        let fake = try FakeRedisServer(behaviour: .allow, digest: try digest())
        defer { fake.stop() }
        let pipeline = try pipeline(fake)
        defer { pipeline.shutdown() }
        for index in 0..<10 {
            #expect(
                try pipeline.evaluateAndWait(
                    keys: [Array("t:p:\(index)".utf8)], arguments: RedisPipelineTests.arguments)?.get() == 0)
        }
        #expect(fake.connections.load(ordering: .relaxed) == 1)
    }
}
