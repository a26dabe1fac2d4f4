import EventLoops
import Foundation
import Synchronization
import TLS

#if canImport(Glibc)
    import Glibc
#endif

/// A local stand-in for Apple's APNs provider API: HTTP/2 over TLS with token authentication.
///
/// It validates requests as APNs does (provider token, path, headers, payload), answers 200 with
/// an `apns-id` or an APNs error body, and records what it delivered. Faults (error statuses,
/// stalls, delays, GOAWAY, stream resets, dropped connections) apply to requests that passed
/// validation. It serves on two event loops (``EventLoops/EventLoop``), never prints, and stops on ``stop()`` or
/// deinit.
///
/// Starting a simulator sets the process to ignore `SIGPIPE`.
public final class APNsSimulator: Sendable {
    private let core: SimulatorCore
    private let loops: [EventLoop]
    /// Each loop's state, kept for the simulator's life (the loops' listeners call into it).
    private let states: [LoopBound<SimulatorLoop>]
    private let stopped = Atomic<Bool>(false)

    /// The port the simulator listens on (the ephemeral port when the configuration asked for 0).
    public let port: UInt16

    /// Binds `configuration.host`:`configuration.port` and starts serving.
    public init(configuration: SimulatorConfiguration) throws {
        signal(SIGPIPE, SIG_IGN)
        core = try SimulatorCore(configuration: configuration)
        let (listenFD, boundPort) = try Self.listen(host: configuration.host, port: configuration.port)
        port = boundPort
        var loops: [EventLoop] = []
        var states: [LoopBound<SimulatorLoop>] = []
        do {
            for index in 0..<2 {
                // Each loop listens on a descriptor of its own for the one listening socket.
                let descriptor = index == 0 ? listenFD : dup(listenFD)
                guard descriptor >= 0 else { throw SimulatorError(.system, "dup failed") }
                // Frees the thread's OpenSSL state before stop() returns (a process that exits right after
                // would otherwise catch it half-freed).
                let loop: EventLoop
                do {
                    loop = try EventLoop(name: "apns-simulator-\(index)") { OpenSSLThread.stop() }
                } catch {
                    close(descriptor)
                    throw error
                }
                loops.append(loop)
                let core = self.core
                states.append(
                    try loop.performAndWait {
                        LoopBound(try SimulatorLoop(core: core, loop: loop, listening: descriptor), on: loop)
                    })
            }
        } catch {
            // Each descriptor is closed by its listener, or above when its loop could not start.
            for loop in loops { loop.stop() }
            throw error
        }
        self.loops = loops
        self.states = states
    }

    deinit {
        stop()
    }

    /// Queues a fault for the next `count` requests that pass validation (after earlier queued faults).
    public func inject(_ fault: SimulatorFault, count: Int = 1) {
        guard count > 0 else { return }
        core.state.withLock { $0.faults.append((fault, count)) }
    }

    /// Sets a fault for every valid request while no queued fault is pending; nil clears it.
    public func setDefaultFault(_ fault: SimulatorFault?) {
        core.state.withLock { $0.defaultFault = fault }
    }

    /// Sets a fault for every valid request to `deviceToken` (lowercase hex), whatever else is
    /// queued or set; nil clears it. For example `.goaway` makes one token poisonous.
    public func setFault(_ fault: SimulatorFault?, forDeviceToken deviceToken: String) {
        core.state.withLock { $0.tokenFaults[deviceToken] = fault }
    }

    /// Sets a plan that chooses a fault for each request from where it stands (its connection, its place on
    /// it, its path), before queued and default faults and after the device-token ones; nil clears it. A plan
    /// returning nil lets the request through to them. For example `{ $0.connection == 1 && $0.request > 1 ?
    /// .resetStream : nil }` refuses everything on the first connection after its first request.
    ///
    /// The plan runs under the simulator's lock, on its threads: it must not call the simulator.
    public func setFaultPlan(_ plan: (@Sendable (SimulatorFaultContext) -> SimulatorFault?)?) {
        core.state.withLock { $0.faultPlan = plan }
    }

    /// The notifications answered 200, in the order they were answered: the latest
    /// `configuration.retainedDeliveries` of them (`statistics.delivered` counts all).
    public var delivered: [DeliveredNotification] {
        core.state.withLock { $0.retainedDeliveries }
    }

    /// Counters since start.
    public var statistics: SimulatorStatistics {
        core.state.withLock { $0.statistics }
    }

    /// Closes the listening socket and every connection, and ends the threads. Idempotent.
    ///
    /// Waits for the threads unless called from one of them (for example from `onDeliver`).
    public func stop() {
        guard !stopped.exchange(true, ordering: .acquiringAndReleasing) else { return }
        for loop in loops { loop.requestStop() }
        guard !loops.contains(where: \.isCurrent) else { return }
        for loop in loops { loop.waitUntilStopped() }
    }

    /// A non-blocking listening socket on host:port, and the port actually bound.
    private static func listen(host: String, port: UInt16) throws -> (Int32, UInt16) {
        var hints = addrinfo()
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let list else {
            throw SimulatorError(
                .invalidHost, "cannot resolve the listen host: \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(list) }
        let info = list.pointee
        let fd = socket(info.ai_family, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SimulatorError(.bindFailed, "socket: \(String(cString: strerror(errno)))") }
        var on: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        guard bind(fd, info.ai_addr, info.ai_addrlen) == 0, Glibc.listen(fd, 1024) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw SimulatorError(.bindFailed, "cannot listen on port \(port): \(reason)")
        }
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else {
            close(fd)
            throw SimulatorError(.bindFailed, "getsockname: \(String(cString: strerror(errno)))")
        }
        let family = Int32(address.ss_family)
        let boundPort: UInt16 = withUnsafePointer(to: &address) { pointer in
            if family == AF_INET6 {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    UInt16(bigEndian: $0.pointee.sin6_port)
                }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                UInt16(bigEndian: $0.pointee.sin_port)
            }
        }
        return (fd, boundPort)
    }
}
