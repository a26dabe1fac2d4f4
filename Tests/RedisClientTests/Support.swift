import Dispatch
import Foundation
import RedisClient
import RedisTestSupport
import RelayTestSupport
import Synchronization
import Testing

/// A pipeline's events, recorded for waiting on them (RelayTestSupport's recorder).
typealias EventLog = Recorder<RedisPipeline.Event>

extension RedisPipeline {
    /// One evaluation, waited for: nil when the pipeline refused at once (not connected).
    func evaluateAndWait(keys: [[UInt8]], arguments: [[UInt8]]) -> Result<Int64, RedisClientError>? {
        answerAndWait(keys: keys, arguments: arguments)?.map(\.first)
    }

    /// One evaluation's whole answer (the integers after the tag), waited for: nil when refused at once.
    func answerAndWait(keys: [[UInt8]], arguments: [[UInt8]]) -> Result<RedisScriptAnswer, RedisClientError>? {
        let box = Mutex<Result<RedisScriptAnswer, RedisClientError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        let sent = evaluate(keys: keys, arguments: arguments) { result in
            box.withLock { $0 = result }
            done.signal()
        }
        guard sent else { return nil }
        // Bounded, so that a pipeline that never answers fails the test instead of hanging the suite.
        guard done.wait(timeout: .now() + 60) == .success else {
            Issue.record("no answer within 60 s")
            return .failure(RedisClientError(.unavailable, "no answer within 60 s"))
        }
        return box.withLock { $0 }
    }

    static func connected(
        to server: RedisServerProcess, script: String, password: String? = nil,
        log: Recorder<RedisPipeline.Event> = Recorder<RedisPipeline.Event>(),
        configure: (inout RedisClientConfiguration) -> Void = { _ in }
    ) throws -> RedisPipeline {
        var configuration = RedisClientConfiguration(host: "127.0.0.1", port: server.port, script: script)
        configuration.password = password ?? server.password
        // Generous: these tests are about replies, not timeouts, and share the machine with the whole suite.
        configuration.timeout = .seconds(5)
        configure(&configuration)
        let pipeline = try RedisPipeline(configuration: configuration) { log.record($0) }
        pipeline.start()
        _ = pipeline.awaitFirstAttempt(timeout: .seconds(10))
        return pipeline
    }
}
