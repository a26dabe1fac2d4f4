@_exported import HTTPBasics

/// The server's answer to an ``HTTP2Request``: any HTTP status counts as an answer. The same type as the relay's
/// server sends (``HTTPBasics/HTTPResponse``), with header names lowercased as HTTP/2 carries them.
public typealias HTTP2Response = HTTPResponse
