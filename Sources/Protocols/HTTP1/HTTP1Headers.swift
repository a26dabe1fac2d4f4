/// Header fields in the order received; names compare without regard to ASCII case.
public struct HTTP1Headers: Sendable, Equatable {
    /// One field line: the name as sent, the value with its surrounding spaces and tabs trimmed.
    public struct Field: Sendable, Equatable {
        public var name: String
        public var value: String

        /// Creates a field.
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// The fields as received.
    public var fields: [Field]

    /// Creates headers from fields in order.
    public init(_ fields: [Field] = []) {
        self.fields = fields
    }

    /// Creates headers from name and value pairs in order (for tests and handlers that build a head themselves).
    public init(_ pairs: [(name: String, value: String)]) {
        fields = pairs.map { Field(name: $0.name, value: $0.value) }
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
    public static func namesMatch(_ a: String, _ b: String) -> Bool {
        let left = a.utf8
        let right = b.utf8
        guard left.count == right.count else { return false }
        for (x, y) in zip(left, right) where x != y {
            if ASCII.lowercased(x) != ASCII.lowercased(y) { return false }
        }
        return true
    }
}

/// Byte classes of RFC 9110 and RFC 9112, as comparisons (no table to load on every byte).
enum ASCII {
    static let cr: UInt8 = 0x0D
    static let lf: UInt8 = 0x0A
    static let space: UInt8 = 0x20
    static let tab: UInt8 = 0x09
    static let colon: UInt8 = 0x3A
    static let semicolon: UInt8 = 0x3B
    static let percent: UInt8 = 0x25
    static let slash: UInt8 = 0x2F
    static let question: UInt8 = 0x3F

    @inline(__always)
    static func lowercased(_ byte: UInt8) -> UInt8 {
        byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
    }

    /// tchar (RFC 9110, 5.6.2): the bytes of a method or a field name.
    @inline(__always)
    static func isToken(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
        case 0x21, 0x23, 0x24, 0x25, 0x26, 0x27, 0x2A, 0x2B, 0x2D, 0x2E, 0x5E, 0x5F, 0x60, 0x7C, 0x7E: true
        default: false
        }
    }

    /// VCHAR: visible ASCII, the bytes a target may hold.
    @inline(__always)
    static func isVisible(_ byte: UInt8) -> Bool { byte >= 0x21 && byte <= 0x7E }

    /// A byte a field value may hold (field-vchar, obs-text, SP, HTAB): anything but a control byte or DEL.
    @inline(__always)
    static func isFieldValue(_ byte: UInt8) -> Bool { (byte >= 0x20 && byte != 0x7F) || byte == tab }

    @inline(__always)
    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x41 + 10
        case 0x61...0x66: byte - 0x61 + 10
        default: nil
        }
    }
}
