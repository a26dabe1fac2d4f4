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

    /// docs/operations/several-instances.md "Running several instances": Debian's Redis with a password, two
    /// relays counting in it.
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

    /// The user a process runs as (its real UID's name, from /proc and the password database; nil if gone).
    func user(of pid: Int32) -> String? {
        let status = read("/proc/\(pid)/status")
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Uid:") }),
            let uid = line.split(whereSeparator: { $0 == "\t" || $0 == " " }).dropFirst().first.flatMap({ UInt32($0) }),
            let entry = getpwuid(uid)
        else { return nil }
        return String(cString: entry.pointee.pw_name)
    }

    /// The main PID the systemctl stand-in recorded for Debian's unit `name`.
    func packagedPID(_ name: String) -> Int32? {
        Int32(trimmed(read(systemd + "/units/\(name)/pid")))
    }

    /// One phone's 21 pushes through `ports` in turn, each from another client address: one budget, 20 and one 429.
    func sharedBudget(_ ports: [Int], addresses base: Int, what: String) throws {
        let grant = try self.grant(ports[0], from: "192.0.2.\(base % 200 + 1)")
        let statuses = (0..<21).map { pushStatus(ports[$0 % ports.count], grant, from: "198.51.100.\(base + $0)") }
        let (ok, limited) = Self.count(statuses)
        guard ok == 20, limited == 1 else {
            throw fail("\(what): one phone through \(ports): \(ok) x 200, \(limited) x 429, not 20 and 1")
        }
    }

    /// docs/operations/several-instances.md, "Running several instances", its Sentinel failover beside the pair: a
    /// replica and a sentinel as Debian runs them (their packages' units through the systemctl stand-in, as the
    /// `redis` user), two relays finding the primary through the sentinel and sharing one phone's budget with the
    /// pair; then the failover rehearsal: the primary stopped, the replica promoted within the time the text
    /// promises, and both relays sharing one budget on the new primary.
    func redisSentinel() throws {
        scenario = "redis-sentinel"
        say("redis-sentinel: \(location(1)), then the failover, \(location(2))")
        let directory = work + "/pair"
        var environment = secretsEnvironment(relayKeys: read(work + "/pair.relay-keys"))
        environment["REDIS_PASSWORD_FILE"] = directory + "/redis_password"
        let output = work + "/sentinel.out"
        let logs = [3, 4].map { directory + "/relay-\($0).log" }
        _ = try RecipeProcess(
            "/bin/bash", ["-euo", "pipefail", try block(1)], directory: directory, environment: environment,
            output: .file(output), error: .output)
        for (index, n) in [3, 4].enumerated() {
            guard waitHTTP(8780 + n, "/readyz") else {
                show([output, logs[index]], last: 5)
                throw fail("relay \(n) never turned ready")
            }
            guard RecipeClock.within(10, { limitsShared(9790 + n) }) else {
                throw fail("relay \(n) does not count in Redis")
            }
            guard read(logs[index]).contains("limits store: connected to Redis at 127.0.0.1:6379; limits are shared")
            else { throw fail("relay \(n) does not say which primary the sentinel named") }
        }
        guard read(output).contains("limits store: redis through sentinel duo-limits (127.0.0.1:26379)/0") else {
            throw fail("check's summary does not name the sentinel and its master")
        }
        for unit in ["redis-server", "redis-server@replica", "redis-sentinel"] {
            guard let pid = packagedPID(unit), user(of: pid) == "redis" else {
                throw fail("\(unit) does not run as the redis user, as Debian's unit runs it")
            }
        }
        // One phone, 21 pushes through the pair's relay 1 (url) and relays 3 and 4 (sentinel): one budget.
        try sharedBudget([8781, 8783, 8784], addresses: 101, what: "before the failover")

        // The failover rehearsal: its own measure of the promotion, which the text promises at about 3 s.
        let failover = work + "/failover.out"
        let started = Date()
        guard
            (try? RecipeProcess.run(
                "/bin/bash", ["-euo", "pipefail", try block(2)], directory: directory, environment: environment,
                output: .file(failover), error: .output, timeout: 60))?.status == 0
        else {
            show([failover], last: 5)
            throw fail("the failover rehearsal (\(location(2))) did not see the replica promoted within 60 s")
        }
        let seconds = Date().timeIntervalSince(started)
        guard let printed = DocTestReadings.promotionMilliseconds(read(failover)) else {
            show([failover])
            throw fail("the failover rehearsal did not print the promotion's time")
        }
        guard printed <= 5_000 else {
            throw fail(
                "the replica was promoted \(printed) ms after the stop began: over the 5 s the text allows")
        }
        for (index, n) in [3, 4].enumerated() {
            guard waitFile(logs[index], "using Redis at 127.0.0.1:6380, the primary now", seconds: 15) else {
                show([logs[index]], last: 5)
                throw fail("relay \(n) did not move to the promoted replica")
            }
            guard RecipeClock.within(15, { limitsShared(9790 + n) }) else {
                throw fail("relay \(n) does not count in Redis after the failover")
            }
        }
        try sharedBudget([8783, 8784], addresses: 131, what: "after the failover")
        guard !anyHolds([output, failover] + logs, trimmed(read(directory + "/redis_password"))) else {
            throw fail("a log holds the Redis password")
        }
        say(
            "redis-sentinel: two relays through a sentinel share one phone's budget with the pair; the replica was "
                + "promoted \(printed) ms after the stop began (the block took \(String(format: "%.1f", seconds)) s), "
                + "and both relays share one budget there")
    }

    /// The status tinyproxy at 127.0.0.1:8888 answers a CONNECT to `target` with (0: none).
    func connectStatus(_ target: String) -> Int {
        RecipeHTTP.connectStatus(proxyPort: 8888, target: target, seconds: 10) ?? 0
    }

    /// docs/operations/egress.md: tinyproxy as Debian runs it (its package's unit through the systemctl stand-in,
    /// serving as the `tinyproxy` user) lets only APNs' hosts and ports through; the rehearsal block admits the
    /// simulator; the relay's pushes reach APNs through it alone.
    func egressProxy() throws {
        scenario = "egress-proxy"
        say("egress-proxy: \(location(1)), the rehearsal \(location(2)), then \(location(3))")
        let directory = work + "/egress"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        guard runBlock(try block(1), output: directory + "/proxy.out") else {
            show([directory + "/proxy.out"], last: 5)
            throw fail("the proxy block (\(location(1)))")
        }
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
        guard connectStatus("127.0.0.1:8443") == 403 else {
            throw fail("the simulator was reachable before the rehearsal block admitted it")
        }
        guard let proxy = packagedPID("tinyproxy") else { throw fail("no tinyproxy PID") }
        guard let proxyUser = user(of: proxy), proxyUser == "tinyproxy" else {
            throw fail("tinyproxy serves as \(user(of: proxy) ?? "nobody"), not the tinyproxy user")
        }
        // The rehearsal block: the simulator on 127.0.0.1:8443 admitted, and tinyproxy told to read its files again.
        guard runBlock(try block(2), output: directory + "/rehearsal.out") else {
            show([directory + "/rehearsal.out"], last: 5)
            throw fail("the rehearsal block (\(location(2)))")
        }
        _ = RecipeClock.within(30) { connectStatus("127.0.0.1:8443") == 200 }
        guard connectStatus("127.0.0.1:8443") == 200 else { throw fail("tinyproxy does not tunnel to the simulator") }
        let configuration = directory + "/relay.json"
        try FileManager.default.copyItem(atPath: repo + "/deploy/systemd/relay.json", toPath: configuration)
        try pointAtSimulator(configuration)
        // Ports of its own (the redis-pair relays still run).
        try editJSON(configuration, #".listen = "127.0.0.1:8786" | .metrics_listen = "127.0.0.1:9786""#)
        let output = directory + "/relay.out"
        _ = try RecipeProcess(
            "/bin/bash", ["-euo", "pipefail", try block(3)], directory: directory,
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
            "egress-proxy: tinyproxy, as the tinyproxy user, refuses other hosts and ports; check names the proxy; a push "
                + "delivered through it alone"
        )
    }
}
