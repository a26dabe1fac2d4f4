import ErrorCodes

/// Why a request was refused from its bytes (docs/DESIGN.md, "The HTTP front"). Equality compares codes only, so that
/// tests and callers match on the kind of refusal, never on the wording of its reason.
public struct HTTP1ParseError: CodedError {
    /// The kind of refusal. Each code answers one status (``status``), decided here and nowhere else: a code of
    /// its own rather than ``ErrorCodes/ErrorCode``, so that this one switch stays exhaustive.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let kind: Kind

        /// The request line is not `METHOD SP target SP HTTP/x.y CRLF` with single spaces (400).
        public static let invalidRequestLine = Code(kind: .invalidRequestLine)
        /// The method is not a token (400).
        public static let invalidMethod = Code(kind: .invalidMethod)
        /// The target is neither origin form nor an `http`/`https` absolute form, or holds a byte outside
        /// visible ASCII, or a `%00` (400).
        public static let invalidTarget = Code(kind: .invalidTarget)
        /// A well-formed version other than HTTP/1.0 and HTTP/1.1 (505).
        public static let versionNotSupported = Code(kind: .versionNotSupported)
        /// A line ended by a bare LF, or a CR not followed by LF (400).
        public static let invalidLineEnding = Code(kind: .invalidLineEnding)
        /// A field name that is not a token followed at once by `:` (400).
        public static let invalidFieldName = Code(kind: .invalidFieldName)
        /// A field line starting with a space or tab: obsolete line folding (400).
        public static let obsoleteLineFolding = Code(kind: .obsoleteLineFolding)
        /// A field value holding NUL or another control byte but HTAB (400).
        public static let invalidFieldValue = Code(kind: .invalidFieldValue)
        /// An HTTP/1.1 request without `Host`, with several, or with a value that is not a host (400).
        public static let invalidHost = Code(kind: .invalidHost)
        /// `Content-Length` that is not ASCII digits, or given more than once, even with equal values (400).
        public static let invalidContentLength = Code(kind: .invalidContentLength)
        /// `Transfer-Encoding` beside `Content-Length`, in HTTP/1.0, given twice, or naming a known coding other
        /// than one `chunked` (400).
        public static let invalidTransferEncoding = Code(kind: .invalidTransferEncoding)
        /// `Transfer-Encoding` naming a coding the relay does not know (501).
        public static let unsupportedTransferCoding = Code(kind: .unsupportedTransferCoding)
        /// A chunk size line that is not 1 to 16 hex digits (optionally followed by an extension), or a size past
        /// 2^63 (400).
        public static let invalidChunkSize = Code(kind: .invalidChunkSize)
        /// Chunk data not followed at once by CRLF (400).
        public static let invalidChunkData = Code(kind: .invalidChunkData)
        /// A target longer than ``HTTP1RequestParser/Limits/maxTargetBytes`` (414).
        public static let targetTooLong = Code(kind: .targetTooLong)
        /// A head (or a trailer section) over ``HTTP1RequestParser/Limits/maxHeadBytes``, or over
        /// ``HTTP1RequestParser/Limits/maxFieldLines`` field lines (431).
        public static let headTooLarge = Code(kind: .headTooLarge)
        /// A body over the route's limit: declared, or as decoded from chunks (413).
        public static let bodyTooLarge = Code(kind: .bodyTooLarge)

        enum Kind: UInt8, Sendable {
            case invalidRequestLine, invalidMethod, invalidTarget, versionNotSupported, invalidLineEnding
            case invalidFieldName, obsoleteLineFolding, invalidFieldValue, invalidHost, invalidContentLength
            case invalidTransferEncoding, unsupportedTransferCoding, invalidChunkSize, invalidChunkData
            case targetTooLong, headTooLarge, bodyTooLarge
        }

        public var description: String { "\(kind)" }

        /// The HTTP status that answers this refusal: the one place a parse error becomes a status.
        public var status: Int {
            switch kind {
            case .versionNotSupported: 505
            case .unsupportedTransferCoding: 501
            case .targetTooLong: 414
            case .headTooLarge: 431
            case .bodyTooLarge: 413
            case .invalidRequestLine, .invalidMethod, .invalidTarget, .invalidLineEnding, .invalidFieldName,
                .obsoleteLineFolding, .invalidFieldValue, .invalidHost, .invalidContentLength,
                .invalidTransferEncoding, .invalidChunkSize, .invalidChunkData:
                400
            }
        }

        /// The relay's JSON error code for ``status`` (`{"error":...}`, docs/API.md).
        public var errorName: String {
            switch status {
            case 413, 414, 431: "too_large"
            case 501: "not_implemented"
            case 505: "version_not_supported"
            default: "bad_request"
            }
        }
    }

    /// The kind of refusal.
    public let code: Code
    /// A human explanation naming the rule broken; it never quotes the request's bytes.
    public let reason: String

    /// Creates an error.
    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    /// The status that answers it (see ``Code/status``).
    public var status: Int { code.status }

    public var description: String { "\(code) (\(code.status)): \(reason)" }
}
