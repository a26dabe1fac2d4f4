import CSystem
import Foundation
import Glibc

/// The systemctl stand-in for the relay's socket unit (`duo-relay.socket`, socket activation), where systemd is not
/// PID 1: what systemd does with it, so that the documents' restart procedure runs as written. Start (`enable --now`,
/// `start`): a holder process (`duo-relay-recipes socket-holder`) binds `ListenStream=` with `Backlog=` and keeps the
/// listening socket open, as systemd keeps it, until the socket unit stops; the service's stand-in then starts each
/// relay process with a copy of that socket on descriptor 3, `LISTEN_PID` and `LISTEN_FDS=1` (``SystemctlStandIn``).
/// Not Accept=yes, starting the service on a first connection, or more than one ListenStream=. Its state (the holder's
/// PID and descriptor) is in `STATE/socket`.
struct SocketUnitStandIn {
    var unit = "/etc/systemd/system/duo-relay.socket"
    let state: String
    var holderFile: String { state + "/socket" }
    var journal: String { state + "/journal" }

    func run(_ command: String, now: Bool) -> Int32 {
        try? FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        switch command {
        case "daemon-reload": return 0
        case "enable": return now ? start() : 0
        case "start": return start()
        case "stop": return stop()
        case "restart":
            let stopped = stop()
            return stopped == 0 ? start() : stopped
        case "status":
            guard holder != nil else {
                print("duo-relay.socket: inactive")
                return 3
            }
            print("duo-relay.socket: active (listening)")
            return 0
        default:
            printError("systemctl (doc-test stand-in): \(command) duo-relay.socket is not played here")
            return 1
        }
    }

    /// The running holder's PID and the number of its listening descriptor (nil when the socket unit is stopped).
    var holder: (pid: Int32, descriptor: Int32)? {
        guard let text = try? String(contentsOfFile: holderFile, encoding: .utf8),
            let held = Self.holderLine(text), ProcessTable.isRunning(held.pid)
        else { return nil }
        return held
    }

    /// A `PID DESCRIPTOR` line, as the holder writes it.
    static func holderLine(_ text: String) -> (pid: Int32, descriptor: Int32)? {
        let fields = text.split(whereSeparator: { $0 == " " || $0 == "\n" })
        guard fields.count == 2, let pid = Int32(fields[0]), let descriptor = Int32(fields[1]) else { return nil }
        return (pid, descriptor)
    }

    /// A copy of the held listening socket, for a service process (nil when the socket unit is stopped). Never
    /// descriptor 3 itself, so that passing it as 3 clears its close-on-exec.
    func copyOfSocket() -> Int32? {
        guard let holder else { return nil }
        var copy = csystem_copy_descriptor(holder.pid, holder.descriptor)
        guard copy >= 0 else {
            printError("duo-relay.socket: cannot copy the held socket (errno \(errno))")
            return nil
        }
        if copy == 3 {
            let moved = fcntl(copy, F_DUPFD_CLOEXEC, 10)
            close(copy)
            copy = moved
        }
        return copy >= 0 ? copy : nil
    }

    func start() -> Int32 {
        if holder != nil { return 0 }
        guard let text = try? String(contentsOfFile: unit, encoding: .utf8) else {
            printError("systemctl (doc-test stand-in): no unit at \(unit)")
            return 1
        }
        let socket = SystemdUnit(text)
        guard let listen = socket.values("ListenStream").last, socket.values("ListenStream").count == 1 else {
            printError("duo-relay.socket: one ListenStream= is played here")
            return 1
        }
        let backlog = socket.values("Backlog").last ?? "4096"
        try? FileManager.default.removeItem(atPath: holderFile)
        let recipes =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        guard
            let process = try? RecipeProcess(
                recipes, ["socket-holder", listen, backlog, holderFile], output: .append(journal), error: .output)
        else {
            printError("duo-relay.socket: the holder did not start")
            return 1
        }
        guard RecipeClock.within(10, { holder != nil || !process.isRunning }), holder != nil else {
            printError("duo-relay.socket: cannot listen on \(listen)")
            return 1
        }
        return 0
    }

    func stop() -> Int32 {
        guard let holder else { return 0 }
        kill(holder.pid, SIGTERM)
        guard
            RecipeClock.within(
                10, { waitpid(holder.pid, nil, WNOHANG) == holder.pid || !ProcessTable.isRunning(holder.pid) })
        else {
            printError("duo-relay.socket: the holder did not stop")
            return 1
        }
        try? FileManager.default.removeItem(atPath: holderFile)
        return 0
    }

    /// `duo-relay-recipes socket-holder HOST:PORT BACKLOG FILE`: binds and listens, writes `PID DESCRIPTOR` to FILE
    /// once it listens, then holds the socket until a signal ends it (what systemd does for a socket unit).
    static func hold(_ arguments: [String]) -> Int32 {
        guard arguments.count == 3, let (host, port) = hostPort(arguments[0]), let backlog = Int32(arguments[1])
        else {
            printError("usage: duo-relay-recipes socket-holder HOST:PORT BACKLOG FILE")
            return 2
        }
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return 1 }
        var one: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
            printError("duo-relay.socket: ListenStream=\(arguments[0]) is not an IPv4 address and port")
            return 1
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(descriptor, backlog) == 0 else {
            printError("duo-relay.socket: cannot listen on \(arguments[0]) (errno \(errno))")
            return 1
        }
        // The descriptor stays close-on-exec-free here: nothing is started from the holder.
        do {
            try "\(getpid()) \(descriptor)\n".write(toFile: arguments[2], atomically: true, encoding: .utf8)
        } catch {
            return 1
        }
        // Standard error: unbuffered, so that the journal has the line while the holder waits.
        printError("duo-relay.socket: listening on \(arguments[0])")
        while true { pause() }
    }

    /// `HOST:PORT` of an IPv4 ListenStream=.
    static func hostPort(_ text: String) -> (String, UInt16)? {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else {
            return nil
        }
        return (String(text[..<colon]), port)
    }
}
