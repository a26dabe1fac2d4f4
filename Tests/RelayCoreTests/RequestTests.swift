import RelayCore
import RelayCrypto
import RelayTestSupport
import Testing

@Suite struct GrantRequestTests {
    func parse(_ text: String) throws(RelayError) -> GrantRequest { try GrantRequest.parse(Array(text.utf8)) }

    @Test func valid() throws {
        let request = try parse(#"{"token":"ABcd01","environment":"sandbox","future":true}"#)
        #expect(request == GrantRequest(token: [0xab, 0xcd, 0x01], environment: .sandbox))
        #expect(try parse(#"{"environment":"production","token":"00"}"#).environment == .production)
        let longest = String(repeating: "a", count: 1024)
        #expect(try parse(#"{"token":"\#(longest)","environment":"sandbox"}"#).token.count == 512)
    }

    @Test(arguments: [
        "not json", "", "[]", "null", #"{"token":"abcd"}"#, #"{"environment":"sandbox"}"#,
        #"{"token":"abc","environment":"sandbox"}"#, #"{"token":"zz","environment":"sandbox"}"#,
        #"{"token":"","environment":"sandbox"}"#, #"{"token":12,"environment":"sandbox"}"#,
        #"{"token":"abcd","environment":"staging"}"#, #"{"token":"abcd","environment":1}"#,
        #"{"token":null,"environment":"sandbox"}"#, #"{"token":"ab cd","environment":"sandbox"}"#,
        #"{"token":"\#(String(repeating: "a", count: 1026))","environment":"sandbox"}"#,
    ])
    func rejected(_ body: String) {
        #expect(throws: RelayError.badRequest) { try parse(body) }
    }

    @Test func responseFormat() {
        let response = GrantResponse(grant: "abc_-", expiresAt: 1_798_624_800)
        #expect(response.json == #"{"grant":"abc_-","expires_at":"2026-12-30T10:00:00Z"}"#)
    }

    @Test(arguments: [
        (UInt64(0), "1970-01-01T00:00:00Z"), (951_782_400, "2000-02-29T00:00:00Z"),
        (4_102_444_799, "2099-12-31T23:59:59Z"), (1_709_251_199, "2024-02-29T23:59:59Z"),
    ])
    func timestamps(_ seconds: UInt64, _ text: String) {
        #expect(Timestamp.iso8601(seconds) == text)
    }
}

@Suite struct PushRequestTests {
    static let sealed = Base64.encode([UInt8](repeating: 0x5a, count: 2934))
    static let hex64 = String(repeating: "aB", count: 32)

    func body(grant: String = "g", sealed: String = sealed, id: String = hex64, thread: String = hex64) -> [UInt8] {
        PushBody.bytes(grant: grant, sealed: sealed, id: id, thread: thread)
    }

    @Test func valid() throws {
        let request = try PushRequest.parse(body())
        #expect(request.sealed == Self.sealed)
        #expect(request.id == Self.hex64)
        #expect(PushRequest.sealedTextLength == 3912)
    }

    @Test func rejected() {
        let cases: [[UInt8]] = [
            body(sealed: Base64.encode([UInt8](repeating: 1, count: 2933))),
            body(sealed: Base64.encode([UInt8](repeating: 1, count: 2935))),
            body(sealed: String(Self.sealed.dropLast(4)) + "AB=="),  // non-canonical, and short
            body(sealed: String(Self.sealed.dropLast(4)) + "\\n" + String(Self.sealed.suffix(4))),
            body(sealed: Self.sealed.replacingOccurrences(of: "W", with: "-")),
            body(id: String(Self.hex64.dropLast())), body(id: Self.hex64 + "0"),
            body(thread: String(repeating: "g", count: 64)),
            Array(#"{"sealed":"\#(Self.sealed)","id":"\#(Self.hex64)","thread":"\#(Self.hex64)"}"#.utf8),
            Array(#"{"grant":5,"sealed":"\#(Self.sealed)","id":"\#(Self.hex64)","thread":"\#(Self.hex64)"}"#.utf8),
            Array("{".utf8), [],
        ]
        for body in cases {
            #expect(throws: RelayError.badRequest) { try PushRequest.parse(body) }
        }
    }
}

extension String {
    func replacingOccurrences(of target: String, with replacement: String) -> String {
        split(separator: Character(target), omittingEmptySubsequences: false).joined(separator: replacement)
    }
}
