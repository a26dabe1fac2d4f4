import Dispatch
import EventLoops
import Foundation
import RedisClient
import RedisTestSupport
import RelayCore
import RelayTestSupport
import Synchronization
import TCPForwarder
import Testing

/// The pipeline's shell on an event loop it is given (a worker's): everything happens on that loop's thread.
@Suite("RedisPipeline on a worker's loop", .serialized)
struct RedisPipelineLoopTests {
    static let arguments = SharedLimitsScript.arguments(
        address: LimitPolicy(requests: 1_000_000, periodSeconds: 60), phone: LimitPolicy(requests: 1, periodSeconds: 1))

    /// The process's threads (their ids).
    static func threads() -> Set<String> {
        Set((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? [])
    }

    /// A pipeline's configuration for `server`, with the shared-limits script.
    static func configuration(_ server: RedisServerProcess) -> RedisClientConfiguration {
        var configuration = RedisClientConfiguration(
            host: "127.0.0.1", port: server.port, script: SharedLimitsScript.source)
        configuration.password = server.password
        configuration.timeout = .seconds(5)
        return configuration
    }

    /// `count` requests made in one turn of `loop` (keys `t:<key prefix><index % keys>`); the completions that ran
    /// off the loop, and the requests that failed or could not be sent.
    static func turn(
        _ count: Int, keyPrefix: String, keys: Int, loop: EventLoop, pipeline: RedisPipeline
    ) -> (offLoop: Int, failed: Int) {
        let offLoop = Atomic<Int>(0)
        let failed = Atomic<Int>(0)
        let answered = Atomic<Int>(0)
        let done = DispatchSemaphore(value: 0)
        loop.execute {
            for index in 0..<count {
                let key = Array("t:\(keyPrefix)\(index % keys)".utf8)
                let sent = pipeline.evaluate(keys: [key], arguments: arguments) { result in
                    if !loop.isCurrent { offLoop.add(1, ordering: .relaxed) }
                    if case .failure = result { failed.add(1, ordering: .relaxed) }
                    if answered.add(1, ordering: .relaxed).newValue == count { done.signal() }
                }
                if !sent, answered.add(1, ordering: .relaxed).newValue == count {
                    failed.add(1, ordering: .relaxed)
                    done.signal()
                }
            }
        }
        #expect(done.wait(timeout: .now() + 30) == .success)
        return (offLoop.load(ordering: .relaxed), failed.load(ordering: .relaxed))
    }

    @Test func completionsRunOnTheLoopsThreadAndNoThreadStartsOnceConnected() throws {
        let server = try RedisServerProcess()
        let loop = try EventLoop(name: "test-worker")
        defer { loop.stop() }
        let configuration = Self.configuration(server)
        let eventsOffLoop = Atomic<Int>(0)
        let log = Recorder<RedisPipeline.Event>()
        let pipeline = try RedisPipeline(configuration: configuration, loop: loop) { event in
            if !loop.isCurrent { eventsOffLoop.add(1, ordering: .relaxed) }
            log.record(event)
        }
        defer { pipeline.shutdown() }
        pipeline.start()
        try #require(pipeline.awaitFirstAttempt(timeout: .seconds(10)))
        #expect(log.all == [.connected])

        func burst(_ count: Int) -> (offLoop: Int, failed: Int) {
            Self.turn(count, keyPrefix: "a:", keys: 10, loop: loop, pipeline: pipeline)
        }

        let first = burst(500)
        #expect(first.offLoop == 0)
        #expect(first.failed == 0)
        // Made from another thread, a request hops to the loop, and its completion runs there too.
        let hopped = Mutex<Bool?>(nil)
        let done = DispatchSemaphore(value: 0)
        #expect(
            pipeline.evaluate(keys: [Array("t:a:hop".utf8)], arguments: Self.arguments) { _ in
                hopped.withLock { $0 = loop.isCurrent }
                done.signal()
            })
        #expect(done.wait(timeout: .now() + 30) == .success)
        #expect(hopped.withLock { $0 } == true)
        #expect(eventsOffLoop.load(ordering: .relaxed) == 0)

        // Connected, the pipeline starts no thread: a burst leaves the process's threads as they were. Other suites
        // run beside this one and may start threads of their own, so windows are tried until one is clean: one clean
        // is proof. Under ThreadSanitizer beside the whole suite a burst of 300 takes several seconds, long enough for
        // every one of a few windows to see another suite's thread: hence many short windows.
        var clean = false
        for _ in 0..<20 where !clean {
            let before = Self.threads()
            let outcome = burst(100)
            #expect(outcome.failed == 0)
            clean = Self.threads().subtracting(before).isEmpty
        }
        #expect(clean, "every burst saw a new thread")
        #expect(pipeline.currentStatistics.connectionsOpened == 1)
    }

