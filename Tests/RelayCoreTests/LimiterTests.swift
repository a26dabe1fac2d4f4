import MonotonicTime
import RelayCore
import RelayCrypto
import RelayTestSupport
import Testing

@Suite struct LimiterTests {
    let second: UInt64 = 1_000_000_000
    /// The test clock's origin.
    let origin: Instant = 0

    func key(_ n: Int) -> LimiterKey { LimiterKey(digest: SHA256.hash(Array(String(n).utf8))) }

    @Test func perPhoneWindow() {
        let limiter = InMemoryRateLimiter(policy: LimitPolicy(requests: 20, periodSeconds: 60))
        let start = origin + 1_000 * second
        for i in 0..<20 { #expect(limiter.admit(key(1), now: start + UInt64(i) * second) == .allowed) }
        #expect(limiter.admit(key(1), now: start + 30 * second) == .limited(retryAfter: 30))
        #expect(limiter.admit(key(2), now: start + 30 * second) == .allowed)
        #expect(limiter.admit(key(1), now: start + 60 * second) == .allowed)
    }

    @Test func perAddressBlock() {
        let limiter = InMemoryRateLimiter(policy: LimitPolicy(requests: 10, periodSeconds: 10, blockSeconds: 10))
        let t0 = origin + 5 * second
        for _ in 0..<10 { #expect(limiter.admit(key(1), now: t0) == .allowed) }
        #expect(limiter.admit(key(1), now: t0 + second) == .limited(retryAfter: 10))
        // Requests while blocked do not extend the block.
        #expect(limiter.admit(key(1), now: t0 + 6 * second) == .limited(retryAfter: 5))
        #expect(limiter.admit(key(1), now: t0 + 10 * second + second / 2) == .limited(retryAfter: 1))
        #expect(limiter.admit(key(1), now: t0 + 11 * second) == .allowed)
    }

    @Test func phoneKeyIsSharedByToken() {
        let token: [UInt8] = [1, 2, 3]
        #expect(LimiterKey.phone(token: token) == LimiterKey.phone(token: [1, 2, 3]))
        #expect(LimiterKey.phone(token: token) != LimiterKey.phone(token: [1, 2, 4]))
    }

    @Test func addressKeyUsesSlash64AndSecret() {
        let secret = SecureRandom.bytes(count: 32)
        let a: [UInt8] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1] + [UInt8](repeating: 1, count: 8)
        let b: [UInt8] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1] + [UInt8](repeating: 2, count: 8)
        let c: [UInt8] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 2] + [UInt8](repeating: 1, count: 8)
        #expect(LimiterKey.address(a, secret: secret) == LimiterKey.address(b, secret: secret))
        #expect(LimiterKey.address(a, secret: secret) != LimiterKey.address(c, secret: secret))
        #expect(
            LimiterKey.address([127, 0, 0, 1], secret: secret) != LimiterKey.address([127, 0, 0, 2], secret: secret))
        #expect(
            LimiterKey.address([127, 0, 0, 1], secret: secret)
                != LimiterKey.address([127, 0, 0, 1], secret: SecureRandom.bytes(count: 32)))
    }

    @Test func forgetsPassedWindows() {
        let limiter = InMemoryRateLimiter(policy: LimitPolicy(requests: 5, periodSeconds: 10))
        for i in 0..<1_000 { _ = limiter.admit(key(i), now: origin + second) }
        #expect(limiter.trackedKeys == 1_000)
        limiter.sweep(now: origin + 10 * second)
        #expect(limiter.trackedKeys == 1_000)
        limiter.sweep(now: origin + 11 * second)
        #expect(limiter.trackedKeys == 0)
        for i in 0..<50 { _ = limiter.admit(key(i), now: origin + 20 * second) }
        #expect(limiter.trackedKeys == 50)
    }

    @Test func boundedUnderAFloodAndActiveKeysStillLimited() {
        let limiter = InMemoryRateLimiter(policy: LimitPolicy(requests: 3, periodSeconds: 60), capacity: 1_600)
        let active = key(-7)
        for _ in 0..<3 { #expect(limiter.admit(active, now: origin + second) == .allowed) }
        var refusedWhileFlooded = 0
        for i in 0..<100_000 {
            _ = limiter.admit(key(i), now: origin + second + UInt64(i))
            if i % 100 == 0, limiter.admit(active, now: origin + second + UInt64(i)) != .allowed {
                refusedWhileFlooded += 1
            }
        }
        // 100,000 new keys passed through, yet memory stayed capped...
        #expect(limiter.trackedKeys <= 1_600)
        // ...and the key in active use was never forgotten: every one of its requests was refused.
        #expect(refusedWhileFlooded == 1_000)
    }
}

@Suite struct SharedLimiterKeyTests {
    @Test func storeKeysAreThePrefixTheKindAndTheDigestInHex() {
        let key = LimiterKey.phone(token: [0xAB, 0xCD])
        let name = String(decoding: key.storeKey(prefix: "duo-relay:", kind: "p"), as: UTF8.self)
        let digest = TestHex.string(SHA256.hash([0xAB, 0xCD]))
        #expect(name == "duo-relay:p:" + digest)
    }

    @Test func everyNibbleIsWrittenInLowercaseHexInItsPlace() {
        let key = LimiterKey(words: (0x0123_4567_89AB_CDEF, 0xFEDC_BA98_7654_3210, 0, .max))
        let name = String(decoding: key.storeKey(prefix: "", kind: "a"), as: UTF8.self)
        #expect(
            name == "a:0123456789abcdef" + "fedcba9876543210" + String(repeating: "0", count: 16)
                + String(repeating: "f", count: 16))
    }

    @Test func instancesWithTheSameRelayKeysHashAnAddressAlike() throws {
        let one = try SymmetricKey(bytes: [UInt8](repeating: 7, count: 32))
        let two = try SymmetricKey(bytes: [UInt8](repeating: 9, count: 32))
        let keys = RelayKeys([4: two, 2: one])
        let secret = LimiterKey.sharedAddressSecret(keys)
        // The lowest id's key, through HKDF-SHA256 with the design's info.
        #expect(
            secret
                == HKDFSHA256.deriveKey(
                    from: [UInt8](repeating: 7, count: 32), info: Array("duo-relay address limiter v1".utf8), count: 32)
        )
        #expect(secret == LimiterKey.sharedAddressSecret(RelayKeys([2: one, 4: two, 9: two])))
        #expect(secret != LimiterKey.sharedAddressSecret(RelayKeys([4: two])))
        let address: [UInt8] = [192, 0, 2, 1]
        #expect(LimiterKey.address(address, secret: secret) == LimiterKey.address(address, secret: secret))
    }
}
