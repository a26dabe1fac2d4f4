import EventLoops

/// `open-loop`: sends requests on a fixed schedule whatever the answers (an open loop), over a pool of
/// keep-alive connections, and measures each request's latency from the instant it was due, so that a
/// slow answer delays no measurement (no coordinated omission).
///
/// The schedule is kept by a `PreciseTimer` (nanoseconds): a `LoopTimer`'s milliseconds would send in
/// bursts at the higher rates (five at once every millisecond at 5,000/s) and each request up to a
/// millisecond late, counted as the target's latency.
struct OpenLoop: Sendable {
    var address: ResolvedAddress
    var requests: [[UInt8]]
    var rate: Double
    var seconds: Double
    var warmupSeconds: Double
    var connections: Int
    /// HTTPS instead of plain HTTP.
    var tls: LoadTLS? = nil

    struct Report: Sendable {
        var scheduled = 0
        var measured: [UInt64] = []
        var statuses: [Int: Int] = [:]
        var failures = 0
        var unanswered = 0
        var elapsedNanoseconds: UInt64 = 0
    }

    func run() throws(LoadError) -> Report {
        try LoadLoop.run("load-open") { [self] loop, finish throws(LoadError) in
            try Run(self, loop: loop, finish: finish).start()
        }
    }

    /// One run, on its loop's thread: requests fall due in order; each goes out on an idle connection as soon
    /// as there is one (waiting in the backlog meanwhile, its due time kept).
    private final class Run: LoadRun {
        let settings: OpenLoop
        let loop: EventLoop
        let finish: (Result<Report, LoadError>) -> Void
        var pool: [ClientConnection] = []
        var idle: [Int] = []
        var connecting = 0
        var report = Report()
        var total = 0
        var interval = 0.0
        var begin: UInt64 = 0
        var measureFrom: UInt64 = 0
        /// The next request to fall due.
        var next = 0
        /// Due times of requests waiting for a connection, from `backlogHead` on.
        var backlog: [UInt64] = []
        var backlogHead = 0
        var sent = 0
        var pacer: PreciseTimer?
        var giveUp: LoopTimer?
        var finished = false

        init(_ settings: OpenLoop, loop: EventLoop, finish: @escaping (Result<Report, LoadError>) -> Void) {
            self.settings = settings
            self.loop = loop
            self.finish = finish
        }

        func start() throws(LoadError) {
            for index in 0..<settings.connections { try open(index) }
            do {
                // The timers hold the run until they close.
                pacer = try PreciseTimer(on: loop) { [self] in pump() }
            } catch {
                throw LoadError(.failed, "cannot make a timer: \(error.reason)")
            }
            interval = 1e9 / settings.rate
            total = Int((settings.rate * (settings.warmupSeconds + settings.seconds)).rounded())
            begin = MonotonicClock.now() + 50_000_000
            measureFrom = begin + UInt64(settings.warmupSeconds * 1e9)
            report.scheduled = total
            report.measured.reserveCapacity(Int(settings.rate * settings.seconds) + 16)
            // Answers still missing 10 s after the last request fell due are given up.
            let giveUpAfter = UInt64((settings.warmupSeconds + settings.seconds) * 1e3) + 50 + 10_000
            let timer = LoopTimer(on: loop) { [self] in
                report.unanswered = busy + backlog.count - backlogHead
                complete()
            }
            timer.schedule(afterMilliseconds: giveUpAfter)
            giveUp = timer
            pump()
        }

        func due(_ index: Int) -> UInt64 { begin + UInt64(Double(index) * interval) }

        var busy: Int { pool.count - idle.count - connecting }

        func open(_ index: Int) throws(LoadError) {
            let client = try ClientConnection.open(
                index, to: settings.address, tls: settings.tls, on: loop, owner: self)
            if index < pool.count {
                pool[index] = client
            } else {
                pool.append(client)
            }
            connecting += 1
        }

        /// Moves the requests now due to the backlog, sends what idle connections can take, and sets the timer
        /// for the next request (or ends the run once every request is answered).
        func pump() {
            guard !finished else { return }
            let now = MonotonicClock.now()
            while next < total && due(next) <= now {
                backlog.append(due(next))
                next += 1
            }
            while backlogHead < backlog.count, let index = idle.popLast() {
                let client = pool[index]
                client.requestStart = backlog[backlogHead]
                backlogHead += 1
                client.send(settings.requests[sent % settings.requests.count])
                sent += 1
            }
            if backlogHead > 4096 && backlogHead * 2 > backlog.count {
                backlog.removeFirst(backlogHead)
                backlogHead = 0
            }
            if next == total && backlogHead == backlog.count && busy == 0 {
                complete()
                return
            }
            if next < total, let pacer, pacer.deadline != due(next) {
                pacer.schedule(atNanoseconds: due(next))
            }
        }

        func complete() {
            report.elapsedNanoseconds = MonotonicClock.now() - begin
            end(.success(report))
        }

        func closeTimers() {
            pacer?.close()
            giveUp?.close()
        }

        func clientDidConnect(_ client: ClientConnection) {
            guard !finished else { return }
            connecting -= 1
            idle.append(client.index)
            pump()
        }

        func client(
            _ client: ClientConnection, didReceive status: Int, body: UnsafeRawBufferPointer, at instant: UInt64
        ) {
            guard !finished else { return }
            report.statuses[status, default: 0] += 1
            if client.requestStart >= measureFrom {
                report.measured.append(instant - client.requestStart)
            }
            guard !client.busy else { return }
            idle.append(client.index)
            if backlogHead < backlog.count || next == total { pump() }
        }

        /// The relay closed a connection (or it broke): a request in flight on it is a failure; a new
        /// connection takes its place.
        func clientDidEnd(_ client: ClientConnection) {
            guard !finished else { return }
            if client.busy { report.failures += 1 }
            idle.removeAll { $0 == client.index }
            do throws(LoadError) { try open(client.index) } catch { end(.failure(error)) }
        }
    }
}
