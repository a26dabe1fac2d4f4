import CNGHTTP2

/// Builds `nghttp2_nv` arrays for a call; nghttp2 copies names and values during submission.
enum HeaderBlock {
    static func withNameValuePairs<Result>(
        _ fields: [(String, String)], _ body: (UnsafePointer<nghttp2_nv>, Int) -> Result
    ) -> Result {
        var storage: [UInt8] = []
        var ranges: [(name: Range<Int>, value: Range<Int>)] = []
        for (name, value) in fields {
            let nameStart = storage.count
            storage.append(contentsOf: name.utf8)
            let valueStart = storage.count
            storage.append(contentsOf: value.utf8)
            ranges.append((nameStart..<valueStart, valueStart..<storage.count))
        }
        return storage.withUnsafeMutableBufferPointer { bytes in
            let base = bytes.baseAddress!
            let pairs = ranges.map { range in
                nghttp2_nv(
                    name: base + range.name.lowerBound, value: base + range.value.lowerBound,
                    namelen: range.name.count, valuelen: range.value.count,
                    flags: UInt8(NGHTTP2_NV_FLAG_NONE.rawValue))
            }
            return pairs.withUnsafeBufferPointer { body($0.baseAddress!, $0.count) }
        }
    }
}
