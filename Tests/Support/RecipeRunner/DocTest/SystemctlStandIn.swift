import Foundation
import Glibc

/// `systemctl` where systemd is not PID 1 (the doc test's namespace; scripts/doc-test puts a `systemctl` that runs
/// `duo-relay-recipes systemctl` first on PATH): for the one installed unit, what systemd does to start, reload
/// and stop it. Start: each LoadCredential file copied into a private credentials directory, ExecStartPre run
/// (every line must succeed), then ExecStart in the background, with the EnvironmentFile's variables and
/// CREDENTIALS_DIRECTORY; the output of all of them is appended to the journal file. Reload: ExecReload's lines,
/// with MAINPID. Stop: KillSignal, then the wait for the process to end. Its state (the PID, the credentials, the
/// journal) is in the directory DOC_TEST_SYSTEMD names. The units of Debian's packages are ``PackagedUnitStandIn``'s,
/// the relay's socket unit ``SocketUnitStandIn``'s: while it holds the socket, each start of the service passes it.
enum SystemctlStandIn {
    struct Paths {
        var unit = "/etc/systemd/system/duo-relay.service"
        var state: String
        var credentials: String { state + "/credentials" }
        var journal: String { state + "/journal" }
        var pid: String { state + "/pid" }
        var journalText: String { (try? String(contentsOfFile: journal, encoding: .utf8)) ?? "" }
    }

    static func run(_ arguments: [String]) -> Int32 {
        guard let state = ProcessInfo.processInfo.environment["DOC_TEST_SYSTEMD"], let command = arguments.first else {
            printError("systemctl (doc-test stand-in): DOC_TEST_SYSTEMD and a command are needed")
            return 1
        }
        // The relay's socket unit: its own stand-in.
        let sockets = arguments.dropFirst().filter { $0.hasSuffix(".socket") }
        if !sockets.isEmpty {
            guard sockets == ["duo-relay.socket"], arguments.dropFirst().filter({ !$0.hasPrefix("-") }).count == 1
            else {
                printError("systemctl (doc-test stand-in): only duo-relay.socket, alone, is played among socket units")
                return 1
            }
            return SocketUnitStandIn(state: state).run(command, now: arguments.contains("--now"))
        }
        // The units Debian's packages install (redis-server, redis-sentinel, tinyproxy) are played from their own
        // files; a name that is not one, or none, is the relay's installed unit.
        let names = arguments.dropFirst().filter { !$0.hasPrefix("-") }.map {
            $0.hasSuffix(".service") ? String($0.dropLast(".service".count)) : $0
        }
        let packaged = names.filter { $0 != "duo-relay" }.compactMap { PackagedUnitStandIn(name: $0, state: state) }
        if !packaged.isEmpty {
            guard packaged.count == names.count else {
                printError("systemctl (doc-test stand-in): a unit it does not know, or the relay's with others")
                return 1
            }
            for unit in packaged {
                let status = unit.run(command)
                guard status == 0 else { return status }
            }
            return 0
        }
        var paths = Paths(state: state)
        if let unit = ProcessInfo.processInfo.environment["DOC_TEST_SYSTEMD_UNIT"] { paths.unit = unit }
        try? FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        guard let text = try? String(contentsOfFile: paths.unit, encoding: .utf8) else {
            printError("systemctl (doc-test stand-in): no unit at \(paths.unit)")
            return 1
        }
        let standIn = Service(unit: SystemdUnit(text), paths: paths)
        switch command {
        case "daemon-reload": return 0
        case "enable": return arguments.dropFirst().first == "--now" ? standIn.start() : 0
        case "start": return standIn.start()
        case "stop": return standIn.stop()
        case "restart":
            let stopped = standIn.stop()
            return stopped == 0 ? standIn.start() : stopped
        case "reload": return standIn.runEach("ExecReload")
        case "status": return standIn.status()
        default:
            printError("systemctl (doc-test stand-in): \(command) is not played here")
            return 1
        }
    }

    /// `journalctl -u duo-relay [--since ...]`: the relay's unit's journal (the output of everything the stand-in ran
    /// for it), all of it: the scenarios' runs are short.
    static func journal(_ arguments: [String]) -> Int32 {
        guard let state = ProcessInfo.processInfo.environment["DOC_TEST_SYSTEMD"],
            let unit = arguments.firstIndex(of: "-u").map({ arguments.index(after: $0) }),
            unit < arguments.count, ["duo-relay", "duo-relay.service"].contains(arguments[unit])
        else {
            printError("journalctl (doc-test stand-in): only -u duo-relay is played here")
            return 1
        }
        print(Paths(state: state).journalText, terminator: "")
        return 0
    }

