/// The listening socket a service manager passes to the process (socket activation, as systemd does it):
/// `LISTEN_PID` names the process meant, `LISTEN_FDS` counts the sockets passed from descriptor 3 on. The server
/// takes exactly one; it listens on it as on its own (``HTTPServerConfiguration/passedSocket``), and the socket
/// outlives the process: connections that come while the process restarts wait in its backlog for the next one.
public enum SocketActivation {
    /// The first descriptor passed (`SD_LISTEN_FDS_START`).
    public static let firstDescriptor: Int32 = 3

    /// The descriptor of the one socket `environment` says was passed to process `processID`; refused, with a
    /// reason an operator can act on, when none or several were passed, or they were meant for another process.
    /// Whether the descriptor is a listening TCP socket is checked as the server takes it.
    public static func passedDescriptor(
        environment: [String: String], processID: Int32
    ) throws(HTTPServerError) -> Int32 {
        guard let pid = environment["LISTEN_PID"], let count = environment["LISTEN_FDS"] else {
            throw HTTPServerError(
                .bindFailed,
                "no socket was passed (LISTEN_PID and LISTEN_FDS are not set): start the relay through its socket unit")
        }
        guard Int32(pid) == processID else {
            throw HTTPServerError(.bindFailed, "the sockets passed (LISTEN_PID \(pid)) are meant for another process")
        }
        guard Int(count) == 1 else {
            throw HTTPServerError(.bindFailed, "LISTEN_FDS is \(count): exactly one listening socket must be passed")
        }
        return firstDescriptor
    }
}
