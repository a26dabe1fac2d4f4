extension LineScan {
    /// The head of a complete status line and field section, with its framing checked as strictly as a request's:
    /// `Content-Length` digits given once, `Transfer-Encoding` only as one `chunked` in HTTP/1.1, never both.
    func makeResponseHead(_ bytes: Bytes, start: Int) -> Result<HTTP1ResponseHead, HTTP1ResponseError> {
        var head = HTTP1ResponseHead(
            version: HTTP1Version(minor: minorVersion), status: status,
            reason: Self.text(bytes, start, reasonStart, reasonEnd))
        var headerFields: [HTTP1Headers.Field] = []
        headerFields.reserveCapacity(fields.count)
        var lengths = 0
        var encodings = 0
        var connectionClose = false
        var connectionKeepAlive = false
        for field in fields {
            headerFields.append(
                HTTP1Headers.Field(
                    name: Self.text(bytes, start, field.nameStart, field.nameEnd),
                    value: Self.text(bytes, start, field.valueStart, field.valueEnd)))
            let name = Self.slice(bytes, start + field.nameStart, start + field.nameEnd)
            let value = Self.slice(bytes, start + field.valueStart, start + field.valueEnd)
            if Self.matches(name, "content-length") {
                lengths += 1
                // Even equal values are refused: two readers that took a list or a second line differently frame
                // the connection's later answers differently.
                guard lengths == 1 else {
                    return .failure(HTTP1ResponseError(.invalidContentLength, "Content-Length given more than once"))
                }
                guard let length = Self.decimal(value) else {
                    return .failure(
                        HTTP1ResponseError(.invalidContentLength, "Content-Length that is not ASCII digits"))
                }
                head.contentLength = length
            } else if Self.matches(name, "transfer-encoding") {
                encodings += 1
                guard encodings == 1, case .chunked = Self.transferCoding(value) else {
                    return .failure(
                        HTTP1ResponseError(.invalidTransferEncoding, "a Transfer-Encoding other than one chunked"))
                }
                head.isChunked = true
            } else if Self.matches(name, "connection") {
                Self.forEachElement(value) { element in
                    if Self.matches(element, "close") { connectionClose = true }
                    if Self.matches(element, "keep-alive") { connectionKeepAlive = true }
                }
            }
        }
        head.headers = HTTP1Headers(headerFields)
        if head.isChunked && head.contentLength != nil {
            return .failure(HTTP1ResponseError(.invalidTransferEncoding, "Transfer-Encoding beside Content-Length"))
        }
        if head.isChunked && head.version == .http10 {
            return .failure(HTTP1ResponseError(.invalidTransferEncoding, "Transfer-Encoding in an HTTP/1.0 answer"))
        }
        head.keepAlive = head.version == .http11 ? !connectionClose : connectionKeepAlive && !connectionClose
        return .success(head)
    }
}
