/// The bytes a reader has received and not yet consumed, scanned in place: the request parser's and the response
/// reader's. Consumed bytes end at `position`; a head or trailer section being scanned stays from `position` on,
/// its fields recorded as offsets from there, and `scan` is the next byte its scan examines. Dropping consumed bytes
/// moves both by the same amount, so the offsets survive.
struct ScanBuffer: Sendable {
    var bytes: [UInt8] = []
    var position = 0
    var scan = 0

    /// Bytes received and not yet consumed.
    var unconsumedCount: Int { bytes.count - position }

    mutating func append(_ more: UnsafeRawBufferPointer) {
        compact()
        bytes.append(contentsOf: more)
    }

    mutating func append(contentsOf more: some Collection<UInt8>) {
        compact()
        bytes.append(contentsOf: more)
    }

    /// Lets go of the storage once every byte received is consumed: a keep-alive connection idle between requests then
    /// holds none of its last request (a push's 4.4 KB, for each of thousands of idle connections). The next request's
    /// bytes take new storage, one allocation a request.
    mutating func releaseIfConsumed() {
        guard position == bytes.count, bytes.capacity > 0 else { return }
        bytes = []
        position = 0
        scan = 0
    }

    /// Drops consumed bytes, so that the buffer holds only what is still to be read.
    private mutating func compact() {
        guard position > 0 else { return }
        if position == bytes.count {
            bytes.removeAll(keepingCapacity: true)
        } else {
            bytes.removeSubrange(0..<position)
        }
        scan -= position
        position = 0
    }
}
