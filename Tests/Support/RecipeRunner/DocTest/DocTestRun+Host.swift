import Foundation
import Glibc

/// The scenarios of one relay on this host: README's quick start and Secrets, OPERATIONS' systemd recipe.
extension DocTestRun {
    /// README's first block: scripts/install ~/.local, then `duo-relay dev`; the commands dev prints, pasted as
    /// a person would, deliver; Ctrl-C ends it with status 0 and nothing kept.
    func quickStart() throws {
        scenario = "quick-start"
        say("quick-start: \(location(1)): scripts/install ~/.local, duo-relay dev")
        let output = work + "/dev.out"
        let shell = try RecipeProcess(
            "/bin/bash", [try block(1)], directory: repo, output: .file(output), error: .output)
        guard waitFile(output, "Try it from another shell:", seconds: 600, while: shell) else {
            show([output], last: 5)
            throw fail("duo-relay dev printed no instructions")
        }
        guard access(home + "/.local/bin/duo-relay", X_OK) == 0 else {
            throw fail("scripts/install ~/.local made no ~/.local/bin/duo-relay")
        }
        guard let hint = DocTestReadings.devInstructions(read(output)) else {
            throw fail("dev's instructions have no commands")
        }
        let answer = try RecipeProcess.run(
            "/bin/bash", ["-c", hint.commands + " && echo && " + hint.push], environment: ["PATH": installedPath],
            error: .output)
        guard answer.status == 0 else {
            let last = answer.output.split(separator: "\n").last ?? ""
            throw fail("the commands duo-relay dev prints failed: \(last)")
        }
        guard answer.output.contains(#""apns_id""#) else {
            throw fail("dev's curl push was not delivered: \(answer.output.prefix(120))")
        }
        guard DocTestReadings.hasLine(answer.output, startingWith: "push: delivered") else {
            throw fail("dev's duo-relay push was not delivered")
        }
        guard let dev = ProcessTable.children(of: shell.pid, named: "duo-relay").first else {
            throw fail("no duo-relay dev process")
        }
        kill(dev, SIGINT)
        guard shell.wait() == 0 else { throw fail("duo-relay dev did not exit 0 on Ctrl-C") }
        guard read(output).contains("nothing kept") else { throw fail("dev did not say it kept nothing") }
        say("quick-start: installed, dev served, its printed curl and duo-relay push delivered, Ctrl-C exit 0")
    }

    /// README's Secrets block (serve in the foreground), Ctrl-C, then OPERATIONS' rotation with plain variables, in
    /// one shell as a person types them; relay.json is deploy/systemd's (127.0.0.1:8787).
    func secretsEnv() throws {
        scenario = "secrets-env"
        say("secrets-env: \(location(1)), then \(location(2))")
        let directory = work + "/env"
        let manager = FileManager.default
        try manager.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try manager.copyItem(atPath: apns + "/AuthKey_KEYID12345.p8", toPath: directory + "/AuthKey_KEYID12345.p8")
        try manager.copyItem(atPath: repo + "/deploy/systemd/relay.json", toPath: directory + "/relay.json")
        try pointAtSimulator(directory + "/relay.json")
        let script = work + "/env.sh"
        try (read(try block(1)) + read(try block(2))).write(toFile: script, atomically: true, encoding: .utf8)
        let output = work + "/env.out"
        let shell = try RecipeProcess(
            "/bin/bash", [script], directory: directory, environment: ["PATH": installedPath], output: .file(output),
            error: .output)
        guard waitHTTP(8787, "/healthz") else {
            show([output], last: 3)
            throw fail("serve never answered /healthz")
        }
        guard DocTestReadings.hasLine(read(output), startingWith: "check: ok") else {
            throw fail("check did not pass before serve")
        }
        let grant = try self.grant(8787)
        try pushDelivered(8787, grant, else: "a push with the secrets from the environment")
        guard let serve = ProcessTable.children(of: shell.pid, named: "duo-relay").first else {
            throw fail("no serve process")
        }
        kill(serve, SIGTERM)
        // The rotation block: key 2 added, check, serve again.
        guard waitFile(output, "relay keys: 1, 2", seconds: 30, while: shell) else {
            throw fail("check after the rotation does not list keys 1, 2")
        }
        guard waitHTTP(8787, "/healthz") else { throw fail("serve did not start again after the rotation") }
        guard pushStatus(8787, grant) == 200 else { throw fail("a grant sealed before the rotation no longer opens") }
        guard let again = ProcessTable.children(of: shell.pid, named: "duo-relay").first else {
            throw fail("no serve process after the rotation")
        }
        kill(again, SIGTERM)
        guard shell.wait() == 0 else { throw fail("serve did not exit 0 on SIGTERM") }
        say("secrets-env: check, serve, a push delivered; key 2 added, old grant still delivers")
    }

    /// Runs `script` with `bash -euo pipefail` (from the checkout), its output in `output`; whether it exited 0.
    func runBlock(_ script: String, output: String, environment: [String: String] = [:]) -> Bool {
        (try? RecipeProcess.run(
            "/bin/bash", ["-euo", "pipefail", script], directory: repo, environment: environment,
            output: .file(output), error: .output))?.status == 0
    }

