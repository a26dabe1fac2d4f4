import Foundation
import Glibc

extension ContainerTestRun {
    /// What the runs need: the simulator on the default network's gateway, with throwaway keys.
    func startSimulator() throws(RecipeFailure) {
        let holder = try podman([
            "run", "-d", "--name", "duo-ct-holder", "--read-only", "--cap-drop", "ALL", "--entrypoint", "/catatonit",
            Self.probe, "-P",
        ])
        try expect(holder.succeeded, "a container on podman's default network")
        gateway = try podman(["network", "inspect", "podman", "-f", "{{range .Subnets}}{{.Gateway}}{{end}}"]).output
            .trimmingCharacters(in: .whitespacesAndNewlines)
        _ = try RecipeClock.within(5) { () throws(RecipeFailure) -> Bool in
            try run("ip", ["-o", "-4", "addr", "show"]).output.contains(" \(gateway)/")
        }
        try makeDirectory(pki)
        let p8 = pki + "/AuthKey_KEYID12345.p8"
        let steps: [[String]] = [
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", p8],
            ["pkey", "-in", p8, "-pubout", "-out", pki + "/public.pem"],
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj",
                "/CN=ct-ca", "-keyout", pki + "/ca.key", "-out", pki + "/ca.pem",
            ],
            [
                "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=\(gateway)",
                "-keyout", pki + "/sim.key", "-out", pki + "/sim.csr",
            ],
            [
                "x509", "-req", "-in", pki + "/sim.csr", "-CA", pki + "/ca.pem", "-CAkey", pki + "/ca.key",
                "-CAcreateserial", "-days", "1", "-out", pki + "/sim.pem", "-extfile", pki + "/sim.ext",
            ],
        ]
        try write("subjectAltName=IP:\(gateway)\nextendedKeyUsage=serverAuth\n", to: pki + "/sim.ext")
        for step in steps {
            try expect(try run("openssl", step).succeeded, "the simulator's keys (openssl \(step[0]))")
        }
        let port = try freePort()
        try write("", to: deliveries)
        let log = work + "/sim.err"
        simulator = try RecipeProcess(
            "duo-relay",
            [
                "apns-sim", "--listen", "\(gateway):\(port)", "--team-id", "ABCDE12345", "--key-id", "KEYID12345",
                "--public-key", pki + "/public.pem", "--cert", pki + "/sim.pem", "--private-key", pki + "/sim.key",
                "--record", deliveries,
            ], output: .file(log), error: .output)
        let listening = RecipeClock.within(10) { read(log).contains("listening on") }
        let last = read(log).split(separator: "\n").last.map(String.init) ?? ""
        try expect(listening, "apns-sim did not start: \(last)")
        origin = "https://\(gateway):\(port)"
    }

    /// A free port on the host.
    func freePort() throws(RecipeFailure) -> Int {
        guard let port = ports.next() else { throw .check("no free port in 20000 to 29999") }
        return port
    }

    /// Secrets owned by root and readable by group 10001 only (files 0440, the directory 0750).
    func ownSecret(_ path: String, mode: mode_t) {
        chown(path, 0, 10001)
        chmod(path, mode)
    }

    /// 2. The container, as OPERATIONS.md runs it.
    func checkContainer() throws(RecipeFailure) {
        say("2. the documented podman run: dry run, then serve; a push; RELAY_KEYS_FILE rotated with SIGHUP; SIGTERM")
        let op = operatorDirectory
        let secrets = op + "/secrets"
        try makeDirectory(secrets)
        let template = FileManager.default.contents(atPath: "deploy/container/relay.json") ?? Data()
        guard let config = ContainerRelayConfig.edited(template, ContainerRelayConfig.atSimulator(origin)) else {
            throw .check("container: deploy/container/relay.json is not JSON")
        }
        try write(String(decoding: config, as: UTF8.self), to: op + "/relay.json", mode: 0o644)
        let keys = try run("duo-relay", ["keygen", "--id", "1"])
        try expect(keys.succeeded, "container: duo-relay keygen")
        try write(keys.output, to: secrets + "/RELAY_KEYS")
        let p8 = read(pki + "/AuthKey_KEYID12345.p8")
        try write(p8, to: secrets + "/APNS_KEY_PRODUCTION")
        try write("KEYID12345", to: secrets + "/APNS_KEY_ID_PRODUCTION")
        ownSecret(secrets, mode: 0o750)
        for name in ["RELAY_KEYS", "APNS_KEY_PRODUCTION", "APNS_KEY_ID_PRODUCTION"] {
            ownSecret(secrets + "/" + name, mode: 0o440)
        }
        let port = try freePort()
        let metricsPort = try freePort()
        guard
            let runBlock = ContainerRecipeEdits.runBlock(
                read(try block("container", 2)), port: port, metricsPort: metricsPort,
                ulimits: ContainerRecipeEdits.ulimitOptions(files: files, processes: processes),
                caFile: pki + "/ca.pem")
        else { throw .check("container: OPERATIONS.md's podman run block lacks what the run changes") }
        try write(runBlock, to: work + "/run.sh")
        let ran = try run("bash", ["-euo", "pipefail", work + "/run.sh"], directory: op)
        try expect(ran.succeeded, "container: the documented dry run and run", detail: ran.tail(5))
        try expect(
            (ran.output + ran.error).split(separator: "\n").contains { $0.hasPrefix("check: ok") },
            "container: the documented dry run did not say ok")
        let relay = "http://127.0.0.1:\(port)"
        try expect(
            RecipeHTTP.answers200(relay + "/healthz"), "container: /healthz never answered 200",
            detail: logTail("duo-relay", 3))
        try processIsConfined("duo-relay", check: "container")
        try expect(
            ContainerConfinement.coreFilesOff(limits: read("/proc/\(try pid(of: "duo-relay"))/limits")),
            "container: core files are not off (--ulimit core=0)")
        let wrote = try podman(["exec", "duo-relay", "/bin/sh", "-c", ": > /probe"])
        try expect(!wrote.succeeded, "container: the root file system took a write")
        try expect(RecipeHTTP.answers200(relay + "/readyz"), "container: /readyz never answered 200")
        let token = Self.randomHex(32)
        let grant = try grant(relay, token: token, check: "container")
        let relayKey = ContainerRelayConfig.string(Data(keys.output.utf8), "1") ?? ""
        let keyLine = p8.split(separator: "\n").dropFirst().first.map(String.init) ?? ""
        secretsGiven += [token, grant, relayKey, keyLine]
        try pushDelivered(relay, grant: grant, check: "container")
        try expect(read(deliveries).contains(token), "container: the simulator got another token")
        try metricsClean("http://127.0.0.1:\(metricsPort)/metrics", check: "container")

        let rotated = try run("bash", ["-euo", "pipefail", try block("container", 3)], directory: op)
        try expect(rotated.succeeded, "container: the documented RELAY_KEYS_FILE rotation", detail: rotated.tail(3))
        let reloaded = try RecipeClock.within(5) { () throws(RecipeFailure) -> Bool in
            let logs = try podman(["logs", "duo-relay"])
            return (logs.output + logs.error).contains("reloaded: relay keys 1, 2")
        }
        try expect(reloaded, "container: SIGHUP did not load key 2")
        try pushDelivered(relay, grant: grant, check: "container after the rotation (a grant of key 1)")

        let grace = ContainerRelayConfig.number(config, ["server", "shutdown_grace_s"]) ?? 0
        let started = Date()
        _ = try podman(["kill", "--signal", "TERM", "duo-relay"])
        let waited = try run("podman", ["wait", "duo-relay"], timeout: Double(grace + 5))
        try expect(waited.succeeded, "container: did not stop within \(grace) s of SIGTERM")
        let took = Int(Date().timeIntervalSince(started) * 1000)
        let code = waited.output.trimmingCharacters(in: .whitespacesAndNewlines)
        try expect(code == "0", "container: exit status \(code) after SIGTERM")
        let logs = try podman(["logs", "duo-relay"])
        try logsClean(logs.output + logs.error, check: "container")
        _ = try podman(["rm", "duo-relay"])
        say(
            "container: UID/GID 10001, no capabilities, no_new_privs, seccomp, read-only root, no core files; "
                + "push delivered; key 2 by SIGHUP; SIGTERM: exit 0 in \(took) ms")
    }
}
