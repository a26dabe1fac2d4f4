/// What a handler works out from a connection's peer, kept for the connection's life so that it is worked out once
/// per connection rather than once per request (the relay keeps its keyed digest of the client address here: an
/// HMAC is one of the dearer steps of a request).
///
/// Every request of a connection carries the same memo (``HTTPRequestHead/peerMemo``). It is read and written only
/// on the connection's worker loop, where every handler callback for the connection runs: hence
/// `@unchecked Sendable`. It ends with the connection and holds nothing about the peer that the connection does not
/// hold already.
public final class PeerMemo: @unchecked Sendable {
    /// A handler's 32-byte digest of ``HTTPRequestHead/peer``, as four words; nil until the handler stores one.
    public var digest: (UInt64, UInt64, UInt64, UInt64)?

    public init() {}
}
