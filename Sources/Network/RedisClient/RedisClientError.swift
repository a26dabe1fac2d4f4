import ErrorCodes

/// Why the store gave no usable answer: the project's one error shape (``ErrorCodes/ModuleError``). Equality is by
/// code; the reason never holds a password, a key or a reply's bytes.
public typealias RedisClientError = ModuleError<RedisClientErrorDomain>

/// The domain of ``RedisClientError``'s codes.
public enum RedisClientErrorDomain {}

extension ErrorCode where Domain == RedisClientErrorDomain {
    /// No connection: the host cannot be resolved or reached, or refuses (also a failed connect).
    public static var refused: Self { Self("refused") }
    /// No reply within the timeout (a request), or no connection set up within the connect timeout.
    public static var timeout: Self { Self("timeout") }
    /// The TLS handshake failed or the server's certificate or name was not accepted.
    public static var tls: Self { Self("tls") }
    /// AUTH was refused, or the server requires AUTH and none was configured.
    public static var auth: Self { Self("auth") }
    /// The server sent something that is not RESP, or a reply of an unexpected type or value.
    public static var protocolError: Self { Self("protocol") }
    /// The connection closed or broke.
    public static var closed: Self { Self("closed") }
    /// The server cannot count: it is not a writable primary (`READONLY`, `LOADING`, `MASTERDOWN`, or `ROLE` names
    /// it a replica), so the pipeline leaves it and connects again until a primary answers.
    public static var notPrimary: Self { Self("not_primary") }
    /// The script (or command) answered with an error reply.
    public static var script: Self { Self("script") }
    /// Not connected now: the request was not sent (the caller decides without the store).
    public static var unavailable: Self { Self("unavailable") }
    /// The configuration cannot work (the CA file cannot be read).
    public static var invalidConfiguration: Self { Self("invalid_configuration") }
}
