import EventLoops

/// `closed-loop`: every connection sends its next request as soon as its previous one is answered
/// (saturation), for a warm-up and then a measured window; counts the answers within the window,
/// their latencies, and the watched processes' CPU over exactly that window.
struct ClosedLoop: Sendable {
    var address: ResolvedAddress
    var requests: [[UInt8]]
    var connections: Int
    var seconds: Double
    var warmupSeconds: Double
    /// HTTPS instead of plain HTTP.
    var tls: LoadTLS? = nil

    struct Report: Sendable {
        var statuses: [Int: Int] = [:]
        var latencies: [UInt64] = []
        var failures = 0
        /// The watched processes' JSON members over the measured window.
        var usage = ""

        var answers: Int { statuses.values.reduce(0, +) }
        var successes: Int { statuses[200] ?? 0 }
    }

    func run(watching watched: WatchedProcesses) throws(LoadError) -> Report {
        IdleConnections.raiseDescriptorLimit(to: connections + 64)
        return try LoadLoop.run("load-closed") { [self] loop, finish throws(LoadError) in
            try Run(self, watching: watched, loop: loop, finish: finish).start()
        }
    }

    /// One run, on its loop's thread.
    private final class Run: LoadRun {
        let settings: ClosedLoop
        var watched: WatchedProcesses
        let loop: EventLoop
        let finish: (Result<Report, LoadError>) -> Void
        var pool: [ClientConnection] = []
        var next: Int
        var measureFrom: UInt64 = 0
        var measureUntil: UInt64 = 0
        var measuring = false
        var report = Report()
        /// Fires at the window's start and end.
        var window: LoopTimer?
        var finished = false

        init(
            _ settings: ClosedLoop, watching watched: WatchedProcesses, loop: EventLoop,
            finish: @escaping (Result<Report, LoadError>) -> Void
        ) {
            self.settings = settings
            self.watched = watched
            self.loop = loop
            self.finish = finish
            next = Int.random(in: 0..<settings.requests.count)
        }

        func start() throws(LoadError) {
            let begin = MonotonicClock.now()
            measureFrom = begin + UInt64(settings.warmupSeconds * 1e9)
            measureUntil = measureFrom + UInt64(settings.seconds * 1e9)
            for index in 0..<settings.connections {
                pool.append(
                    try ClientConnection.open(index, to: settings.address, tls: settings.tls, on: loop, owner: self))
            }
            // The timer holds the run until it closes.
            window = LoopTimer(on: loop) { [self] in boundary() }
            boundary()
        }

        /// Starts or ends the measured window when its time has come; otherwise waits for it.
        func boundary() {
            guard !finished, let window else { return }
            let now = MonotonicClock.now()
            if !measuring && now >= measureFrom {
                measuring = true
                watched.start()
            }
            if now >= measureUntil {
                report.usage = watched.finish(answers: report.answers)
                end(.success(report))
                return
            }
            // Whole milliseconds, rounded up: the loop's timers are no finer.
            let wait = (measuring ? measureUntil : measureFrom) - now
            window.schedule(afterMilliseconds: (wait + 999_999) / 1_000_000)
        }

        func closeTimers() { window?.close() }

        func send(_ client: ClientConnection) {
            client.requestStart = MonotonicClock.now()
            client.send(settings.requests[next % settings.requests.count])
            next += 1
        }

        func clientDidConnect(_ client: ClientConnection) {
            guard !finished else { return }
            send(client)
        }

        func client(
            _ client: ClientConnection, didReceive status: Int, body: UnsafeRawBufferPointer, at instant: UInt64
        ) {
            guard !finished else { return }
            if measuring && instant < measureUntil {
                report.statuses[status, default: 0] += 1
                report.latencies.append(instant - client.requestStart)
            }
            if !client.busy { send(client) }
        }

        /// The relay closed a connection (or it broke): a request in flight on it is a failure; a new
        /// connection takes its place.
        func clientDidEnd(_ client: ClientConnection) {
            guard !finished else { return }
            if client.busy { report.failures += 1 }
            do throws(LoadError) {
                pool[client.index] = try ClientConnection.open(
                    client.index, to: settings.address, tls: settings.tls, on: loop, owner: self)
            } catch {
                end(.failure(error))
            }
        }
    }
}
