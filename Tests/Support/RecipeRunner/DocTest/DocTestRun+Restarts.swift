import DuoRelayClient
import Foundation
import Glibc

/// docs/operations/restarts.md's host procedure (the socket unit) and docs/operations/tls.md's certbot renewal, on the
/// relay the systemd scenario installed.
extension DocTestRun {
    /// Pushes through 127.0.0.1:`port`, one every 50 ms (20 a second) each on a new connection, on a thread of its
    /// own until ``stop()``: what each was answered. The grants and the client addresses (in `X-Forwarded-For`) take
    /// turns, so that no phone's and no address's limit is reached (deploy/systemd's relay.json: 20 a minute a phone,
    /// 10 in 10 s an address).
    final class Trickle: @unchecked Sendable {
        // @unchecked: `statuses` and `stopping` are read and written under `lock` only.
        private let lock = NSLock()
        private var statuses: [Int] = []
        private var stopping = false
        private let done = DispatchSemaphore(value: 0)

        init(port: Int, grants: [String]) {
            Thread { [self] in
                // Bounded by the stop and by a count no scenario reaches.
                for sent in 0..<100_000 {
                    if lock.withLock({ stopping }) { break }
                    let status = DocTestRun.pushStatus(
                        port, grants[sent % grants.count], from: "198.51.100.\(sent % 250 + 1)")
                    lock.withLock { statuses.append(status) }
                    Thread.sleep(forTimeInterval: 0.05)
                }
                done.signal()
            }.start()
        }

        /// Stops the pushes; the status of each (0 where no answer came).
        func stop() -> [Int] {
            lock.withLock { stopping = true }
            done.wait()
            return lock.withLock { statuses }
        }
    }

    /// The main PID the systemctl stand-in recorded for the relay's service.
    var servicePID: Int32? { Int32(trimmed(read(systemd + "/pid"))) }

    /// docs/operations/restarts.md, "One relay on a host: the socket unit": the socket unit installed and enabled,
    /// `listen` switched to `"systemd"` (block 1), then a restart (block 2) and an upgrade of the binary (block 3),
    /// each under a steady trickle of pushes on new connections: none fails, and each new process serves on the socket
    /// systemd holds.
    func restarts() throws {
        scenario = "restarts"
        say("restarts: \(location(1)) (the socket unit), \(location(2)) (a restart), \(location(3)) (an upgrade)")
        let journal = systemd + "/journal"
        // The block up to the service's start, then (once it serves, as a person looks a moment later) the journal.
        let install = DocTestReadings.split(read(try block(1)), before: "journalctl")
        try install.head.write(toFile: work + "/socket-install.sh", atomically: true, encoding: .utf8)
        try install.tail.write(toFile: work + "/socket-journal.sh", atomically: true, encoding: .utf8)
        guard runBlock(work + "/socket-install.sh", output: work + "/socket-install.out") else {
            show([work + "/socket-install.out"], last: 10)
            throw fail("the socket unit's install (\(location(1)))")
        }
        guard waitHTTP(8787, "/healthz") else {
            show([journal], last: 10)
            throw fail("the relay never answered on the socket unit's address")
        }
        guard runBlock(work + "/socket-journal.sh", output: work + "/socket-journal.out") else {
            show([journal], last: 10)
            throw fail("the journal does not say the relay took the socket systemd passed (\(location(1)))")
        }
        guard let holder = SocketUnitStandIn(state: systemd).holder, let first = servicePID else {
            throw fail("no socket holder or no service after the install")
        }
        let listening = try RecipeProcess.run("ss", ["-tlnpH", "( sport = :8787 )"], error: .inherited).output
        let users = DocTestReadings.socketUsers(listening).flatMap { $0 }.map(\.pid)
        guard users.contains(holder.pid), users.contains(first) else {
            throw fail("the listening socket is not the one the socket unit holds, shared with the relay")
        }
        let grants = try (0..<20).map { try self.grant(8787, from: "192.0.2.\(100 + $0)") }
        try pushDelivered(8787, grants[0], else: "a push through the socket unit's address")

        // Block 2, the restart, and block 3, the upgrade (a new ./duo-relay installed over the running one's file).
        let upgrade = work + "/upgrade"
        try FileManager.default.createDirectory(atPath: upgrade, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: repo + "/.build/release/duo-relay", toPath: upgrade + "/duo-relay")
        let installed = try FileManager.default.attributesOfItem(atPath: "/usr/local/bin/duo-relay")[.systemFileNumber]
        var pids = [first]
        var answered = 0
        for (number, directory) in [(2, repo), (3, upgrade)] {
            let before = deliveries()
            let trickle = Trickle(port: 8787, grants: grants)
            Thread.sleep(forTimeInterval: 1)
            let output = work + "/restart-\(number).out"
            let ran = try RecipeProcess.run(
                "/bin/bash", ["-euo", "pipefail", try block(number)], directory: directory, output: .file(output),
                error: .output)
            Thread.sleep(forTimeInterval: 2)
            let statuses = trickle.stop()
            guard ran.status == 0 else {
                show([output], last: 10)
                throw fail("block \(number) (\(location(number))) failed")
            }
            let failed = statuses.filter { $0 != 200 }
            guard failed.isEmpty else {
                show([journal], last: 10)
                throw fail("\(failed.count) of \(statuses.count) pushes failed across \(location(number)): \(failed)")
            }
            guard statuses.count >= 20 else { throw fail("only \(statuses.count) pushes across \(location(number))") }
            guard RecipeClock.within(10, { deliveries() == before + statuses.count }) else {
                throw fail("APNs did not get each of the \(statuses.count) pushes once")
            }
            guard let pid = servicePID, !pids.contains(pid), ProcessTable.isRunning(pid) else {
                throw fail("no new relay process after \(location(number))")
            }
            pids.append(pid)
            answered += statuses.count
        }
        guard SocketUnitStandIn(state: systemd).holder?.pid == holder.pid else {
            throw fail("the socket unit's socket did not outlive the restarts")
        }
        let now = try FileManager.default.attributesOfItem(atPath: "/usr/local/bin/duo-relay")[.systemFileNumber]
        guard let installed, let now, "\(installed)" != "\(now)" else {
            throw fail("the upgrade did not put a new file in place")
        }
        let taken = read(journal).components(separatedBy: "listening on the socket systemd passed, port 8787").count - 1
        guard taken == 3 else { throw fail("\(taken) relay processes said they took the passed socket, not 3") }
        guard !grants.contains(where: read(journal).contains) else { throw fail("the journal holds a grant") }
        say(
            "restarts: the socket unit holds 127.0.0.1:8787; a restart and an upgrade under 20 pushes a second: "
                + "\(answered) pushes, all answered 200 and delivered once, three processes on one socket")
    }

}

