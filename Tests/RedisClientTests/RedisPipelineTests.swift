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
    static let arguments = SharedWindowScript.arguments(policy)

    @Test func manyConcurrentCallersShareTheConnectionAndEachGetsItsReply() throws {
        let server = try RedisServerProcess()
        let pipeline = try RedisPipeline.connected(to: server, script: SharedWindowScript.source)
        defer { pipeline.shutdown() }
        try #require(pipeline.isConnected)
        let count = 2_000
        let answered = Atomic<Int>(0)
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.concurrentPerform(iterations: count) { index in
            let key = Array("t:p:\(index % 50)".utf8)
            let sent = pipeline.evaluate(
                keys: [key], arguments: SharedWindowScript.arguments(LimitPolicy(requests: 40, periodSeconds: 60))
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
        let pipeline = try RedisPipeline.connected(to: server, script: SharedWindowScript.source)
        defer { pipeline.shutdown() }
        try #require(pipeline.isConnected)
        let arguments = SharedWindowScript.arguments(LimitPolicy(requests: 30, periodSeconds: 60))
        let call = pipeline.prepare(keyLength: 8, arguments: arguments)
        let count = 1_000
        let allowed = Mutex<[String: Int]>([:])
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.concurrentPerform(iterations: count) { index in
            let key = "t:p:" + String(1_000 + index % 20)
            let record: RedisPipeline.Completion = { result in
                if case .success(0) = result { allowed.withLock { $0[key, default: 0] += 1 } }
                done.signal()
            }
            let sent =
                index % 2 == 0
                ? pipeline.evaluate(call, key: Array(key.utf8), completion: record)
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
        let log = EventLog()
        let pipeline = try RedisPipeline.connected(
            to: server, script: SharedWindowScript.source, password: "not-the-password", log: log)
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
        let pipeline = try RedisPipeline.connected(to: server, script: SharedWindowScript.source)
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
        let log = EventLog()
        let pipeline = try RedisPipeline.connected(to: server, script: SharedWindowScript.source, log: log) {
            $0.timeout = .milliseconds(500)
        }
        defer { pipeline.shutdown() }
        let key = Array("t:p:restart".utf8)
        #expect(try pipeline.evaluateAndWait(keys: [key], arguments: Self.arguments)?.get() == 0)
        server.stop()
        // Every request is answered (refused at once or failed) within the timeout and a margin.
        #expect(log.wait { $0.contains { if case .lost = $0 { true } else { false } } })
        for _ in 0..<20 {
            let start = ContinuousClock.now
            if let result = pipeline.evaluateAndWait(keys: [key], arguments: Self.arguments) {
                #expect(throws: RedisClientError.self) { try result.get() }
            }
            // Within the timeout and a margin for a loaded machine.
            #expect(elapsed(since: start) < 1.5)
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
        let trusted = try RedisPipeline.connected(to: server, script: SharedWindowScript.source) {
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
            let log = EventLog()
            let untrusted = try RedisPipeline.connected(to: target, script: SharedWindowScript.source, log: log) {
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
    func pipeline(_ fake: FakeRedisServer, log: EventLog = EventLog(), timeout: Duration = .seconds(2)) throws
        -> RedisPipeline
    {
        var configuration = RedisClientConfiguration(
            host: "127.0.0.1", port: fake.port, script: SharedWindowScript.source)
        configuration.timeout = timeout
        let pipeline = try RedisPipeline(configuration: configuration) { log.record($0) }
        pipeline.start()
        _ = pipeline.awaitFirstAttempt(timeout: .seconds(5))
        return pipeline
    }

    func digest() throws -> String {
        let probe = try RedisPipeline(
            configuration: RedisClientConfiguration(host: "127.0.0.1", port: 1, script: SharedWindowScript.source)
        ) { _ in }
        return probe.scriptDigest
    }

    @Test(arguments: [FakeRedisServer.Behaviour.garbage, .wrongType, .closeAfter(2), .unsolicited])
    func brokenRepliesFailAtOnceAndTheConnectionIsReplaced(_ behaviour: FakeRedisServer.Behaviour) throws {
        let fake = try FakeRedisServer(behaviour: behaviour, digest: try digest())
        defer { fake.stop() }
        let log = EventLog()
        // A long timeout: the failures below must not be timeouts.
        let pipeline = try pipeline(fake, log: log, timeout: .seconds(5))
        defer { pipeline.shutdown() }
        #expect(log.wait { !$0.isEmpty })
        var failures = 0
        let start = ContinuousClock.now
        for round in 0..<6 {
            // Several requests in flight at once, as under load.
            let results = Mutex<[Result<Int64, RedisClientError>]>([])
            let group = DispatchGroup()
            for index in 0..<5 {
                group.enter()
                let sent = pipeline.evaluate(
                    keys: [Array("t:p:\(round)-\(index)".utf8)], arguments: RedisPipelineTests.arguments
                ) { result in
                    results.withLock { $0.append(result) }
                    group.leave()
                }
                if !sent { group.leave() }
            }
            group.wait()
            failures += results.withLock { $0.filter { (try? $0.get()) == nil }.count }
            usleep(100_000)
        }
        #expect(elapsed(since: start) < 4)
        #expect(failures > 0)
        // Replaced, not given up on: the pipeline connected again.
        #expect(fake.connections.load(ordering: .relaxed) >= 2)
        #expect(
            log.all.contains(.lost(RedisClientError(.protocolError, "")))
                || log.all.contains(.lost(RedisClientError(.closed, ""))))
    }

    @Test func aSilentServerTimesOutEveryRequestWithinTheTimeout() throws {
        let fake = try FakeRedisServer(behaviour: .silent, digest: try digest())
        defer { fake.stop() }
        let log = EventLog()
        let pipeline = try pipeline(fake, log: log, timeout: .milliseconds(100))
        defer { pipeline.shutdown() }
        #expect(pipeline.isConnected)
        let start = ContinuousClock.now
        let result = try #require(
            pipeline.evaluateAndWait(keys: [Array("t:p:silent".utf8)], arguments: RedisPipelineTests.arguments))
        #expect(throws: RedisClientError(.timeout, "")) { try result.get() }
        // 100 ms and a margin for a loaded machine; far below the 5 s the fault tests allow.
        #expect(elapsed(since: start) < 1.0)
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
