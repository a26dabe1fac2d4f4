import COpenSSL
import ClientTLS
import Foundation
import Testing

@testable import APNsSimulator
@testable import LoopTLS

/// `StreamBIO` between a client `SSL` and a server `SSL` on memory BIOs, with no socket: what the server sends
/// reaches the client in reads of many sizes, so TLS records are cut in every kind of place (a header, a body, between
/// two records) and several sometimes arrive in one read.
@Suite struct StreamBIOTests {
    /// A client session on a `StreamBIO` and a server session on two memory BIOs, for `localhost`.
    final class Pair {
        let records = StreamBIO()
        let client: OpaquePointer
        let server: OpaquePointer
        private let serverInput: OpaquePointer
        private let serverOutput: OpaquePointer
        private let serverContext: TLSServerContext
        private let clientContext: TLSClientContext

        init() throws {
            let pki = try SimulatorPKI.generate()
            serverContext = try TLSServerContext(certificatePEM: pki.certificatePEM, privateKeyPEM: pki.privateKeyPEM)
            let caFile = NSTemporaryDirectory() + "streambio-ca-\(UUID().uuidString).pem"
            try pki.caCertificatePEM.write(toFile: caFile, atomically: true, encoding: .utf8)
            defer { try? FileManager.default.removeItem(atPath: caFile) }
            clientContext = try TLSClientContext(extraCAFile: caFile, alpn: ["h2"])
            client = try #require(clientContext.session(host: "localhost", hostIsAddress: false))
            // One BIO both ways, as ClientStream gives it (SSL_set_bio takes the one reference).
            let bio = try #require(records.makeBIO())
            SSL_set_bio(client, bio, bio)
            server = try #require(SSL_new(serverContext.context))
            serverInput = try #require(BIO_new(BIO_s_mem()))
            serverOutput = try #require(BIO_new(BIO_s_mem()))
            SSL_set_bio(server, serverInput, serverOutput)
            SSL_set_accept_state(server)
        }

        deinit {
            SSL_free(client)
            SSL_free(server)
        }

        /// The client's records, as the stream would flush them, into the server's input.
        func clientToServer() {
            records.flush { bytes in _ = BIO_write(serverInput, bytes.baseAddress, Int32(bytes.count)) }
        }

        /// Everything the server has written, handed to the client in reads of 1, 2, 5, 13, 100, 1,000 and 5,000
        /// bytes in turn (so records are cut at every kind of place, and several arrive in one read), with `step`
        /// run on the client's SSL during each read (as the stream runs SSL_read or the handshake in `didRead`).
        func serverToClientInPieces(_ step: () -> Void) {
            var pending: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = BIO_read(serverOutput, &chunk, Int32(chunk.count))
                guard count > 0 else { break }
                pending += chunk[0..<Int(count)]
            }
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
        var buffer = [UInt8](repeating: 0, count: 32 * 1024)
        // What the stream does with each read: the handshake until it is done, then SSL_read until OpenSSL asks
        // for more (TLS 1.3 session tickets arrive after the handshake and are read this way too).
        var clientDone = false
        func clientStep() {
            if !clientDone {
                clientDone = SSL_do_handshake(pair.client) == 1
                if !clientDone { return }
            }
            while true {
                let count = SSL_read(pair.client, &buffer, Int32(buffer.count))
                guard count > 0 else { return }
                received += buffer[0..<Int(count)]
            }
        }
        // The handshake: both sides step in turn, a bounded number of flights.
        var serverDone = false
        for _ in 0..<20 where !(clientDone && serverDone) {
            pair.records.reading(UnsafeRawBufferPointer(start: nil, count: 0)) { clientStep() }
            pair.clientToServer()
            if !serverDone { serverDone = SSL_do_handshake(pair.server) == 1 }
            pair.serverToClientInPieces { clientStep() }
        }
        #expect(clientDone && serverDone)

        // From the server: more than one record (16 KiB of plaintext each), read by the client in pieces.
        let fromServer = (0..<20_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        var sent = 0
        while sent < fromServer.count {
            // The simulator's context enables partial writes: one record (16 KiB) per call.
            let written = fromServer.withUnsafeBytes {
                SSL_write(pair.server, $0.baseAddress! + sent, Int32($0.count - sent))
            }
            #expect(written > 0)
            guard written > 0 else { break }
            sent += Int(written)
        }
        pair.serverToClientInPieces { clientStep() }
        let serverDataArrived = received == fromServer
        #expect(serverDataArrived, "\(received.count) of \(fromServer.count) bytes, in order: \(serverDataArrived)")

        // From the client: its records, flushed as the stream flushes them, reach the server whole.
        let fromClient = (0..<20_000).map { UInt8(truncatingIfNeeded: $0 &* 13) }
        var offset = 0
        while offset < fromClient.count {
            let written = fromClient.withUnsafeBytes {
                SSL_write(pair.client, $0.baseAddress! + offset, Int32($0.count - offset))
            }
            #expect(written > 0, "SSL_write: error \(SSL_get_error(pair.client, written))")
            guard written > 0 else { break }
            offset += Int(written)
        }
        pair.clientToServer()
        var atServer: [UInt8] = []
        while true {
            let count = SSL_read(pair.server, &buffer, Int32(buffer.count))
            guard count > 0 else { break }
            atServer += buffer[0..<Int(count)]
        }
        let clientDataArrived = atServer == fromClient
        #expect(clientDataArrived, "\(atServer.count) of \(fromClient.count) bytes, in order: \(clientDataArrived)")
    }

    @Test func withNothingToReadTheClientAsksForMore() throws {
        let pair = try Pair()
        let result = pair.records.reading(UnsafeRawBufferPointer(start: nil, count: 0)) {
            SSL_do_handshake(pair.client)
        }
        #expect(result <= 0)
        #expect(SSL_get_error(pair.client, result) == SSL_ERROR_WANT_READ)
        // The ClientHello was written, and is flushed once.
        var flushed = 0
        pair.records.flush { flushed += $0.count }
        #expect(flushed > 0)
        pair.records.flush { flushed += $0.count + 1_000_000 }
        #expect(flushed < 1_000_000)
    }
}
