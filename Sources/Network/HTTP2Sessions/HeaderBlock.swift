import CNGHTTP2

/// An HTTP/2 header block as nghttp2 takes it (an array of `nghttp2_nv`), built in one place for the
/// APNs client's requests and the simulator's answers. Names and values are copied into one byte
/// buffer; the fields point into it only during ``withFields(_:)``, and nghttp2 copies them during the
/// submission made there. Reusable: `removeAll()` keeps the buffers' capacity, so a connection that
/// keeps one block allocates nothing per request once warm.
public struct HeaderBlock {
    private var bytes: [UInt8] = []
    private var spans: [(name: Int, nameLength: Int, value: Int, valueLength: Int)] = []
    private var fields: [nghttp2_nv] = []

    public init() {}

    /// Fields in the block.
    public var count: Int { spans.count }

    /// Empties the block, keeping its capacity.
    public mutating func removeAll() {
        bytes.removeAll(keepingCapacity: true)
        spans.removeAll(keepingCapacity: true)
    }

    /// Adds a field; with `lowercasingName`, ASCII capitals of the name are lowered (HTTP/2 field names
    /// are lowercase, RFC 9113 8.2.1).
    public mutating func append(_ name: String, _ value: String, lowercasingName: Bool = false) {
        let nameStart = bytes.count
        name.withUTF8Bytes { name in
            // Names are usually lowercase already: then they are copied whole, not byte by byte.
            if lowercasingName && name.contains(where: { $0 >= 0x41 && $0 <= 0x5A }) {
                for byte in name { bytes.append(byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte) }
            } else {
                bytes.append(contentsOf: name)
            }
        }
        let valueStart = bytes.count
        value.withUTF8Bytes { bytes.append(contentsOf: $0) }
        spans.append((nameStart, valueStart - nameStart, valueStart, bytes.count - valueStart))
    }

    /// Whether a field of this (lowercase) name is in the block.
    public func contains(name: StaticString) -> Bool {
        let wanted = UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount)
        return bytes.withUnsafeBufferPointer { bytes in
            spans.contains { span in
                span.nameLength == wanted.count
                    && UnsafeBufferPointer(rebasing: bytes[span.name..<span.name + span.nameLength]).elementsEqual(
                        wanted)
            }
        }
    }

    /// A request's block: the pseudo-header fields, then `headers` (names lowercased), then
    /// `content-length` for a body when `headers` has none.
    public mutating func setRequest(
        method: String, scheme: String = "https", authority: String, path: String,
        headers: [(name: String, value: String)], bodyLength: Int
    ) {
        removeAll()
        append(":method", method)
        append(":scheme", scheme)
        append(":authority", authority)
        append(":path", path)
        // By index: `for (name, value) in` copies each field (a retain and a release per string).
        for index in headers.indices { append(headers[index].name, headers[index].value, lowercasingName: true) }
        if bodyLength > 0 && !contains(name: "content-length") { append("content-length", String(bodyLength)) }
    }

    /// An answer's block: `:status`, then `headers` as given.
    public mutating func setResponse(status: Int, headers: [(name: String, value: String)]) {
        removeAll()
        append(":status", String(status))
        for (name, value) in headers { append(name, value) }
    }

    /// Runs `body` with the block as nghttp2 fields (valid during the call only). The block must not be
    /// empty.
    public mutating func withFields<Result>(_ body: (UnsafePointer<nghttp2_nv>, Int) -> Result) -> Result {
        precondition(!bytes.isEmpty, "an empty header block")
        return bytes.withUnsafeMutableBufferPointer { storage in
            let base = storage.baseAddress!
            fields.removeAll(keepingCapacity: true)
            for span in spans {
                fields.append(
                    nghttp2_nv(
                        name: base + span.name, value: base + span.value, namelen: span.nameLength,
                        valuelen: span.valueLength, flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue)))
            }
            return fields.withUnsafeBufferPointer { body($0.baseAddress!, $0.count) }
        }
    }
}
