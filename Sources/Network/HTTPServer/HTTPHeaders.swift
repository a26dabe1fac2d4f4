import HTTP1

/// Request header fields in the order received, as the parser read them (names compare without regard to ASCII
/// case): the handler gets the parser's own value, with no per-request conversion.
public typealias HTTPHeaders = HTTP1Headers
