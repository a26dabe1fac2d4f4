import CNGHTTP2
import TLS

/// Writes what an nghttp2 session has serialized to an OpenSSL connection: frames are gathered
/// into one buffer of up to `batchSize` bytes and written with one `SSL_write` (TLS cuts it into
/// 16 KiB records), so a round of many small frames costs a few records and system calls, not
/// one per frame. Used by the simulator, one per connection, on the connection's thread (the APNs
/// client gathers its frames the same way and hands them to its `ClientStream`).
public struct FrameWriter {
    /// Where `flush` stopped.
    public enum Progress: Equatable {
        /// Everything nghttp2 had to send is written.
        case done
        /// The socket is full: call again once it is writable.
        case wantsWritable
        /// TLS needs to read first (renegotiation, key update): call again after reading.
        case wantsReadable
        /// The connection is unusable; the reason never holds the data sent.
        case failed(String)
    }

    private var buffer: [UInt8] = []
    private var offset = 0
    private let batchSize: Int
    /// How many bytes went through this writer. A reference, so that nghttp2 callbacks running
    /// inside `flush` can read it without touching the writer itself (an exclusive access then).
    public final class Counters {
        /// Bytes taken from nghttp2 so far: during an nghttp2 send callback, the position just past
        /// the frame it reports.
        public fileprivate(set) var queued = 0
        /// Bytes handed to `SSL_write` so far: a frame that ends at or before this reached the socket.
        public fileprivate(set) var written = 0
    }

    public let counters = Counters()

    public init(batchSize: Int = 64 * 1024) {
        self.batchSize = batchSize
        buffer.reserveCapacity(batchSize + 16 * 1024)
    }

    /// Bytes serialized but not yet written.
    public var hasPending: Bool { offset < buffer.count }

    /// Writes until nghttp2 has nothing more to send or the socket is full.
    public mutating func flush(session: OpaquePointer, ssl: TLSSession) -> Progress {
        while true {
            if offset == buffer.count {
                buffer.removeAll(keepingCapacity: true)
                offset = 0
                while buffer.count < batchSize {
                    var chunk: UnsafePointer<UInt8>?
                    let length = nghttp2_session_mem_send(session, &chunk)
                    if length < 0 { return .failed("nghttp2: \(String(cString: nghttp2_strerror(Int32(length))))") }
                    guard length > 0, let chunk else { break }
                    buffer.append(contentsOf: UnsafeBufferPointer(start: chunk, count: length))
                    counters.queued += length
                }
                if buffer.isEmpty { return .done }
            }
            let result = buffer.withUnsafeBytes { bytes in
                ssl.write(UnsafeRawBufferPointer(rebasing: bytes[offset...]))
            }
            switch result {
            case .wrote(let written):
                offset += written
                counters.written += written
                continue
            case .wantsWritable: return .wantsWritable
            case .wantsReadable: return .wantsReadable
            case .failed: return .failed("the connection closed while writing")
            }
        }
    }
}
