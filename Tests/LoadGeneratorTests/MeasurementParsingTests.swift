import Testing

@testable import LoadGenerator

@Suite("The benchmark's readings of strace and h2load")
struct MeasurementParsingTests {
    @Test("strace -c: calls per system call, with and without an errors column; the total line skipped")
    func straceSummary() {
        let summary = """
            % time     seconds  usecs/call     calls    errors syscall
            ------ ----------- ----------- --------- --------- ----------------
             45.00    0.001000          10      2332       466 read
             30.00    0.000600           5      1711           epoll_wait
             20.00    0.000400           4       844           poll
              5.00    0.000100          50         3           clone3
            ------ ----------- ----------- --------- --------- ----------------
            100.00    0.002100           4      4890       466 total
            """
        let calls = SyscallCount.parse(summary)
        #expect(calls == ["read": 2332, "epoll_wait": 1711, "poll": 844, "clone3": 3])
        var report = SyscallCount.Report()
        report.calls = calls
        #expect(report.total == 4890)
        #expect(report.wakeups == 2555)
        #expect(report.threadStarts == 3)
    }

    @Test("h2load: requests per second and the failed, errored and timed-out requests")
    func h2loadSummary() throws {
        let output = """
            starting benchmark...
            finished in 6.00s, 51921.33 req/s, 3.45MB/s
            requests: 311528 total, 311592 started, 311528 done, 311520 succeeded, 5 failed, 2 errored, 1 timeout
            status codes: 311520 2xx, 0 3xx, 0 4xx, 0 5xx
            """
        let report = try #require(DirectLoad.parse(output))
        #expect(report.requestsPerSecond == 51921.33)
        #expect(report.failed == 8)
        #expect(DirectLoad.parse("-D: value error 1.000s") == nil)
    }
}
