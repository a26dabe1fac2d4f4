import CMicroHTTPD
import Glibc

/// The C callbacks given to libmicrohttpd. Each is a plain function that finds its objects through MHD's context
/// pointers: `cls` is the ``ServerCore`` (unretained; the server outlives its daemon) and `*req_cls` is a retained
/// ``RequestContext``.
enum DaemonCallbacks {
    /// MHD_OPTION_URI_LOG_CALLBACK: called once per request, as soon as its request line is read. The context it
    /// returns becomes `*req_cls`; MHD then reports the request's end to `requestCompleted` in every case.
    static let uriLog:
        @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?, OpaquePointer?) -> UnsafeMutableRawPointer? = {
            cls, uri, connection in
            guard let cls, let connection else { return nil }
            let core = Unmanaged<ServerCore>.fromOpaque(cls).takeUnretainedValue()
            let uriLength = uri.map { strlen($0) } ?? 0
            let context = RequestContext(core: core, connection: connection, uriLength: Int(uriLength))
            core.openContexts.add(1, ordering: .relaxed)
            return Unmanaged.passRetained(context).toOpaque()
        }

    /// The access handler: called for the headers, each body chunk, the end of the body, and after a resume.
    static let access: MHD_AccessHandlerCallback = { _, _, url, method, _, uploadData, uploadSize, requestContext in
        guard let uploadSize, let opaque = requestContext?.pointee else { return .NO }
        let context = Unmanaged<RequestContext>.fromOpaque(opaque).takeUnretainedValue()
        return context.handle(url: url, method: method, uploadData: uploadData, uploadSize: uploadSize)
    }

    /// MHD_OPTION_NOTIFY_COMPLETED: the request is over (answered, failed, or the client went away).
    static let requestCompleted: MHD_RequestCompletedCallback = { _, _, requestContext, _ in
        guard let requestContext, let opaque = requestContext.pointee else { return }
        requestContext.pointee = nil
        let context = Unmanaged<RequestContext>.fromOpaque(opaque).takeRetainedValue()
        context.completed()
        context.core.openContexts.subtract(1, ordering: .relaxed)
    }

    /// MHD_OPTION_EXTERNAL_LOGGER: MHD's messages may contain client addresses, so they are dropped.
    static let discardLog: MHD_LogCallback = { _, _, _ in }
}
