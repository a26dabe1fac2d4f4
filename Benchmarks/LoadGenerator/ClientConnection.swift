import EventLoops
import Foundation
import HTTP1
import OutboundConnections

/// What a ``ClientConnection`` tells the measurement that owns it, on the loop's thread.
protocol ClientConnectionOwner: AnyObject {
    /// The connection is established: it may send.
    func clientDidConnect(_ client: ClientConnection)
    /// The connection could not be established.
    func client(_ client: ClientConnection, didFailToConnect error: LoopError)
    /// A complete answer arrived at `instant` (monotonic nanoseconds, read as the bytes arrived); the client
    /// is no longer busy. `body` is valid only during the call.
    func client(_ client: ClientConnection, didReceive status: Int, body: UnsafeRawBufferPointer, at instant: UInt64)
    /// The established connection ended: the peer closed or reset it, or a write failed. Nothing more comes.
    func clientDidEnd(_ client: ClientConnection)
}

/// One HTTP/1.1 keep-alive client connection with one request in flight at a time, on the load generator's
/// event loop (a `TCPConnection`: the request is written at once, only what the socket refuses is queued), or with
/// ``LoadTLS`` an HTTPS one (a `ClientStream`: the same, through TLS).
///
/// Ownership: the open `TCPConnection` (or `ClientStream`) holds this client, and the client its owner, until
/// ``close()`` or the end of the connection; the owner holds its clients.
final class ClientConnection: TCPConnectionDelegate, ClientStreamDelegate {
    /// The owner's number for this connection.
    let index: Int
    /// When the request in flight was due (open loop) or sent (closed loop), monotonic nanoseconds.
    var requestStart: UInt64 = 0
    /// The `Retry-After` of the answer being handed to the owner (read it in `didReceive`).
    private(set) var retryAfter: Int?
    /// Whether a request is in flight.
    private(set) var busy = false
    private(set) var connected = false
    private var owner: (any ClientConnectionOwner)?
    private var connection: TCPConnection?
    /// With TLS, in place of `connection`.
    private var stream: ClientStream?
    /// The answers read so far, and the bytes of one that has not arrived whole yet.
    private var reader = HTTP1ResponseReader()

    private init(index: Int, owner: any ClientConnectionOwner) {
        self.index = index
        self.owner = owner
    }

    /// Starts connecting; the owner hears `clientDidConnect` or `didFailToConnect`. Throws when not even the
    /// socket can be made (descriptors ran out, say).
    static func open(
        _ index: Int, to address: ResolvedAddress, tls: LoadTLS? = nil, on loop: EventLoop,
        owner: any ClientConnectionOwner
    ) throws(LoadError) -> ClientConnection {
        let client = ClientConnection(index: index, owner: owner)
        if let tls {
            client.stream = ClientStream.connect(
                on: loop, host: tls.host, port: tls.port, tls: tls.stream, delegate: client)
            return client
        }
        do {
            client.connection = try TCPConnection.connect(on: loop, to: address, delegate: client)
        } catch {
            throw LoadError(.failed, "cannot connect: \(error.reason)")
        }
        return client
    }

    /// Sends a request (the connection must be established); its answer reaches the owner.
    func send(_ request: [UInt8]) {
        busy = true
        if let stream {
            stream.write(request)
        } else {
            connection?.write(request)
        }
    }

    /// Closes the connection; the owner hears nothing more from it.
    func close() {
        owner = nil
        connection?.close()
        stream?.close()
    }

    // MARK: TCPConnectionDelegate

    func connectionDidConnect(_ connection: TCPConnection) {
        connected = true
        connection.startReading()
        owner?.clientDidConnect(self)
    }

    func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
        received(bytes)
    }

    private func received(_ bytes: UnsafeRawBufferPointer) {
        let instant = MonotonicClock.now()
        reader.append(bytes)
        // Every complete answer goes to the owner; one that is not HTTP ends the connection.
        while let owner {
            switch reader.nextResponse() {
            case .needMoreBytes, .end:
                return
            case .complete(let head, let body):
                busy = false
                retryAfter = Self.retryAfter(head)
                body.withUnsafeBytes { owner.client(self, didReceive: head.status, body: $0, at: instant) }
            case .failed:
                end()
                return
            }
        }
    }

    /// `Retry-After` in whole seconds (the relay's form), nil when absent or another form.
    static func retryAfter(_ head: HTTP1ResponseHead) -> Int? {
        head.headers["retry-after"].flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
    }

    func connectionDidReachEnd(_ connection: TCPConnection) {
        end()
    }

    func connection(_ connection: TCPConnection, didFail error: LoopError) {
        guard connected else {
            let owner = self.owner
            close()
            owner?.client(self, didFailToConnect: error)
            return
        }
        end()
    }

    // MARK: ClientStreamDelegate (with TLS)

    func streamDidConnect(_ stream: ClientStream) {
        connected = true
        owner?.clientDidConnect(self)
    }

    func stream(_ stream: ClientStream, didRead bytes: UnsafeRawBufferPointer) {
        received(bytes)
    }

    func stream(_ stream: ClientStream, didFail failure: ClientStreamFailure) {
        guard connected else {
            let owner = self.owner
            close()
            owner?.client(self, didFailToConnect: LoopError(.connectFailed, failure.reason))
            return
        }
        end()
    }

    func streamDidClose(_ stream: ClientStream) {
        // The stream lets go of its delegate here: a connection closed by `close()` is forgotten by its owner.
        self.stream = nil
    }

    private func end() {
        let owner = self.owner
        close()
        owner?.clientDidEnd(self)
    }
}