    /// The requests made in one turn of the loop (the requests of every client read in that turn) leave in one
    /// write, the first one included (not written at once, alone, with the rest waiting for its reply).
    @Test func theRequestsOfOneTurnOfTheLoopLeaveInOneWrite() throws {
        let server = try RedisServerProcess()
        let loop = try EventLoop(name: "test-worker")
        defer { loop.stop() }
        let configuration = Self.configuration(server)
        let pipeline = try RedisPipeline(configuration: configuration, loop: loop) { _ in }
        defer { pipeline.shutdown() }
        pipeline.start()
        try #require(pipeline.awaitFirstAttempt(timeout: .seconds(10)))

        /// `count` requests made in one turn of the loop; how many were answered without a failure.
        func turn(_ count: Int) -> Int {
            count - Self.turn(count, keyPrefix: "w:", keys: count, loop: loop, pipeline: pipeline).failed
        }

        // One request first, so that the pipeline knows the server's round trip (near: replies are waited for).
        #expect(turn(1) == 1)
        let before = pipeline.currentStatistics.writes
        #expect(turn(50) == 50)
        #expect(pipeline.currentStatistics.writes - before == 1)
    }

    /// The requests of one turn are decided in as few runs of the script as calls allow (32 requests a call), each
    /// request in the order it was made: a call runs the script once for all of its requests, and a request with a
    /// phone key and one without join the same call.
    @Test func theRequestsOfOneTurnShareScriptRunsAndAreDecidedInOrder() throws {
        let server = try RedisServerProcess()
        let loop = try EventLoop(name: "test-worker")
        defer { loop.stop() }
        let pipeline = try RedisPipeline(configuration: Self.configuration(server), loop: loop) { _ in }
        defer { pipeline.shutdown() }
        pipeline.start()
        try #require(pipeline.awaitFirstAttempt(timeout: .seconds(10)))

        /// Script runs the server has made so far (`INFO commandstats`).
        func scriptRuns() throws -> Int {
            let line = try server.command("INFO", "commandstats").split(whereSeparator: \.isNewline)
                .first { $0.hasPrefix("cmdstat_evalsha:") }
            return line.flatMap { Int($0.split(separator: "=")[1].split(separator: ",")[0]) } ?? 0
        }
        // The address: 40 a minute; the phone: 15 a minute. Even requests name the phone, odd ones do not.
        let arguments = SharedLimitsScript.arguments(
            address: LimitPolicy(requests: 40, periodSeconds: 60), phone: LimitPolicy(requests: 15, periodSeconds: 60))
        let address = Array("t:o:address".utf8)
        let phone = Array("t:o:phone".utf8)
        let count = 100
        let answers = Mutex<[Int: RedisScriptAnswer]>([:])
        let done = DispatchSemaphore(value: 0)
        let before = try scriptRuns()
        loop.execute {
            for index in 0..<count {
                let keys = index % 2 == 0 ? [address, phone] : [address]
                let sent = pipeline.evaluate(keys: keys, arguments: arguments) { result in
                    let answer = (try? result.get()) ?? RedisScriptAnswer(-1)
                    let answered = answers.withLock { all in
                        all[index] = answer
                        return all.count
                    }
                    if answered == count { done.signal() }
                }
                if !sent { done.signal() }
            }
        }
        #expect(done.wait(timeout: .now() + 30) == .success)
        let all = answers.withLock { $0 }
        try #require(all.count == count)
        // The first 40 are admitted for the address, in order; of those, the even ones ask for the phone too, and
        // its first 15 (requests 0, 2, ... 28) are admitted.
        for index in 0..<count {
            let answer = try #require(all[index])
            if index >= 40 {
                #expect(answer.first > 0, "request \(index): the address is over its limit")
                #expect(answer.second == nil, "request \(index): the phone is not counted")
                continue
            }
            #expect(answer.first == 0, "request \(index): the address is admitted")
            if index % 2 == 1 {
                #expect(answer.second == nil, "request \(index) names no phone")
            } else if index < 30 {
                #expect(answer.second == 0, "request \(index): the phone is admitted")
            } else {
                #expect((answer.second ?? 0) > 0, "request \(index): the phone is over its limit")
            }
        }
        #expect(try server.command("HGET", "t:o:phone", "c").trimmingCharacters(in: .whitespacesAndNewlines) == "20")
        // 100 requests of one turn: four calls of at most 32.
        #expect(try scriptRuns() - before == 4)
    }

    /// Shut down twice, then freed: its socket is closed once, at the first shutdown (the descriptor's number,
    /// free after that, may belong to another file by the time the pipeline goes).
    @Test func aPipelineShutDownTwiceClosesItsSocketOnce() throws {
        let listener = try LoopbackListener(backlog: 4)
        defer { close(listener.descriptor) }
        var pipeline: RedisPipeline? = try RedisPipeline(
            configuration: RedisClientConfiguration(
                host: "127.0.0.1", port: listener.port, script: SharedLimitsScript.source)
        ) { _ in }
        pipeline?.start()
        var entry = pollfd(fd: listener.descriptor, events: Int16(POLLIN), revents: 0)
        try #require(poll(&entry, 1, 10_000) == 1, "the pipeline did not connect")
        let accepted = accept(listener.descriptor, nil, nil)
        try #require(accepted >= 0)
        defer { close(accepted) }
        pipeline?.shutdown()
        pipeline?.shutdown()
        // The peer sees the connection end.
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(accepted, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var buffer = [UInt8](repeating: 0, count: 4096)
        var received = 1
        while received > 0 { received = recv(accepted, &buffer, buffer.count, 0) }
        #expect(received == 0 || errno == ECONNRESET)
        let other = open("/dev/null", O_RDONLY)
        try #require(other >= 0)
        defer { close(other) }
        pipeline = nil
        #expect(fcntl(other, F_GETFD) != -1, "a file opened after the shutdown was closed")
    }
}
