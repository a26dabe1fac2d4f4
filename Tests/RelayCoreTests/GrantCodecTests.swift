import RelayCore
import RelayCrypto
import Testing

@Suite struct GrantCodecTests {
    let key1 = SymmetricKey.generate()
    let key2 = SymmetricKey.generate()
    let token: [UInt8] = (0..<32).map { UInt8($0 * 7 % 256) }
    let lifetime: UInt64 = 2_592_000
    let issued: UInt64 = 1_790_000_000

    var keys: RelayKeys { RelayKeys([1: key1]) }

    @Test func roundTrip() throws {
        let grant = Grant(environment: .production, issuedAt: issued, token: token)
        let text = try GrantCodec.seal(grant, keyID: 1, keys: keys)
        let opened = try GrantCodec.open(text, keys: keys, now: issued + 5, lifetime: lifetime)
        #expect(opened == grant)
        // base64url without padding, 2 + 12 + 9 + 32 + 16 bytes
        #expect(text.count == (71 * 4 + 2) / 3)
        #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
    }

    @Test func layoutMatchesDesign() throws {
        let grant = Grant(environment: .sandbox, issuedAt: issued, token: token)
        let nonce = [UInt8](repeating: 9, count: 12)
        let text = try GrantCodec.seal(grant, keyID: 1, keys: keys, nonce: nonce)
        let bytes = try #require(Base64.urlDecode(text))
        #expect(bytes[0] == 0x01)
        #expect(bytes[1] == 1)
        #expect(Array(bytes[2..<14]) == nonce)
        // Opened independently of the codec: AES-256-GCM with AAD version|key_id.
        let plain = try AES.GCM.open(
            ciphertext: bytes[14..<(bytes.count - 16)], tag: bytes[(bytes.count - 16)...], nonce: nonce, using: key1,
            authenticating: [1, 1] as [UInt8])
        var expected: [UInt8] = [0]
        for shift in stride(from: 56, through: 0, by: -8) {
            expected.append(UInt8(truncatingIfNeeded: issued >> UInt64(shift)))
        }
        expected += token
        #expect(plain == expected)
    }

    @Test func everySingleByteChangeIsInvalid() throws {
        let text = try GrantCodec.seal(
            Grant(environment: .sandbox, issuedAt: issued, token: token), keyID: 1, keys: keys)
        let bytes = try #require(Base64.urlDecode(text))
        for index in bytes.indices {
            for delta: UInt8 in [1, 0x80] {
                var changed = bytes
                changed[index] ^= delta
                #expect(throws: GrantError.self) {
                    _ = try GrantCodec.open(Base64.urlEncode(changed), keys: keys, now: issued, lifetime: lifetime)
                }
                do {
                    _ = try GrantCodec.open(Base64.urlEncode(changed), keys: keys, now: issued, lifetime: lifetime)
                } catch {
                    #expect(error.relayError == .grantInvalid)
                }
            }
        }
        // Truncated or extended grants too.
        for cut in [1, 5, 16] {
            #expect(throws: GrantError.self) {
                _ = try GrantCodec.open(
                    Base64.urlEncode(bytes.dropLast(cut)), keys: keys, now: issued, lifetime: lifetime)
            }
        }
        #expect(throws: GrantError.self) {
            _ = try GrantCodec.open(Base64.urlEncode(bytes + [0]), keys: keys, now: issued, lifetime: lifetime)
        }
    }

    @Test(arguments: ["", "!!!!", "AAAA", "a", "grant with spaces", String(repeating: "A", count: 5000)])
    func garbageIsInvalid(_ text: String) {
        #expect(throws: GrantError(.malformed)) {
            _ = try GrantCodec.open(text, keys: keys, now: issued, lifetime: lifetime)
        }
    }

    @Test func unknownVersionAndKeyID() throws {
        let text = try GrantCodec.seal(
            Grant(environment: .sandbox, issuedAt: issued, token: token), keyID: 1, keys: keys)
        var bytes = try #require(Base64.urlDecode(text))
        bytes[0] = 0x02
        #expect(throws: GrantError(.malformed)) {
            _ = try GrantCodec.open(Base64.urlEncode(bytes), keys: keys, now: issued, lifetime: lifetime)
        }
        bytes[0] = 0x01
        bytes[1] = 7
        #expect(throws: GrantError(.unknownKey)) {
            _ = try GrantCodec.open(Base64.urlEncode(bytes), keys: keys, now: issued, lifetime: lifetime)
        }
    }

    @Test func expiryFollowsTheClock() throws {
        let clock = ManualClock(unixSeconds: issued)
        let text = try GrantCodec.seal(
            Grant(environment: .sandbox, issuedAt: clock.unixSeconds, token: token), keyID: 1, keys: keys)
        clock.advance(seconds: Double(lifetime - 1))
        #expect(throws: Never.self) {
            _ = try GrantCodec.open(text, keys: keys, now: clock.unixSeconds, lifetime: lifetime)
        }
        clock.advance(seconds: 1)
        #expect(throws: GrantError(.expired)) {
            _ = try GrantCodec.open(text, keys: keys, now: clock.unixSeconds, lifetime: lifetime)
        }
        // The lifetime configured now decides: a longer one revives it.
        #expect(throws: Never.self) {
            _ = try GrantCodec.open(text, keys: keys, now: clock.unixSeconds, lifetime: lifetime + 10)
        }
        #expect(GrantError(.expired).relayError == .grantExpired)
    }

    @Test func rotation() throws {
        let old = RelayKeys([1: key1])
        let grant = Grant(environment: .sandbox, issuedAt: issued, token: token)
        let sealedUnder1 = try GrantCodec.seal(grant, keyID: 1, keys: old)
        // grant_key_id becomes 2; key 1 stays: old grants still open, new ones use key 2.
        let both = RelayKeys([1: key1, 2: key2])
        #expect(try GrantCodec.open(sealedUnder1, keys: both, now: issued, lifetime: lifetime) == grant)
        let sealedUnder2 = try GrantCodec.seal(grant, keyID: 2, keys: both)
        #expect(Base64.urlDecode(sealedUnder2)?[1] == 2)
        // Key 1 removed: its grants no longer open.
        let onlyNew = RelayKeys([2: key2])
        #expect(throws: GrantError(.unknownKey)) {
            _ = try GrantCodec.open(sealedUnder1, keys: onlyNew, now: issued, lifetime: lifetime)
        }
        #expect(try GrantCodec.open(sealedUnder2, keys: onlyNew, now: issued, lifetime: lifetime) == grant)
        // A different key under the same id fails authentication.
        #expect(throws: GrantError(.authenticationFailed)) {
            _ = try GrantCodec.open(sealedUnder1, keys: RelayKeys([1: key2]), now: issued, lifetime: lifetime)
        }
    }

    @Test func longestTokenFits() throws {
        let long = [UInt8](repeating: 0xab, count: GrantCodec.maximumTokenBytes)
        let text = try GrantCodec.seal(
            Grant(environment: .sandbox, issuedAt: issued, token: long), keyID: 1, keys: keys)
        #expect(text.utf8.count <= PushRequest.maximumGrantLength)
        #expect(try GrantCodec.open(text, keys: keys, now: issued, lifetime: lifetime).token == long)
    }
}
