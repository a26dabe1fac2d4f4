import Foundation
import RelayCrypto
import Synchronization

/// The `apns-id` the simulator answers when the request named none: a version 4 UUID, unique in the
/// process, made without a system call. Foundation's `UUID()` opened, read and closed /dev/urandom
/// for every answer, and OpenSSL's `RAND_bytes` calls getpid() on every call (its fork check); here
/// the random source is read once, for the seed, and every id is two SplitMix64 outputs of a shared
/// counter. The simulator needs ids that are unique and look like Apple's, not unpredictable ones.
enum APNsIdentifier {
    private static let golden: UInt64 = 0x9E37_79B9_7F4A_7C15
    private static let counter = Atomic<UInt64>(
        SecureRandom.bytes(count: 8).reduce(0) { $0 << 8 | UInt64($1) })

    static func random() -> String {
        let last = counter.wrappingAdd(2 &* golden, ordering: .relaxed).newValue
        var bytes = withUnsafeBytes(of: (mix(last &- golden), mix(last))) { Array($0) }
        bytes[6] = bytes[6] & 0x0F | 0x40
        bytes[8] = bytes[8] & 0x3F | 0x80
        let uuid = UUID(
            uuid: (
                bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7], bytes[8], bytes[9],
                bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]
            ))
        return uuid.uuidString
    }

    /// SplitMix64's output function: a bijection of 64-bit values, so distinct counters give distinct ids.
    private static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
