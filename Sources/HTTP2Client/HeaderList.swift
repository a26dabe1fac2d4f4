import CCurl

/// A `curl_slist` for `CURLOPT_HTTPHEADER` built in one reusable buffer: the nodes, then their
/// NUL-terminated lines. curl only reads the list (it never frees or changes it), so it does not
/// have to come from `curl_slist_append`, which allocates a node and copies a line per header.
/// It must stay unchanged while a transfer that was given it runs; `build` may reuse the buffer
/// for the next request.
struct HeaderList: ~Copyable {
    private var buffer: UnsafeMutableRawPointer?
    private var capacity = 0

    /// Headers curl adds by itself unless the request sets them (`Accept: */*`,
    /// `Expect: 100-continue`, a form content type); sent as "name:" to remove them.
    private static let implicit: [StaticString] = ["accept", "expect", "content-type"]

    init() {}

    deinit { buffer?.deallocate() }

    /// Builds the list for `headers` (names are sent lowercased, an empty value as `name;`),
    /// with removals of curl's implicit headers the request does not set. Returns its head.
    mutating func build(_ headers: [(name: String, value: String)]) -> UnsafeMutablePointer<curl_slist>? {
        var implicitSet = [false, false, false]
        var textBytes = 0
        for (name, value) in headers {
            textBytes += name.utf8.count + 2 + value.utf8.count + 1
            for (index, implicit) in Self.implicit.enumerated() where Self.equalsLowercased(name, implicit) {
                implicitSet[index] = true
            }
        }
        var count = headers.count
        for (index, implicit) in Self.implicit.enumerated() where !implicitSet[index] {
            textBytes += implicit.utf8CodeUnitCount + 2
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
        func node(_ write: (inout UnsafeMutablePointer<UInt8>) -> Void) {
            let start = text
            write(&text)
            text.pointee = 0
            text += 1
            let next = index + 1 < count ? nodes + index + 1 : nil
            (nodes + index).initialize(
                to: curl_slist(data: UnsafeMutableRawPointer(start).assumingMemoryBound(to: CChar.self), next: next))
            index += 1
        }
        for (name, value) in headers {
            node { out in
                for byte in name.utf8 {
                    out.pointee = byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
                    out += 1
                }
                if value.isEmpty {
                    out.pointee = UInt8(ascii: ";")
                    out += 1
                } else {
                    out.pointee = UInt8(ascii: ":")
                    (out + 1).pointee = UInt8(ascii: " ")
                    out += 2
                    for byte in value.utf8 {
                        out.pointee = byte
                        out += 1
                    }
                }
            }
        }
        for (index, implicit) in Self.implicit.enumerated() where !implicitSet[index] {
            node { out in
                let count = implicit.utf8CodeUnitCount
                out.update(from: implicit.utf8Start, count: count)
                out += count
                out.pointee = UInt8(ascii: ":")
                out += 1
            }
        }
        return nodes
    }

    /// `name` equals the lowercase ASCII `lower`, ignoring ASCII case.
    private static func equalsLowercased(_ name: String, _ lower: StaticString) -> Bool {
        guard name.utf8.count == lower.utf8CodeUnitCount else { return false }
        var offset = 0
        for byte in name.utf8 {
            let folded = byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
            if folded != lower.utf8Start[offset] { return false }
            offset += 1
        }
        return true
    }
}
