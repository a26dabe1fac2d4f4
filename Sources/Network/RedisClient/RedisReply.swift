/// One RESP2 reply, as hiredis's reader parsed it.
public enum RedisReply: Equatable, Sendable {
    case status(String)
    case error(String)
    case integer(Int64)
    /// A bulk string; nil: the null bulk string.
    case bulk([UInt8]?)
    /// nil: the null array.
    case array([RedisReply]?)
}
