/// A request as a plain HTTP/2 simulator's responder sees it (``SimulatorConfiguration/responder``).
public struct SimulatorRequest: Sendable {
    /// `:method`.
    public let method: String
    /// `:path`.
    public let path: String
    /// Every header but the pseudo-headers, in the order received (names lowercase, as HTTP/2 sends them).
    public let headers: [(name: String, value: String)]
    public let body: [UInt8]
    /// The connection it came on: 1 for the first the simulator accepted, then 2, and so on.
    public let connection: Int
    /// Its HTTP/2 stream id.
    public let stream: Int32

    /// The first value of the header `name` (lowercase), if any.
    public subscript(header name: String) -> String? {
        headers.first { $0.name == name }?.value
    }
}

/// A plain HTTP/2 simulator's answer to one request (``SimulatorConfiguration/responder``): its status,
/// headers besides `:status` (names lowercase, as HTTP/2 wants) and body. A tuple, not a third response struct
/// beside HTTP1's `HTTP1Response` and HTTP2Client's `HTTP2Response`.
public typealias SimulatorResponse = (status: Int, headers: [(name: String, value: String)], body: [UInt8])

/// Where a request stands, for a fault plan (``APNsSimulator/setFaultPlan(_:)``).
public struct SimulatorFaultContext: Sendable {
    /// The connection it came on: 1 for the first the simulator accepted.
    public let connection: Int
    /// Its place among the requests the simulator took on that connection: 1 for the first. Requests above a
    /// GOAWAY's last-stream-id are not taken, and not counted.
    public let request: Int
    /// `:path`.
    public let path: String
}
