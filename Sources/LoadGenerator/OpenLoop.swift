import CSystem
import Glibc

/// `open-loop`: sends requests on a fixed schedule whatever the answers (an open loop), over a pool of
/// keep-alive connections, and measures each request's latency from the instant it was due, so that a
/// slow answer delays no measurement (no coordinated omission).
struct OpenLoop {
    var address: sockaddr_in
    var requests: [[UInt8]]
    var rate: Double
    var seconds: Double
    var warmupSeconds: Double
    var connections: Int

    struct Report {
        var scheduled = 0
        var measured: [UInt64] = []
        var statuses: [Int: Int] = [:]
        var failures = 0
        var unanswered = 0
        var elapsedNanoseconds: UInt64 = 0
    }

    func run() throws(LoadError) -> Report {
        let poll = EventPoll()
        var pool: [ClientConnection] = []
        var idle: [Int] = []
        var connecting = Set<Int>()
        func open(_ index: Int) throws(LoadError) {
            guard let connection = ClientConnection(to: address) else {
                throw LoadError(.failed, "cannot connect (errno \(errno))")
            }
            if index < pool.count {
                idle.removeAll { $0 == index }
                poll.remove(pool[index].fd)
                pool[index] = connection
            } else {
                pool.append(connection)
            }
            if connection.connected {
                poll.add(connection.fd, token: UInt64(index))
                idle.append(index)
            } else {
                poll.add(connection.fd, token: UInt64(index), writable: true)
                connecting.insert(index)
            }
        }
        for index in 0..<connections { try open(index) }

        let timer = MonotonicClock.makeTimer()
        defer { close(timer) }
        let timerToken = UInt64.max
        poll.add(timer, token: timerToken)

        let interval = 1e9 / rate
        let total = Int((rate * (warmupSeconds + seconds)).rounded())
        let begin = MonotonicClock.now() + 50_000_000
        let measureFrom = begin + UInt64(warmupSeconds * 1e9)
        let giveUp = begin + UInt64((warmupSeconds + seconds) * 1e9) + 10_000_000_000
        func due(_ index: Int) -> UInt64 { begin + UInt64(Double(index) * interval) }

        var report = Report()
        report.scheduled = total
        report.measured.reserveCapacity(Int(rate * seconds) + 16)
        var next = 0
        var backlog: [UInt64] = []
        var backlogHead = 0
        var sent = 0
        var failure: LoadError?

        while true {
            let now = MonotonicClock.now()
            while next < total && due(next) <= now {
                backlog.append(due(next))
                next += 1
            }
            while backlogHead < backlog.count, let index = idle.popLast() {
                let connection = pool[index]
                connection.requestStart = backlog[backlogHead]
                backlogHead += 1
                if !connection.send(requests[sent % requests.count]) {
                    report.failures += 1
                    do throws(LoadError) { try open(index) } catch { failure = error }
                } else if connection.wantsWrite {
                    poll.modify(connection.fd, token: UInt64(index), writable: true)
                }
                sent += 1
            }
            if backlogHead > 4096 && backlogHead * 2 > backlog.count {
                backlog.removeFirst(backlogHead)
                backlogHead = 0
            }
            if let failure { throw failure }
            let busy = pool.count - idle.count - connecting.count
            if next == total && backlogHead == backlog.count && busy == 0 { break }
            if now > giveUp {
                report.unanswered = busy + backlog.count - backlogHead
                break
            }
            if next < total { MonotonicClock.arm(timer, at: due(next)) }
            poll.wait(timeoutMilliseconds: 100) { token, events in
                if token == timerToken {
                    MonotonicClock.drain(timer)
                    return
                }
                let index = Int(token)
                let connection = pool[index]
                if events & EPOLLOUT.rawValue != 0 {
                    if connecting.contains(index) {
                        connecting.remove(index)
                        if connection.finishConnect() {
                            poll.modify(connection.fd, token: token, writable: false)
                            idle.append(index)
                        } else {
                            report.failures += 1
                            do throws(LoadError) { try open(index) } catch { failure = error }
                        }
                        return
                    }
                    if !connection.flush() {
                        report.failures += 1
                        do throws(LoadError) { try open(index) } catch { failure = error }
                        return
                    }
                    if !connection.wantsWrite { poll.modify(connection.fd, token: token, writable: false) }
                }
                let readable = EPOLLIN.rawValue | EPOLLRDHUP.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue
                guard events & readable != 0, !connecting.contains(index) else { return }
                let answeredAt = MonotonicClock.now()
                guard let responses = connection.readResponses() else {
                    if connection.busy { report.failures += 1 }
                    do throws(LoadError) { try open(index) } catch { failure = error }
                    return
                }
                for response in responses {
                    report.statuses[response.status, default: 0] += 1
                    if connection.requestStart >= measureFrom {
                        report.measured.append(answeredAt - connection.requestStart)
                    }
                }
                if !responses.isEmpty && !connection.busy { idle.append(index) }
            }
        }
        report.elapsedNanoseconds = MonotonicClock.now() - begin
        return report
    }
}
