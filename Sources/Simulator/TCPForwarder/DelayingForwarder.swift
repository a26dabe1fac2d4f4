import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A TCP forwarder of our own, for the tests and the benchmark (`duo-relay-load forwarder`), between a
/// client on loopback and a server elsewhere (in a network namespace, or a local Redis): it holds
/// every chunk for `delay` before passing it on, in both directions, which adds latency as a long
/// path does (this kernel has no netem). It can also reset every connection (`SO_LINGER` 0, as a
/// load balancer or NAT does) or forget them silently.
public final class DelayingForwarder: Sendable {
    public let port: UInt16
    private let listener: Int32
    /// Where new connections go (``retarget(port:)`` moves it; connections made keep theirs).
    private let target: Mutex<(host: String, port: UInt16)>
    private let delay: Duration
    private let links = Mutex<[ForwardedLink]>([])
    private let stopped = Atomic<Bool>(false)
    private let acceptorDone = DispatchSemaphore(value: 0)

    public init(to host: String, port: UInt16, delay: Duration) throws {
        target = Mutex((host, port))
        self.delay = delay
        let listener = try LoopbackListener(backlog: 128)
        self.listener = listener.descriptor
        self.port = listener.port
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    deinit { stop() }

    /// Closes the listener and every connection.
    public func stop() {
        guard !stopped.exchange(true, ordering: .relaxed) else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        acceptorDone.wait()
        close(listener)
        for link in links.withLock({ $0 }) { link.close(reset: false) }
        for link in links.withLock({ $0 }) { link.join() }
    }

    /// Sends new connections to `port` on the same host, and leaves those made where they are: an address that
    /// follows a new primary while the old one keeps its clients (a managed endpoint, a DNS name).
    public func retarget(port: UInt16) {
        target.withLock { $0.port = port }
    }

    /// Resets every connection both ways (RST, as `SO_LINGER` 0 sends).
    public func resetAll() {
        for link in takeLinks() { link.close(reset: true) }
    }

    /// Forgets every connection silently, as a NAT that timed out does: the server's side is reset
    /// (it forgets too), the client's side stays open and nothing more reaches it or leaves it.
    public func forgetAll() {
        for link in takeLinks() { link.forget() }
    }

    public var connectionCount: Int { links.withLock { $0.filter { !$0.isClosed }.count } }

    private func takeLinks() -> [ForwardedLink] {
        links.withLock { links in
            defer { links.removeAll { $0.isClosed } }
            return links.filter { !$0.isClosed }
        }
    }

    private func acceptLoop() {
        defer { acceptorDone.signal() }
        while !stopped.load(ordering: .relaxed) {
            let client = accept(listener, nil, nil)
            guard client >= 0 else {
                if errno == EINTR { continue }
                return
            }
            guard let server = connectTarget() else {
                ForwardedLink.abort(client)
                close(client)
                continue
            }
            let link = ForwardedLink(client: client, server: server, delay: delay)
            links.withLock { $0.append(link) }
            link.start()
        }
    }

    private func connectTarget() -> Int32? {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        let target = self.target.withLock { $0 }
        address.sin_port = target.port.bigEndian
        address.sin_addr.s_addr = inet_addr(target.host)
        var one: Int32 = 1
        setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        // A blackholed path must not hold the forwarder forever: give up after 10 s.
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(descriptor)
            return nil
        }
        return descriptor
    }
}
