import CSystem
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One address of the origin, as `getaddrinfo` gave it.
struct SocketAddress: Sendable {
    let family: Int32
    private let storage: sockaddr_storage
    private let length: socklen_t

    /// The host's addresses for TCP, in the resolver's order of preference, or the reason
    /// (the resolver's own text) there are none.
    static func resolve(host: String, port: UInt16) -> Resolution.Answer {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_protocol = Int32(IPPROTO_TCP)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0 else {
            return Resolution.Answer(
                addresses: [], problem: resolveFailurePrefix + String(cString: gai_strerror(status)))
        }
        defer { freeaddrinfo(list) }
        var addresses: [SocketAddress] = []
        var entry = list
        while let current = entry {
            if let address = current.pointee.ai_addr,
                Int(current.pointee.ai_addrlen) <= MemoryLayout<sockaddr_storage>.size
            {
                var storage = sockaddr_storage()
                withUnsafeMutableBytes(of: &storage) { target in
                    target.copyMemory(
                        from: UnsafeRawBufferPointer(start: address, count: Int(current.pointee.ai_addrlen)))
                }
                addresses.append(
                    SocketAddress(
                        family: current.pointee.ai_family, storage: storage, length: current.pointee.ai_addrlen))
            }
            entry = current.pointee.ai_next
        }
        return Resolution.Answer(addresses: addresses, problem: addresses.isEmpty ? "the host has no address" : nil)
    }

    static let resolveFailurePrefix = "cannot resolve the host: "

    enum ConnectStart {
        /// The socket, connected or (`inProgress`) connecting.
        case started(descriptor: Int32, inProgress: Bool)
        /// The errno of the failure.
        case failed(Int32)
    }

    /// Starts a non-blocking connect.
    func startConnect() -> ConnectStart {
        let descriptor = socket(
            family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue),
            Int32(IPPROTO_TCP))
        guard descriptor >= 0 else { return .failed(errno) }
        var address = storage
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, length) }
        }
        if result == 0 { return .started(descriptor: descriptor, inProgress: false) }
        let error = errno
        if error == EINPROGRESS { return .started(descriptor: descriptor, inProgress: true) }
        close(descriptor)
        return .failed(error)
    }
}

extension Int32 {
    /// `strerror` of an errno value.
    var errnoDescription: String { String(cString: strerror(self)) }
}

/// A `getaddrinfo` running on a thread of its own, so that a connection can give up on it at
/// its connect deadline (a resolver that gets no answer from its servers may wait far longer).
final class Resolution: Sendable {
    /// The host's addresses, or the reason (the resolver's own text) there are none.
    struct Answer: Sendable {
        var addresses: [SocketAddress]
        var problem: String?
    }
    private let state = Mutex<(answer: Answer?, waiters: [@Sendable () -> Void])>((nil, []))

    /// Starts resolving.
    init(host: String, port: UInt16) {
        let thread = Thread { [self] in
            _ = csystem_set_thread_name("apns-resolver")
            let answer = SocketAddress.resolve(host: host, port: port)
            let waiters = self.state.withLock { state in
                state.answer = answer
                defer { state.waiters = [] }
                return state.waiters
            }
            for waiter in waiters { waiter() }
        }
        thread.name = "HTTP2Client resolver"
        thread.start()
    }

    /// The answer, once it is in.
    var answer: Answer? { state.withLock { $0.answer } }

    var isDone: Bool { answer != nil }

    /// Calls `wake` (on the resolver's thread) when the answer comes in; at once if it is in.
    func notify(_ wake: @escaping @Sendable () -> Void) {
        let done = state.withLock { state in
            if state.answer != nil { return true }
            state.waiters.append(wake)
            return false
        }
        if done { wake() }
    }
}

/// Resolves the origin for a client's connections: a connection opened while a lookup is still
/// running shares it, so a resolver that does not answer ties up one thread, not one per attempt.
final class OriginResolver: Sendable {
    private let host: String
    private let port: UInt16
    private let current = Mutex<Resolution?>(nil)

    init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// The lookup running now, or a new one.
    func resolution() -> Resolution {
        current.withLock { current in
            if let running = current, !running.isDone { return running }
            let started = Resolution(host: host, port: port)
            current = started
            return started
        }
    }
}
