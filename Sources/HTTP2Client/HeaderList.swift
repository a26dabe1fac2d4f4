import CCurl

/// A `curl_slist` for `CURLOPT_HTTPHEADER` built in one reusable buffer: the nodes, then their
/// NUL-terminated lines. curl only reads the list (it never frees or changes it), so it does not
/// have to come from `curl_slist_append`, which allocates a node and copies a line per header.
/// It must stay unchanged while a transfer that was given it runs; `build` may reuse the buffer
/// for the next request.
struct HeaderList: ~Copyable {
    private var buffer: UnsafeMutableRawPointer?
    private var capacity = 0

    init() {}

    deinit { buffer?.deallocate() }

    /// Builds the list for `headers` (names are sent lowercased, an empty value as `name;`),
    /// with removals of curl's implicit headers the request does not set. Returns its head.
    mutating func build(_ headers: [(name: String, value: String)]) -> UnsafeMutablePointer<curl_slist>? {
        var implicitSet = (false, false, false)
        var textBytes = 0
        for (name, value) in headers {
            textBytes += name.utf8.count + 2 + value.utf8.count + 1
            name.withUTF8Bytes { name in
                if Self.equalsLowercased(name, Self.accept) { implicitSet.0 = true }
                if Self.equalsLowercased(name, Self.expect) { implicitSet.1 = true }
                if Self.equalsLowercased(name, Self.contentType) { implicitSet.2 = true }
            }
        }
        let removals = [
            implicitSet.0 ? nil : Self.accept, implicitSet.1 ? nil : Self.expect,
            implicitSet.2 ? nil : Self.contentType,
        ]
        var count = headers.count
        for case let removal? in removals {
            textBytes += removal.utf8CodeUnitCount + 2
            count += 1
        }
        guard count > 0 else { return nil }
        let nodeBytes = count * MemoryLayout<curl_slist>.stride
        let needed = nodeBytes + textBytes
        if needed > capacity {
            buffer?.deallocate()
            capacity = max(needed, 1024)
            buffer = UnsafeMutableRawPointer.allocate(
                byteCount: capacity, alignment: MemoryLayout<curl_slist>.alignment)
        }
        guard let buffer else { return nil }
        let nodes = buffer.bindMemory(to: curl_slist.self, capacity: count)
        var text = (buffer + nodeBytes).assumingMemoryBound(to: UInt8.self)
        var index = 0
        /// Ends the line started at `start` (NUL) and links its node.
        func link(_ start: UnsafeMutablePointer<UInt8>) {
            text.pointee = 0
            text += 1
            let next = index + 1 < count ? nodes + index + 1 : nil
            (nodes + index).initialize(
                to: curl_slist(data: UnsafeMutableRawPointer(start).assumingMemoryBound(to: CChar.self), next: next))
            index += 1
        }
        for (name, value) in headers {
            let start = text
            name.withUTF8Bytes { name in
                for byte in name {
                    text.pointee = byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
                    text += 1
                }
            }
            if value.isEmpty {
                text.pointee = UInt8(ascii: ";")
                text += 1
            } else {
                text.pointee = UInt8(ascii: ":")
                (text + 1).pointee = UInt8(ascii: " ")
                text += 2
                value.withUTF8Bytes { value in
                    guard let base = value.baseAddress else { return }
                    text.update(from: base, count: value.count)
                    text += value.count
                }
            }
            link(start)
        }
        for case let removal? in removals {
            let start = text
            text.update(from: removal.utf8Start, count: removal.utf8CodeUnitCount)
            text += removal.utf8CodeUnitCount
            text.pointee = UInt8(ascii: ":")
            text += 1
            link(start)
        }
        return nodes
    }

    // Headers curl adds by itself unless the request sets them (`Accept: */*`,
    // `Expect: 100-continue`, a form content type); sent as "name:" to remove them.
    private static let accept: StaticString = "accept"
    private static let expect: StaticString = "expect"
    private static let contentType: StaticString = "content-type"

    /// `name` equals the lowercase ASCII `lower`, ignoring ASCII case.
    private static func equalsLowercased(_ name: UnsafeBufferPointer<UInt8>, _ lower: StaticString) -> Bool {
        guard name.count == lower.utf8CodeUnitCount else { return false }
        for offset in 0..<name.count {
            let byte = name[offset]
            let folded = byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
            if folded != lower.utf8Start[offset] { return false }
        }
        return true
    }
}
