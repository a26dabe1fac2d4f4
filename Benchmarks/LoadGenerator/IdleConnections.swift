import EventLoops
import Foundation
import Glibc

/// `idle`: opens many keep-alive connections, makes one request on each (so each is a used keep-alive
/// connection, as a channel's would be), then holds them all idle and reads the relay's memory.
struct IdleConnections: Sendable {
    var address: ResolvedAddress
    var host: String
    var count: Int
    var relayPID: Int32
    var settleSeconds: Double
    /// HTTPS instead of plain HTTP.
    var tls: LoadTLS? = nil
    /// The one request each connection makes, taken in turn (pushes: a channel's connection idle after its last
    /// push); none: `GET /healthz`.
    var requests: [[UInt8]] = []

    struct Report: Sendable {
        var answered = 0
        var stillOpen = 0
        var failures = 0
        var rssKilobytes = 0
        var peakKilobytes = 0
    }

    func run() throws(LoadError) -> Report {
        Self.raiseDescriptorLimit(to: count + 64)
        return try LoadLoop.run("load-idle") { [self] loop, finish throws(LoadError) in
            try Run(self, loop: loop, finish: finish).start()
        }
    }

    /// One run, on its loop's thread: at most 256 connections opening at once; once every connection is
    /// answered (or failed), they are held for `settleSeconds` and the relay's memory is read.
    private final class Run: LoadRun {
        let settings: IdleConnections
        let loop: EventLoop
        let finish: (Result<Report, LoadError>) -> Void
        let request: [UInt8]
        var pool: [ClientConnection] = []
        /// Per connection: answered and now held open.
        var held: [Bool] = []
        var report = Report()
        var inProgress = 0
        var heldCount = 0
        /// Held connections that the relay closed since.
        var closed = 0
        /// The bound on opening them all, then the settling time.
        var timer: LoopTimer?
        var holding = false
        var finished = false

        init(_ settings: IdleConnections, loop: EventLoop, finish: @escaping (Result<Report, LoadError>) -> Void) {
            self.settings = settings
            self.loop = loop
            self.finish = finish
            request = HTTPRequestBytes.get(path: "/healthz", host: settings.host)
            pool.reserveCapacity(settings.count)
            held.reserveCapacity(settings.count)
        }

        func start() throws(LoadError) {
            let timer = LoopTimer(on: loop) { [self] in
                end(.failure(LoadError(.failed, "opening connections took too long")))
            }
            timer.schedule(afterMilliseconds: 120_000)
            self.timer = timer
            try openMore()
            settleIfDone()
        }

        func openMore() throws(LoadError) {
            while pool.count < settings.count && inProgress < 256 {
                do {
                    pool.append(
                        try ClientConnection.open(
                            pool.count, to: settings.address, tls: settings.tls, on: loop, owner: self))
                } catch {
                    throw LoadError(.failed, "cannot open connection \(pool.count + 1) (\(error.reason))")
                }
                held.append(false)
                inProgress += 1
            }
        }

        /// Once every connection is answered or failed: hold them, let the relay settle, read its memory.
        func settleIfDone() {
            guard !holding, report.answered + report.failures == settings.count, let timer else { return }
            holding = true
            timer.close()
            let settle = LoopTimer(on: loop) { [self] in
                (report.rssKilobytes, report.peakKilobytes) = IdleConnections.memory(of: settings.relayPID)
                report.stillOpen = heldCount - closed
                end(.success(report))
            }
            settle.schedule(afterMilliseconds: UInt64(settings.settleSeconds * 1e3))
            self.timer = settle
        }

        func closeTimers() { timer?.close() }

        /// An opening connection failed before its answer: counted, and the next one may open.
        func failed() {
            report.failures += 1
            inProgress -= 1
            do throws(LoadError) { try openMore() } catch { end(.failure(error)) }
            settleIfDone()
        }

        func clientDidConnect(_ client: ClientConnection) {
            guard !finished else { return }
            client.send(settings.requests.isEmpty ? request : settings.requests[client.index % settings.requests.count])
        }

        func client(_ client: ClientConnection, didFailToConnect error: LoopError) {
            guard !finished else { return }
            failed()
        }

        func client(
            _ client: ClientConnection, didReceive status: Int, body: UnsafeRawBufferPointer, at instant: UInt64
        ) {
            guard !finished, !held[client.index] else { return }
            // Held open whatever the answer, as a channel's connection would be; only a 200 counts as answered.
            held[client.index] = true
            heldCount += 1
            if status == 200 { report.answered += 1 } else { report.failures += 1 }
            inProgress -= 1
            do throws(LoadError) { try openMore() } catch { end(.failure(error)) }
            settleIfDone()
        }

        func clientDidEnd(_ client: ClientConnection) {
            guard !finished else { return }
            if held[client.index] {
                closed += 1
            } else {
                failed()
            }
        }
    }

    /// VmRSS and VmHWM of a process, in kB (0 if unreadable).
    static func memory(of pid: Int32) -> (rss: Int, peak: Int) {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return (0, 0) }
        func value(_ name: String) -> Int {
            guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return 0 }
            return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") ?? 0
        }
        return (value("VmRSS"), value("VmHWM"))
    }

    /// Many connections need many descriptors: raise the soft limit as far as the hard limit allows.
    static func raiseDescriptorLimit(to wanted: Int) {
        var limit = rlimit()
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        guard getrlimit(resource, &limit) == 0, limit.rlim_cur < rlim_t(wanted) else { return }
        limit.rlim_cur = min(limit.rlim_max, rlim_t(wanted))
        _ = setrlimit(resource, &limit)
    }
}
