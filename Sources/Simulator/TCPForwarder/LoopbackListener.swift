#if canImport(Glibc)
    import Glibc
#endif

/// A TCP socket listening on 127.0.0.1 at a port the kernel chose, for the forwarder and the tests' own
/// servers. The caller owns `descriptor` and closes it once.
public struct LoopbackListener: Sendable {
    public let descriptor: Int32
    public let port: UInt16

    public init(backlog: Int32 = 16) throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw ForwarderError(.listen, "no socket for a loopback listener") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length) == 0 && listen(descriptor, backlog) == 0
                    && getsockname(descriptor, $0, &length) == 0
            }
        }
        guard listening else {
            close(descriptor)
            throw ForwarderError(.listen, "cannot listen on a loopback port")
        }
        self.descriptor = descriptor
        port = UInt16(bigEndian: address.sin_port)
    }
}
