import CSystem
import Foundation
import Glibc

/// `idle`: opens many keep-alive connections, makes one request on each (so each is a used keep-alive
/// connection, as a channel's would be), then holds them all idle and reads the relay's memory.
struct IdleConnections {
    var address: sockaddr_in
    var host: String
    var count: Int
    var relayPID: Int32
    var settleSeconds: Double

    struct Report {
        var answered = 0
        var stillOpen = 0
        var failures = 0
        var rssKilobytes = 0
        var peakKilobytes = 0
    }

    func run() throws(LoadError) -> Report {
        Self.raiseDescriptorLimit(to: count + 64)
        let poll = EventPoll()
        var pool: [ClientConnection?] = []
        pool.reserveCapacity(count)
        var report = Report()
        var inProgress = 0
        var opened = 0
        let request = HTTPRequestBytes.get(path: "/healthz", host: host)
        let deadline = MonotonicClock.now() + 120_000_000_000
        while report.answered + report.failures < count {
            while opened < count && inProgress < 256 {
                guard let connection = ClientConnection(to: address) else {
                    throw LoadError(.failed, "cannot open connection \(opened + 1) (errno \(errno))")
                }
                poll.add(connection.fd, token: UInt64(opened), writable: true)
                pool.append(connection)
                opened += 1
                inProgress += 1
            }
            guard MonotonicClock.now() < deadline else { throw LoadError(.failed, "opening connections took too long") }
            poll.wait(timeoutMilliseconds: 100) { token, events in
                guard let connection = pool[Int(token)] else { return }
                if !connection.busy {
                    guard events & EPOLLOUT.rawValue != 0 else { return }
                    guard connection.connected || connection.finishConnect(), connection.send(request) else {
                        poll.remove(connection.fd)
                        pool[Int(token)] = nil
                        report.failures += 1
                        inProgress -= 1
                        return
                    }
                    poll.modify(connection.fd, token: token, writable: false)
                    return
                }
                guard let responses = connection.readResponses() else {
                    poll.remove(connection.fd)
                    pool[Int(token)] = nil
                    report.failures += 1
                    inProgress -= 1
                    return
                }
                if let response = responses.first {
                    if response.status == 200 { report.answered += 1 } else { report.failures += 1 }
                    inProgress -= 1
                }
            }
        }
        // Let the relay settle, then read its memory while every connection is held.
        usleep(UInt32(settleSeconds * 1e6))
        (report.rssKilobytes, report.peakKilobytes) = Self.memory(of: relayPID)
        var closed = 0
        poll.wait(timeoutMilliseconds: 0) { _, _ in closed += 1 }
        report.stillOpen = pool.reduce(0) { $0 + ($1 == nil ? 0 : 1) } - closed
        return report
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
