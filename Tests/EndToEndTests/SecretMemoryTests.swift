import Foundation
import Glibc
import RelayTestSupport
import Testing

/// The relay holds the APNs signing keys: `serve` (and `check`) make the process undumpable at start, so no
/// core file is written and no other process of the same user can attach or read its memory.
@Suite struct SecretMemoryTests {
    /// Root reads any process (CAP_SYS_PTRACE): as root, the relay and the probes run as `nobody`, one user
    /// without capabilities, as a same-user attacker would be.
    static var launcher: [String] {
        getuid() == 0 ? ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"] : []
    }

    /// Runs `command` as the launcher's user; its exit status and standard output.
    static func probe(_ command: [String]) throws -> (status: Int32, output: String) {
        let full = launcher + command
        let result = try Tool.run(full[0], Array(full.dropFirst()))
        return (result.status, result.output)
    }

    @Test func aRunningRelayCannotBeReadByItsOwnUser() throws {
        let secrets = TestSecrets()
        let relay = try RelayProcess(config: RelayProcess.config(), secrets: secrets, launcher: Self.launcher)
        let pid = relay.process.processIdentifier
        // /proc/<pid>/status stays readable: the relay runs as the probes' user, and the kernel keeps no
        // record of a dump in it.
        let status = try Self.probe(["/bin/cat", "/proc/\(pid)/status"])
        #expect(status.status == 0)
        let uid = status.output.split(separator: "\n").first { $0.hasPrefix("Uid:") }?.split(separator: "\t")
        #expect(uid?.dropFirst().first.map(String.init) == String(getuid() == 0 ? 65534 : getuid()), "\(status)")

        // A process of the same user started without the protection: its environment reads.
        let control = Process()
        control.executableURL = URL(fileURLWithPath: (Self.launcher + ["/bin/sleep"])[0])
        control.arguments = Array((Self.launcher + ["/bin/sleep", "30"]).dropFirst())
        control.environment = ["MARKER": "readable"]
        try control.run()
        defer {
            // SIGKILL: the child inherits the test runner's blocked signals, SIGTERM included (a terminate()
            // left it to sleep its 30 s out, and this test to wait for it).
            kill(control.processIdentifier, SIGKILL)
            control.waitUntilExit()
        }
        try Poll.wait(for: "the control process runs as the probes' user", within: .seconds(10)) {
            (try? Self.probe(["/bin/cat", "/proc/\(control.processIdentifier)/environ"]).output.contains("MARKER"))
                == true
        }

        // The relay's: refused, though its environment holds the secrets given as variables; and its memory.
        for file in ["environ", "mem", "maps"] {
            let read = try Self.probe(["/bin/cat", "/proc/\(pid)/\(file)"])
            #expect(read.status != 0, "/proc/<relay>/\(file) was readable")
            for secret in secrets.secretStrings { #expect(!read.output.contains(secret)) }
        }
        #expect(try relay.connect().request("GET", "/healthz").status == 200)
    }
}
