import Foundation
import Testing

@testable import LoadGenerator

@Suite("The benchmark's report: figures from the steps, null when a run went wrong")
struct BenchReportTests {
    private func step(_ name: String, _ json: String) throws -> BenchReport.Step {
        BenchReport.Step(name: name, data: try #require(JSONText.object(Substring(json))))
    }

    private func value(_ figures: [BenchReport.Figure], _ key: String) -> Double? {
        figures.first { $0.key == key }?.value
    }

    @Test("medians over rounds, and the ratio of two medians")
    func mediansAndRatio() throws {
        let report = BenchReport(steps: [
            try step("saturation", #"{"answers":1000,"ok":1000,"rps":900,"cpu_us":{"relay":40,"simulator":30}}"#),
            try step("saturation", #"{"answers":1000,"ok":1000,"rps":1100,"cpu_us":{"relay":50,"simulator":31}}"#),
            try step("saturation", #"{"answers":1000,"ok":1000,"rps":1000,"cpu_us":{"relay":60,"simulator":32}}"#),
            try step("direct", #"{"seconds":6,"rps":2000,"failed":0,"cpu_us":{"simulator":20}}"#),
            try step("direct", #"{"seconds":6,"rps":4000,"failed":0,"cpu_us":{"simulator":22}}"#),
        ])
        let figures = report.figures()
        #expect(value(figures, "push_rps") == 1000)
        #expect(value(figures, "push_cpu_us") == 50)
        #expect(value(figures, "simulator_cpu_us") == 31)
        #expect(value(figures, "direct_rps") == 3000)
        #expect(value(figures, "ratio") == 1000.0 / 3000.0)
    }

    @Test("the relay over the simulator at 1,000/s: the median of each run's own ratio")
    func relayOverSimulator() throws {
        // One `rate-relay` run: every request answered 200, with each program's CPU per push.
        func run(rate: Int, relay: Int, simulator: Int) throws -> BenchReport.Step {
            let requests = rate * 7
            return try step(
                "rate-relay",
                #"{"rate":\#(rate),"scheduled":\#(requests),"statuses":{"200":\#(requests)},"#
                    + #""cpu_us":{"relay":\#(relay),"simulator":\#(simulator)}}"#)
        }
        let report = BenchReport(steps: [
            try run(rate: 1000, relay: 100, simulator: 80),
            try run(rate: 1000, relay: 160, simulator: 100),
            try run(rate: 1000, relay: 120, simulator: 100),
            try run(rate: 200, relay: 300, simulator: 100),
        ])
        let figures = report.figures()
        // 1.25, 1.6 and 1.2: the median of the ratios, not the ratio of the medians (120 / 100).
        #expect(value(figures, "relay_over_simulator_at_1000") == 1.25)
        #expect(value(figures, "push_cpu_us_at_1000") == 120)
    }

    @Test("a run with fewer than 99 % of its requests answered 200 leaves its figure null")
    func failedRunIsNull() throws {
        let report = BenchReport(steps: [
            try step("saturation", #"{"answers":1000,"ok":1000,"rps":1000,"cpu_us":{"relay":40}}"#),
            try step("saturation", #"{"answers":1000,"ok":900,"rps":900,"cpu_us":{"relay":40}}"#),
            try step("rate-nginx", #"{"rate":1000,"scheduled":7000,"statuses":{"200":6000},"cpu_us":{"nginx":80}}"#),
            try step("rate-nginx", #"{"rate":200,"scheduled":1400,"statuses":{"200":1400},"cpu_us":{"nginx":150}}"#),
        ])
        let figures = report.figures()
        #expect(value(figures, "push_rps") == nil)
        #expect(value(figures, "nginx_cpu_us_at_1000") == nil)
        #expect(value(figures, "nginx_cpu_us_at_200") == 150)
        // Never measured at all: null too.
        #expect(value(figures, "syscalls_per_push_at_1000") == nil)
        #expect(figures.filter { $0.inJSON && $0.value == nil }.count > 0)
    }

    @Test("the relay against nginx at a rate, and the threads the relay started")
    func anchorAndThreads() throws {
        let report = BenchReport(steps: [
            try step(
                "rate-relay",
                #"{"rate":200,"scheduled":1400,"statuses":{"200":1400},"cpu_us":{"relay":300},"threads_started":{"relay":2}}"#
            ),
            try step("rate-nginx", #"{"rate":200,"scheduled":1400,"statuses":{"200":1400},"cpu_us":{"nginx":150}}"#),
            try step(
                "syscalls",
                #"{"scheduled":5000,"ok":5000,"syscalls_per_push":20.5,"wakeups_per_push":5.8,"thread_starts":0}"#),
        ])
        let figures = report.figures()
        #expect(value(figures, "cpu_ratio_to_nginx_at_200") == 2)
        #expect(value(figures, "syscalls_per_push_at_1000") == 20.5)
        #expect(value(figures, "wakeups_per_push_at_1000") == 5.8)
        #expect(value(figures, "threads_started") == 2)
    }

    @Test("TLS: saturated medians and their ratio; at 1,000/s the pair's two processes added run by run")
    func tlsFigures() throws {
        func fixed(_ step: String, _ cpu: String) throws -> BenchReport.Step {
            try self.step(step, #"{"rate":1000,"scheduled":7000,"statuses":{"200":7000},"cpu_us":{\#(cpu)}}"#)
        }
        let report = BenchReport(steps: [
            try step("tls-saturation", #"{"answers":1000,"ok":1000,"rps":800,"cpu_us":{"relay":24,"load":9}}"#),
            try step("tls-paired-plain", #"{"answers":1000,"ok":1000,"rps":1000,"cpu_us":{"relay":20,"load":6}}"#),
            try step("tls-saturation", #"{"answers":1000,"ok":1000,"rps":900,"cpu_us":{"relay":26}}"#),
            try step("tls-paired-plain", #"{"answers":1000,"ok":1000,"rps":1000,"cpu_us":{"relay":22}}"#),
            try fixed("tls-relay-fixed", #""relay":120"#),
            try fixed("tls-pair-fixed", #""relay":100,"nginx":60"#),
            try fixed("tls-relay-fixed", #""relay":130"#),
            try fixed("tls-pair-fixed", #""relay":110,"nginx":80"#),
            try step("idle-tls", #"{"connections":100,"answered":100,"rss_kb":102400}"#),
        ])
        let figures = report.figures()
        #expect(value(figures, "push_rps_tls") == 850)
        #expect(value(figures, "push_rps_plain_paired") == 1000)
        #expect(value(figures, "tls_rps_ratio") == 0.85)
        #expect(value(figures, "push_cpu_us_tls") == 25)
        #expect(value(figures, "push_cpu_us_plain_paired") == 21)
        #expect(value(figures, "push_cpu_us_tls_at_1000") == 125)
        // 160 and 190: each run's nginx and relay added, then the median.
        #expect(value(figures, "tls_pair_cpu_us_at_1000") == 175)
        #expect(value(figures, "tls_pair_nginx_cpu_us_at_1000") == 70)
        #expect(value(figures, "tls_pair_relay_cpu_us_at_1000") == 105)
        #expect(value(figures, "tls_cpu_ratio_to_pair_at_1000") == 125.0 / 175.0)
        #expect(value(figures, "idle_conn_tls_rss_mb") == 100)
        // Both kinds printed run by run.
        let table = report.table(figures, targets: [], mode: "tls")
        #expect(table.contains("| 1 | 800 | 1000 | 0.80 | 24.0 | 20.0 | 9.0 | 6.0 |"), "\(table)")
        #expect(table.contains("| 2 | 130.0 | 190.0 (80.0 + 110.0) | 0.68 |"), "\(table)")
    }

    @Test("a pair whose run lost requests leaves the pair's figure and the ratio null")
    func tlsPairFailedIsNull() throws {
        let report = BenchReport(steps: [
            try step(
                "tls-relay-fixed", #"{"rate":1000,"scheduled":7000,"statuses":{"200":7000},"cpu_us":{"relay":120}}"#),
            try step(
                "tls-pair-fixed",
                #"{"rate":1000,"scheduled":7000,"statuses":{"200":6000},"cpu_us":{"relay":100,"nginx":60}}"#),
        ])
        let figures = report.figures()
        #expect(value(figures, "push_cpu_us_tls_at_1000") == 120)
        #expect(value(figures, "tls_pair_cpu_us_at_1000") == nil)
        #expect(value(figures, "tls_cpu_ratio_to_pair_at_1000") == nil)
    }

    @Test("the repository's targets file names only figures the report makes")
    func targetsFile() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("scripts/bench-targets.json").path
        let targets = try BenchReport.readTargets(path)
        let known = Set(BenchReport(steps: []).figures().map(\.key))
        #expect(targets.count >= 10)
        for target in targets {
            #expect(known.contains(target.figure), "\(target.figure)")
            if let other = target.times { #expect(known.contains(other), "\(other)") }
        }
    }
    @Test("a --cpu, --redis or --tls run leaves what it does not measure null and passes; a full run with a null fails")
    func partialModes() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let results = FileManager.default.temporaryDirectory.appendingPathComponent("bench-report-\(getpid()).jsonl")
        defer { try? FileManager.default.removeItem(at: results) }
        // What `scripts/bench --redis` measures: the saturated pairs, and nothing of the memory-only figures.
        let lines = [
            #"{"step":"pair-memory","data":{"answers":1000,"ok":1000,"rps":1000,"cpu_us":{"relay":20}}}"#,
            #"{"step":"pair-redis","data":{"answers":900,"ok":900,"rps":850,"cpu_us":{"relay":23,"redis":9}}}"#,
        ]
        try (lines.joined(separator: "\n") + "\n").write(to: results, atomically: true, encoding: .utf8)
        let targets = root.appendingPathComponent("scripts/bench-targets.json").path
        func run(_ mode: String) throws -> Int32 {
            try BenchReport.run(try Arguments(["--results", results.path, "--targets", targets, "--mode", mode]))
        }
        #expect(try run("redis") == 0)
        #expect(try run("cpu") == 0)
        #expect(try run("tls") == 0)
        #expect(try run("full") == 1, "a full run must measure every figure")
        #expect(try run("smoke") == 1)
    }
}
