import Foundation
import Glibc

/// The systemctl stand-in for a unit a Debian package installs (`redis-server`, `redis-server@replica`,
/// `redis-sentinel`, `tinyproxy`), so that the documents can show those servers as Debian runs them and the doc test
/// still runs the blocks as written. The unit is the package's own (`/etc/systemd/system`, else `/lib/systemd/system`;
/// `NAME@INSTANCE` reads the template `NAME@.service` with `%i` replaced). Start: its EnvironmentFiles (a leading `-`:
/// optional), its RuntimeDirectory made under /run for its User and Group, then ExecStart in the background as that
/// User and Group (`setpriv`), through bash so that its `$VARIABLES` come from the environment files. Reload:
/// ExecReload's lines with MAINPID. Stop: KillSignal and the wait for the end. From `/`, as systemd runs a system
/// service. Not Restart=, Type=notify's wait, or the sandboxing. Its state (the PID, the output as a journal) is in `STATE/units/NAME`.
struct PackagedUnitStandIn {
    let name: String
    let unit: SystemdUnit
    let directory: String
    var pidFile: String { directory + "/pid" }
    var journal: String { directory + "/journal" }

    init?(name: String, state: String) {
        let parts = name.split(separator: "@", maxSplits: 1).map(String.init)
        var candidates = ["/etc/systemd/system/\(name).service", "/lib/systemd/system/\(name).service"]
        if parts.count == 2 {
            candidates += ["/etc/systemd/system/\(parts[0])@.service", "/lib/systemd/system/\(parts[0])@.service"]
        }
        guard let text = candidates.lazy.compactMap({ try? String(contentsOfFile: $0, encoding: .utf8) }).first else {
            return nil
        }
        self.name = name
        unit = SystemdUnit(parts.count == 2 ? text.replacingOccurrences(of: "%i", with: parts[1]) : text)
        directory = state + "/units/" + name
    }

    func run(_ command: String) -> Int32 {
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        switch command {
        case "enable", "daemon-reload": return 0
        case "start": return mainPID.map(ProcessTable.isRunning) == true ? 0 : start()
        case "stop": return stop()
        case "restart":
            let stopped = stop()
            return stopped == 0 ? start() : stopped
        case "reload": return reload()
        case "status": return status()
        default:
            printError("systemctl (doc-test stand-in): \(command) \(name) is not played here")
            return 1
        }
    }

    var mainPID: Int32? {
        (try? String(contentsOfFile: pidFile, encoding: .utf8)).flatMap {
            Int32($0.trimmingCharacters(in: .whitespacesAndNewlines))
        }
    }

    /// The service's variables: its environment files' (a missing optional one sets none), and PATH.
    func environment() -> [String: String] {
        var variables = ["PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
        for file in unit.values("EnvironmentFile").flatMap({ $0.split(separator: " ") }) {
            let path = file.hasPrefix("-") ? String(file.dropFirst()) : String(file)
            let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
            variables.merge(SystemdUnit.environment(text)) { _, new in new }
        }
        return variables
    }

    func start() -> Int32 {
        let user = unit.values("User").last
        let group = unit.values("Group").last ?? user
        let mode = unit.values("RuntimeDirectoryMode").last.flatMap { mode_t($0, radix: 8) } ?? 0o755
        for runtime in unit.values("RuntimeDirectory").flatMap({ $0.split(separator: " ") }) {
            let path = "/run/" + runtime
            try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            chmod(path, mode)
            if let user, let owner = getpwnam(user)?.pointee, let group, let owners = getgrnam(group)?.pointee {
                chown(path, owner.pw_uid, owners.gr_gid)
            }
        }
        guard let line = unit.values("ExecStart").last, !line.isEmpty else {
            printError("\(name).service: no ExecStart")
            return 1
        }
        var command = ["/bin/bash", "-c", "exec " + line]
        if let user, let group {
            command = ["/usr/bin/setpriv", "--reuid=\(user)", "--regid=\(group)", "--init-groups", "--"] + command
        }
        guard
            let service = try? RecipeProcess(
                command[0], Array(command.dropFirst()), directory: "/", environment: environment(),
                output: .append(journal), error: .output)
        else {
            printError("\(name).service: ExecStart did not start")
            return 1
        }
        guard (try? "\(service.pid)\n".write(toFile: pidFile, atomically: true, encoding: .utf8)) != nil else {
            return 1
        }
        // A server that cannot start (its configuration refused, its port taken) exits at once, as systemd would
        // then report the start failed.
        if RecipeClock.within(0.5, { !ProcessTable.isRunning(service.pid) }) {
            printError("\(name).service: exited at start; its output:")
            printError((try? String(contentsOfFile: journal, encoding: .utf8)) ?? "")
            return 1
        }
        return 0
    }

    func reload() -> Int32 {
        var variables = environment()
        variables["MAINPID"] = mainPID.map(String.init) ?? ""
        let lines = unit.values("ExecReload").filter { !$0.isEmpty }
        guard !lines.isEmpty else {
            printError("\(name).service: no ExecReload (reload is not played without one)")
            return 1
        }
        for line in lines {
            let status =
                (try? RecipeProcess.run(
                    "/bin/bash", ["-c", line], environment: variables, output: .append(journal), error: .output))?
                .status ?? 127
            guard status == 0 else {
                printError("\(name).service: ExecReload failed: \(line)")
                return 1
            }
        }
        return 0
    }

    func stop() -> Int32 {
        guard let pid = mainPID else { return 0 }
        guard let signal = unit.killSignal else {
            printError("\(name).service: KillSignal \(unit.values("KillSignal").last ?? "") is not played here")
            return 1
        }
        kill(pid, signal)
        guard RecipeClock.within(60, { waitpid(pid, nil, WNOHANG) == pid || !ProcessTable.isRunning(pid) }) else {
            printError("\(name).service: did not stop within 60 s")
            return 1
        }
        try? FileManager.default.removeItem(atPath: pidFile)
        return 0
    }

    func status() -> Int32 {
        guard let pid = mainPID, ProcessTable.isRunning(pid) else {
            print("\(name).service: inactive")
            return 3
        }
        print("\(name).service: active (running), main PID \(pid)")
        return 0
    }
}
