import Dispatch
import EventLoops
import Foundation
import HTTP2Client
import RelayTestSupport
import Synchronization
import Testing

/// Throughput of ~3.5 KB POSTs over loopback TLS to the simulator (as a plain HTTP/2 server). Runs only with
/// HTTP2CLIENT_BENCHMARK=1 (it takes a few seconds and both cores).
@Suite("HTTP2Client throughput")
struct HTTP2ClientBenchmark {
    @Test(.enabled(if: ProcessInfo.processInfo.environment["HTTP2CLIENT_BENCHMARK"] == "1"))
    func postsPerSecond() async throws {
        let server = try TestHTTP2Server(files: ["ok": "{}"], echo: false)
        let connections = Int(ProcessInfo.processInfo.environment["HTTP2CLIENT_CONNECTIONS"] ?? "") ?? 2
        let client = try HTTP2Client(
            configuration: HTTP2ClientConfiguration(
                origin: server.origin, caFile: TestPKI.shared.caFile, maxConnections: connections))
        defer { client.shutdown() }
        let total = Int(ProcessInfo.processInfo.environment["HTTP2CLIENT_REQUESTS"] ?? "") ?? 30_000
        let window = Int(ProcessInfo.processInfo.environment["HTTP2CLIENT_WINDOW"] ?? "") ?? 1000
        let body = [UInt8](repeating: UInt8(ascii: "x"), count: 3500)
        let headers = [
            ("authorization", "bearer " + String(repeating: "j", count: 180)), ("apns-topic", "app.test"),
            ("apns-push-type", "alert"), ("apns-priority", "10"), ("apns-expiration", "0"),
        ]
        // Warm up: open the connections.
        for _ in 0..<2 { _ = await client.send(HTTP2Request(path: "/ok", body: body)) }
        let failures = Atomic<Int>(0)
        let seconds = await withCheckedContinuation { (continuation: CheckedContinuation<Double, Never>) in
            Thread.detachNewThread {
                let slots = DispatchSemaphore(value: window)
                let done = DispatchSemaphore(value: 0)
                let remaining = Atomic<Int>(total)
                let started = ContinuousClock.now
                for i in 0..<total {
                    slots.wait()
                    client.send(HTTP2Request(path: "/ok", headers: headers, body: body)) { result in
                        if (try? result.get().status) != 200 {
                            if failures.add(1, ordering: .relaxed).newValue == 1 { print("first failure: \(result)") }
                        }
                        slots.signal()
                        if remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { done.signal() }
                    }
                    _ = i
                }
                done.wait()
                let elapsed = ContinuousClock.now - started
                let (s, atto) = elapsed.components
                continuation.resume(returning: Double(s) + Double(atto) / 1e18)
            }
        }
        let statistics = client.statistics
        print(
            "HTTP2Client benchmark: \(total) POSTs of \(body.count) bytes in \(seconds) s = "
                + "\(Int(Double(total) / seconds)) req/s; \(statistics)")
        #expect(failures.load(ordering: .relaxed) == 0)
    }
}

/// A steady rate on a client given a loop, for counting system calls per request (`strace -c -f -p <test process>`
/// counts the simulator's threads too, which run in the same process: count the client's loop thread, `steady`,
/// alone). Runs only with HTTP2CLIENT_STEADY=<requests>.
@Suite("HTTP2Client at a steady rate")
struct HTTP2ClientSteadyRate {
    final class Progress: Sendable {
        let answered = Atomic<Int>(0)
        let failed = Atomic<Int>(0)
    }

    @Test(.enabled(if: ProcessInfo.processInfo.environment["HTTP2CLIENT_STEADY"] != nil))
    func oneRequestPerMillisecond() async throws {
        let total = Int(ProcessInfo.processInfo.environment["HTTP2CLIENT_STEADY"] ?? "") ?? 1000
        let server = try TestHTTP2Server(files: ["ok": "{}"], echo: false)
        let loop = try EventLoop(name: "steady")
        defer { loop.stop() }
        let client = try HTTP2Client(
            configuration: HTTP2ClientConfiguration(
                origin: server.origin, caFile: TestPKI.shared.caFile, maxConnections: 1),
            loop: loop)
        defer { client.shutdown() }
        let body = [UInt8](repeating: UInt8(ascii: "x"), count: 3500)
        #expect(try await client.send(HTTP2Request(path: "/ok", body: body)).get().status == 200)
        let progress = Progress()
        let started = ContinuousClock.now
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            loop.execute {
                var sent = 0
                var timer: LoopTimer?
                timer = LoopTimer(on: loop) {
                    client.send(HTTP2Request(path: "/ok", body: body)) { result in
                        if (try? result.get().status) == 200 {
                            progress.answered.add(1, ordering: .relaxed)
                        } else {
                            progress.failed.add(1, ordering: .relaxed)
                        }
                        if progress.answered.load(ordering: .relaxed) + progress.failed.load(ordering: .relaxed)
                            == total
                        {
                            done.resume()
                        }
                    }
                    sent += 1
                    if sent < total { timer?.schedule(afterMilliseconds: 1) } else { timer?.close() }
                }
                timer?.schedule(afterMilliseconds: 1)
            }
        }
        print(
            "HTTP2Client steady rate: \(total) requests in \(ContinuousClock.now - started), "
                + "\(progress.failed.load(ordering: .relaxed)) failed")
        #expect(progress.answered.load(ordering: .relaxed) == total)
    }
}
