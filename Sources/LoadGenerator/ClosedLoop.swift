import CSystem
import Glibc

/// `closed-loop`: every connection sends its next request as soon as its previous one is answered
/// (saturation), for a warm-up and then a measured window; counts the answers within the window,
/// their latencies, and the watched processes' CPU over exactly that window.
struct ClosedLoop {
    var address: sockaddr_in
    var requests: [[UInt8]]
    var connections: Int
    var seconds: Double
    var warmupSeconds: Double

    struct Report {
        var statuses: [Int: Int] = [:]
        var latencies: [UInt64] = []
        var failures = 0
        /// The watched processes' JSON members over the measured window.
        var usage = ""

        var answers: Int { statuses.values.reduce(0, +) }
        var successes: Int { statuses[200] ?? 0 }
    }

    func run(watching watched: inout WatchedProcesses) throws(LoadError) -> Report {
        IdleConnections.raiseDescriptorLimit(to: connections + 64)
        let poll = EventPoll()
        var pool: [ClientConnection] = []
        var next = Int.random(in: 0..<requests.count)
        let begin = MonotonicClock.now()
        let measureFrom = begin + UInt64(warmupSeconds * 1e9)
        let measureUntil = measureFrom + UInt64(seconds * 1e9)
        var measuring = false
        var report = Report()
        var failure: LoadError?

        func send(_ index: Int) {
            let connection = pool[index]
            connection.requestStart = MonotonicClock.now()
            if !connection.send(requests[next % requests.count]) {
                report.failures += 1
                reopen(index)
            } else if connection.wantsWrite {
                poll.modify(connection.fd, token: UInt64(index), writable: true)
            }
            next += 1
        }
        func open() throws(LoadError) -> ClientConnection {
            guard let connection = ClientConnection(to: address) else {
                throw LoadError(.failed, "cannot connect (errno \(errno))")
            }
            return connection
        }
        func reopen(_ index: Int) {
            poll.remove(pool[index].fd)
            do throws(LoadError) {
                pool[index] = try open()
                poll.add(pool[index].fd, token: UInt64(index), writable: true)
            } catch { failure = error }
        }
        for index in 0..<connections {
            pool.append(try open())
            poll.add(pool[index].fd, token: UInt64(index), writable: true)
        }

        while failure == nil {
            let now = MonotonicClock.now()
            if !measuring && now >= measureFrom {
                measuring = true
                watched.start()
            }
            if now >= measureUntil {
                report.usage = watched.finish(answers: report.answers)
                break
            }
            let untilBoundary = (measuring ? measureUntil : measureFrom) - now
            let timeout = Int32(min(100, untilBoundary / 1_000_000 + 1))
            poll.wait(timeoutMilliseconds: timeout) { token, events in
                let index = Int(token)
                let connection = pool[index]
                if events & EPOLLOUT.rawValue != 0 {
                    if !connection.connected {
                        guard connection.finishConnect() else {
                            report.failures += 1
                            reopen(index)
                            return
                        }
                        poll.modify(connection.fd, token: token, writable: false)
                        send(index)
                        return
                    }
                    guard connection.flush() else {
                        report.failures += 1
                        reopen(index)
                        return
                    }
                    if !connection.wantsWrite { poll.modify(connection.fd, token: token, writable: false) }
                }
                let readable = EPOLLIN.rawValue | EPOLLRDHUP.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue
                guard events & readable != 0, connection.connected else { return }
                let answeredAt = MonotonicClock.now()
                guard let responses = connection.readResponses() else {
                    if connection.busy { report.failures += 1 }
                    reopen(index)
                    return
                }
                guard !responses.isEmpty else { return }
                if measuring && answeredAt < measureUntil {
                    for response in responses { report.statuses[response.status, default: 0] += 1 }
                    report.latencies.append(answeredAt - connection.requestStart)
                }
                if !connection.busy { send(index) }
            }
        }
        if let failure { throw failure }
        return report
    }
}
