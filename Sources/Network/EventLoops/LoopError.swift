import CUV
import ErrorCodes

/// A failure of the event loop or of a socket on it: a code to decide by, a reason for people, and libuv's
/// status (a negative errno) when one caused it. Equal when their codes are.
public struct LoopError: CodedError {
    /// What went wrong, to decide by (the static members of `ErrorCode` below).
    public typealias Code = ErrorCode<LoopError>

    public let code: Code
    /// One short sentence for a log; never holds data read from a peer.
    public let reason: String
    /// libuv's status (a negative errno such as `UV_ECONNRESET`), or 0.
    public let status: Int32

    public init(_ code: Code, _ reason: String, status: Int32 = 0) {
        self.code = code
        self.reason = reason
        self.status = status
    }

    /// An error from a libuv status, with its code chosen from the status when `code` is nil.
    init(status: Int32, _ context: String, code: Code? = nil) {
        let chosen: Code
        if let code {
            chosen = code
        } else {
            switch status {
            case UV_ECONNRESET.rawValue: chosen = .connectionReset
            case UV_EPIPE.rawValue: chosen = .brokenPipe
            case UV_ECONNREFUSED.rawValue, UV_ETIMEDOUT.rawValue, UV_ENETUNREACH.rawValue, UV_EHOSTUNREACH.rawValue:
                chosen = .connectFailed
            case UV_EMFILE.rawValue, UV_ENFILE.rawValue, UV_ENOMEM.rawValue, UV_ENOBUFS.rawValue: chosen = .system
            default: chosen = .io
            }
        }
        self.init(chosen, "\(context): \(String(cString: uv_strerror(status)))", status: status)
    }
}

extension ErrorCode where Domain == LoopError {
    /// Opening, binding or listening on a socket failed.
    public static var listenFailed: Self { Self("listen_failed") }
    /// A host is not an IPv4 or IPv6 literal.
    public static var invalidAddress: Self { Self("invalid_address") }
    /// The peer reset the connection (ECONNRESET).
    public static var connectionReset: Self { Self("connection_reset") }
    /// A write to a connection the peer has closed (EPIPE).
    public static var brokenPipe: Self { Self("broken_pipe") }
    /// A connection attempt failed (refused, unreachable, timed out).
    public static var connectFailed: Self { Self("connect_failed") }
    /// A host name could not be resolved to an address.
    public static var resolveFailed: Self { Self("resolve_failed") }
    /// Another error of reading or writing a socket.
    public static var io: Self { Self("io") }
    /// The loop has stopped and took no more work.
    public static var stopped: Self { Self("stopped") }
    /// A system resource ran out (threads, descriptors, memory).
    public static var system: Self { Self("system") }
}
