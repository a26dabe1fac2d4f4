import CUV
import Glibc

/// One address to connect to: an IPv4 or IPv6 address with a port, as the resolver gave it or parsed from a literal.
public struct ResolvedAddress: Sendable, Equatable {
    let address: SocketAddressBytes

    /// The address of an IPv4 or IPv6 literal (brackets allowed around IPv6), or nil when `host` is not one.
    public static func literal(_ host: String, port: UInt16) -> ResolvedAddress? {
        guard let parsed = try? SocketAddress(host: host, port: port) else { return nil }
        return ResolvedAddress(address: SocketAddressBytes(parsed))
    }

    func withSocketAddress<Result>(_ body: (UnsafePointer<sockaddr>) -> Result) -> Result {
        address.withSocketAddress(body)
    }
}

/// A `sockaddr_storage` kept as plain bytes, so that addresses are values that may cross threads.
struct SocketAddressBytes: Sendable, Equatable {
    private let bytes: [UInt8]

    init(_ address: SocketAddress) {
        bytes = withUnsafeBytes(of: address.storage) { Array($0.prefix(Int(address.length))) }
    }

    init?(_ address: UnsafePointer<sockaddr>) {
        let family = Int32(address.pointee.sa_family)
        let length: Int
        switch family {
        case AF_INET: length = MemoryLayout<sockaddr_in>.size
        case AF_INET6: length = MemoryLayout<sockaddr_in6>.size
        default: return nil
        }
        bytes = Array(UnsafeRawBufferPointer(start: address, count: length))
    }

    func withSocketAddress<Result>(_ body: (UnsafePointer<sockaddr>) -> Result) -> Result {
        var storage = sockaddr_storage()
        withUnsafeMutableBytes(of: &storage) { target in
            bytes.withUnsafeBytes { target.copyMemory(from: $0) }
        }
        return withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1, body) }
    }
}

/// Name resolution on a loop: `uv_getaddrinfo`, which runs the system resolver on libuv's thread pool and calls
/// back on the loop's thread, so no loop waits for DNS.
public enum HostResolver {
    /// Resolves `host` for TCP to its addresses, in the resolver's order of preference, or the reason (the
    /// resolver's words) there are none. An IP literal is answered without the resolver. `completion` runs on
    /// `loop`'s thread, never before this returns. Call on `loop`'s thread.
    public static func resolve(
        host: String, port: UInt16, on loop: EventLoop,
        completion: @escaping (Result<[ResolvedAddress], LoopError>) -> Void
    ) {
        loop.preconditionCurrent()
        if let literal = ResolvedAddress.literal(host, port: port) {
            loop.enqueue { completion(.success([literal])) }
            return
        }
        let request = UnsafeMutablePointer<uv_getaddrinfo_t>.allocate(capacity: 1)
        let pending = Pending(completion: completion)
        request.pointee.data = Unmanaged.passRetained(pending).toOpaque()
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_protocol = Int32(IPPROTO_TCP)
        let status = uv_getaddrinfo(
            loop.raw, request,
            { request, status, list in
                let pending = Unmanaged<Pending>.fromOpaque(request!.pointee.data).takeRetainedValue()
                request!.deallocate()
                defer { uv_freeaddrinfo(list) }
                guard status == 0 else {
                    // A cancelled request (the loop is closing) is answered too, so the caller can let go.
                    pending.completion(
                        .failure(LoopError(status: status, "cannot resolve the host", code: .resolveFailed)))
                    return
                }
                var addresses: [ResolvedAddress] = []
                var entry = list
                while let current = entry {
                    if let address = current.pointee.ai_addr, let bytes = SocketAddressBytes(address) {
                        let resolved = ResolvedAddress(address: bytes)
                        if !addresses.contains(resolved) { addresses.append(resolved) }
                    }
                    entry = current.pointee.ai_next
                }
                if addresses.isEmpty {
                    pending.completion(.failure(LoopError(.resolveFailed, "cannot resolve the host: no address")))
                } else {
                    pending.completion(.success(addresses))
                }
            }, host, String(port), &hints)
        if status != 0 {
            Unmanaged<Pending>.fromOpaque(request.pointee.data).release()
            request.deallocate()
            let error = LoopError(status: status, "cannot resolve the host", code: .resolveFailed)
            loop.enqueue { completion(.failure(error)) }
        }
    }

    /// Starts libuv's thread pool (shared by every loop of the process) now, if it has not started: the pool starts
    /// its threads at its first use, which would otherwise be the first connection to a host by name (APNs'
    /// `api.push.apple.com`), after the relay has started serving. Returns once its threads exist. Call on `loop`'s
    /// thread.
    public static func startPool(on loop: EventLoop) throws(LoopError) {
        loop.preconditionCurrent()
        let request = UnsafeMutablePointer<uv_work_t>.allocate(capacity: 1)
        // The pool starts its threads inside this call; the work itself does nothing.
        let status = uv_queue_work(loop.raw, request, { _ in }, { request, _ in request?.deallocate() })
        if status != 0 {
            request.deallocate()
            throw LoopError(status: status, "cannot start libuv's thread pool")
        }
    }

    private final class Pending {
        let completion: (Result<[ResolvedAddress], LoopError>) -> Void
        init(completion: @escaping (Result<[ResolvedAddress], LoopError>) -> Void) {
            self.completion = completion
        }
    }
}
