import Foundation
import Glibc

/// The scenarios of several relays sharing limits in Redis, and of a relay behind an egress proxy.
extension DocTestRun {
    /// How many of `statuses` were 200 and how many 429.
    static func count(_ statuses: [Int]) -> (ok: Int, limited: Int) {
        (statuses.filter { $0 == 200 }.count, statuses.filter { $0 == 429 }.count)
    }

    /// Whether any of `files` holds `secret` (an empty secret counts as held: it could not be looked for).
    func anyHolds(_ files: [String], _ secret: String) -> Bool {
        secret.isEmpty || files.contains { read($0).contains(secret) }
    }

    /// OPERATIONS "Running several instances": one Redis with a password, two relays counting in it.
    func redisPair() throws {
        scenario = "redis-pair"
        say("redis-pair: \(location(1))")
        let directory = work + "/pair"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: repo + "/deploy/systemd/relay.json", toPath: directory + "/relay.json")
        try pointAtSimulator(directory + "/relay.json")
        // The secrets in the environment, as README's Secrets block sets them; the keys kept for redis-sentinel's
        // relay, which must open the pair's grants.
        let keys = try keygen()
        try keys.write(toFile: work + "/pair.relay-keys", atomically: true, encoding: .utf8)
        let output = work + "/pair.out"
        _ = try RecipeProcess(
            "/bin/bash", ["-euo", "pipefail", try block(1)], directory: directory,
            environment: secretsEnvironment(relayKeys: keys), output: .file(output), error: .output)
        for n in 1...2 {
            guard waitHTTP(8780 + n, "/readyz") else {
                show([output, directory + "/relay-\(n).log"], last: 3)
                throw fail("relay \(n) never turned ready")
            }
            guard limitsShared(9790 + n) else { throw fail("relay \(n) does not count in Redis") }
        }
        // One phone, 30 pushes alternating relays, each from another client address: 20 delivered, 10 refused.
        let grant = try self.grant(8781)
        var before = deliveries()
        let statuses = (1...30).map { pushStatus(8780 + $0 % 2 + 1, grant, from: "198.51.100.\($0)") }
        let (ok, limited) = Self.count(statuses)
        guard ok == 20, limited == 10 else {
            throw fail("one phone through two relays: \(ok) x 200, \(limited) x 429, not 20 and 10")
        }
        guard deliveries() == before + 20 else { throw fail("APNs did not get exactly 20 pushes") }
        // The documented check from one host (every request from 127.0.0.1): one phone, 21 pushes through both
        // relays with duo-relay push; the 21st is refused by the phone's limit, not the address's.
        before = deliveries()
        let check = work + "/pair-check.out"
        guard
            (try? RecipeProcess.run(
                "/bin/bash", ["-euo", "pipefail", try block(2)], directory: directory,
                environment: ["TOKEN": Self.randomHex(32), "PATH": installedPath], output: .file(check), error: .output
            ))?.status == 0
        else {
            show([check], last: 3)
            throw fail("the check (\(location(2)))")
        }
        let lines = DocTestReadings.PushLines(read(check))
        guard lines.delivered == 20 else {
            show([check])
            throw fail("the check did not deliver 20 (\(location(2)))")
        }
        guard lines.phoneLimited == 1 else {
            show([check])
            throw fail("the 21st push was not the phone's 429 (\(location(2)))")
        }
        guard lines.all == 21 else { throw fail("the check printed other outcomes") }
        guard deliveries() == before + 20 else { throw fail("APNs did not get exactly 20 pushes from the check") }
        let logs = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
            .filter { $0.hasPrefix("relay-") && $0.hasSuffix(".log") }.map { directory + "/" + $0 }
        guard !anyHolds([output] + logs, trimmed(read(directory + "/redis_password"))) else {
            throw fail("a log holds the Redis password")
        }
        say(
            "redis-pair: two relays and one Redis with a password: one phone's 30 pushes, 20 delivered, 10 answered "
                + "429; the documented check from one host: 20 delivered, the 21st 429 limit: phone")
    }

    /// OPERATIONS "Failover: Sentinel", beside the pair: a replica, a sentinel, and relay 3 finding the primary
    /// through it shares one phone's budget with the pair.
    func redisSentinel() throws {
        scenario = "redis-sentinel"
        say("redis-sentinel: \(location(1))")
        let directory = work + "/pair"
        var environment = secretsEnvironment(relayKeys: read(work + "/pair.relay-keys"))
        environment["REDIS_PASSWORD_FILE"] = directory + "/redis_password"
        let output = work + "/sentinel.out"
        let log = directory + "/relay-3.log"
        _ = try RecipeProcess(
            "/bin/bash", ["-euo", "pipefail", try block(1)], directory: directory, environment: environment,
            output: .file(output), error: .output)
        guard waitHTTP(8783, "/readyz") else {
            show([output, log], last: 5)
            throw fail("relay 3 never turned ready")
        }
        guard RecipeClock.within(10, { limitsShared(9793) }) else { throw fail("relay 3 does not count in Redis") }
        guard read(output).contains("limits store: redis through sentinel duo-limits (127.0.0.1:26379)/0") else {
            throw fail("check's summary does not name the sentinel and its master")
        }
        guard read(log).contains("limits store: connected to Redis at 127.0.0.1:6379; limits are shared") else {
            throw fail("relay 3 does not say which primary the sentinel named")
        }
        // One phone, 21 pushes alternating the pair's relay 1 (url) and relay 3 (sentinel): one budget, 20 and one 429.
        let grant = try self.grant(8783, from: "192.0.2.9")
        let statuses = (1...21).map { pushStatus($0 % 2 == 0 ? 8781 : 8783, grant, from: "198.51.100.\(100 + $0)") }
        let (ok, limited) = Self.count(statuses)
        guard ok == 20, limited == 1 else {
            throw fail("one phone through two relays: \(ok) x 200, \(limited) x 429, not 20 and 1")
        }
        guard !anyHolds([output, log], trimmed(read(directory + "/redis_password"))) else {
            throw fail("a log holds the Redis password")
        }
        say("redis-sentinel: a relay finding the primary through a sentinel shares one phone's budget with the pair")
    }

    /// The status tinyproxy at 127.0.0.1:8888 answers a CONNECT to `target` with (0: none).
    func connectStatus(_ target: String) -> Int {
        RecipeHTTP.connectStatus(proxyPort: 8888, target: target, seconds: 10) ?? 0
    }

    /// OPERATIONS "Behind an egress proxy": tinyproxy lets only APNs' hosts and ports through, and the relay's
    /// pushes reach APNs through it alone.
    func egressProxy() throws {
        scenario = "egress-proxy"
        say("egress-proxy: \(location(1)), then \(location(2))")
        let directory = work + "/egress"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // The block starts tinyproxy in the background: sourced, so that its PID is known.
        guard
            (try? RecipeProcess.run(
                "/bin/bash", ["-c", #". "$1" && echo $! > "$2""#, "bash", try block(1), directory + "/tinyproxy.pid"],
                directory: repo, output: .file(directory + "/proxy.out"), error: .output))?.status == 0
        else { throw fail("the proxy block (\(location(1)))") }
        _ = RecipeClock.within(30) { connectStatus("example.com:443") == 403 }
        // Only APNs' hosts on 443 and 2197 pass the filter (nothing outside is reachable here: the allowed ones then
        // fail to connect, with another status than the filter's 403).
        guard connectStatus("example.com:443") == 403 else { throw fail("a CONNECT to another host was not refused") }
        guard connectStatus("api.push.apple.com:8443") == 403 else {
            throw fail("a CONNECT to another port was not refused")
        }
        guard connectStatus("api.push.apple.com:443") != 403 else { throw fail("APNs' host on 443 was filtered") }
        guard connectStatus("api.sandbox.push.apple.com:2197") != 403 else {
            throw fail("APNs' sandbox on 2197 was filtered")
        }
        // APNs here is the simulator on 127.0.0.1:8443: the test lets the proxy reach it too, and tinyproxy reads
        // its configuration and filter again on SIGUSR1.
        try append(#"^127\.0\.0\.1$"# + "\n", to: "/etc/tinyproxy/apns-hosts")
        try append("ConnectPort 8443\n", to: "/etc/tinyproxy/apns.conf")
        guard let proxy = Int32(trimmed(read(directory + "/tinyproxy.pid"))) else { throw fail("no tinyproxy PID") }
        kill(proxy, SIGUSR1)
        _ = RecipeClock.within(30) { connectStatus("127.0.0.1:8443") == 200 }
        guard connectStatus("127.0.0.1:8443") == 200 else { throw fail("tinyproxy does not tunnel to the simulator") }
        let configuration = directory + "/relay.json"
        try FileManager.default.copyItem(atPath: repo + "/deploy/systemd/relay.json", toPath: configuration)
        try pointAtSimulator(configuration)
        // Ports of its own (the redis-pair relays still run).
        try editJSON(configuration, #".listen = "127.0.0.1:8786" | .metrics_listen = "127.0.0.1:9786""#)
        let output = directory + "/relay.out"
        _ = try RecipeProcess(
            "/bin/bash", ["-euo", "pipefail", try block(2)], directory: directory,
            environment: secretsEnvironment(relayKeys: try keygen()), output: .file(output), error: .output)
        guard waitHTTP(8786, "/healthz") else {
            show([output], last: 3)
            throw fail("the relay never answered")
        }
        guard DocTestReadings.hasLine(read(output), startingWith: "check: ok") else { throw fail("check did not pass") }
        guard read(output).contains("apns proxy: http://127.0.0.1:8888 (CONNECT; Proxy-Authorization: none)") else {
            throw fail("check's summary does not name the proxy")
        }
        let grant = try self.grant(8786)
        try pushDelivered(8786, grant, else: "a push through the proxy")
        // The simulator's connections all come from tinyproxy: the relay holds none to it. The other scenarios'
        // relays still run and reach the simulator directly: only this relay's own connections count (its PID is the
        // one listening on 8786).
        let listening = try RecipeProcess.run("ss", ["-tlnpH", "( sport = :8786 )"], error: .inherited).output
        guard let relay = DocTestReadings.socketUsers(listening).first?.first?.pid else {
            throw fail("no process listens on 8786")
        }
        let tunnels = DocTestReadings.socketUsers(
            try RecipeProcess.run("ss", ["-tnpH", "state", "established", "( dport = :8443 )"], error: .inherited)
                .output)
        guard tunnels.contains(where: { $0.contains { $0.name == "tinyproxy" } }) else {
            throw fail("no tunnel to APNs")
        }
        guard !tunnels.contains(where: { $0.contains { $0.pid == relay } }) else {
            throw fail("the relay connects to APNs itself")
        }
        say(
            "egress-proxy: tinyproxy refuses other hosts and ports; check names the proxy; a push delivered through it alone"
        )
    }

    func append(_ text: String, to path: String) throws {
        guard let handle = FileHandle(forWritingAtPath: path) else { throw fail("cannot write \(path)") }
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(text.utf8))
    }
}
