import MonotonicTime
import RelayCrypto

/// What a limiter counts by: a 32-byte digest (SHA-256 of a device token, or a keyed hash of a
/// client address), never the thing itself.
public struct LimiterKey: Hashable, Sendable {
    /// The digest's 32 bytes as four big-endian words.
    public let words: (UInt64, UInt64, UInt64, UInt64)

    /// The key whose ``words`` these are (a key kept as its words, such as a connection's address key).
    public init(words: (UInt64, UInt64, UInt64, UInt64)) {
        self.words = words
    }

    /// Takes the first 32 bytes of a digest.
    public init(digest: [UInt8]) {
        precondition(digest.count >= 32, "a limiter key is a 32-byte digest")
        func word(_ offset: Int) -> UInt64 {
            var value: UInt64 = 0
            for index in offset..<offset + 8 { value = value << 8 | UInt64(digest[index]) }
            return value
        }
        words = (word(0), word(8), word(16), word(24))
    }

    /// The per-phone key: SHA-256 of the raw device token bytes, shared by every grant of the token.
    public static func phone(token: [UInt8]) -> LimiterKey {
        LimiterKey(digest: SHA256.hash(token))
    }

    /// The per-address key: IPv4 addresses whole, IPv6 by /64, under a keyed hash so that stored
    /// keys cannot be reversed by trying every address.
    public static func address(_ bytes: [UInt8], secret: [UInt8]) -> LimiterKey {
        address(bytes, secret: HMACSHA256.Key(secret))
    }

    /// The per-address key, under a secret made ready once (``HMACSHA256/Key``): what a server keeps.
    public static func address(_ bytes: [UInt8], secret: HMACSHA256.Key) -> LimiterKey {
        let prefix = bytes.count == 16 ? bytes[0..<8] : bytes[...]
        return LimiterKey(digest: secret.authenticationCode(for: prefix))
    }

    public static func == (lhs: LimiterKey, rhs: LimiterKey) -> Bool {
        lhs.words == rhs.words
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(words.0)
        hasher.combine(words.1)
    }

    /// The key's name in a shared store: `prefix`, the limit's letter (`p` phone, `a` address), `:`,
    /// and the 32-byte digest in lowercase hex. Nothing else: the store learns only hashes.
    public func storeKey(prefix: String, kind: Character) -> [UInt8] {
        let start = Array(prefix.utf8) + Array(String(kind).utf8) + [UInt8(ascii: ":")]
        return [UInt8](unsafeUninitializedCapacity: start.count + 64) { buffer, count in
            let target = UnsafeMutableRawBufferPointer(buffer)
            start.withUnsafeBytes { target.copyMemory(from: $0) }
            writeHex(into: UnsafeMutableRawBufferPointer(rebasing: target[start.count...]))
            count = start.count + 64
        }
    }

    /// The digest in lowercase hex into the first 64 bytes of `target` (the end of a store key, written in place).
    public func writeHex(into target: UnsafeMutableRawBufferPointer) {
        precondition(target.count >= 64)
        let digits: StaticString = "0123456789abcdef"
        digits.withUTF8Buffer { hex in
            var index = 0
            for word in [words.0, words.1, words.2, words.3] {
                for shift in stride(from: 60, through: 0, by: -4) {
                    target[index] = hex[Int(word >> UInt64(shift) & 0xF)]
                    index += 1
                }
            }
        }
    }
}

/// A limit: `requests` per `period`, then optionally blocked for `block`.
public struct LimitPolicy: Equatable, Sendable {
    public var requests: Int
    /// Nanoseconds.
    public var period: UInt64
    /// Nanoseconds; 0: no block beyond the window.
    public var block: UInt64

    public init(requests: Int, periodSeconds: Double, blockSeconds: Double = 0) {
        self.requests = requests
        period = UInt64(periodSeconds * 1e9)
        block = UInt64(blockSeconds * 1e9)
    }
}

/// The limiter's verdict.
public enum LimitDecision: Equatable, Sendable {
    case allowed
    /// Refused; a retry may succeed after this many whole seconds.
    case limited(retryAfter: Int)
    /// Not decided: the shared store cannot be reached and the relay is configured to refuse rather
    /// than count locally (503 `overloaded`); a retry may succeed after this many whole seconds.
    case unavailable(retryAfter: Int)
}

/// A limiter that decides at once (the in-memory one: no work added to the request's path). With a
/// shared store, both limits of a request are decided together in one round trip instead
/// (``SharedLimitsScript``), and this limiter is each instance's fallback.
public protocol RateLimiter: Sendable {
    /// Counts one request for `key` at `now` and decides it.
    func admit(_ key: LimiterKey, now: Instant) -> LimitDecision
    /// Forgets windows that have passed (called now and then, so idle memory is returned).
    func sweep(now: Instant)
    /// How many keys are currently held.
    var trackedKeys: Int { get }
}