    struct Service {
        let unit: SystemdUnit
        let paths: Paths

        /// The service's variables: the EnvironmentFile's and CREDENTIALS_DIRECTORY.
        func environment() -> [String: String] {
            var variables: [String: String] = [:]
            for file in unit.values("EnvironmentFile").flatMap({ $0.split(separator: " ") }) {
                let text = (try? String(contentsOfFile: String(file), encoding: .utf8)) ?? ""
                variables.merge(SystemdUnit.environment(text)) { _, new in new }
            }
            variables["CREDENTIALS_DIRECTORY"] = paths.credentials
            return variables
        }

        var mainPID: Int32? {
            (try? String(contentsOfFile: paths.pid, encoding: .utf8)).flatMap {
                Int32($0.trimmingCharacters(in: .whitespacesAndNewlines))
            }
        }

        /// Runs each line of `key` with bash, as systemd does each command of the key in order; 1 at the first
        /// that fails.
        func runEach(_ key: String) -> Int32 {
            var variables = environment()
            variables["MAINPID"] = mainPID.map(String.init) ?? ""
            for line in unit.values(key) where !line.isEmpty {
                let status =
                    (try? RecipeProcess.run(
                        "/bin/bash", ["-c", line], environment: variables, output: .append(paths.journal),
                        error: .output
                    ))?.status ?? 127
                guard status == 0 else {
                    printError("duo-relay.service: \(key) failed: \(line)")
                    return 1
                }
            }
            return 0
        }

        func start() -> Int32 {
            let manager = FileManager.default
            try? manager.removeItem(atPath: paths.credentials)
            guard
                (try? manager.createDirectory(
                    atPath: paths.credentials, withIntermediateDirectories: false,
                    attributes: [.posixPermissions: 0o700])) != nil
            else {
                printError("duo-relay.service: cannot make \(paths.credentials)")
                return 1
            }
            for credential in unit.credentials {
                let copy = paths.credentials + "/" + credential.name
                guard (try? manager.copyItem(atPath: credential.path, toPath: copy)) != nil,
                    chmod(copy, 0o400) == 0
                else {
                    printError("duo-relay.service: LoadCredential \(credential.name): cannot read \(credential.path)")
                    return 1
                }
            }
            guard runEach("ExecStartPre") == 0 else { return 1 }
            var command = unit.start
            // With the socket unit started, the service gets its socket as systemd passes it: descriptor 3, and
            // LISTEN_PID naming the process (through sh, which learns its own PID and then becomes the service).
            let socket = SocketUnitStandIn(state: paths.state).copyOfSocket()
            defer { if let socket { close(socket) } }
            if socket != nil {
                command = ["/bin/sh", "-c", #"export LISTEN_PID=$$ LISTEN_FDS=1; exec "$0" "$@""#] + command
            }
            guard let executable = command.first,
                let service = try? RecipeProcess(
                    executable, Array(command.dropFirst()), environment: environment(), output: .append(paths.journal),
                    error: .output, passing: socket)
            else {
                printError("duo-relay.service: ExecStart did not start")
                return 1
            }
            guard (try? "\(service.pid)\n".write(toFile: paths.pid, atomically: true, encoding: .utf8)) != nil else {
                return 1
            }
            return 0
        }

        func stop() -> Int32 {
            guard let pid = mainPID else { return 0 }
            guard let signal = unit.killSignal else {
                printError("duo-relay.service: KillSignal \(unit.values("KillSignal").last ?? "") is not played here")
                return 1
            }
            kill(pid, signal)
            // TimeoutStopSec is 30 s; the relay's shutdown grace is 10 s.
            // (The service is this process's child when the same stand-in started it: then it is reaped here.)
            guard RecipeClock.within(60, { waitpid(pid, nil, WNOHANG) == pid || !ProcessTable.isRunning(pid) }) else {
                printError("duo-relay.service: did not stop within 60 s")
                return 1
            }
            try? FileManager.default.removeItem(atPath: paths.pid)
            return 0
        }

        func status() -> Int32 {
            guard let pid = mainPID, ProcessTable.isRunning(pid) else {
                print("duo-relay.service: inactive")
                return 3
            }
            print("duo-relay.service: active (running), main PID \(pid)")
            let journal = (try? String(contentsOfFile: paths.journal, encoding: .utf8)) ?? ""
            for line in journal.split(separator: "\n").suffix(3) {
                print(line)
            }
            return 0
        }
    }
}
