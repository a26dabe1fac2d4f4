import Foundation
import RelayTestSupport
import Synchronization

/// A misbehaving HTTP/2 server (Python, Debian's python3-h2) on 127.0.0.1 for fault tests.
/// Its first connection answers its first request, then misbehaves according to `mode`;
/// later connections answer everything. Every answer echoes the path and names the connection
/// (`x-connection`). It logs `PROCESSED|RECEIVED|REFUSED <connection> <path>` per request.
final class FaultyServer: Sendable {
    enum Mode: String, Sendable {
        /// Further streams are reset with REFUSED_STREAM.
        case refuse
        /// After three more requests: answers the first, GOAWAY with its id as last stream id, closes.
        case goaway
        /// After three more requests (logged RECEIVED, as if processed): closes with a TCP reset.
        case reset
        /// Further requests are never answered.
        case stall
    }

    let port: Int
    var origin: String { "https://127.0.0.1:\(port)" }
    private let process: Process
    private let output = LogLines()

    init(mode: Mode) throws {
        let pki = TestPKI.shared
        let script = pki.directory + "/faulty-h2-server.py"
        if !FileManager.default.fileExists(atPath: script) {
            try Self.script.write(toFile: script, atomically: true, encoding: .utf8)
        }
        port = try freePort()
        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [script, mode.rawValue, String(port), pki.serverCertificate, pki.serverKey]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try process.run()
        let ready = DispatchSemaphore(value: 0)
        let reader = pipe.fileHandleForReading
        let output = self.output
        Thread.detachNewThread { [output] in
            var pending = ""
            var signalled = false
            while true {
                let data = reader.availableData
                if data.isEmpty { break }
                pending += String(decoding: data, as: UTF8.self)
                while let newline = pending.firstIndex(of: "\n") {
                    let line = String(pending[..<newline])
                    pending = String(pending[pending.index(after: newline)...])
                    if line == "READY" {
                        if !signalled { ready.signal() }
                        signalled = true
                    } else {
                        output.lines.withLock { $0.append(line) }
                    }
                }
            }
            if !signalled { ready.signal() }
        }
        guard ready.wait(timeout: .now() + 10) == .success, process.isRunning else {
            kill(process.processIdentifier, SIGKILL)
            throw TestServerError.didNotStart
        }
    }

    deinit {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// The server's log lines so far.
    var log: [String] { output.lines.withLock { $0 } }

    /// How often the server logged `event` for `path`, once its log has caught up (its lines
    /// are read on another thread: wait up to 2 s for at least `atLeast` of them).
    func count(_ event: String, _ path: String, atLeast: Int = 1) async -> Int {
        var found = 0
        await Poll.suspendUntil(within: .seconds(2)) {
            found = log.filter { $0.hasPrefix(event + " ") && $0.hasSuffix(" " + path) }.count
            return found >= atLeast
        }
        return found
    }

    private static let script = #"""
        import socket, ssl, sys, threading, time
        import h2.connection, h2.config, h2.events, h2.errors, h2.settings

        mode, port, cert, key = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        ctx.set_alpn_protocols(['h2'])
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(('127.0.0.1', port))
        listener.listen(64)
        lock = threading.Lock()

        def log(*words):
            with lock:
                print(*words, flush=True)

        def serve(raw, index):
            tls = ctx.wrap_socket(raw, server_side=True)
            conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False))
            conn.initiate_connection()
            tls.sendall(conn.data_to_send())
            paths, waiting, answered = {}, [], 0
            misbehave = index == 1
            def answer(stream):
                conn.send_headers(stream, [(':status', '200'), ('x-connection', str(index))])
                conn.send_data(stream, paths[stream].encode(), end_stream=True)
                log('PROCESSED', index, paths[stream])
            try:
                while True:
                    data = tls.recv(65536)
                    if not data:
                        break
                    for event in conn.receive_data(data):
                        if isinstance(event, h2.events.RequestReceived):
                            paths[event.stream_id] = dict((k.decode() if isinstance(k, bytes) else k, v.decode() if isinstance(v, bytes) else v) for k, v in event.headers)[':path']
                        elif isinstance(event, h2.events.DataReceived):
                            conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                        elif isinstance(event, h2.events.StreamEnded):
                            stream = event.stream_id
                            if not misbehave or answered == 0:
                                answered += 1
                                answer(stream)
                            elif mode == 'refuse':
                                conn.reset_stream(stream, h2.errors.ErrorCodes.REFUSED_STREAM)
                                log('REFUSED', index, paths[stream])
                            else:
                                waiting.append(stream)
                                log('RECEIVED', index, paths[stream])
                                if len(waiting) == 3 and mode == 'goaway':
                                    answer(waiting[0])
                                    conn.close_connection(error_code=0, last_stream_id=waiting[0])
                                    tls.sendall(conn.data_to_send())
                                    time.sleep(0.2)
                                    raise EOFError
                                if len(waiting) == 3 and mode == 'reset':
                                    raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b'\x01\x00\x00\x00\x00\x00\x00\x00')
                                    raise EOFError
                    tls.sendall(conn.data_to_send())
            except (EOFError, OSError, ssl.SSLError):
                pass
            finally:
                raw.close()

        print('READY', flush=True)
        index = 0
        while True:
            raw, _ = listener.accept()
            index += 1
            threading.Thread(target=serve, args=(raw, index), daemon=True).start()
        """#
}

/// Lines read from a child process, shared with the reading thread.
final class LogLines: Sendable {
    let lines = Mutex<[String]>([])
}
