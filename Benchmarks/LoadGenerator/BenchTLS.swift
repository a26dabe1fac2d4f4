import Foundation
import Glibc
import TLS

/// The relay serving HTTPS itself (`tls`), measured against what it replaces and against its own plain front
/// (BENCHMARKS.md, "What each figure means"): nginx terminating TLS in front of the plain relay at 1,000/s (both
/// processes' CPU added), its saturated push rate against the plain relay's, and the memory of idle TLS connections.
extension BenchRun {
    /// The front's TLS pair, made once per run: a throwaway CA and a P-256 certificate for `localhost` and
    /// 127.0.0.1 that the relay and nginx both serve, and that every HTTPS client verifies.
    struct FrontFiles {
        let directory: String
        var caCertificate: String { directory + "/ca.pem" }
        var certificate: String { directory + "/cert.pem" }
        var key: String { directory + "/key.pem" }
    }

    var front: FrontFiles { FrontFiles(directory: work + "/front") }

    /// The options that make a load subcommand speak HTTPS to a front serving ``front``'s certificate.
    var httpsOptions: [String] { ["--ca-file", front.caCertificate, "--server-name", "localhost"] }

    /// Writes the front's pair (the key readable by its owner only: the relay refuses a key others may read).
    func prepareFront() throws {
        try FileManager.default.createDirectory(atPath: front.directory, withIntermediateDirectories: true)
        let pki = try LocalPKI.generate()
        try pki.caCertificatePEM.write(toFile: front.caCertificate, atomically: true, encoding: .utf8)
        try pki.certificatePEM.write(toFile: front.certificate, atomically: true, encoding: .utf8)
        guard FileManager.default.createFile(atPath: front.key, contents: nil, attributes: [.posixPermissions: 0o600])
        else { throw LoadError(.failed, "cannot write \(front.key)") }
        try pki.privateKeyPEM.write(toFile: front.key, atomically: false, encoding: .utf8)
    }

    /// Every measurement of the section, each on a fresh stack. Saturated, TLS and plain alternate (TLS first); at
    /// 1,000/s, the relay with `tls` and the pair (nginx with TLS in front of the plain relay) alternate, the same
    /// HTTPS load against each; then idle connections, plain (unless the serving section measured them) and TLS.
    func tlsFront() throws {
        try prepareFront()
        for round in 1...plan.tlsRounds {
            servesTLS = true
            // The load generator's own CPU too: it shares the cores, and its TLS is part of what a round costs them.
            let load = ["--pid", "load=self"]
            try onAFreshStack("tls-saturation") { saturated(watching: ["relay": relayPID]) + load + httpsOptions }
            servesTLS = false
            try onAFreshStack("tls-paired-plain") { saturated(watching: ["relay": relayPID]) + load }
            Self.log("TLS saturated round \(round) of \(plan.tlsRounds) done")
        }
        let rate = Double(plan.fixedRate)
        for round in 1...plan.tlsRounds {
            servesTLS = true
            try onAFreshStack("tls-relay-fixed") {
                openLoop(rate, seconds: plan.fixedSeconds, watching: ["relay": relayPID]) + httpsOptions
            }
            servesTLS = false
            try startStack()
            try startNginxTLSFront()
            record(
                "tls-pair-fixed",
                openLoop(
                    rate, seconds: plan.fixedSeconds, watching: ["relay": relayPID, "nginx": nginxWorker],
                    target: "127.0.0.1:\(nginxPort)") + httpsOptions)
            stopNginx()
            stopStack()
            Self.log("relay with tls and the pair at \(plan.fixedRate)/s, round \(round) of \(plan.tlsRounds) done")
        }
        if !plan.measuresServing {
            try onAFreshStack("idle") { idle() }
        }
        servesTLS = true
        try onAFreshStack("idle-tls") { idle() + httpsOptions }
        servesTLS = false
        Self.log("TLS measured")
    }

    /// The idle connections' load on the relay now running.
    func idle() -> [String] {
        [
            "idle", "--target", relayTarget, "--connections", String(plan.idleConnections), "--pid",
            String(relayPID), "--settle", Self.text(plan.idleSettleSeconds),
        ]
    }

    /// nginx as deployments run it in front of the relay: one worker terminating TLS (``front``'s pair), proxying
    /// HTTP/1.1 with keep-alive to the plain relay of the stack now running. Its CPU is its only worker's.
    func startNginxTLSFront() throws {
        let directory = work + "/nginx-tls"
        for _ in 0..<20 {
            let port = try Self.freePort()
            let proxy = try nginxInstance(
                "front", directory: directory,
                body: BenchRun.nginxTLSFront(
                    port: port, relay: relayTarget, certificate: front.certificate, key: front.key))
            let answered = Self.poll(100) {
                self.httpStatus(["--cacert", front.caCertificate, "https://127.0.0.1:\(port)/healthz"]) == "200"
                    ? true : nil
            }
            if answered == true,
                let worker = BenchReadings.onlyChild(Self.read("/proc/\(proxy.pid)/task/\(proxy.pid)/children"))
            {
                nginxPort = port
                nginxWorker = worker
                return
            }
            stopNginx()
        }
        LoadCommand.write(Self.read("\(directory)/front.log"), to: STDERR_FILENO)
        throw LoadError(.failed, "nginx terminating TLS did not start")
    }

    /// The pair's nginx: TLS 1.2 and 1.3 as the relay serves them, keep-alive on both sides (64 connections to the
    /// relay, as many as the load's), the relay's own body limit.
    static func nginxTLSFront(port: Int, relay: String, certificate: String, key: String) -> String {
        """
            upstream relay_plain {
                server \(relay);
                keepalive 64;
                keepalive_requests 10000000;
                keepalive_timeout 120s;
            }
            server {
                listen 127.0.0.1:\(port) ssl;
                ssl_certificate \(certificate);
                ssl_certificate_key \(key);
                ssl_protocols TLSv1.2 TLSv1.3;
                client_max_body_size 8k;
                location / {
                    proxy_pass http://relay_plain;
                    proxy_http_version 1.1;
                    proxy_set_header Connection "";
                }
            }
        """
    }
}
