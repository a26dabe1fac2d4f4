/// A PKCS#11 URI (RFC 7512) naming an APNs key held in a token (docs/DESIGN.md, "APNs keys in a PKCS#11 token"):
/// `pkcs11:token=duo-relay;object=apns-sandbox;id=%01`. Pure: parsing checks the text only; whether the token and
/// the key exist is the PKCS#11 client's question.
///
/// The path attributes taken are `token` (the token's label), `object` (the key's `CKA_LABEL`), `id` (its `CKA_ID`,
/// bytes) and `type`, which may only say `private`. The PIN is a secret of its own (`APNS_PKCS11_PIN`): a
/// `pin-value` or `pin-source` is refused, and so is every other attribute (a module named in the URI would
/// compete with `apns.pkcs11_module`; an attribute the relay does not match on would be ignored silently).
public struct PKCS11URI: Sendable, Hashable, CustomStringConvertible {
    /// The token's label (`CKA_LABEL` of the token: at most 32 bytes of UTF-8).
    public var token: String?
    /// The key object's label.
    public var object: String?
    /// The key object's id, any bytes.
    public var id: [UInt8]?

    public init(token: String? = nil, object: String? = nil, id: [UInt8]? = nil) {
        self.token = token
        self.object = object
        self.id = id
    }

    /// Whether a secret's text is a URI rather than a PEM key: it starts with the scheme (case-insensitive, as a
    /// URI scheme is).
    public static func isURI(_ text: String) -> Bool {
        text.utf8.count >= 7 && String(decoding: text.utf8.prefix(7), as: UTF8.self).lowercased() == "pkcs11:"
    }

    /// Parses `text`; a problem is a ``ConfigurationError`` about `subject` (the variable the URI came from) whose
    /// reason never repeats a value from the query part (where a PIN would be).
    public init(parsing text: String, subject: String) throws(ConfigurationError) {
        func refuse(_ reason: String) -> ConfigurationError {
            ConfigurationError(.invalid, subject, "is not a PKCS#11 URI the relay takes: " + reason)
        }
        guard Self.isURI(text) else { throw refuse("it must start with pkcs11:") }
        let rest = Array(text.utf8.dropFirst(7))
        let path: ArraySlice<UInt8>
        if let question = rest.firstIndex(of: UInt8(ascii: "?")) {
            path = rest[..<question]
            let query = rest[(question + 1)...]
            for attribute in query.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: false) {
                let name = String(decoding: attribute.prefix(while: { $0 != UInt8(ascii: "=") }), as: UTF8.self)
                switch name {
                case "pin-value", "pin-source":
                    throw refuse(
                        "it holds a PIN (\(name)): give the PIN as APNS_PKCS11_PIN (a secret of its own, in any "
                            + "secret form), never in the URI")
                case "module-name", "module-path":
                    throw refuse("it names a module (\(name)): the module is apns.pkcs11_module in the configuration")
                default:
                    throw refuse("a query attribute the relay does not take (not shown); remove the part from ?")
                }
            }
        } else {
            path = rest[...]
        }
        var uri = PKCS11URI()
        var seen: Set<String> = []
        for attribute in path.split(separator: UInt8(ascii: ";"), omittingEmptySubsequences: false) {
            guard let equals = attribute.firstIndex(of: UInt8(ascii: "=")) else {
                throw refuse(attribute.isEmpty ? "an empty attribute (;;, or ; at an end)" : "an attribute without =")
            }
            let nameBytes = attribute[..<equals]
            guard nameBytes.allSatisfy(Self.isNameByte) else { throw refuse("an attribute name that is not a name") }
            let name = String(decoding: nameBytes, as: UTF8.self)
            guard seen.insert(name).inserted else { throw refuse("\(name) is given more than once") }
            let value = try Self.decode(attribute[(equals + 1)...], name: name, refuse: refuse)
            guard !value.isEmpty else { throw refuse("\(name) is empty") }
            switch name {
            case "token":
                guard let text = String(validating: value, as: UTF8.self) else { throw refuse("token is not UTF-8") }
                guard value.count <= 32 else { throw refuse("token is longer than a token label's 32 bytes") }
                uri.token = text
            case "object":
                guard let text = String(validating: value, as: UTF8.self) else { throw refuse("object is not UTF-8") }
                uri.object = text
            case "id":
                uri.id = value
            case "type":
                guard value == Array("private".utf8) else {
                    throw refuse("type must be private (the key that signs) when given")
                }
            case "pin-value", "pin-source":
                throw refuse("it holds a PIN (\(name)): give the PIN as APNS_PKCS11_PIN, never in the URI")
            default:
                throw refuse(
                    "\(name) is not an attribute the relay matches on: name the key by token, object and id")
            }
        }
        guard uri.object != nil || uri.id != nil else {
            throw refuse("it names no key: give object= (the key's label) or id=, or both")
        }
        self = uri
    }

    /// The URI in one canonical form: attributes in the order token, object, id, every byte outside RFC 3986's
    /// unreserved characters percent-encoded (the whole id is).
    public var description: String {
        var parts: [String] = []
        if let token { parts.append("token=" + Self.encode(Array(token.utf8))) }
        if let object { parts.append("object=" + Self.encode(Array(object.utf8))) }
        if let id { parts.append("id=" + id.map(Self.percent).joined()) }
        return "pkcs11:" + parts.joined(separator: ";")
    }

    private static func isNameByte(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
            || byte == UInt8(ascii: "-")
    }

    /// RFC 7512's `pk11-pchar` outside percent-encoding: unreserved, the sub-delimiters but `;`, and `: [ ] @ &`.
    private static func isValueByte(_ byte: UInt8) -> Bool {
        isUnreserved(byte) || Array("!$'()*+,=:[]@&".utf8).contains(byte)
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || Array("-._~".utf8).contains(byte)
    }

    private static func decode(
        _ text: ArraySlice<UInt8>, name: String, refuse: (String) -> ConfigurationError
    ) throws(ConfigurationError) -> [UInt8] {
        var out: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let byte = text[index]
            if byte == UInt8(ascii: "%") {
                guard text.endIndex - index >= 3,
                    let high = hexValue(text[index + 1]), let low = hexValue(text[index + 2])
                else { throw refuse("\(name) has a % not followed by two hex digits") }
                out.append(high << 4 | low)
                index += 3
                continue
            }
            guard isValueByte(byte) else {
                throw refuse("\(name) has a character that must be percent-encoded (as %XX)")
            }
            out.append(byte)
            index += 1
        }
        return out
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    private static func encode(_ bytes: [UInt8]) -> String {
        bytes.map { isUnreserved($0) ? String(UnicodeScalar($0)) : percent($0) }.joined()
    }

    private static func percent(_ byte: UInt8) -> String {
        let digits = Array("0123456789ABCDEF")
        return "%" + String(digits[Int(byte >> 4)]) + String(digits[Int(byte & 0xF)])
    }
}
