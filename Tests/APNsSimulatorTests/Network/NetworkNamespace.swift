import CSystem
import Foundation
import RelayTestSupport
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A network namespace of this test process's own, joined to it by a veth pair: the far side
/// (``innerAddress``) is where a server started with ``run(_:)`` listens, and where iptables rules
/// (``iptables(_:)``) make faults that a real network has. Removed on deinit, with its veth pair.
///
/// Names carry the process id (`duoapns-<pid>-<n>`), so parallel runs and other helpers never meet.
final class NetworkNamespace: Sendable {
    let name: String
    /// This side of the veth pair, in the test's namespace.
    let outerAddress: String
    /// The other side, inside the namespace.
    let innerAddress: String
    /// This side's interface name.
    private let outerLink: String

    private static let counter = Atomic<Int>(0)

    /// Why namespaces cannot be made here, or nil when they can (checked once, by making one).
    static let unavailableReason: String? = {
        guard getuid() == 0 else { return "network namespaces need root (the tests run as root in CI)" }
        removeLeftovers()
        do {
            _ = try NetworkNamespace()
            return nil
        } catch {
            return "this kernel or sandbox refuses network namespaces: \(error)"
        }
    }()

    static var available: Bool { unavailableReason == nil }

    init() throws {
        let pid = Int(getpid())
        let index = Self.counter.add(1, ordering: .relaxed).newValue
        name = "duoapns-\(pid)-\(index)"
        // A /30 of its own per namespace, from the process id and a counter.
        let prefix = "10.212.\(pid % 250)"
        outerAddress = "\(prefix).\((index % 60) * 4 + 1)"
        innerAddress = "\(prefix).\((index % 60) * 4 + 2)"
        outerLink = "dao\(pid % 100_000)x\(index)"
        let outer = outerLink
        let inner = "dai\(pid % 100_000)x\(index)"
        try Self.command("ip", "netns", "add", name)
        do {
            try Self.command("ip", "link", "add", outer, "type", "veth", "peer", "name", inner)
            try Self.command("ip", "link", "set", inner, "netns", name)
            try Self.command("ip", "addr", "add", "\(outerAddress)/30", "dev", outer)
            try Self.command("ip", "link", "set", outer, "up")
            try Self.command("ip", "netns", "exec", name, "ip", "addr", "add", "\(innerAddress)/30", "dev", inner)
            try Self.command("ip", "netns", "exec", name, "ip", "link", "set", inner, "up")
            try Self.command("ip", "netns", "exec", name, "ip", "link", "set", "lo", "up")
        } catch {
            _ = try? Self.command("ip", "link", "del", outer)
            _ = try? Self.command("ip", "netns", "del", name)
            throw error
        }
    }

    deinit {
        // Deleting either end deletes the pair; the namespace may outlive its name while sockets in
        // it close, so the pair goes first.
        _ = try? Self.command("ip", "link", "del", outerLink)
        _ = try? Self.command("ip", "netns", "del", name)
    }

    /// Removes namespaces and links of this prefix left by test processes that were killed.
    private static func removeLeftovers() {
        let namespaces = (try? command("ip", "netns", "list")) ?? ""
        for line in namespaces.split(separator: "\n") {
            let name = String(line.split(separator: " ").first ?? "")
            let parts = name.split(separator: "-")
            guard parts.count == 3, parts[0] == "duoapns", let pid = Int32(parts[1]), kill(pid, 0) != 0 else {
                continue
            }
            _ = try? command("ip", "link", "del", "dao\(pid % 100_000)x\(parts[2])")
            _ = try? command("ip", "netns", "del", name)
        }
    }

    /// Runs `body` on a thread that has entered the namespace: sockets it makes live there (and
    /// keep living there after the thread has left).
    func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) throws -> T {
        let result = Mutex<Result<T, any Error>?>(nil)
        let path = "/var/run/netns/\(name)"
        // Joined, so that nothing `body` captured is released by the thread after this returns.
        let thread = try JoinableThread {
            let descriptor = open(path, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0, csystem_enter_network_namespace(descriptor) == 0 else {
                let reason = String(cString: strerror(errno))
                if descriptor >= 0 { close(descriptor) }
                result.withLock { $0 = .failure(TestFailure("cannot enter \(path): \(reason)")) }
                return
            }
            close(descriptor)
            let value = Result { try body() }
            result.withLock { $0 = value }
        }
        thread.join()
        return try result.withLock { $0! }.get()
    }

    /// Runs iptables inside the namespace.
    func iptables(_ arguments: String...) throws {
        try Self.command(["ip", "netns", "exec", name, "iptables", "-w"] + arguments)
    }

    /// Drops every packet in and out of the namespace's veth (a blackhole), or stops dropping.
    func blackhole(_ on: Bool) throws {
        let action = on ? "-I" : "-D"
        try iptables(action, "INPUT", "-i", "dai+", "-j", "DROP")
        try iptables(action, "OUTPUT", "-o", "dai+", "-j", "DROP")
    }

    /// Answers every TCP segment that reaches the namespace with a reset, or stops.
    func rejectWithReset(_ on: Bool) throws {
        try iptables(on ? "-I" : "-D", "INPUT", "-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset")
    }

    @discardableResult
    static func command(_ arguments: String...) throws -> String { try command(arguments) }

    @discardableResult
    static func command(_ arguments: [String]) throws -> String {
        let result = try Tool.run("/usr/bin/env", arguments, environment: ["PATH": "/usr/sbin:/usr/bin:/sbin:/bin"])
        let text = result.output + result.errors
        guard result.status == 0 else {
            throw TestFailure(
                "\(arguments.joined(separator: " ")): \(text.trimmingCharacters(in: .whitespacesAndNewlines))")
        }
        return text
    }
}