extension DocTestRun {
    /// The SHA-256 fingerprint of the certificate in the PEM text `certificate`, as hex digits without colons, upper
    /// case (nil if openssl cannot read it).
    func fingerprint(ofPEM certificate: String) -> String? {
        let ran = try? RecipeProcess.run(
            "openssl", ["x509", "-noout", "-fingerprint", "-sha256"], input: Data(certificate.utf8), error: .discard)
        return ran.flatMap { DocTestReadings.fingerprint($0.output) }
    }

    /// The fingerprint of the certificate a new TLS connection to 127.0.0.1:8787 is served, for the name `name`,
    /// verified against `caFile` (nil if the handshake or the verification failed).
    func servedFingerprint(name: String, caFile: String) -> String? {
        let ran = try? RecipeProcess.run(
            "openssl",
            [
                "s_client", "-connect", "127.0.0.1:8787", "-servername", name, "-verify_hostname", name, "-CAfile",
                caFile, "-verify_return_error", "-alpn", "http/1.1",
            ], input: Data(), error: .discard, timeout: 20)
        guard let ran, ran.status == 0 else { return nil }
        return fingerprint(ofPEM: ran.output)
    }

    /// One request over TLS through curl (the chain against `caFile`, the name `name` resolved to 127.0.0.1): the
    /// HTTP status and the body.
    func curlTLS(_ path: String, name: String, caFile: String, body: Data? = nil) -> (status: Int, body: String)? {
        var arguments = [
            "-sS", "--max-time", "20", "--cacert", caFile, "--resolve", "\(name):8787:127.0.0.1", "-w",
            "\n%{http_code}",
            "https://\(name):8787\(path)",
        ]
        if body != nil { arguments += ["-H", "Content-Type: application/json", "--data-binary", "@-"] }
        guard let ran = try? RecipeProcess.run("curl", arguments, input: body ?? Data(), error: .discard),
            ran.status == 0, let newline = ran.output.lastIndex(of: "\n"),
            let status = Int(ran.output[ran.output.index(after: newline)...])
        else { return nil }
        return (status, String(ran.output[..<newline]))
    }

