import Foundation
import Testing

@testable import LoadGenerator

/// What a benchmark run decides without starting a server: its plan for each mode, the files it writes for
/// the servers, and what it reads back from them.
@Suite("The benchmark run's plan, files and readings")
struct BenchRunTests {
    @Test("the smoke run measures every section briefly; the full run every section at length")
    func smokeAndFull() {
        let smoke = BenchPlan(mode: .smoke)
        #expect(smoke.measuresSaturation && smoke.measuresServing && smoke.measuresAnchor && smoke.measuresRedis)
        #expect(smoke.tokens == 128)
        #expect(smoke.rounds == 1)
        #expect(smoke.concurrencyLevels == [16])
        #expect(smoke.latencyRate == 500)
        #expect(smoke.idleConnections == 500)
        #expect(smoke.rates == [200, 1000, 2000, 5000])
        let full = BenchPlan(mode: .full)
        #expect(full.measuresSaturation && full.measuresServing && full.measuresAnchor && full.measuresRedis)
        #expect(full.tokens == 4096)
        #expect(full.rounds == 3)
        #expect(full.concurrencyLevels == [1, 16, 64, 256])
        #expect(full.latencyRate == 2000)
        #expect(full.idleConnections == 10_000)
        #expect(full.saturationSeconds == 6)
        #expect(full.fixedRate == 1000)
    }

    @Test("--cpu runs only what a push's CPU moves, 1,000/s three times; --redis only the Redis store")
    func partialModes() {
        let cpu = BenchPlan(mode: .cpu)
        #expect(cpu.measuresSaturation && cpu.measuresAnchor)
        #expect(!cpu.measuresServing && !cpu.measuresRedis)
        #expect(cpu.rates == [1000, 1000, 1000])
        #expect(cpu.rounds == 2)
        #expect(cpu.saturationSeconds == 5)
        #expect(cpu.syscallsSeconds == 4)
        let redis = BenchPlan(mode: .redis)
        #expect(redis.measuresRedis)
        #expect(!redis.measuresSaturation && !redis.measuresServing && !redis.measuresAnchor)
        #expect(redis.rounds == 3)
        #expect(redis.latencySeconds == 10)
    }

    @Test("--tls runs only the TLS section, two alternating pairs; the full and smoke runs include it")
    func tlsMode() {
        let tls = BenchPlan(mode: .tls)
        #expect(tls.measuresTLS)
        #expect(!tls.measuresSaturation && !tls.measuresServing && !tls.measuresAnchor && !tls.measuresRedis)
        #expect(tls.tlsRounds == 2)
        #expect(tls.saturationSeconds == 5 && tls.warmupSeconds == 1)
        #expect(tls.fixedRate == 1000 && tls.idleConnections == 10_000)
        #expect(BenchPlan(mode: .full).measuresTLS && BenchPlan(mode: .full).tlsRounds == 2)
        #expect(BenchPlan(mode: .smoke).measuresTLS && BenchPlan(mode: .smoke).tlsRounds == 1)
        #expect(!BenchPlan(mode: .cpu).measuresTLS && !BenchPlan(mode: .redis).measuresTLS)
    }

    @Test("--pid NAME=self watches the measurement's own process; a PID that is not a number is refused")
    func watchingItself() throws {
        let watched = try WatchedProcesses(Arguments(["--pid", "relay=42", "--pid", "load=self"]))
        #expect(watched.processes.map(\.name) == ["relay", "load"])
        #expect(watched.processes.map(\.pid) == [42, getpid()])
        #expect(throws: LoadError(.usage, "")) { try WatchedProcesses(Arguments(["--pid", "load=me"])) }
    }

    @Test("each rate runs for at least 500 requests; h2load keeps as many requests in flight as the relay's run")
    func rateSecondsAndStreams() {
        let smoke = BenchPlan(mode: .smoke)
        #expect(smoke.seconds(atRate: 200) == 2.5)
        #expect(smoke.seconds(atRate: 1000) == 0.5)
        #expect(smoke.seconds(atRate: 5000) == 0.5)
        #expect(BenchPlan(mode: .full).seconds(atRate: 200) == 6)
        #expect(BenchPlan(mode: .full).directStreams == 32)
        #expect(BenchPlan(mode: .full, saturationConnections: 7).directStreams == 4)
    }

