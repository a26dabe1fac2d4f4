import COpenSSL

/// The bytes between OpenSSL and a ``ClientStream``'s TCP connection: one BIO of the stream's own kind, read
/// and written by OpenSSL, that reads the records libuv has just delivered where they lie and collects the
/// records OpenSSL writes until the stream flushes them.
///
/// It replaces two memory BIOs. A memory BIO copies what is written into it, zeroes the room it grows into
/// first, and zeroes its whole buffer (as large as the largest burst it ever held) on every reset: callgrind
/// counted about 20,000 instructions per push in those `memset`s at 100 pushes/s. Here, nothing is zeroed: the
/// records read are not copied at all, and the records written are appended to one array whose room is kept.
///
/// Loop-bound like its stream. OpenSSL calls the BIO's functions only from within `SSL_*` calls the stream makes
/// on its loop's thread.
public final class StreamBIO {
    /// Records received and not yet read by OpenSSL: the bytes of the current `didRead` call, valid during it only.
    ///
    /// Private, with every access in this file: the optimizer then proves the accesses never overlap and drops
    /// their run-time exclusivity checks (several per record, in OpenSSL's callbacks).
    private var input: UnsafeRawBufferPointer = UnsafeRawBufferPointer(start: nil, count: 0)
    private var inputOffset = 0
    /// Records OpenSSL wrote, not yet handed to the connection.
    private var output: [UInt8] = []

    public init() {}

    /// A new BIO reading and writing through this object, which must outlive it (the stream frees its `SSL`,
    /// and the BIO with it, before it lets go of this object); nil when OpenSSL cannot allocate it.
    func makeBIO() -> OpaquePointer? {
        guard let method = Self.method.pointer, let bio = BIO_new(method) else { return nil }
        BIO_set_data(bio, Unmanaged.passUnretained(self).toOpaque())
        BIO_set_init(bio, 1)
        return bio
    }

    /// Lends OpenSSL `bytes` for the calls made inside `body`; what OpenSSL has not read by then is dropped (the
    /// stream reads until OpenSSL asks for more, so that happens only when the stream stops reading).
    public func reading(_ bytes: UnsafeRawBufferPointer, _ body: () -> Void) {
        input = bytes
        inputOffset = 0
        defer {
            input = UnsafeRawBufferPointer(start: nil, count: 0)
            inputOffset = 0
        }
        body()
    }

    /// Hands the records written so far to `send`, then forgets them, keeping the array's room unless told not to (a
    /// server connection, mostly idle, keeps none).
    public func flush(keepingCapacity: Bool = true, _ send: (UnsafeRawBufferPointer) -> Void) {
        guard !output.isEmpty else { return }
        output.withUnsafeBytes { send($0) }
        output.removeAll(keepingCapacity: keepingCapacity)
    }

    // MARK: The BIO's functions

    private func read(into buffer: UnsafeMutableRawPointer, count: Int) -> Int {
        let available = min(count, input.count - inputOffset)
        guard available > 0, let base = input.baseAddress else { return 0 }
        buffer.copyMemory(from: base + inputOffset, byteCount: available)
        inputOffset += available
        return available
    }

    private func write(_ bytes: UnsafeRawBufferPointer) {
        output.append(contentsOf: bytes)
    }

    private static func owner(_ bio: OpaquePointer?) -> StreamBIO? {
        guard let bio, let data = BIO_get_data(bio) else { return nil }
        return Unmanaged<StreamBIO>.fromOpaque(data).takeUnretainedValue()
    }

    /// The BIO kind, made once for the process.
    private static let method = BIOMethod()

    /// A `BIO_METHOD`: never freed, it lives as long as the process.
    // @unchecked Sendable: written once, at first use, then only read (OpenSSL reads a method from any thread).
    private struct BIOMethod: @unchecked Sendable {
        let pointer: OpaquePointer?

        init() {
            guard let method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "duo-relay client stream")
            else {
                pointer = nil
                return
            }
            BIO_meth_set_read_ex(method) { bio, buffer, count, readBytes in
                BIO_clear_flags(bio, BIO_FLAGS_READ | BIO_FLAGS_WRITE | BIO_FLAGS_IO_SPECIAL | BIO_FLAGS_SHOULD_RETRY)
                guard let owner = StreamBIO.owner(bio), let buffer else { return 0 }
                let read = owner.read(into: buffer, count: count)
                guard read > 0 else {
                    // Nothing more for now: OpenSSL reports SSL_ERROR_WANT_READ, and the stream waits for libuv.
                    BIO_set_flags(bio, BIO_FLAGS_READ | BIO_FLAGS_SHOULD_RETRY)
                    return 0
                }
                readBytes?.pointee = read
                return 1
            }
            BIO_meth_set_write_ex(method) { bio, bytes, count, written in
                BIO_clear_flags(bio, BIO_FLAGS_READ | BIO_FLAGS_WRITE | BIO_FLAGS_IO_SPECIAL | BIO_FLAGS_SHOULD_RETRY)
                guard let owner = StreamBIO.owner(bio) else { return 0 }
                if count > 0, let bytes { owner.write(UnsafeRawBufferPointer(start: bytes, count: count)) }
                written?.pointee = count
                return 1
            }
            BIO_meth_set_ctrl(method) { _, command, _, _ in
                switch command {
                // Written records are flushed by the stream itself after each SSL call.
                case BIO_CTRL_FLUSH: 1
                // Nothing is held that OpenSSL could count as pending: each read hands over what it asks for.
                default: 0
                }
            }
            pointer = method
        }
    }
}
