import CNGHTTP2

/// A body that nghttp2 sends a part at a time, through a data source read callback: an answer's body
/// in the simulator (the APNs client's connection machine keeps its requests' bodies itself). The owner
/// keeps it with its stream and hands each part over from the callback.
public struct OutgoingBody {
    public let bytes: [UInt8]
    /// Bytes handed to nghttp2 so far.
    public private(set) var offset = 0

    public init(_ bytes: [UInt8] = []) {
        self.bytes = bytes
    }

    /// Copies the next part, at most `length` bytes, into nghttp2's `buffer` and returns its size;
    /// the last part sets `NGHTTP2_DATA_FLAG_EOF` in `flags`, which ends the stream's data.
    public mutating func copyNext(
        into buffer: UnsafeMutablePointer<UInt8>, length: Int, flags: UnsafeMutablePointer<UInt32>
    ) -> Int {
        let count = min(length, bytes.count - offset)
        if count > 0 {
            bytes.withUnsafeBufferPointer { buffer.update(from: $0.baseAddress! + offset, count: count) }
            offset += count
        }
        if offset == bytes.count { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
        return count
    }

    /// What a read callback answers for a stream that is gone: nothing, and no more (EOF in `flags`).
    public static func nothingMore(flags: UnsafeMutablePointer<UInt32>) -> Int {
        flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
        return 0
    }
}