    @Test("the command line: the mode, the environment's settings, and a wrong value refused")
    func options() throws {
        let options = try BenchRun.Options(
            Arguments([
                "--mode", "cpu", "--relay-bin", "/x/duo-relay", "--hop-ms", "2", "--connections", "16",
                "--relay-threads", "3", "--keep", "/tmp/k", "--perf", "1",
            ]))
        #expect(options.plan.mode == .cpu)
        #expect(options.plan.hopMilliseconds == 2)
        #expect(options.plan.saturationConnections == 16)
        #expect(options.relayThreads == 3)
        #expect(options.keep == "/tmp/k")
        #expect(options.perf && !options.verbose)
        // Empty settings (an unset environment variable passed on) mean the defaults.
        let plain = try BenchRun.Options(
            Arguments(["--relay-bin", "r", "--relay-threads", "", "--keep", "", "--perf", "", "--verbose", ""]))
        #expect(plain.plan.mode == .full && plain.relayThreads == nil && plain.keep == nil && !plain.perf)
        #expect(throws: LoadError(.usage, "")) { try BenchRun.Options(Arguments(["--relay-bin", "r", "--mode", "x"])) }
        #expect(throws: LoadError(.usage, "")) {
            try BenchRun.Options(Arguments(["--relay-bin", "r", "--relay-threads", "two"]))
        }
        #expect(throws: LoadError(.usage, "")) { try BenchRun.Options(Arguments(["--mode", "smoke"])) }
    }

    @Test("the relay's configuration: raised limits, the simulator as APNs, Redis and threads when asked")
    func relayConfiguration() throws {
        func parsed(_ text: String) throws -> [String: Any] {
            try #require(JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        }
        let memory = try parsed(
            BenchFiles.relayConfiguration(simulatorPort: 4433, caFile: "/w/apns/ca.pem", storePort: nil, threads: nil))
        #expect(memory["listen"] as? String == "127.0.0.1:0")
        #expect(memory["limits_store"] == nil)
        #expect(BenchReport.number(memory, "push_limit", "requests") == 1_000_000)
        #expect(BenchReport.number(memory, "ip_limit", "requests") == 1_000_000)
        #expect(BenchReport.number(memory, "ip_limit", "period_s") == 1)
        let apns = try #require(memory["apns"] as? [String: Any])
        #expect(apns["sandbox_origin"] as? String == "https://127.0.0.1:4433")
        #expect(apns["production_origin"] as? String == "https://127.0.0.1:4433")
        #expect(apns["ca_file"] as? String == "/w/apns/ca.pem")
        #expect(apns["topic"] as? String == BenchSimulator.topic)
        let server = try #require(memory["server"] as? [String: Any])
        #expect(server["threads"] == nil)
        #expect(BenchReport.number(server, "max_connections") == 16384)
        #expect(BenchReport.number(server, "max_connections_per_address") == 0)

        let redis = try parsed(
            BenchFiles.relayConfiguration(simulatorPort: 4433, caFile: "/ca.pem", storePort: 6390, threads: 2))
        let store = try #require(redis["limits_store"] as? [String: Any])
        #expect(store["kind"] as? String == "redis")
        #expect(store["url"] as? String == "redis://127.0.0.1:6390/0")
        #expect(BenchReport.number(store, "timeout_ms") == 100)
        #expect(BenchReport.number(redis, "server", "threads") == 2)
        #expect(redis["tls"] == nil)

        let tls = try parsed(
            BenchFiles.relayConfiguration(
                simulatorPort: 4433, caFile: "/ca.pem", storePort: nil, threads: nil,
                tls: ("/w/front/cert.pem", "/w/front/key.pem")))
        let pair = try #require(tls["tls"] as? [String: Any])
        #expect(pair["certificate_file"] as? String == "/w/front/cert.pem")
        #expect(pair["key_file"] as? String == "/w/front/key.pem")
        #expect(tls["listen"] as? String == "127.0.0.1:0")
    }

    @Test("the pair's nginx: one worker terminating TLS with the front's pair, keep-alive to the plain relay")
    func nginxTLSFront() {
        let front = BenchRun.nginxTLSFront(
            port: 30003, relay: "127.0.0.1:30004", certificate: "/w/front/cert.pem", key: "/w/front/key.pem")
        #expect(front.contains("listen 127.0.0.1:30003 ssl;"))
        #expect(front.contains("ssl_certificate /w/front/cert.pem;"))
        #expect(front.contains("ssl_certificate_key /w/front/key.pem;"))
        #expect(front.contains("ssl_protocols TLSv1.2 TLSv1.3;"))
        #expect(front.contains("server 127.0.0.1:30004;"))
        #expect(front.contains("keepalive 64;"))
        #expect(front.contains("proxy_pass http://relay_plain;"))
        #expect(front.contains("proxy_set_header Connection \"\";"))
        let whole = BenchFiles.nginxConfiguration(name: "front", directory: "/w/nginx-tls", body: front)
        #expect(whole.hasPrefix("worker_processes 1;\ndaemon off;\n"))
        #expect(whole.filter { $0 == "{" }.count == whole.filter { $0 == "}" }.count)
    }

    @Test("nginx's configurations: one worker in the foreground, files under the run's directory, the TLS anchor")
    func nginxConfigurations() {
        let upstream = BenchFiles.nginxConfiguration(
            name: "upstream", directory: "/w/nginx",
            body: BenchFiles.nginxUpstream(port: 30001, certificate: "/w/apns/sim-cert.pem", key: "/w/apns/sim-key.pem")
        )
        #expect(upstream.hasPrefix("worker_processes 1;\ndaemon off;\npid /w/nginx/upstream.pid;\n"))
        #expect(upstream.contains("error_log /w/nginx/upstream.log warn;"))
        #expect(upstream.contains("client_body_temp_path /w/nginx/upstream-temp/body;"))
        #expect(upstream.contains("listen 127.0.0.1:30001 ssl;"))
        #expect(upstream.contains("ssl_certificate /w/apns/sim-cert.pem;"))
        #expect(upstream.contains("ssl_certificate_key /w/apns/sim-key.pem;"))
        #expect(upstream.contains("location / { return 200 '{}'; }"))
        let proxy = BenchFiles.nginxProxy(port: 30002, upstreamPort: 30001, caFile: "/w/apns/ca.pem")
        #expect(proxy.contains("server 127.0.0.1:30001;"))
        #expect(proxy.contains("listen 127.0.0.1:30002;"))
        #expect(proxy.contains("proxy_pass https://upstream_tls;"))
        #expect(proxy.contains("proxy_ssl_verify on;"))
        #expect(proxy.contains("proxy_ssl_trusted_certificate /w/apns/ca.pem;"))
        #expect(proxy.contains("proxy_set_header Connection \"\";"))
        // Every brace closed: nginx refuses the file otherwise.
        let whole = BenchFiles.nginxConfiguration(name: "proxy", directory: "/w/nginx", body: proxy)
        #expect(whole.filter { $0 == "{" }.count == whole.filter { $0 == "}" }.count)
    }

    @Test("the relay's port from its log, once it has logged it")
    func listeningPort() {
        #expect(BenchReadings.listeningPort(log: "") == nil)
        #expect(BenchReadings.listeningPort(log: "duo-relay: starting\n") == nil)
        #expect(
            BenchReadings.listeningPort(log: "duo-relay: starting\nduo-relay: listening on 127.0.0.1:41234\n") == 41234)
        #expect(BenchReadings.listeningPort(log: "duo-relay: listening on 127.0.0.1:") == nil)
        #expect(
            BenchReadings.listeningPort(
                log: "2026-12-05T14:40:00.123Z info duo-relay: version: 0.1.0\n"
                    + "2026-12-05T14:40:00.124Z info duo-relay: listening on 127.0.0.1:41234\n") == 41234)
        #expect(BenchReadings.listeningPort(log: "duo-relay: listening on 127.0.0.1:80 (TLS)") == nil)
        #expect(BenchReadings.listeningPort(log: "duo-relay: listening on 127.0.0.1:99999") == nil)
    }

    @Test("a step's line in the results: its JSON as data; a step that printed nothing is left out")
    func resultLines() throws {
        let line = try #require(BenchReadings.resultLine(step: "saturation", output: "{\"rps\":900}\n"))
        #expect(line == #"{"step":"saturation","data":{"rps":900}}"#)
        let object = try #require(JSONText.object(Substring(line)))
        #expect(object["step"] as? String == "saturation")
        #expect(BenchReadings.resultLine(step: "saturation", output: "") == nil)
        #expect(BenchReadings.resultLine(step: "saturation", output: " \n") == nil)
    }

    @Test("a load run's answers for perf: an open loop's measured, a closed loop's answers")
    func answeredRequests() {
        #expect(BenchReadings.answeredRequests(#"{"rate":1000,"scheduled":6000,"measured":5990}"#) == 5990)
        #expect(BenchReadings.answeredRequests(#"{"connections":64,"answers":81234,"ok":81234}"#) == 81234)
        #expect(BenchReadings.answeredRequests("") == nil)
    }

    @Test("redis-server's INFO: the reads, and the script calls with their microseconds, before and after")
    func redisInfo() {
        let before = RedisInfo("# Stats\r\ntotal_reads_processed:10\r\nredis_version:7.0.15\r\n")
        #expect(before.reads == 10)
        #expect(before.scriptCalls == 0)
        let after = RedisInfo(
            """
            # Stats\r
            total_reads_processed:1010\r
            # Commandstats\r
            cmdstat_evalsha:calls=4000,usec=24000,usec_per_call=6.00,rejected_calls=0,failed_calls=0\r
            cmdstat_ping:calls=3,usec=1,usec_per_call=0.33\r
            """)
        #expect(after.reads == 1010)
        #expect(after.scriptCalls == 4000)
        #expect(after.scriptMicroseconds == 24000)
        #expect(
            RedisInfo.sharing(before: before, after: after)
                == "saturated, redis-server ran 4000 script calls in 1000 reads (4.0 a read), 6.0 µs in each call")
        #expect(RedisInfo.sharing(before: after, after: after) == nil)
    }

    @Test("the machine line, nginx's one worker, and perf's symbols without its comments")
    func smallReadings() {
        let cpuinfo = "processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t: fpu\nmodel name\t: other\n"
        #expect(BenchReadings.machine(cores: 2, cpuinfo: cpuinfo, kernel: "6.1.0") == "2 cores, AMD EPYC 7B13, 6.1.0")
        #expect(BenchReadings.onlyChild("4242 ") == 4242)
        #expect(BenchReadings.onlyChild("") == nil)
        #expect(BenchReadings.onlyChild("1 2") == nil)
        let report =
            "# header\n\n  40.00%  libc.so.6  [.] memcpy\n# more\n"
            + (1...50).map { "line \($0)" }.joined(separator: "\n")
        let symbols = BenchReadings.perfSymbols(report)
        #expect(symbols.split(separator: "\n").count == 40)
        #expect(symbols.hasPrefix("  40.00%  libc.so.6  [.] memcpy\nline 1\n"))
        #expect(!symbols.contains("#"))
    }

    @Test("options' numbers as the measurements read them; a free loopback port")
    func helpers() throws {
        #expect(BenchRun.text(6) == "6")
        #expect(BenchRun.text(0.5) == "0.5")
        #expect(BenchRun.text(2.5) == "2.5")
        let port = try BenchRun.freePort()
        #expect(port > 0 && port < 65536)
        var calls = 0
        #expect(
            BenchRun.poll(3, interval: 0) { () -> Int? in
                calls += 1
                return calls == 2 ? 7 : nil
            } == 7)
        #expect(BenchRun.poll(3, interval: 0) { () -> Int? in nil } == nil)
    }

    @Test("a child process: its output and errors in one file, stopped by its PID; a failed command gives nothing")
    func children() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("bench-child-\(getpid()).log").path
        defer { try? FileManager.default.removeItem(atPath: file) }
        let child = try BenchChild(
            "sh", ["-c", "echo out; echo err >&2; exec sleep 30"], output: .file(file), error: .output)
        #expect(BenchRun.poll(200, interval: 0.01) { BenchRun.read(file).contains("err") ? true : nil } == true)
        #expect(BenchRun.read(file).split(separator: "\n").sorted() == ["err", "out"])
        #expect(child.isRunning)
        child.stop()
        #expect(!child.isRunning)
        #expect(child.wait() == 128 + SIGTERM)
        #expect(
            BenchChild.output("sh", ["-c", "echo \"$BENCH_TEST_VALUE\""], environment: ["BENCH_TEST_VALUE": "v"])
                == "v\n")
        #expect(BenchChild.output("sh", ["-c", "echo partial; exit 3"]) == nil)
        #expect(BenchChild.find("sh") != nil)
        #expect(BenchChild.find("no-such-program-here") == nil)
        #expect(throws: LoadError(.failed, "")) { try BenchChild("no-such-program-here", []) }
    }
}
