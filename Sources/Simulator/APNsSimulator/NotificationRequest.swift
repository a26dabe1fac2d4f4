import Foundation
import HTTP2Sessions

/// One HTTP/2 request as the simulator collects it from nghttp2 callbacks.
///
/// Only the pseudo-headers and headers that APNs interprets are kept, and the body up to a byte over APNs's
/// limit; a plain HTTP/2 simulator's request (``SimulatorConfiguration/responder``) keeps everything.
final class NotificationRequest {
    /// The largest payload APNs accepts for an alert (bytes).
    static let maximumPayloadSize = 4096
    /// Headers the simulator reads; anything else is ignored.
    static let interpretedHeaders: Set<String> = [
        ":method", ":path", "authorization", "apns-topic", "apns-push-type", "apns-priority", "apns-id",
        "apns-collapse-id", "apns-expiration",
    ]

    /// Whether every header and the whole body are kept (a plain HTTP/2 simulator's request).
    let keepsEverything: Bool
    var headers: [String: String] = [:]
    /// Every header but the pseudo-headers, in order, when `keepsEverything`.
    var otherHeaders: [(name: String, value: String)] = []
    var hasDuplicateHeader = false
    /// The body, kept up to one byte over the limit; `bodyLength` counts all of it.
    var body: [UInt8] = []
    var bodyLength = 0
    /// The answer body while nghttp2 is sending it.
    var response = OutgoingBody()

    init(keepsEverything: Bool = false) {
        self.keepsEverything = keepsEverything
    }

    func addHeader(name: String, value: String) {
        if keepsEverything && !name.hasPrefix(":") {
            otherHeaders.append((name, value))
            return
        }
        guard Self.interpretedHeaders.contains(name) else { return }
        if headers.updateValue(value, forKey: name) != nil { hasDuplicateHeader = true }
    }

    func appendBody(_ bytes: UnsafeBufferPointer<UInt8>) {
        bodyLength += bytes.count
        if keepsEverything {
            body.append(contentsOf: bytes)
            return
        }
        let room = Self.maximumPayloadSize + 1 - body.count
        if room > 0 { body.append(contentsOf: bytes.prefix(room)) }
    }
}
