import EventLoops
import OutboundConnections
import TLS

/// The connection to a sentinel, on a pipeline's loop: one at a time (asking, then kept as the `+switch-master`
/// watch), with its reply reader. It connects, writes and closes when the pipeline's machine says so (its composed
/// ``SentinelMachine`` decides), and hands it what happens: connected, each reply, a failure.
///
/// Loop-bound: made, used and closed on the pipeline's loop only.
final class SentinelLocator {
    private let loop: EventLoop
    private let context: TLSClientContext?
    private var stream: ClientStream?
    private var reader = RedisReplyReader()
    /// The pipeline it tells (it holds this locator).
    private weak var pipeline: RedisPipeline?

    init(pipeline: RedisPipeline, loop: EventLoop, tls: TLSClientContext?) {
        self.pipeline = pipeline
        self.loop = loop
        context = tls
    }

    /// Closes any connection and connects to `node`.
    func connect(to node: SentinelMachine.Node) {
        close()
        reader = RedisReplyReader()
        stream = ClientStream.connect(
            on: loop, host: node.host, port: node.port,
            tls: context.map { ClientStream.TLS(context: $0, serverName: node.host) }, delegate: self)
    }

    func write(_ bytes: [UInt8]) {
        stream?.write(bytes)
    }

    /// Closes the connection, if any.
    func close() {
        let closing = stream
        stream = nil
        closing?.reset()
    }
}

extension SentinelLocator: ClientStreamDelegate {
    func streamDidConnect(_ stream: ClientStream) {
        guard stream === self.stream else { return }
        pipeline?.sentinelConnected()
    }

    func stream(_ stream: ClientStream, didRead bytes: UnsafeRawBufferPointer) {
        guard stream === self.stream else { return }
        do throws(RedisClientError) {
            try reader.feed(bytes)
            while self.stream === stream, let reply = try reader.next() {
                pipeline?.sentinelReceived(reply)
            }
        } catch {
            close()
            pipeline?.sentinelFailed(error.reason)
        }
    }

    func stream(_ stream: ClientStream, didFail failure: ClientStreamFailure) {
        guard stream === self.stream else { return }
        self.stream = nil
        pipeline?.sentinelFailed(RedisPipeline.error(failure).reason)
    }
}
