/// Request header fields in the order received; names compare without regard to ASCII case.
public struct HTTPHeaders: Sendable {
    /// The fields as received (names keep their original case).
    public let fields: [(name: String, value: String)]

    /// Creates headers from fields in order.
    public init(_ fields: [(name: String, value: String)] = []) {
        self.fields = fields
    }

    /// The value of the first field with this name (ASCII case-insensitive), or nil.
    public subscript(_ name: String) -> String? {
        for field in fields where Self.namesMatch(field.name, name) {
            return field.value
        }
        return nil
    }

    /// The values of every field with this name (ASCII case-insensitive), in order.
    public func values(_ name: String) -> [String] {
        fields.filter { Self.namesMatch($0.name, name) }.map(\.value)
    }

    /// Compares two names byte by byte, folding ASCII letters only, without allocating.
    static func namesMatch(_ a: String, _ b: String) -> Bool {
        let left = a.utf8
        let right = b.utf8
        guard left.count == right.count else { return false }
        for (x, y) in zip(left, right) where x != y {
            let foldedX = (x >= 0x41 && x <= 0x5a) ? x | 0x20 : x
            let foldedY = (y >= 0x41 && y <= 0x5a) ? y | 0x20 : y
            if foldedX != foldedY { return false }
        }
        return true
    }
}