    /// OPERATIONS' systemd recipe: the install (the service enabled through the systemctl stand-in), the dry run
    /// with the service's secrets and by hand, one push, then the rotation: key 2 added and sealing, key 1 removed.
    func systemdScenario() throws {
        scenario = "systemd"
        say("systemd: \(location(3)) (install), then the dry run, a push, the rotation")
        let journal = systemd + "/journal"
        // From the repository, as root, with the .p8 beside it (the checkout is an overlay here).
        try? FileManager.default.removeItem(atPath: repo + "/AuthKey_KEYID12345.p8")
        try FileManager.default.copyItem(
            atPath: apns + "/AuthKey_KEYID12345.p8", toPath: repo + "/AuthKey_KEYID12345.p8")
        // The install block but for its last lines (enable --now, status): relay.json pointed at the simulator first.
        let install = DocTestReadings.split(read(try block(3)), before: "systemctl daemon-reload")
        try install.head.write(toFile: work + "/install.sh", atomically: true, encoding: .utf8)
        try install.tail.write(toFile: work + "/enable.sh", atomically: true, encoding: .utf8)
        guard runBlock(work + "/install.sh", output: work + "/install.out") else {
            show([work + "/install.out"], last: 5)
            throw fail("the install block (\(location(3)))")
        }
        guard access("/usr/local/bin/duo-relay", X_OK) == 0 else {
            throw fail("scripts/install made no /usr/local/bin/duo-relay")
        }
        let keys = try? FileManager.default.attributesOfItem(atPath: "/etc/duo-relay/credentials/RELAY_KEYS")
        guard (keys?[.posixPermissions] as? Int).map({ $0 & 0o777 }) == 0o600 else {
            throw fail("RELAY_KEYS is not 0600")
        }
        try pointAtSimulator("/etc/duo-relay/relay.json")
        guard runBlock(work + "/enable.sh", output: work + "/enable.out") else {
            show([work + "/enable.out", journal])
            throw fail("enable --now and status")
        }
        guard read(work + "/enable.out").contains("active (running)") else {
            throw fail("systemctl status does not say running")
        }
        guard waitHTTP(8787, "/healthz") else {
            show([journal], last: 3)
            throw fail("the service never answered")
        }

        // The dry run, with the service's secrets (block 1), and by hand as the systemd section says (block 4).
        var service = SystemdUnit.environment(read("/etc/duo-relay/relay.env"))
        service["CREDENTIALS_DIRECTORY"] = systemd + "/credentials"
        guard runBlock(try block(1), output: work + "/check.out", environment: service) else {
            throw fail("the dry run with the service's secrets")
        }
        guard runBlock(try block(4), output: work + "/check.out") else {
            show([work + "/check.out"])
            throw fail("the dry run by hand (\(location(4)))")
        }
        guard DocTestReadings.hasLine(read(work + "/check.out"), startingWith: "check: ok") else {
            throw fail("the dry run by hand did not say ok")
        }

        // One push end to end (block 2), with a grant as a test phone would get it.
        let grant = try self.grant(8787)
        let before = deliveries()
        let push = work + "/push.out"
        guard
            runBlock(try block(2), output: push, environment: ["GRANT": grant, "RELAY_URL": "http://127.0.0.1:8787"])
        else {
            show([push])
            throw fail("duo-relay push (\(location(2)))")
        }
        // What OPERATIONS.md says it prints (the HTTP status follows on the same line).
        guard DocTestReadings.hasLine(read(push), startingWith: "push: delivered") else {
            throw fail("duo-relay push did not say delivered")
        }
        guard deliveries() == before + 1 else { throw fail("the push did not reach APNs") }
        guard !read(push).contains(grant) else { throw fail("duo-relay push printed the grant") }

        // Rotation: key 2 added and sealing (block 5), then key 1 removed (block 6).
        guard runBlock(try block(5), output: work + "/rotate.out") else {
            show([work + "/rotate.out"])
            show([journal], last: 5)
            throw fail("rotation, add and switch (\(location(5)))")
        }
        guard waitHTTP(8787, "/healthz") else {
            show([journal], last: 20)
            throw fail("not serving after the rotation's restart")
        }
        guard read(work + "/rotate.out").contains("relay keys: 1, 2; grants sealed with key 1") else {
            throw fail("check after adding key 2")
        }
        guard waitFile(journal, "reloaded: relay keys 1, 2", seconds: 10) else {
            throw fail("the reload did not apply")
        }
        guard pushStatus(8787, grant) == 200 else {
            throw fail("a grant of key 1 no longer delivers after adding key 2")
        }
        let new = try self.grant(8787, from: "192.0.2.2")
        guard runBlock(try block(6), output: work + "/remove.out") else {
            show([work + "/remove.out"])
            throw fail("rotation, remove key 1 (\(location(6)))")
        }
        guard waitHTTP(8787, "/healthz") else { throw fail("not serving after removing key 1") }
        guard pushStatus(8787, grant, from: "192.0.2.3") == 401 else {
            throw fail("a grant of the removed key 1 still opens")
        }
        guard pushStatus(8787, new, from: "192.0.2.4") == 200 else { throw fail("a grant of key 2 does not deliver") }
        guard
            (try? RecipeProcess.run("systemctl", ["stop", "duo-relay"], output: .discard, error: .discard))?.status == 0
        else {
            throw fail("systemctl stop did not stop the service")
        }
        guard !read(journal).contains(grant) else { throw fail("the journal holds a grant") }
        say(
            "systemd: installed, enabled, dry run ok (service and by hand), push delivered, key 2 added and sealing, "
                + "key 1 removed")
    }
}
