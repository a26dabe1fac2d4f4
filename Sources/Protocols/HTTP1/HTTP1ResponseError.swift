import ErrorCodes

/// Why bytes read from a server are not an HTTP/1.1 answer the ``HTTP1ResponseReader`` takes. Equality compares
/// codes only; the reason names the rule broken and never quotes the bytes.
public typealias HTTP1ResponseError = ModuleError<HTTP1ResponseErrorDomain>

/// The domain of ``HTTP1ResponseError``'s codes.
public enum HTTP1ResponseErrorDomain {}

extension ErrorCode where Domain == HTTP1ResponseErrorDomain {
    /// The status line is not `HTTP/1.0` or `HTTP/1.1`, SP, a status of 100 to 599, then SP and a reason of
    /// printable ASCII (or nothing).
    public static var invalidStatusLine: Self { Self("invalidStatusLine") }
    /// A line ended by a bare LF, or a CR not followed by LF.
    public static var invalidLineEnding: Self { Self("invalidLineEnding") }
    /// A field name that is not a token followed at once by `:`.
    public static var invalidFieldName: Self { Self("invalidFieldName") }
    /// A field line starting with a space or tab: obsolete line folding.
    public static var obsoleteLineFolding: Self { Self("obsoleteLineFolding") }
    /// A field value holding a control byte other than HTAB.
    public static var invalidFieldValue: Self { Self("invalidFieldValue") }
    /// A head (or a trailer section) over the reader's size or field-line limit.
    public static var headTooLarge: Self { Self("headTooLarge") }
    /// `Content-Length` that is not ASCII digits, or given more than once.
    public static var invalidContentLength: Self { Self("invalidContentLength") }
    /// `Transfer-Encoding` other than one `chunked`, given twice, beside `Content-Length`, or in HTTP/1.0.
    public static var invalidTransferEncoding: Self { Self("invalidTransferEncoding") }
    /// A chunk size line that is not 1 to 16 hex digits (optionally followed by an extension).
    public static var invalidChunkSize: Self { Self("invalidChunkSize") }
    /// Chunk data not followed at once by CRLF.
    public static var invalidChunkData: Self { Self("invalidChunkData") }
    /// A body over the reader's limit: declared, decoded from chunks, or read up to the connection's end.
    public static var bodyTooLarge: Self { Self("bodyTooLarge") }
    /// More interim (1xx) answers before the final one than the reader's limit.
    public static var tooManyInterimAnswers: Self { Self("tooManyInterimAnswers") }
    /// A body framed by neither `Content-Length` nor `chunked`, where the caller does not take one framed by the
    /// connection's end.
    public static var unframedBody: Self { Self("unframedBody") }
    /// The connection ended inside an answer's head or inside a body framed by its length or its chunks.
    public static var truncated: Self { Self("truncated") }
}