    /// docs/operations/tls.md, "certbot": the hook installed and the first certificate issued (block 1; certbot is a
    /// stand-in that issues from the run's own CA and runs the hook with certbot's variables), `tls` turned on and the
    /// relay restarted on the socket unit's socket (block 2), then a forced renewal (block 3): new connections see the
    /// new certificate's fingerprint, the relay printed its `reloaded:` line naming it, and pushes go on over TLS.
    func tlsCertbot() throws {
        scenario = "tls-certbot"
        say("tls-certbot: \(location(1)) (the hook, the first certificate), \(location(2)) (tls on), \(location(3))")
        let journal = systemd + "/journal"
        let name = "relay.example.org"
        let caFile = systemd + "/certbot/ca.pem"
        let lineage = "/etc/letsencrypt/live/" + name
        guard runBlock(try block(1), output: work + "/certbot-1.out") else {
            show([work + "/certbot-1.out"], last: 10)
            throw fail("certbot certonly with the deploy hook (\(location(1)))")
        }
        // What the hook installed: the lineage's pair, the key readable by the ssl-cert group and not by others.
        guard read("/etc/duo-relay/tls/fullchain.pem") == read(lineage + "/fullchain.pem"),
            read("/etc/duo-relay/tls/privkey.pem") == read(lineage + "/privkey.pem")
        else { throw fail("the deploy hook did not install the lineage's pair") }
        let key = try FileManager.default.attributesOfItem(atPath: "/etc/duo-relay/tls/privkey.pem")
        guard (key[.posixPermissions] as? Int).map({ $0 & 0o777 }) == 0o640,
            key[.groupOwnerAccountName] as? String == "ssl-cert"
        else { throw fail("the key is not root:ssl-cert 0640") }
        guard let first = fingerprint(ofPEM: read(lineage + "/cert.pem")) else {
            throw fail("the first certificate does not read")
        }

        guard runBlock(try block(2), output: work + "/certbot-2.out") else {
            show([work + "/certbot-2.out", journal], last: 10)
            throw fail("tls on and the restart (\(location(2)))")
        }
        guard RecipeClock.within(30, { curlTLS("/healthz", name: name, caFile: caFile)?.status == 200 }) else {
            show([journal], last: 10)
            throw fail("the relay does not answer over TLS, verified for \(name)")
        }
        guard servedFingerprint(name: name, caFile: caFile) == first else {
            throw fail("a new connection is not served the first certificate")
        }
        guard let started = journalFingerprint(after: "tls: certificate subject CN=\(name)"), started == first else {
            throw fail("the start-up summary does not name the first certificate's fingerprint")
        }
        let grant = try grantTLS(name: name, caFile: caFile)
        try pushTLS(grant, name: name, caFile: caFile, what: "before the renewal")

        let reloads = read(journal).components(separatedBy: "reloaded:").count
        guard runBlock(try block(3), output: work + "/certbot-3.out") else {
            show([work + "/certbot-3.out", journal], last: 10)
            throw fail("certbot renew --force-renewal (\(location(3)))")
        }
        guard let renewed = fingerprint(ofPEM: read(lineage + "/cert.pem")), renewed != first else {
            throw fail("the renewal did not put a new certificate in the lineage")
        }
        guard read(journal).components(separatedBy: "reloaded:").count == reloads + 1,
            let printed = DocTestReadings.fingerprint(read(work + "/certbot-3.out")), printed == renewed
        else {
            show([work + "/certbot-3.out"], last: 3)
            throw fail("the block's reloaded: line does not name the renewed certificate")
        }
        guard servedFingerprint(name: name, caFile: caFile) == renewed else {
            throw fail("a new connection after the renewal is not served the renewed certificate")
        }
        try pushTLS(grant, name: name, caFile: caFile, what: "after the renewal")
        say(
            "tls-certbot: the hook installed the pair (root:ssl-cert 0640); the relay served the first certificate "
                + "over TLS on the socket unit's socket; after certbot renew, reloaded: named the new fingerprint, new "
                + "connections got it, and pushes over TLS were delivered before and after")
    }

    /// The fingerprint in the journal's last line that holds `text`.
    func journalFingerprint(after text: String) -> String? {
        read(systemd + "/journal").split(separator: "\n").last { $0.contains(text) }.flatMap {
            DocTestReadings.fingerprint(String($0))
        }
    }

    /// A grant for a fresh token from the relay over TLS.
    func grantTLS(name: String, caFile: String) throws -> String {
        let body = #"{"token":""# + Self.randomHex(32) + #"","environment":"production"}"#
        guard let answer = curlTLS("/v1/grant", name: name, caFile: caFile, body: Data(body.utf8)),
            answer.status == 200,
            let grant = RelayAnswer(status: 200, retryAfter: nil, body: Data(answer.body.utf8)).strings["grant"]
        else { throw fail("no grant from the relay over TLS") }
        return grant
    }

    /// One push over TLS with `grant`: answered 200 and delivered.
    func pushTLS(_ grant: String, name: String, caFile: String, what: String) throws {
        var generator = SystemRandomNumberGenerator()
        let sealed = Data((0..<RelayPush.sealedByteCount).map { _ in UInt8.random(in: 0...255, using: &generator) })
        let push = RelayPush(sealed: sealed, id: Self.randomHex(32), thread: Self.randomHex(32))
        let before = deliveries()
        guard curlTLS("/v1/push", name: name, caFile: caFile, body: push.body(grant: grant))?.status == 200 else {
            throw fail("a push over TLS \(what) was not answered 200")
        }
        guard RecipeClock.within(10, { deliveries() == before + 1 }) else {
            throw fail("a push over TLS \(what) did not reach APNs")
        }
    }
}
