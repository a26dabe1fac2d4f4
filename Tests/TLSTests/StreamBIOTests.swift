import Foundation
import TLS
import Testing

/// `StreamBIO` between a client session and a server session on memory BIOs, with no socket: what the server sends
/// reaches the client in reads of many sizes, so TLS records are cut in every kind of place (a header, a body, between
/// two records) and several sometimes arrive in one read.
@Suite struct StreamBIOTests {
    /// A client session on a `StreamBIO` and a server session on two memory BIOs, for `localhost`.
    final class Pair {
        let records = StreamBIO()
        let client: TLSSession
        let server: TLSSession
        private let serverContext: TLSServerContext
        private let clientContext: TLSClientContext

        init() throws {
            let pki = try LocalPKI.generate()
            serverContext = try TLSServerContext(certificatePEM: pki.certificatePEM, privateKeyPEM: pki.privateKeyPEM)
            let caFile = NSTemporaryDirectory() + "streambio-ca-\(UUID().uuidString).pem"
            try pki.caCertificatePEM.write(toFile: caFile, atomically: true, encoding: .utf8)
            defer { try? FileManager.default.removeItem(atPath: caFile) }
            clientContext = try TLSClientContext(extraCAFile: caFile, alpn: ["h2"])
            client = try #require(clientContext.session(host: "localhost", hostIsAddress: false))
            // One BIO both ways, as ClientStream gives it.
            #expect(client.attach(records))
            server = try #require(serverContext.session())
        }

        deinit {
            client.free()
            server.free()
        }

        /// The client's records, as the stream would flush them, into the server's input.
        func clientToServer() {
            records.flush { server.receive($0) }
        }

        /// Everything the server has written, handed to the client in reads of 1, 2, 5, 13, 100, 1,000 and 5,000
        /// bytes in turn (so records are cut at every kind of place, and several arrive in one read), with `step`
        /// run on the client's session during each read (as the stream reads or steps the handshake in `didRead`).
        func serverToClientInPieces(_ step: () -> Void) {
            var pending: [UInt8] = []
            let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 16)
            defer { chunk.deallocate() }
            server.flushOutput(through: chunk) { pending += $0 }
            let sizes = [1, 2, 5, 13, 100, 1000, 5000]
            var offset = 0
            var turn = 0
            pending.withUnsafeBytes { bytes in
                while offset < bytes.count {
                    let end = min(bytes.count, offset + sizes[turn % sizes.count])
                    records.reading(UnsafeRawBufferPointer(rebasing: bytes[offset..<end])) { step() }
                    offset = end
                    turn += 1
                }
            }
        }
    }

    @Test func aHandshakeAndRecordsCutAnywhereAreReadWhole() throws {
        let pair = try Pair()
        var received: [UInt8] = []
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 32 * 1024, alignment: 16)
        defer { buffer.deallocate() }
        // What the stream does with each read: the handshake until it is done, then reads until OpenSSL asks
        // for more (TLS 1.3 session tickets arrive after the handshake and are read this way too).
        var clientDone = false
        func clientStep() {
            if !clientDone {
                clientDone = pair.client.handshake() == .done
                if !clientDone { return }
            }
            while case .read(let count) = pair.client.read(into: buffer) {
                received += buffer[0..<count]
            }
        }
        // The handshake: both sides step in turn, a bounded number of flights.
        var serverDone = false
        for _ in 0..<20 where !(clientDone && serverDone) {
            pair.records.reading(UnsafeRawBufferPointer(start: nil, count: 0)) { clientStep() }
            pair.clientToServer()
            if !serverDone { serverDone = pair.server.handshake() == .done }
            pair.serverToClientInPieces { clientStep() }
        }
        #expect(clientDone && serverDone)
        #expect(pair.client.negotiatedProtocol == "h2")
        #expect(pair.server.agreed(on: ALPN.http2))

        // From the server: more than one record (16 KiB of plaintext each), read by the client in pieces.
        let fromServer = (0..<20_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        var sent = 0
        while sent < fromServer.count {
            // The simulator's context enables partial writes: one record (16 KiB) per call.
            let result = fromServer.withUnsafeBytes { pair.server.write(UnsafeRawBufferPointer(rebasing: $0[sent...])) }
            guard case .wrote(let written) = result else {
                Issue.record("the server's write: \(result)")
                break
            }
            sent += written
        }
        pair.serverToClientInPieces { clientStep() }
        let serverDataArrived = received == fromServer
        #expect(serverDataArrived, "\(received.count) of \(fromServer.count) bytes, in order: \(serverDataArrived)")

        // From the client: its records, flushed as the stream flushes them, reach the server whole.
        let fromClient = (0..<20_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        var offset = 0
        while offset < fromClient.count {
            let result = fromClient.withUnsafeBytes {
                pair.client.write(UnsafeRawBufferPointer(rebasing: $0[offset...]))
            }
            guard case .wrote(let written) = result else {
                Issue.record("the client's write: \(result)")
                break
            }
            offset += written
        }
        pair.clientToServer()
        var atServer: [UInt8] = []
        while case .read(let count) = pair.server.read(into: buffer) {
            atServer += buffer[0..<count]
        }
        let clientDataArrived = atServer == fromClient
        #expect(clientDataArrived, "\(atServer.count) of \(fromClient.count) bytes, in order: \(clientDataArrived)")
    }

    @Test func withNothingToReadTheClientAsksForMore() throws {
        let pair = try Pair()
        var step = TLSHandshake.Step.done
        pair.records.reading(UnsafeRawBufferPointer(start: nil, count: 0)) { step = pair.client.handshake() }
        #expect(step == .wantsReadable)
        // The ClientHello was written, and is flushed once.
        var flushed = 0
        pair.records.flush { flushed += $0.count }
        #expect(flushed > 0)
        pair.records.flush { flushed += $0.count + 1_000_000 }
        #expect(flushed < 1_000_000)
    }
}
