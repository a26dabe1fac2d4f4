import Glibc
import Loop

/// The keep-alive server on the Loop module: one EventLoop, one listener, a delegate per connection.
/// With `timers`, each connection also re-arms a deadline timer per request, as the HTTP front will.
enum LibuvServer {
    static func run(port: UInt16, timers: Bool) throws {
        let loop = try EventLoop(name: "spike-uv")
        try loop.performAndWait {
            _ = try TCPListener(on: loop, host: "127.0.0.1", port: port) { connection in
                let handler = Handler(timer: timers ? LoopTimer(on: loop) { connection.close() } : nil)
                connection.delegate = handler
                handler.timer?.schedule(afterMilliseconds: 30_000)
                connection.startReading()
            }
        }
        // The loop runs on its own thread until the process is killed.
        while true { sleep(3600) }
    }

    final class Handler: TCPConnectionDelegate {
        var framer = RequestFramer()
        let timer: LoopTimer?
        init(timer: LoopTimer?) { self.timer = timer }

        func connection(_ connection: TCPConnection, didRead bytes: UnsafeRawBufferPointer) {
            let requests = framer.feed(bytes)
            guard requests > 0 else { return }
            timer?.schedule(afterMilliseconds: 30_000)
            for _ in 0..<requests { connection.write(answer) }
        }
        func connectionDidReachEnd(_ connection: TCPConnection) { connection.close() }
        func connection(_ connection: TCPConnection, didFail error: LoopError) { connection.close() }
        func connectionDidClose(_ connection: TCPConnection) { timer?.close() }
    }
}
