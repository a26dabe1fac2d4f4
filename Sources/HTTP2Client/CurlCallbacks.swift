import CCurl
import Glibc

// curl's callbacks for a `Transfer`. Each gets the transfer as its context pointer, passed
// unretained: the connection holds the transfer strongly while its easy handle is in the
// multi handle, which is the only time curl calls these. All run on the connection's thread.

private func transfer(_ pointer: UnsafeMutableRawPointer?) -> Transfer {
    Unmanaged<Transfer>.fromOpaque(pointer!).takeUnretainedValue()
}

/// CURLOPT_WRITEFUNCTION: collects the response body.
func transferWriteCallback(
    _ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?
) -> Int {
    let length = size * count
    guard length > 0, let data else { return length }
    return transfer(context).receiveBody(UnsafeRawBufferPointer(start: data, count: length)) ? length : 0
}

/// CURLOPT_HEADERFUNCTION: one response header line at a time.
func transferHeaderCallback(
    _ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?
) -> Int {
    let length = size * count
    guard length > 0, let data else { return length }
    transfer(context).receiveHeaderLine(UnsafeRawBufferPointer(start: data, count: length))
    return length
}

/// CURLOPT_PREREQFUNCTION: the connection is up and the request is about to be sent.
func transferPrereqCallback(
    _ context: UnsafeMutableRawPointer?, _ primaryIP: UnsafeMutablePointer<CChar>?,
    _ localIP: UnsafeMutablePointer<CChar>?, _ primaryPort: Int32, _ localPort: Int32
) -> Int32 {
    let transfer = transfer(context)
    transfer.submitted = true
    transfer.connection.established = true
    return CURL_PREREQFUNC_OK
}

/// CURLOPT_OPENSOCKETFUNCTION: a connection makes one TCP connection, never a second one.
///
/// Once a request has been sent on it, curl wanting another socket means it lost the first
/// connection and would reconnect in place (for example to resend requests by itself, see
/// `Connection`): refusing makes that transfer fail with CURLE_COULDNT_CONNECT instead.
func transferOpenSocketCallback(
    _ context: UnsafeMutableRawPointer?, _ purpose: curlsocktype, _ address: UnsafeMutablePointer<curl_sockaddr>?
) -> curl_socket_t {
    let transfer = transfer(context)
    guard let address, !transfer.connection.established else {
        transfer.reconnectBlocked = true
        transfer.connection.reconnectBlocked()
        return CURL_SOCKET_BAD
    }
    let descriptor = socket(address.pointee.family, address.pointee.socktype, address.pointee.protocol)
    transfer.connection.socketOpened(descriptor)
    return descriptor
}

/// CURLOPT_DEBUGFUNCTION: reads curl's informational lines for GOAWAY, refused streams and
/// curl's own retries. Header and data records (which hold request data) are ignored.
func transferDebugCallback(
    _ handle: UnsafeMutableRawPointer?, _ type: curl_infotype, _ data: UnsafeMutablePointer<CChar>?, _ size: Int,
    _ context: UnsafeMutableRawPointer?
) -> Int32 {
    guard type == CURLINFO_TEXT, let data, size > 0 else { return 0 }
    transfer(context).logLine(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
