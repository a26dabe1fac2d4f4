import Foundation
import RelayCrypto

/// The `apns-id` the simulator answers when the request named none.
enum APNsIdentifier {
    /// A random (version 4) UUID from OpenSSL's generator, which is seeded once and then runs in user
    /// space: Foundation's `UUID()` opened, read and closed /dev/urandom for every answer, which cost
    /// the benchmark's simulator two system calls per request.
    static func random() -> String {
        var bytes = SecureRandom.bytes(count: 16)
        bytes[6] = bytes[6] & 0x0F | 0x40
        bytes[8] = bytes[8] & 0x3F | 0x80
        let uuid = UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9],
                bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            ))
        return uuid.uuidString
    }
}
